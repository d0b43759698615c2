"""Helpers several test folders share: running `minitf` in this process, or code and `minitf` in a fresh one,
checking its one-line errors, reading a PNG, writing a tokenizer laid out like FrawdLLM's."""

import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

from hf_minitf.cli import main

BOS, EOS = 2, 3  # FrawdLLM's <|bos|> and <|eos|> ids


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


def run_minitf(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """`minitf ARGS` in a fresh process."""
    return subprocess.run(
        [sys.executable, "-m", "hf_minitf.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )


def assert_one_line_error(status: int, err: str, *words: str) -> None:
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, lines[0])


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
