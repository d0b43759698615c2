"""Helpers several test folders share: running `minitf` in this process, or code and `minitf` in a fresh one,
loading a benchmark script, checking its one-line errors, copying a model folder with changed config fields, checking a refused export, reading a
PNG, writing a tokenizer laid out like FrawdLLM's."""

import contextlib
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from hf_minitf.cli import main
from hf_minitf.export import ExportRefused

BOS, EOS = 2, 3  # FrawdLLM's <|bos|> and <|eos|> ids
ENCODER_TEXTS = [
    "the cat sat on the mat",
    "what time is it?",
    "dog",
    "The QUICK brown fox, jumps over the lazy dog!",
    "an unseen word: zyzzyva",
]
"""Texts the encoder exports embed: a sentence, a question, one word, mixed case and punctuation, an unseen word."""


@contextlib.contextmanager
def llama_cpp_hidden():
    """llama-cpp-python unimportable inside (as where the `llama` extra is not installed): the GGUF exports write with
    the gguf package alone and refuse what only llama.cpp's quantizer writes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "llama_cpp", None)
        yield


def card_table(text: str) -> list[dict[str, str]]:
    """The "Runs in" table of a card's text, read as Markdown: the rows under the header that starts `| Runtime |`."""
    lines = text.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("| Runtime |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in line.strip().strip("|").split(" | ")))))
    return rows


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """main(argv) in this process: (exit status, stdout, stderr); argparse's exits count as a status. What the
    test printed before (a factory saving a model, with its progress bar) is not the command's."""
    capsys.readouterr()
    try:
        status = main([str(arg) for arg in argv])
    except SystemExit as exit:
        status = exit.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_python(code: str, timeout: int = 300) -> dict:
    """Run `code` in a fresh Python process; it prints one JSON object last, which is returned. Engines run this way,
    each in a process of its own, as their idle threads slow torch in the same one."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"subprocess failed:\n{result.stdout}\n{result.stderr}"
    last_line = (result.stdout.strip().splitlines() or [""])[-1]
    try:
        return json.loads(last_line)
    except json.JSONDecodeError:
        raise AssertionError(f"no JSON printed last:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}") from None


# Runs each argv of the JSON list argv[1] through `minitf`'s main, then prints their (status, stdout, stderr) and which
# heavy modules the process imported.
_CLI_IN_A_FRESH_PROCESS = """
import contextlib, io, json, sys
import hf_minitf.cli as minitf_cli
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = minitf_cli.main(argv)
        except SystemExit as exit:
            status = exit.code
    results.append([status, out.getvalue(), err.getvalue()])
heavy = sorted({name.split('.')[0] for name in sys.modules} & {'torch', 'transformers', 'sentence_transformers'})
print(json.dumps({'results': results, 'heavy': heavy}))
"""


def run_cli_in_a_fresh_process(argvs: list[list[str]]) -> tuple[list[tuple[int, str, str]], list[str]]:
    """`minitf ARGV` for each of `argvs`, one after another in one fresh process (120 columns wide): each one's
    (exit status, stdout, stderr), and which of torch, transformers and sentence_transformers the process imported
    (help and argument errors should need none)."""
    completed = subprocess.run(
        [sys.executable, "-c", _CLI_IN_A_FRESH_PROCESS, json.dumps(argvs)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS="120"),
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    return [tuple(result) for result in report["results"]], report["heavy"]


def load_benchmark(name: str):
    """The script benchmarks/NAME.py as a module (its shared plumbing, benchmarks/common.py, importable as when it
    runs as a script)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    if str(script.parent) not in sys.path:
        sys.path.append(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_minitf(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`minitf ARGS` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "hf_minitf.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


TRAINING_LOG_LINE = re.compile(r"step \d+/\d+: ")
"""How a training run's log lines start (`step 1/2: loss ...`, on stderr before an error that stops the run)."""


def assert_one_line_error(status: int, err: str, *words: str) -> None:
    """Exit status 2 and one error line on stderr naming `words`, besides the log lines of a run it stopped."""
    assert status == 2
    lines = [line for line in err.strip().splitlines() if not TRAINING_LOG_LINE.match(line)]
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])


def update_json(path: Path, **changes) -> Path:
    """Rewrite the JSON object file `path` with the fields `changes` set (None writes null)."""
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
    return path


def copy_with_config(source: Path, folder: Path, **changes) -> Path:
    """A copy of the model folder `source` at `folder`, its config.json given the fields `changes`: a variant of a
    model that a command should treat otherwise (often refuse)."""
    shutil.copytree(source, folder)
    update_json(folder / "config.json", **changes)
    return folder


def assert_refused_writing_nothing(export, source: Path, out: Path, message: str) -> None:
    """`export(source, out)` raises ExportRefused with a message matching `message`, and nothing is written in the
    folder `out` would be in (nor a half-written work folder)."""
    with pytest.raises(ExportRefused, match=message):
        export(source, out)
    assert not list(out.parent.iterdir())


def png_size(path: Path) -> tuple[int, int]:
    """Width and height of a PNG, after checking its signature, chunk CRCs and that its pixels decompress."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, chunks, pixels = 8, [], b""
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks.append(kind)
        pixels += body if kind == b"IDAT" else b""
        offset += 12 + length
    assert chunks[0] == b"IHDR" and chunks[-1] == b"IEND"
    width, height = struct.unpack(">II", data[16:24])
    assert len(zlib.decompress(pixels)) >= width * height
    return width, height


def write_frawdllm_tokenizer(path: Path, chat: bool) -> Path:
    """A tokenizer laid out like FrawdLLM's (tokenizer_100m/tokenizer.json): byte-level BPE, <|pad|> <|unk|> <|bos|>
    <|eos|> (then <|user|> <|assistant|> for chat) as special added tokens, a post-processor framing every text as
    <|bos|> $A <|eos|>; 96 tokens with chat, 94 without (the fixtures' model has 96)."""
    specials = ["<|pad|>", "<|unk|>", "<|bos|>", "<|eos|>"] + (["<|user|>", "<|assistant|>"] if chat else [])
    merges = [
        ("t", "h"),
        ("h", "e"),
        ("Ġ", "t"),
        ("i", "n"),
        ("e", "r"),
        ("a", "n"),
        ("Ġ", "a"),
        ("th", "e"),
        ("Ġt", "he"),
        ("o", "n"),
        ("r", "e"),
        ("a", "t"),
        ("e", "n"),
        ("n", "d"),
        ("Ġ", "s"),
        ("o", "u"),
        ("i", "t"),
        ("i", "s"),
        ("o", "r"),
        ("in", "g"),
        ("Ġ", "w"),
        ("Ġ", "o"),
        ("e", "s"),
        ("e", "d"),
        ("Ġ", "b"),
        ("Ġ", "c"),
        ("a", "r"),
        ("a", "l"),
        ("Ġ", "m"),
        ("Ġ", "f"),
    ]
    symbols = [*"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", ".", ",", "!", "?", "Ġ", "<", ">", "|"]
    tokens = specials + symbols + ["".join(pair) for pair in merges]
    tokens = tokens[: 96 if chat else 94]
    tokenizer = Tokenizer(
        models.BPE(
            vocab={token: i for i, token in enumerate(tokens)},
            merges=[pair for pair in merges if "".join(pair) in tokens],
        )
    )
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in specials])
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A <|eos|>", pair="$A $B:1", special_tokens=[("<|bos|>", BOS), ("<|eos|>", EOS)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.save(str(path))
    return path
