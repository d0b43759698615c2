"""A model card linter: what issue 48 asks of every card the package writes, read the way the Hub reads a card
(huggingface_hub's `ModelCard.load` and `metadata_load`).

`lint_card(target, snippet_results)` returns, per check (CHECKS), the problems found, each one line:

- metadata: a license from the Hub's list (or `other` with a `license_name`), `pipeline_tag`, `library_name`, tags
  with `minitf`, `base_model` exactly when the card is an export or conversion of a Hub repo (never local),
  `datasets` never local, `language` a list of ISO 639 codes;
- paths: no absolute or temporary path (/tmp, /home, /work, a drive letter, the test's own folders) anywhere, but
  for the `minitf_source` record of a local export (what `minitf verify` measures it against; a push drops it);
- figures: every model-index value and every figure of a Results/Evaluation table is one the package measured
  (`CardTarget.measured`), every Runs-in row names a file of this artifact, and a number in a code comment (the
  sentence-transformers template's example similarities) is one the snippet printed when it ran;
- usage: exactly one section of usage code;
- empty_sections: no heading followed by nothing (or by "[More Information Needed]");
- snippets: every ```python block runs against the card's folder (or its repo on the loopback Hub) in a fresh process;
- examples: every text the card's code gives the model (a tokenizer's, generator's or encoder's argument, the text of
  `minitf generate/translate/embed`, `llama-cli -p`, `ollama run`) is one the model's tokenizer spells: no unknown
  token, nothing dropped (a "Hello" for a character vocabulary without a capital H).

The snippets of many cards run in two processes (`run_snippets`): one where hf_minitf is importable, for the blocks
that import it, one where it is not (as on a machine without the package), each block in fresh globals.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from huggingface_hub import ModelCard, metadata_load

from hf_minitf.catalog.verification import SOURCE_CARD_FIELD

CHECKS = ("metadata", "paths", "figures", "usage", "empty_sections", "snippets", "examples")

HUB_LICENSES = frozenset(
    """apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
    bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc
    cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0
    cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0
    cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0
    gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c ms-pl apple-ascl
    apple-amlr mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr
    deepfloyd-if-license fair-noncommercial-research-license llama2 llama3 llama3.1 llama3.2 llama3.3 llama4 gemma
    unknown other""".split()
)
"""The license ids of the Hub's list (https://huggingface.co/docs/hub/repositories-licenses), written out here so
that the package's own list is not what checks it."""

ISO_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
FENCE = re.compile(r"^(```+|~~~+)(.*)$")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
NO_INFORMATION = "[More Information Needed]"
ABSOLUTE_PATH = re.compile(
    r"(?<![\w.:/-])(?:/(?:tmp|var/folders|private/var|home|work|root|Users|mnt)/[^\s\"'`|)]*|[A-Za-z]:\\[^\s\"'`|)]*)"
)
PLACEHOLDER_FOLDER = re.compile(r"""(["'])path/to/(?:this/)?(?:folder|model|repo)(?=[/"'])""")
DECIMAL = re.compile(r"-?\d+\.\d+")
_STRING = r'"(?:[^"\\\n]|\\.)*"'
EXAMPLE_USES = (
    re.compile(
        r"(?:\b(?:tokenizer|generator|generate|extractor|encode|encode_batch|translate|translator|pipe)\(|\bfor \w+ in )"
        rf"\s*(\[\s*{_STRING}(?:\s*,\s*{_STRING})*\s*\]|{_STRING})"
    ),
    re.compile(rf"\bminitf (?:generate|translate|embed) \S+ ({_STRING})"),
    re.compile(rf"\s-p ({_STRING})"),
    re.compile(rf"\bollama run \S+ ({_STRING})"),
)
"""Where a card's code gives the model a text: the example (a JSON string, or a list of them) is the group."""
TOKENIZER_FILES = ("source_tokenizer.json", "tokenizer.json")
"""The file that reads a model's input text: a translator's source side, else the tokenizer."""


@dataclass
class CardTarget:
    """A card to lint and what the package knows about it.

    `folder` holds the README.md and the files it describes (a download of the repo for a pushed card); `repo_id`
    is the repo it was pushed to (its snippets then run against the loopback Hub), else None; `measured` maps each
    metric name to the value the package measured and returned (training's `eval_results`, `minitf eval --json`);
    `base_model` is the Hub id the card must name as its base model (None: it must name none); `kind` is "model",
    "export" or "space" (a Space card has no library or pipeline); `local_names` are names of the test's own
    folders, which no metadata value may be; `model_id` the id its snippets load (replaced by the folder);
    `tokenizer_folder` holds the tokenizer its examples are read with (default: `folder`; an export without a
    tokenizer file names its source's)."""

    name: str
    folder: Path
    repo_id: str | None = None
    measured: Mapping[str, float] = field(default_factory=dict)
    base_model: str | None = None
    kind: str = "model"
    local_names: frozenset[str] = frozenset()
    forbidden: tuple[str, ...] = ()
    model_id: str | None = None
    tokenizer_folder: Path | None = None

    @property
    def readme(self) -> Path:
        return self.folder / "README.md"


# --- reading the card ------------------------------------------------------------------------------------------------


def split_blocks(body: str) -> tuple[list[str], list[tuple[str, str]]]:
    """The body's lines outside fenced code blocks (a block's lines replaced by one line `<code LANG>`) and the
    fenced blocks as (language, code)."""
    lines, blocks, fence, language, code = [], [], None, "", []
    for line in body.splitlines():
        match = FENCE.match(line.strip())
        if fence is None and match:
            fence, language, code = match.group(1), match.group(2).strip().lower(), []
            continue
        if fence is not None and line.strip().startswith(fence) and not line.strip()[len(fence) :].strip():
            blocks.append((language, "\n".join(code) + "\n"))
            lines.append(f"<code {language or 'text'}>")
            fence = None
            continue
        (code if fence is not None else lines).append(line)
    return lines, blocks


@dataclass
class Section:
    level: int
    title: str
    start: int  # the index of its heading in `lines`
    end: int  # the index after its last line (the next heading of its level or above)
    lines: list[str]  # the body's lines outside code and comments (a code block as one line `<code LANG>`)

    @property
    def content(self) -> list[str]:
        """Its lines after the heading, its subsections' included."""
        return self.lines[self.start + 1 : self.end]


def sections(body: str) -> list[Section]:
    """Every heading of the body (outside code and HTML comments) with the lines up to the next heading of its
    level or above; the text before the first heading is a section of level 0."""
    lines, _ = split_blocks(HTML_COMMENT.sub("", body))
    headings = [(index, HEADING.match(line)) for index, line in enumerate(lines)]
    found = [Section(0, "", -1, len(lines), lines)]
    for index, match in headings:
        if match:
            level = len(match.group(1))
            end = next(
                (later for later, other in headings[index + 1 :] if other and len(other.group(1)) <= level), len(lines)
            )
            found.append(Section(level, match.group(2), index, end, lines))
    return found


def python_blocks(card_text: str) -> list[str]:
    """The card's ```python blocks."""
    return [code for language, code in split_blocks(card_text)[1] if language in ("python", "py")]


# --- the checks ------------------------------------------------------------------------------------------------------


def check_metadata(target: CardTarget, card: ModelCard) -> list[str]:
    data = metadata_load(target.readme) or {}
    loaded = card.data.to_dict()
    if loaded != data:
        keys = sorted(key for key in {*loaded, *data} if loaded.get(key) != data.get(key))
        return [f"ModelCard.load and metadata_load read {', '.join(keys)} differently"]
    problems = []
    license = data.get("license")
    if not license:
        problems.append("no license")
    elif license not in HUB_LICENSES:
        problems.append(f"license {license!r} is not on the Hub's license list")
    elif license == "other" and not data.get("license_name"):
        problems.append("license 'other' without a license_name")
    if target.kind != "space":
        for key in ("pipeline_tag", "library_name"):
            if not data.get(key):
                problems.append(f"no {key}")
    if "minitf" not in (data.get("tags") or []):
        problems.append(f"tags {data.get('tags')} lack 'minitf'")
    base = data.get("base_model")
    if target.base_model is None and base is not None:
        problems.append(f"base_model {base!r} but the card's model has no Hub source")
    elif target.base_model is not None and base != target.base_model:
        problems.append(f"base_model is {base!r}, not the source's repo id {target.base_model!r}")
    datasets = data.get("datasets") or []
    for dataset in [datasets] if isinstance(datasets, str) else datasets:
        if _local(str(dataset), target):
            problems.append(f"datasets names a local path {dataset!r}")
    language = data.get("language")
    if language is not None and not (
        isinstance(language, list) and all(isinstance(code, str) and ISO_LANGUAGE.match(code) for code in language)
    ):
        problems.append(f"language {language!r} is not a list of ISO 639 codes")
    for key, value in data.items():
        if key != "model-index" and isinstance(value, str) and value in target.local_names:
            problems.append(f"{key}: {value!r} names a local folder")
    return problems


def _local(value: str, target: CardTarget) -> bool:
    return (
        value.startswith(("/", ".", "~"))
        or bool(re.match(r"^[A-Za-z]:[\\/]", value))
        or value.count("/") > 1
        or "\\" in value
        or value.split("/")[0] in target.local_names
    )


def check_paths(target: CardTarget, text: str) -> list[str]:
    if target.repo_id is None:  # a local export's record of its source, for `minitf verify`; `minitf push` drops it
        text = re.sub(rf"^{re.escape(SOURCE_CARD_FIELD)}: .*$", "", text, flags=re.MULTILINE)
    found = [match.group(0) for match in ABSOLUTE_PATH.finditer(text)]
    found += [path for path in target.forbidden if path in text]
    found += [
        match.group(0)
        for name in sorted(target.local_names)
        for match in re.finditer(rf"(?<![\w/.-]){re.escape(name)}/[\w./-]+", text)
    ]
    return [f"names the path {path}" for path in dict.fromkeys(found)]


def _numbers(cells: list[str]) -> list[tuple[int, float, str]]:
    out = []
    for index, cell in enumerate(cells):
        text = cell.strip().replace(",", "")
        if re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", text):
            out.append((index, float(text), cell.strip()))
    return out


def _agrees(printed: str, value: float) -> bool:
    """Whether `printed` (a figure as the card writes it) is `value` rounded."""
    text = printed.replace(",", "")
    decimals = len(text.split(".")[1].split("e")[0]) if "." in text else 0
    return math.isclose(float(text), value, rel_tol=5e-4, abs_tol=0.51 * 10**-decimals)


def check_figures(target: CardTarget, card: ModelCard, outputs: Mapping[int, str]) -> list[str]:
    problems = []
    for result in card.data.eval_results or []:
        measured = target.measured.get(result.metric_type)
        if measured is None:
            problems.append(f"model-index {result.metric_type} = {result.metric_value} was not measured on this model")
        elif not math.isclose(float(result.metric_value), measured, rel_tol=1e-6):
            problems.append(f"model-index {result.metric_type} = {result.metric_value}, measured {measured}")
    for section in sections(card.text):
        title = section.title.lower()
        rows = [line for line in section.content if line.startswith("|") and not re.match(r"^\|[-| :]+\|$", line)]
        if title in ("results", "evaluation"):
            for row in rows:
                cells = [cell.strip() for cell in row.strip("|").split("|")]
                names = [cell for cell in cells if cell in target.measured]
                numbers = _numbers(cells)
                if names and numbers and not _agrees(numbers[-1][2], target.measured[names[0]]):
                    problems.append(
                        f"{section.title}: {names[0]} {numbers[-1][2]}, measured {target.measured[names[0]]}"
                    )
                elif numbers and not names and cells[0] not in ("metric", "data (sha256)"):
                    problems.append(f"{section.title}: row {row!r} has no measured metric")
        if title == "runs in":
            header = next((row for row in rows if "File" in row), None)
            column = [cell.strip() for cell in header.strip("|").split("|")].index("File") if header else 1
            for row in rows:
                if row is header:
                    continue
                file = [cell.strip() for cell in row.strip("|").split("|")][column].strip("`")
                if not (target.folder / file).is_file():
                    problems.append(f"Runs in names {file}, not a file of this {target.kind}")
    for index, code in enumerate(python_blocks(card.text)):
        comments = " ".join(line.split("#", 1)[1] for line in code.splitlines() if "#" in line)
        printed = outputs.get(index)
        for figure in DECIMAL.findall(comments):
            if printed is None or figure not in printed:
                problems.append(f"python block {index + 1} shows {figure}, which running it does not print")
    return problems


USAGE_LANGUAGES = ("python", "py")
SHELL_LANGUAGES = ("console", "bash", "sh", "shell")


def check_usage(card: ModelCard) -> list[str]:
    """Exactly one section of level 2 or above (the text before them counts as one) holds usage code: python
    blocks, else shell commands."""
    found = sections(card.text)
    top = [section for section in found if section.level <= 2]
    for languages in (USAGE_LANGUAGES, SHELL_LANGUAGES):
        codes = {f"<code {language}>" for language in languages}
        with_code = []
        for section in top:
            inner = [
                other for other in top if other.level > section.level and section.start < other.start < section.end
            ]
            own = range(section.start + 1, min([other.start for other in inner] + [section.end]))
            if any(section.lines[index] in codes for index in own):
                with_code.append(section.title or "(the text before the first section)")
        if with_code:
            return [] if len(with_code) == 1 else [f"{len(with_code)} usage sections: {', '.join(with_code)}"]
    return ["no usage section (no python or shell code)"]


def check_empty_sections(card: ModelCard) -> list[str]:
    problems = []
    for section in sections(card.text)[1:]:
        content = [line for line in section.content if line.strip() and not HEADING.match(line)]
        if not content or all(line.strip() == NO_INFORMATION for line in content):
            problems.append(f"section {'#' * section.level} {section.title} is empty")
    return problems


def check_snippets(card: ModelCard, results: list[dict]) -> list[str]:
    if not python_blocks(card.text):
        return []
    return [
        f"python block {index + 1} fails: {result['error']}" for index, result in enumerate(results) if result["error"]
    ]


def example_texts(text: str) -> list[str]:
    """The texts the card's code gives the model (EXAMPLE_USES), in order."""
    found = []
    for pattern in EXAMPLE_USES:
        for match in pattern.finditer(text):
            value = json.loads(match.group(1))
            found += value if isinstance(value, list) else [value]
    return found


def misspelled(tokenizer, text: str) -> bool:
    """Whether the `tokenizers` tokenizer writes `text` with an unknown token or drops part of it (decoding its ids
    does not give the normalized text back, white space aside)."""
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    unknown = json.loads(tokenizer.to_str())["model"].get("unk_token")
    unknown_id = tokenizer.token_to_id(unknown) if isinstance(unknown, str) else None
    normalized = tokenizer.normalizer.normalize_str(text) if tokenizer.normalizer is not None else text
    decoded = tokenizer.decode(ids, skip_special_tokens=True)
    return not ids or unknown_id in ids or "".join(decoded.split()) != "".join(normalized.split())


def check_examples(target: CardTarget, text: str) -> list[str]:
    from tokenizers import Tokenizer

    examples = list(dict.fromkeys(example_texts(text)))
    folder = target.tokenizer_folder or target.folder
    path = next((folder / name for name in TOKENIZER_FILES if (folder / name).is_file()), None)
    if not examples:
        return []
    if path is None:
        return [f"no tokenizer file ({', '.join(TOKENIZER_FILES)}) in {folder.name} to read the examples with"]
    tokenizer = Tokenizer.from_file(str(path))
    return [
        f"example {text!r} is not spelled by the model's tokenizer" for text in examples if misspelled(tokenizer, text)
    ]


def lint_card(target: CardTarget, snippet_results: list[dict] | None = None) -> dict[str, list[str]]:
    """Each check of CHECKS -> its problems (empty: the card passes it). `snippet_results` are `run_snippets`'s for
    this card (one dict per python block: error, stdout)."""
    card = ModelCard.load(target.readme)
    text = target.readme.read_text(encoding="utf-8")
    results = snippet_results if snippet_results is not None else run_snippets([target])[target.name]
    outputs = {index: result["stdout"] for index, result in enumerate(results) if not result["error"]}
    return {
        "metadata": check_metadata(target, card),
        "paths": check_paths(target, text),
        "figures": check_figures(target, card, outputs),
        "usage": check_usage(card),
        "empty_sections": check_empty_sections(card),
        "snippets": check_snippets(card, results),
        "examples": check_examples(target, text),
    }


# --- running the snippets --------------------------------------------------------------------------------------------

_RUNNER = """
import contextlib, io, json, os, sys, traceback, warnings
warnings.simplefilter("ignore")
results = []
for job in json.loads(sys.stdin.read()):
    os.chdir(job["cwd"])
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(job["code"], "<card snippet>", "exec"), {"__name__": "__main__"})
        error = None
    except BaseException as exception:
        error = traceback.format_exception_only(type(exception), exception)[-1].strip()
    results.append({"error": error, "stdout": printed.getvalue()})
print("\\n" + json.dumps(results))
"""


def snippet_code(target: CardTarget, code: str) -> str:
    """`code` with the card's placeholder folder (path/to/...) and, for a local card, its model id and any string
    naming the folder (its name, OWNER/NAME, its path) replaced by the folder's path."""
    folder = repr(str(target.folder))
    code = PLACEHOLDER_FOLDER.sub(lambda match: match.group(1) + str(target.folder), code)
    if target.repo_id is None:
        # A local card may name its model by the folder's name or as OWNER/NAME: both load the folder.
        named = re.compile(rf"""(["'])([^"'\n]*/)?{re.escape(target.folder.name)}/?\1""")
        code = named.sub(lambda _: folder, code)
        if target.model_id:
            code = code.replace(repr(target.model_id), folder).replace(json.dumps(target.model_id), folder)
    return code


def run_snippets(
    targets: list[CardTarget], env: Mapping[str, str] | None = None, timeout: int = 600
) -> dict[str, list[dict]]:
    """Every python block of every target's card, run in two fresh processes (with hf_minitf for the blocks that
    import it, without it for the others), each block in fresh globals with the card's folder as the working
    directory: target name -> one {"error", "stdout"} per block."""
    from isolation import _HIDE_HF_MINITF, REPO_ROOT

    from _hf_minitf_autoregister import DISABLE_VARIABLE

    jobs: dict[bool, list[tuple[str, int, dict]]] = {True: [], False: []}
    for target in targets:
        for index, code in enumerate(python_blocks(target.readme.read_text(encoding="utf-8"))):
            job = {"code": snippet_code(target, code), "cwd": str(target.folder)}
            jobs["hf_minitf" in code].append((target.name, index, job))
    base = dict(os.environ if env is None else env)
    processes = {}
    for with_package, batch in jobs.items():
        if not batch:
            continue
        program = _RUNNER if with_package else _HIDE_HF_MINITF.format(root=REPO_ROOT) + _RUNNER
        process_env = dict(base, OMP_NUM_THREADS="1")
        if not with_package:
            process_env = {k: v for k, v in process_env.items() if k != "PYTHONPATH"} | {DISABLE_VARIABLE: "1"}
        process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(program)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=process_env,
        )
        process.stdin.write(json.dumps([job for _, _, job in batch]))
        process.stdin.close()
        processes[with_package] = process
    results: dict[str, list[dict]] = {
        target.name: [{}] * len(python_blocks(target.readme.read_text(encoding="utf-8"))) for target in targets
    }
    for with_package, process in processes.items():
        stdout = process.stdout.read()
        stderr = process.stderr.read()
        process.wait(timeout=timeout)
        lines = stdout.strip().splitlines()
        assert process.returncode == 0 and lines, f"the snippet runner failed:\n{stdout[-2000:]}\n{stderr[-4000:]}"
        for (name, index, _), result in zip(jobs[with_package], json.loads(lines[-1]), strict=True):
            results[name] = [*results[name][:index], result, *results[name][index + 1 :]]
    return results


def card_metadata(folder: Path) -> dict:
    """The card's YAML metadata, as a plain dict."""
    return yaml.safe_load(ModelCard.load(folder / "README.md").data.to_yaml()) or {}
