"""Every code block of README.md and docs/*.md runs here, and each one is checked, not only run.

How a page is read (the rules a writer of the docs follows):
- ```python: executed. Either a ```text block follows it (only blank lines between) holding what it prints, or
  the code asserts something itself. The blocks of one page share one namespace and one working folder, in order.
- ```console: `$ COMMAND` lines (a trailing backslash continues one), each followed by what it prints. `minitf ...`
  runs in this process through `minitf_cli.main` (torch is loaded once); anything else runs in bash with this
  Python's environment first on PATH. A command exiting 0 is compared with its stdout, a failing one with its
  stderr, so a documented error has to be the error it shows.
- ```bash: only `make TARGET   # COMMAND: what it does` lines, checked by `make -n TARGET` in the repository:
  the dry run must show COMMAND (running `make test` inside the tests would recurse).
- ```text: output shown after a python block, or an illustration that is not code. No other language is allowed.
Printed output is compared as doctest does, with ELLIPSIS (`...` stands for any text) and NORMALIZE_WHITESPACE.
The working folder holds links to the repository's `tests` and `benchmarks`, so that paths in the docs are the
paths of a clone's root. Pushes go to the loopback Hub (tests/hub_server.py). A page whose examples need a running
server is listed in RUN_ELSEWHERE with the test that runs them against one.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import doctest
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CHECKER = doctest.OutputChecker()
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass
class Block:
    """One fenced code block: where it is, its language and code, and the output shown after it."""

    page: Path
    line: int
    language: str
    code: str
    expected: str | None = None
    end: int = 0  # the line after its closing fence
    section: str = ""  # the `## ` heading it is under

    @property
    def name(self) -> str:
        where = self.page.relative_to(ROOT).as_posix() if self.page.is_relative_to(ROOT) else self.page.name
        return f"{where}:{self.line}"


def read_blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page; a text block right after a python block becomes its expected output."""
    blocks, lines, index, section = [], page.read_text(encoding="utf-8").splitlines(), 0, ""
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match:
            section = lines[index][3:].strip() if lines[index].startswith("## ") else section
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{page.name}:{index + 1}: a code block is not closed"
        block = Block(page, index + 1, match[1], "\n".join(lines[index + 1 : end]) + "\n", section=section)
        between = (
            blocks
            and blocks[-1].language == "python"
            and blocks[-1].expected is None
            and all(not line.strip() for line in lines[blocks[-1].end : index])
        )
        if block.language == "text" and between:
            blocks[-1].expected = block.code
        else:
            blocks.append(block)
        block.end = end + 1
        index = end + 1
    return blocks


def console_commands(block: Block) -> list[tuple[str, str]]:
    """(command, expected output) pairs of a console block."""
    commands: list[tuple[str, list[str]]] = []
    continued = False
    for line in block.code.splitlines():
        if continued:
            commands[-1] = (commands[-1][0] + "\n" + line, [])
        elif line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{block.name}: console output before any `$ ` command"
            commands[-1][1].append(line)
        continued = line.endswith("\\") and not commands[-1][1]
    return [(command, "\n".join(output) + "\n") for command, output in commands]


def check_output(block: Block, what: str, expected: str, got: str) -> None:
    if not CHECKER.check_output(expected, got, OPTIONS):
        pytest.fail(
            f"{block.name}: {what} printed something else than the docs show:\n"
            + CHECKER.output_difference(doctest.Example("", expected), got, OPTIONS),
            pytrace=False,
        )


@contextlib.contextmanager
def transformers_logging_kept():
    """minitf commands quiet transformers' logging and progress bars: give the other tests theirs back."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        (logging.enable_progress_bar if bars else logging.disable_progress_bar)()


def run_minitf(arguments: list[str]) -> tuple[int, str, str]:
    from hf_minitf.cli import main

    out, err = io.StringIO(), io.StringIO()
    with transformers_logging_kept(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(arguments)
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def run_shell(command: str) -> tuple[int, str, str]:
    environment = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=environment, timeout=300)
    return done.returncode, done.stdout, done.stderr


def run_console(block: Block) -> None:
    for command, expected in console_commands(block):
        assert expected.strip(), f"{block.name}: `{command}` shows no output to check"
        words = shlex.split(command.replace("\\\n", " "), comments=True)
        status, out, err = run_minitf(words[1:]) if words[0] == "minitf" else run_shell(command)
        if status != 0:
            assert "error" in expected, f"{block.name}: `{command}` failed (exit status {status}):\n{err}"
        check_output(block, f"`{command}` (exit status {status})", expected, out if status == 0 else err)


def run_python(block: Block, namespace: dict) -> None:
    tree = ast.parse(block.code, filename=block.name)
    if block.expected is None and not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        pytest.fail(
            f"{block.name}: a python block must assert something or be followed by its output in a text block",
            pytrace=False,
        )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, block.name, "exec"), namespace)
    if block.expected is not None:
        check_output(block, "the block", block.expected, out.getvalue())


def run_make(block: Block) -> None:
    for line in block.code.strip().splitlines():
        match = re.fullmatch(r"make (\w+)\s+# ([^:]+):.*", line)
        assert match, f"{block.name}: a bash block holds `make TARGET   # COMMAND: what it does` lines, not {line!r}"
        dry_run = subprocess.run(["make", "-n", match[1]], cwd=ROOT, capture_output=True, text=True)
        assert dry_run.returncode == 0, dry_run.stderr
        assert match[2] in dry_run.stdout, f"{block.name}: `make {match[1]}` does not run {match[2]}"


@dataclass
class PageRun:
    """A page's blocks run in order, in one folder and one namespace; `upto` is how many have run."""

    blocks: list[Block]
    folder: Path
    namespace: dict = field(default_factory=lambda: {"__name__": "__docs__"})
    upto: int = 0

    def run_through(self, index: int) -> None:
        while self.upto <= index:
            block = self.blocks[self.upto]
            self.upto += 1
            torch.manual_seed(0)
            previous = Path.cwd()
            os.chdir(self.folder)
            try:
                if block.language == "python":
                    run_python(block, self.namespace)
                elif block.language == "console":
                    run_console(block)
                elif block.language == "bash":
                    run_make(block)
                else:
                    assert block.language == "text", (
                        f"{block.name}: a ```{block.language} block is not checked; "
                        "use python, console, bash (make) or text"
                    )
            finally:
                os.chdir(previous)
        if self.upto == len(self.blocks):
            self.namespace.clear()  # ends what the page made, such as an ONNX Runtime session and its threads


# Pages whose blocks need a running server: another test runs them, against the server it starts.
RUN_ELSEWHERE = {
    ROOT / "docs/serving.md": (
        "serving/test_serving.py",
        "test_the_serving_page_examples",
        "its curl and openai examples call a running `minitf serve`",
    ),
}
# Sections of the other pages whose blocks need a running server, by (page, heading): run by another test too.
SECTIONS_RUN_ELSEWHERE = {
    (ROOT / "docs/training.md", "Chat fine-tuning with TRL"): (
        "training/test_chat_fine_tuning.py",
        "test_the_chat_fine_tuning_section",
        "it serves the fine-tuned GPT and asks it through the openai client",
    ),
}


def checked_blocks(page: Path) -> list[Block]:
    """The blocks of a page that this module runs: all but those of the sections run elsewhere."""
    return [block for block in read_blocks(page) if (page, block.section) not in SECTIONS_RUN_ELSEWHERE]


BLOCKS = [block for page in PAGES if page not in RUN_ELSEWHERE for block in checked_blocks(page)]


@pytest.fixture(scope="module")
def page_runs(tmp_path_factory, hub):  # hub: the publishing examples push to the loopback Hub
    runs = {}
    for page in PAGES:
        folder = tmp_path_factory.mktemp(page.stem)
        for name in ("tests", "benchmarks"):
            (folder / name).symlink_to(ROOT / name)
        runs[page] = PageRun(checked_blocks(page), folder)
    return runs


@pytest.mark.parametrize("block", BLOCKS, ids=[block.name for block in BLOCKS])
def test_doc_block(block, page_runs):
    run = page_runs[block.page]
    run.run_through(next(index for index, candidate in enumerate(run.blocks) if candidate.line == block.line))


def test_pages_run_elsewhere_are_run_there():
    for page, (test_file, test_name, reason) in RUN_ELSEWHERE.items():
        source = (ROOT / "tests" / test_file).read_text(encoding="utf-8")
        assert f"def {test_name}(" in source, f"{page.name} ({reason}) is run by no test {test_name} in {test_file}"
        assert page.name in source, f"{test_file} does not read {page.name}"
    for (page, section), (test_file, test_name, reason) in SECTIONS_RUN_ELSEWHERE.items():
        assert any(block.section == section for block in read_blocks(page)), f"{page.name} has no section {section}"
        source = (ROOT / "tests" / test_file).read_text(encoding="utf-8")
        assert f"def {test_name}(" in source, f"{page.name}, {section} ({reason}): no test {test_name} in {test_file}"
        assert page.name in source and section in source, f"{test_file} does not read {page.name}, {section}"


def test_the_quickstart_folders_the_docs_name_are_the_ones_it_writes():
    """Every `quickstart_models/NAME` in a page (the `minitf serve` lines, the requests' and clients' `model`) is a
    folder `minitf quickstart` writes: its --out default and the family folders of hf_minitf.training.quickstart."""
    from hf_minitf.cli import build_parser
    from hf_minitf.training.quickstart import FOLDERS

    out = build_parser().parse_args(["quickstart"]).out.as_posix()
    named = {
        (page.relative_to(ROOT).as_posix(), name)
        for page in PAGES
        for name in re.findall(rf"\b{re.escape(out)}/([\w.-]+)", page.read_text(encoding="utf-8"))
    }
    assert any(page == "docs/serving.md" for page, _ in named), "docs/serving.md names no quickstart folder"
    wrong = sorted((page, name) for page, name in named if name not in FOLDERS.values())
    assert not wrong, f"folders {out}/NAME that minitf quickstart does not write ({sorted(FOLDERS.values())}): {wrong}"


def test_every_page_is_named_in_the_readme_which_links_nothing_relative():
    """The README is also the package index's page, where a relative link leads nowhere: it names each page by its
    path in the source distribution, and links only absolute addresses."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert f"`docs/{page.name}`" in readme, f"README.md does not name docs/{page.name}"
    relative = [target for target in re.findall(r"\]\(([^)]+)\)", readme) if ":" not in target]
    assert not relative, f"README.md links {relative}, which the package index cannot resolve"


def outside_code_blocks(page: Path) -> str:
    """The page's text without its fenced code blocks (a card shown in one links its own files, not the page's)."""
    kept, inside = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            kept.append(line)
    return "\n".join(kept)


def test_links_between_pages_point_at_files():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", outside_code_blocks(page)):
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which is not there"


# Files of the original projects that the docs name (FrawdLLM's): not files of this repository.
ORIGINALS_FILES = {"convert_to_hf.py", "hf_wrapper.py"}
TREE_FOLDERS = ("hf_minitf", "tests", "docs", "benchmarks", "conversion", "model_cards", ".ci")
PLACEHOLDER = re.compile(r"(?<![A-Za-z])[A-Z]{2,}(?![a-z])|<[^>]*>|\.\.\.")  # NAME, <folder>, ...


def prose_spans(page: Path) -> list[tuple[int, str]]:
    """The inline code spans outside code blocks, with their line numbers."""
    spans, inside = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            inside = not inside
        elif not inside:
            spans += [(number, span.strip()) for span in re.findall(r"`([^`\n]+)`", line)]
    return spans


def named_thing_missing(span: str, commands: set[str], files: set[str]) -> str | None:
    """What `span` names that is not there: a repository path (globs must match), an `hf_minitf` module or
    attribute, a file by its name, a `minitf` command; None when it names nothing checkable or names what exists."""
    import importlib
    import importlib.util

    if PLACEHOLDER.search(span) or not span.split():
        return None
    word = re.sub(r"[:(,].*$", "", span.split()[0])
    if word.startswith(tuple(f"{folder}/" for folder in TREE_FOLDERS)):
        path = word.rstrip("/")
        found = any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()
        return None if found else f"path {word}"
    if re.fullmatch(r"hf_minitf(\.\w+)+", word):
        parts = word.split(".")
        for length in range(len(parts), 0, -1):
            module = ".".join(parts[:length])
            try:
                spec = importlib.util.find_spec(module)
            except ModuleNotFoundError:  # a name inside a module, not a module
                spec = None
            if spec is not None:
                thing: object = importlib.import_module(module)
                for attribute in parts[length:]:
                    if not hasattr(thing, attribute):
                        break
                    thing = getattr(thing, attribute)
                else:
                    return None
                break
        # a file the wheel's build writes beside the package (setup.py), not a module
        return None if word in (ROOT / "setup.py").read_text(encoding="utf-8") else f"module {word}"
    if re.fullmatch(r"[\w.-]+\.(py|md|sh|toml)", word):  # .json: files of model folders, not of the checkout
        return None if word in files or word in ORIGINALS_FILES else f"file {word}"
    if word == "minitf" and len(span.split()) > 1:
        named = re.sub(r"[:,]$", "", span.split()[1])
        wrong = [name for name in named.split("/") if not name.startswith("-") and name not in commands]
        return f"command minitf {'/'.join(wrong)}" if wrong else None
    return None


def test_prose_names_files_modules_and_commands_that_exist():
    """A path, module, file or command named in a page's text (not only its code blocks) is one the checkout has."""
    from hf_minitf.cli import build_parser

    parser = build_parser()
    commands = {
        name for action in parser._actions if isinstance(action, argparse._SubParsersAction) for name in action.choices
    }
    files = {
        path.name for folder in TREE_FOLDERS for path in (ROOT / folder).rglob("*") if "node_modules" not in path.parts
    } | {path.name for path in ROOT.iterdir()}
    missing = [
        f"{page.relative_to(ROOT)}:{number}: {what}"
        for page in [*PAGES, ROOT / "CONTRIBUTING.md"]
        for number, span in prose_spans(page)
        if (what := named_thing_missing(span, commands, files))
    ]
    assert not missing, "the docs name what is not there:\n" + "\n".join(missing)


def test_the_prose_check_finds_what_is_not_there():
    commands, files = {"train", "serve"}, {"modeling_minitf.py"}
    assert named_thing_missing("hf_minitf/no_such_file.py", commands, files) == "path hf_minitf/no_such_file.py"
    assert named_thing_missing("tests/*/test_nothing_*.py", commands, files) == "path tests/*/test_nothing_*.py"
    assert named_thing_missing("hf_minitf.training.no_such", commands, files) == "module hf_minitf.training.no_such"
    assert named_thing_missing("hf_minitf.training.trainers.train_gpt", commands, files) is None
    assert named_thing_missing("file_safety.py", commands, files) == "file file_safety.py"
    assert named_thing_missing("minitf train/export --out X", commands, files) == "command minitf export"
    assert named_thing_missing("minitf serve: error: ...", commands, files) is None
    assert named_thing_missing("hf_minitf/modeling/configuration_minitf_NAME.py", commands, files) is None


def test_the_reader_pairs_outputs_and_refuses_unchecked_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n```python\nprint(1 + 1)\n```\n\n```text\n2\n```\n\n```python\nx = 1\n```\n\n"
        "```console\n$ minitf --version\nminitf (hf-minitf) ...\n```\n",
        encoding="utf-8",
    )
    printing, silent, console = read_blocks(page)
    assert (printing.language, printing.expected, silent.expected) == ("python", "2\n", None)
    assert console_commands(console) == [("minitf --version", "minitf (hf-minitf) ...\n")]
    with pytest.raises(pytest.fail.Exception, match="must assert something"):
        run_python(silent, {})
    wrong = Block(page, 1, "python", "print(3)\n", expected="2\n")
    with pytest.raises(pytest.fail.Exception, match="something else than the docs show"):
        run_python(wrong, {})
