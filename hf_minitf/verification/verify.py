"""`verify_export`: run an export's files in their runtimes and the MiniTF model it came from in PyTorch, on the same
inputs, and say how far they agree; write the "Runs in" rows into the export's own card (and into the source's only
when asked: `record_in`).

The MiniTF side runs here (the reference: greedy tokens and the logits of its own sequences, embeddings, or
translations); each runtime runs in a process of its own (`worker`), all of its files in that one process.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hf_minitf.cards import RunRow, write_runs_in
from hf_minitf.catalog.exports import context_limit
from hf_minitf.catalog.families import FAMILIES
from hf_minitf.catalog.verification import (
    EXACT_EMBEDDING_DIFFERENCE,
    NOTHING_MEASURED,
    PROMPT_LENGTHS,
    PROMPT_SEED,
    RUNTIMES,
    VERIFY_NEW_TOKENS,
    VERIFY_PROMPTS,
    gguf_advice,
    not_measured,
)
from hf_minitf.catalog.wording import with_article
from hf_minitf.safety.json_files import read_json
from hf_minitf.verification.runners import Export, Target, find_export
from hf_minitf.verification.worker import RESULT_FILE
from hf_minitf.verification.worker import versions as worker_versions

PUBLISHED_FILES = (
    "*.json",
    "*.safetensors",
    "*.onnx",
    "*.onnx_data",
    "*.onnx.data",
    "model.bin",
    "*.gguf",
    "*.txt",
    "*.jinja",
    "README.md",
)
"""What is downloaded of a published export (never code, never a pickle: CTranslate2's model.bin is its own format)."""
WEIGHTS_COMPARED = ("native",)
"""The export formats whose files copy the source's tensors (`export.native.native_tensors`): an exact one is
compared with them tensor by tensor, besides its outputs."""


@dataclass
class Inputs:
    """What both sides run: prompts (token ids) and new tokens for a GPT, texts for the others."""

    kind: str
    prompts: list[list[int]] = field(default_factory=list)
    new_tokens: int = 0
    texts: list[str] = field(default_factory=list)


@dataclass
class Check:
    """One file measured (or not run): its row of the table, whether it agrees with MiniTF (None: not run), and the
    first difference in one line."""

    target: Target
    row: RunRow
    agrees: bool | None
    difference: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def fails(self) -> bool:
        """A file whose format claims exactness that is not exact."""
        return self.target.claims_exact and self.agrees is False

    def as_dict(self) -> dict[str, Any]:
        return {
            **vars(self.row),
            "claims_exact": self.target.claims_exact,
            "agrees": self.agrees,
            "difference": self.difference,
            **self.figures,
        }


@dataclass
class Verification:
    """What `verify_export` found, and the cards it wrote."""

    export: str
    source: str
    checks: list[Check]
    cards: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the reader should know besides the checks (an old export that recorded no hashes of its source)."""

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if check.fails]

    @property
    def measured(self) -> list[Check]:
        """The checks of files that ran (agreeing or not), beside those not measured (their runtime missing)."""
        return [check for check in self.checks if check.agrees is not None]

    def summary(self) -> str:
        """One line: the first failure (the first differing token), that nothing was measured (and why), or how
        many files agree."""
        if self.failures:
            check = self.failures[0]
            return (
                f"{self.export}: {check.row.file} ({check.row.runtime}, {check.row.precision}) claims to give the "
                f"MiniTF model's outputs but does not: {check.difference}"
            )
        if not self.measured:
            why = "; ".join(f"{check.row.file}: {check.row.agreement}" for check in self.checks)
            return f"{self.export}: {NOTHING_MEASURED}: {why}"
        return (
            f"{self.export}: {len(self.measured)} file(s) measured against {self.source}, none claiming exactness fails"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "export": self.export,
            "source": self.source,
            "runs": [check.as_dict() for check in self.checks],
            "cards": self.cards,
            "notes": self.notes,
            "failures": len(self.failures),
        }


# ------------------------------------------------------------------------------------------------------ the inputs
def sampled_ids(tokenizer, size: int, count: int) -> list[list[int]]:
    """`count` sequences of token ids below `size` (lengths `PROMPT_LENGTHS` in turn), drawn with a fixed seed,
    special tokens left out: the same inputs for every runtime and every run."""
    special = set(tokenizer.all_special_ids)
    candidates = [index for index in range(size) if index not in special]
    generator = np.random.default_rng(PROMPT_SEED)
    return [
        [int(index) for index in generator.choice(candidates, PROMPT_LENGTHS[number % len(PROMPT_LENGTHS)])]
        for number in range(count)
    ]


def make_inputs(kind: str, tokenizer, config, count: int, new_tokens: int) -> Inputs:
    """The inputs of a family's comparison: GPT prompts that leave room for `new_tokens` in a learned position
    table; an encoder's texts decoded from sampled ids; a translator's source texts made of source tokens."""
    if kind == "generator":
        prompts = sampled_ids(tokenizer, min(len(tokenizer), config.vocab_size), count)
        limit = context_limit(config)
        if limit is not None:
            new_tokens = min(new_tokens, limit - max(map(len, prompts)))
        if new_tokens < 1:
            raise ValueError(
                f"the model reads {limit} positions, too few for prompts of {max(map(len, prompts))} tokens and "
                "new ones after them: it cannot be verified this way"
            )
        return Inputs(kind, prompts=prompts, new_tokens=new_tokens)
    if kind == "embedder":
        ids = sampled_ids(tokenizer, min(len(tokenizer), config.vocab_size), count)
        texts = [tokenizer.decode(sequence, skip_special_tokens=True).strip() or "a" for sequence in ids]
        return Inputs(kind, texts=texts)
    ids = sampled_ids(tokenizer, tokenizer.source_vocab_size, count)
    return Inputs(kind, texts=[" ".join(tokenizer.convert_ids_to_tokens(sequence)) for sequence in ids])


# ---------------------------------------------------------------------------------------------------- the MiniTF side
def reference(source, tokenizer, kind: str, inputs: Inputs) -> dict[str, Any]:
    """The MiniTF model's outputs for `inputs`, in float32: greedy new tokens, the full sequences and their logits;
    embeddings; or translations."""
    import torch

    from hf_minitf.verification.runs import torch_embedder, torch_generator, torch_translator

    model = source.load_model(torch.float32)
    if kind == "generator":
        generation = source.load_generation_config()
        ends = generation.eos_token_id if generation is not None else None
        run = torch_generator(model, [ends] if isinstance(ends, int) else list(ends or []))
        tokens = run.generate(inputs.prompts, inputs.new_tokens)
        sequences = [prompt + new for prompt, new in zip(inputs.prompts, tokens)]
        return {"tokens": tokens, "sequences": sequences, "logits": [run.logits(sequence) for sequence in sequences]}
    if kind == "embedder":
        return {
            "embeddings": torch_embedder(model, tokenizer, model.config.max_position_embeddings).encode(inputs.texts)
        }
    return {"translations": torch_translator(model, tokenizer).translate(inputs.texts)}


# -------------------------------------------------------------------------------------------------- the runtimes' side
def run_runtime(runtime: str, targets: list[Target], inputs: Inputs, sequences: list[list[int]]) -> list[dict]:
    """Each of `targets` run by `runtime` in one worker process: per target its outputs (arrays loaded), or its
    error; the runtime's versions under "versions"."""
    with tempfile.TemporaryDirectory(prefix="minitf-verify-") as folder:
        work = Path(folder)
        request = {
            "kind": inputs.kind,
            "targets": [
                {"loader": target.runner.loader, "folder": str(target.folder), "file": target.file, "info": target.info}
                for target in targets
                if target.runner is not None
            ],
            "prompts": inputs.prompts,
            "new_tokens": inputs.new_tokens,
            "sequences": sequences,
            "texts": inputs.texts,
            "distributions": list(RUNTIMES[runtime].distributions),
        }
        (work / "request.json").write_text(json.dumps(request), encoding="utf-8")
        process = subprocess.run(
            [sys.executable, "-m", "hf_minitf.verification.worker", str(work / "request.json")],
            capture_output=True,
            text=True,
        )
        if process.returncode != 0 or not (work / RESULT_FILE).is_file():
            lines = process.stderr.strip().splitlines()
            error = lines[-1] if lines else f"the worker ended with status {process.returncode}"
            return [{"error": error, "versions": {}} for _ in targets]
        result = read_json(work / RESULT_FILE)
        outputs = []
        for index, output in enumerate(result["results"]):
            if "error" not in output:
                if inputs.kind == "generator":
                    output["logits"] = [
                        np.load(work / f"logits_{index}_{number}.npy") for number in range(len(sequences))
                    ]
                elif inputs.kind == "embedder":
                    output["embeddings"] = np.load(work / f"embeddings_{index}.npy")
            outputs.append(output | {"versions": result["versions"]})
        return outputs


# ------------------------------------------------------------------------------------------------------ comparisons
def relative_difference(expected: np.ndarray, actual: np.ndarray) -> float:
    """The largest absolute difference relative to the largest absolute expected value (over the columns both
    have: an engine may pad its vocabulary)."""
    rows, columns = min(len(expected), len(actual)), min(expected.shape[-1], actual.shape[-1])
    expected, actual = expected[:rows, ..., :columns], actual[:rows, ..., :columns]
    return float(np.abs(expected - actual).max() / max(float(np.abs(expected).max()), 1e-30))


def first_difference(mine: list[int], theirs: list[int]) -> int:
    """The first position (0-based) where two token lists differ, or the shorter one's length."""
    return next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))


def compare_generations(
    expected: dict, output: dict, inputs: Inputs, runtime: str, token_text
) -> tuple[bool, str, str | None, dict]:
    """(tokens equal, agreement cell, first difference, figures) of a generator's run."""
    logits = max(relative_difference(a, b) for a, b in zip(expected["logits"], output["logits"]))
    equal = [a == b for a, b in zip(expected["tokens"], output["tokens"])]
    count = len(inputs.prompts)
    figures = {
        "prompts": count,
        "new_tokens": inputs.new_tokens,
        "prompts_equal": sum(equal),
        "logits_relative": logits,
        "earliest_difference": min(
            (first_difference(a, b) for a, b in zip(expected["tokens"], output["tokens"]) if a != b), default=None
        ),
    }
    if all(equal):
        return (
            True,
            f"greedy tokens equal ({count}/{count} prompts x {inputs.new_tokens}); logits within {logits:.1e}",
            None,
            figures,
        )
    number = equal.index(False)
    mine, theirs = expected["tokens"][number], output["tokens"][number]
    position = first_difference(mine, theirs)

    def token(tokens: list[int]) -> str:
        return f"{tokens[position]} {token_text(tokens[position])!r}" if position < len(tokens) else "the end"

    difference = (
        f"prompt {number + 1} {inputs.prompts[number]} first differs at new token {position + 1}: "
        f"MiniTF {token(mine)}, {runtime} {token(theirs)}"
    )
    figures |= {"first_difference": {"prompt": number + 1, "new_token": position + 1}}
    if position < min(len(mine), len(theirs)):  # how close MiniTF's own choice was there: a near tie, or not
        row = expected["logits"][number][len(inputs.prompts[number]) - 1 + position]
        margin = float(row[mine[position]] - row[theirs[position]])
        difference += f" (MiniTF's logit margin between them: {margin:.2g})"
        figures["first_difference"]["minitf_margin"] = margin
    cell = f"greedy tokens differ ({sum(equal)}/{count} prompts equal; {difference}); logits within {logits:.1e}"
    return False, cell, difference, figures


def logits_difference(expected: list[np.ndarray], actual: list[np.ndarray], inputs: Inputs, bound: float) -> str:
    """Where an exact file's logits differ most from MiniTF's (greedy tokens equal): the prompt and position."""
    worst = max(range(len(expected)), key=lambda index: relative_difference(expected[index], actual[index]))
    rows = min(len(expected[worst]), len(actual[worst]))
    columns = min(expected[worst].shape[-1], actual[worst].shape[-1])
    gaps = np.abs(expected[worst][:rows, :columns] - actual[worst][:rows, :columns])
    position = int(gaps.max(-1).argmax())
    relative = relative_difference(expected[worst], actual[worst])
    return (
        f"greedy tokens equal, but the logits of prompt {worst + 1} {inputs.prompts[worst]} differ by {relative:.1e} "
        f"relative at position {position + 1} (more than {bound:g}, the bound of an exact file of this format)"
    )


def compare_embeddings(expected: dict, output: dict, inputs: Inputs) -> tuple[bool, str, str | None, dict]:
    mine, theirs = expected["embeddings"], output["embeddings"]
    difference = relative_difference(mine, theirs)
    mine64, theirs64 = np.asarray(mine, np.float64), np.asarray(theirs, np.float64)
    cosines = (mine64 * theirs64).sum(-1) / np.maximum(
        np.linalg.norm(mine64, axis=-1) * np.linalg.norm(theirs64, axis=-1), 1e-30
    )
    least = min(float(cosines.min()), 1.0)  # rounding can put a cosine a hair above 1
    figures = {"texts": len(inputs.texts), "embeddings_relative": difference, "least_cosine": least}
    cell = f"embeddings within {difference:.1e}, least cosine {least:.7f} ({len(inputs.texts)} texts)"
    if difference <= EXACT_EMBEDDING_DIFFERENCE:
        return True, cell, None, figures
    worst = int(np.abs(mine - theirs).max(-1).argmax())
    return (
        False,
        cell,
        f"the embeddings of text {worst + 1} {inputs.texts[worst]!r} differ by {difference:.1e} relative (more than {EXACT_EMBEDDING_DIFFERENCE:g}), cosine {float(cosines[worst]):.7f}",
        figures,
    )


def compare_translations(
    expected: dict, output: dict, inputs: Inputs, runtime: str
) -> tuple[bool, str, str | None, dict]:
    equal = [a == b for a, b in zip(expected["translations"], output["translations"])]
    count = len(inputs.texts)
    figures = {"texts": count, "translations_equal": sum(equal)}
    if all(equal):
        return True, f"translations equal ({count}/{count})", None, figures
    number = equal.index(False)
    difference = (
        f"text {number + 1} {inputs.texts[number]!r}: MiniTF {expected['translations'][number]!r}, "
        f"{runtime} {output['translations'][number]!r}"
    )
    return False, f"translations differ ({sum(equal)}/{count} equal; {difference})", difference, figures


def first_differing_tensor(path: Path, expected: dict[str, Any]) -> str | None:
    """Where the safetensors file `path` first differs from `expected` (the tensors the export writes from the
    source): a tensor missing, extra, of another shape, or the first row (index, for a vector) whose values differ
    at all; None where every tensor is equal. A native export copies the weights, so a float32 one is bit-equal."""
    import torch
    from safetensors import safe_open

    with safe_open(str(path), "pt") as weights:
        names = set(weights.keys())
        for name, wanted in expected.items():
            if name not in names:
                return f"tensor {name} of the source's weights is missing from {path.name}"
            actual = weights.get_tensor(name)
            if actual.shape != wanted.shape:
                return f"tensor {name} has shape {list(actual.shape)} in {path.name}, the source's {list(wanted.shape)}"
            if torch.equal(actual, wanted.to(actual.dtype)):
                continue
            differs = (actual != wanted.to(actual.dtype)).reshape(len(actual), -1).any(-1) if actual.dim() else None
            where = (
                "" if differs is None else f" at {'row' if actual.dim() > 1 else 'index'} {int(differs.nonzero()[0])}"
            )
            count = "" if differs is None else f" ({int(differs.sum())} of {len(actual)} differ)"
            largest = float((actual.double() - wanted.double()).abs().max())
            return (
                f"tensor {name} of {path.name} differs from the source's{where}{count}, by up to {largest:.2g}: "
                "the file is not the source's weights"
            )
        extra = sorted(names - set(expected))
        if extra:
            return f"{path.name} holds tensor {extra[0]}, which the source's weights do not"
    return None


def compare_weights(check: Check, opened, config) -> None:
    """A file that claims exactness and whose format copies the source's tensors (`WEIGHTS_COMPARED`) compared with
    them tensor by tensor: the first difference fails it, named, even where the outputs agree (a tampered row of a
    token no prompt uses)."""
    from hf_minitf.export.native import native_tensors

    if not check.target.claims_exact:
        return
    difference = first_differing_tensor(check.target.folder / check.target.file, native_tensors(opened, config))
    if difference is None:
        return
    check.agrees = False
    check.difference = f"{check.difference}; {difference}" if check.difference else difference
    check.row = dataclasses.replace(check.row, agreement=f"{check.row.agreement}; {difference}")
    check.figures["weights_differ"] = difference


# ------------------------------------------------------------------------------------------------------- the rows
def file_size(target: Target) -> str:
    """The size of the file and its companions with their external data (ONNX), in decimal units."""
    paths = [target.folder / name for name in (target.file, *target.companions)]
    size: float = sum(
        item.stat().st_size
        for path in paths
        for item in (path, Path(f"{path}.data"), Path(f"{path}_data"))
        if item.is_file()
    )
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def versions_cell(versions: dict[str, str]) -> str:
    """The runtime's versions, then this package's (which ran the MiniTF side)."""
    from hf_minitf.catalog.packaging import PACKAGE

    return ", ".join(f"{name} {version}" for name, version in (versions | worker_versions([PACKAGE])).items())


def check_of(target: Target, expected: dict, output: dict, inputs: Inputs, token_text) -> Check:
    runtime = target.engine
    row = dict(runtime=runtime, file=target.label, precision=target.precision, size=file_size(target))
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    if "error" in output:  # named without the folder it lies in (a temporary download, a path of this machine)
        error = output["error"].replace(f"{target.folder}{os.sep}", "").replace(str(target.folder), target.label)
        cell = f"does not run: {error}"
        return Check(
            target,
            RunRow(**row, agreement=cell, speed="", date=date, versions=versions_cell(output["versions"])),
            False,
            cell,
        )
    if inputs.kind == "generator":
        agrees, cell, difference, figures = compare_generations(expected, output, inputs, runtime, token_text)
        bound = target.logit_bound
        if agrees and target.claims_exact and figures["logits_relative"] > bound:
            agrees, difference = False, logits_difference(expected["logits"], output["logits"], inputs, bound)
        if target.engine == "llama.cpp":  # a GGUF type: what its figure means for the user, in one sentence
            advice = gguf_advice(
                target.precision, figures["prompts"], figures["prompts_equal"], figures["earliest_difference"]
            )
            cell, figures["advice"] = f"{cell}; {advice}", advice
        unit = "tokens/s"
    elif inputs.kind == "embedder":
        agrees, cell, difference, figures = compare_embeddings(expected, output, inputs)
        unit = "sentences/s"
    else:
        agrees, cell, difference, figures = compare_translations(expected, output, inputs, runtime)
        unit = "sentences/s"
    speed = ""  # left out where the worker could not measure it as for every runtime (`worker.one_core`)
    if output["seconds"] is not None:
        rate = output["count"] / max(output["seconds"], 1e-9)
        figures["speed"] = rate
        speed = f"{rate:,.0f} {unit}" if rate >= 10 else f"{rate:.2g} {unit}"
    return Check(
        target,
        RunRow(**row, agreement=cell, speed=speed, date=date, versions=versions_cell(output["versions"])),
        agrees,
        difference,
        figures,
    )


def not_run(target: Target, why: str) -> Check:
    """A file that did not run: its row says why (`not_measured`, or no runner); None agrees."""
    row = RunRow(target.engine, target.label, target.precision, file_size(target), why, "", "", "")
    return Check(target, row, None, why)


# ----------------------------------------------------------------------------------------------------- the source
def check_recorded_place(export: str | Path, named: str, refuse: bool) -> None:
    """Refuse a recorded source that is neither a folder here nor a repo id (moved or deleted since the export): one
    line naming it and what to do. `refuse` False (an old export, recorded relative to where it was made) leaves
    the folder's own refusal to `open_source`."""
    from hf_minitf.hub.sources import looks_like_repo_id

    if refuse and not Path(named).exists() and not looks_like_repo_id(named):
        raise ValueError(
            f"{export} was exported from {named}, which is not here (moved or deleted since the export); give the "
            "MiniTF folder it was exported from (or its repo id) with --source, or export it again"
        )


def check_recorded_source(export: str | Path, found: Export, opened) -> list[str]:
    """Refuse a recorded source whose config.json or weights no longer hash as they did at export time (another
    model, or this one changed since): one line naming it and what to do. An old export that recorded no hashes
    passes, with a note (returned) saying it was not checked."""
    from hf_minitf.export.source import source_hashes

    named = found.source
    if found.source_hashes is None:
        return [
            f"{export} records no hashes of its source (an export made before they were recorded): measured "
            f"against {named} as it is now, unchecked; export again to record them"
        ]
    now = source_hashes(opened.folder)
    if found.source_hashes.get("config") != now.get("config"):
        raise ValueError(
            f"{named} is another model than {export} was exported from (its config.json differs from the one "
            "recorded at export); give the MiniTF folder it was exported from with --source, or export again"
        )
    if found.source_hashes.get("weights") != now.get("weights"):
        raise ValueError(
            f"{named} changed since {export} was exported from it (its weights differ from those recorded at "
            f"export); export it again, or give --source {named} to measure the export against it as it is now"
        )
    return []


def check_record_in(folder: Path, opened) -> Path:
    """The card of `folder` (`--record-in`), checked before anything is measured: a local MiniTF folder with a card,
    holding the model the export is measured against (its config.json and weights hash the same); a ValueError in
    one line otherwise."""
    from hf_minitf.cards.render import README
    from hf_minitf.export.source import source_hashes

    if not folder.is_dir():
        raise ValueError(f"--record-in {folder}: no such folder; give the local MiniTF folder whose card gets the rows")
    if not (folder / README).is_file():
        raise ValueError(f"--record-in {folder} has no {README} to write the rows into; give a MiniTF model folder")
    if source_hashes(folder) != opened.hashes():
        raise ValueError(
            f"--record-in {folder} does not hold the model the export is measured against ({opened.name}: its "
            "config.json or weights differ); give the folder it was exported from"
        )
    return folder / README


def source_row(row: RunRow, repo_id: str | None) -> RunRow:
    """`row` as the source's card records it: the file after the published export's repo id (`org/name-ONNX:
    onnx/model.onnx`), or relative to a local export as its own card names it; never a local folder's path."""
    return row if repo_id is None else dataclasses.replace(row, file=f"{repo_id}: {row.file}")


# -------------------------------------------------------------------------------------------------------- the whole
def open_export(export: str | Path) -> tuple[Export, bool]:
    """The export at a local path, or a published one downloaded by repo id; and whether it is published (its
    files then lie in the Hugging Face cache, whose cards are not written)."""
    from hf_minitf.hub.sources import download_repo_files, looks_like_repo_id

    if looks_like_repo_id(export):
        return find_export(download_repo_files(str(export), PUBLISHED_FILES)), True
    return find_export(Path(export)), False


def verify_export(
    export: str | Path,
    source: str | Path | None = None,
    *,
    prompts: int = VERIFY_PROMPTS,
    new_tokens: int = VERIFY_NEW_TOKENS,
    write_cards: bool = True,
    revision: str | None = None,
    export_name: str | None = None,
    record_in: str | Path | None = None,
) -> Verification:
    """Measure the export `export` (a folder, a GGUF file, or the Hub repo id of a published export) against the
    MiniTF folder it came from (`source`, else the one it names) and, unless `write_cards` is False or the export is
    published, write its "Runs in" rows into the export's own card: the rows belong to the files measured.
    `record_in`, a local MiniTF folder holding the model measured against, also gets them in its card, each file
    named relative to the export or after the published export's repo id (`source_row`), never by a local path.
    `revision` is the source's branch, tag or commit when it is a Hub repo id; `export_name` names the export in the
    summary (default: the path or repo id given).

    A ValueError says what is wrong with the input (no source named, a source of another family, a `record_in`
    folder that is not that model), before anything is measured or written."""
    from hf_minitf.export.source import open_source

    found, published = open_export(export)
    named = str(source) if source is not None else found.source
    if named is None:
        raise ValueError(
            f"{export} does not name the MiniTF model it was exported from (a published export names only a source "
            "pushed to the Hub, never a folder of the machine it was made on); give it with --source FOLDER (or "
            "--source REPO_ID)"
        )
    if source is None:
        check_recorded_place(export, named, found.source_hashes is not None or published)
    opened = open_source(named, revision)
    notes = [] if source is not None else check_recorded_source(export, found, opened)
    recorded_card = None if record_in is None else check_record_in(Path(record_in), opened)
    kind = FAMILIES[opened.family].engine_kind
    for target in found.targets:
        if target.kind != kind:
            raise ValueError(
                f"{export} holds {target.label}, {with_article(target.kind)} export, but {named} is "
                f"{with_article(opened.family)} model; give the folder it was exported from with --source"
            )
    tokenizer = opened.load_tokenizer()
    family = FAMILIES[opened.family]
    config = family.load(family.config_class).from_pretrained(opened.folder)
    inputs = make_inputs(kind, tokenizer, config, prompts, new_tokens)
    expected = reference(opened, tokenizer, kind, inputs)

    checks: dict[int, Check] = {}
    by_runtime: dict[str, list[int]] = {}
    for index, target in enumerate(found.targets):
        runner = target.runner
        if runner is None:
            checks[index] = not_run(
                target, f"not measured: minitf verify has no runner for {target.engine} {target.kind} files"
            )
        elif importlib.util.find_spec(RUNTIMES[runner.runtime].module) is None:
            checks[index] = not_run(target, not_measured(runner.runtime))
        else:
            by_runtime.setdefault(runner.runtime, []).append(index)
    for runtime, indexes in by_runtime.items():
        outputs = run_runtime(runtime, [found.targets[i] for i in indexes], inputs, expected.get("sequences", []))
        for index, output in zip(indexes, outputs):
            if "missing" in output:
                why = f"{runtime} does not import: {output['missing']}"
                checks[index] = not_run(found.targets[index], not_measured(runtime, why))
                continue
            checks[index] = check_of(
                found.targets[index], expected, output, inputs, lambda token: tokenizer.decode([token])
            )
    for check in checks.values():
        runner = check.target.runner
        if check.agrees is not None and runner is not None and runner.export_format in WEIGHTS_COMPARED:
            compare_weights(check, opened, config)
    verification = Verification(
        export_name or str(export), named, [checks[index] for index in sorted(checks)], notes=notes
    )
    measured = [check.row for check in verification.measured]
    if write_cards and not published and measured:
        for card in found.cards:
            if write_runs_in(card, measured):
                verification.cards.append(str(card))
    if recorded_card is not None and measured:
        write_runs_in(recorded_card, [source_row(row, str(export) if published else None) for row in measured])
        verification.cards.append(str(recorded_card))
    return verification


__all__ = ["Check", "Verification", "verify_export"]
