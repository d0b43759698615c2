"""The data `minitf eval --data` measures a model on: texts for a GPT, (query, positive) pairs for an encoder,
(source, reference) pairs for a translator, from a .txt/.tsv file, .jsonl/.json rows or a folder saved by
`datasets`' save_to_disk (`--split`). Every problem is one line naming the file and, in a line-based file, the
line: an empty file, a file past `MAX_EVAL_DATA_BYTES`, a row of the wrong shape, text that is not UTF-8.

`EvalData` also names the data as the card does: its file name and the sha256 of its bytes (a folder: of its
files), so a figure on a card says which data it was measured on.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.catalog.limits import MAX_EVAL_DATA_BYTES

TEXT_SUFFIXES = (".txt", ".md")
PAIR_SUFFIXES = (".tsv", ".txt")
ROW_SUFFIXES = (".jsonl", ".json")


class EvalDataError(ValueError):
    """Evaluation data that cannot be used as it is; the message names the file (and line) and what to change."""


@dataclass(frozen=True)
class EvalData:
    """Evaluation data as read: the `texts` (a GPT's documents) or `pairs`, and how the card names it."""

    name: str
    """The file or folder name."""
    sha256: str
    """The sha256 of the file's bytes (of a datasets folder: of its files' names and bytes, in order)."""
    split: str | None
    """The split of a datasets folder; None for a file."""
    texts: list[str] | None = None
    pairs: list[tuple[str, str]] | None = None

    @property
    def size(self) -> int:
        """How many documents or pairs."""
        return len(self.texts if self.texts is not None else self.pairs or [])


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(item for item in path.rglob("*") if item.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _checked_path(path: Path) -> Path:
    """`path` when it is a file or datasets folder of a size evaluation reads; an EvalDataError otherwise."""
    if not path.exists():
        raise EvalDataError(f"{path} does not exist; give a .txt, .tsv, .jsonl or .json file, or a datasets folder")
    size = (
        sum(item.stat().st_size for item in path.rglob("*") if item.is_file()) if path.is_dir() else path.stat().st_size
    )
    if size > MAX_EVAL_DATA_BYTES:
        raise EvalDataError(
            f"{path} is {size:,} bytes, more than the {MAX_EVAL_DATA_BYTES:,} evaluation reads (it holds the data in "
            "memory); give a sample of it"
        )
    if size == 0:
        raise EvalDataError(f"{path} is empty; give a file with the data to evaluate on")
    return path


def _text(path: Path) -> str:
    """The UTF-8 text of a file; an EvalDataError naming the line and byte of the first byte that is not."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - (raw.rfind(b"\n", 0, error.start) + 1) + 1
        raise EvalDataError(
            f"{path} is not UTF-8 text: line {line}, byte {column} ({raw[error.start]:#04x}); save it as UTF-8"
        ) from None


def _lines(text: str) -> list[tuple[int, str]]:
    """The non-blank lines of a text and their numbers (lines end at a line feed only, so a text may hold U+2028)."""
    return [(number, line.rstrip("\r")) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]


def _rows(path: Path, split: str | None) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a .jsonl/.json file or a datasets folder, each with where it is (`line 4`, `row 3`)."""
    if path.is_dir():
        from datasets import DatasetDict, load_from_disk

        try:
            dataset = load_from_disk(str(path))
        except FileNotFoundError as error:
            raise EvalDataError(f"{path} is a folder but not one saved by datasets' save_to_disk: {error}") from None
        if isinstance(dataset, DatasetDict):
            if split is None or split not in dataset:
                raise EvalDataError(f"{path} has the splits {', '.join(dataset)}; pick one with --split")
            dataset = dataset[split]
        return [(f"row {index}", row) for index, row in enumerate(dataset.to_list())]
    text = _text(path)
    if path.suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as error:
            raise EvalDataError(f"{path} is not JSON: line {error.lineno}, column {error.colno}: {error.msg}") from None
        if not isinstance(rows, list):
            raise EvalDataError(f"{path} holds a JSON {type(rows).__name__}, not a list of objects (one per example)")
        located = [(f"row {index}", row) for index, row in enumerate(rows)]
    else:
        located = []
        for number, line in _lines(text):
            try:
                located.append((f"line {number}", json.loads(line)))
            except json.JSONDecodeError as error:
                raise EvalDataError(
                    f"{path} is not JSON lines: line {number}, column {error.colno}: {error.msg}"
                ) from None
    for where, row in located:
        if not isinstance(row, dict):
            raise EvalDataError(f"{path} {where} is not a JSON object; each example is an object with named texts")
    return located


def _field(path: Path, where: str, row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    if column not in row:
        raise EvalDataError(f"{path} {where} has no {column!r} (its keys: {', '.join(row) or 'none'}); use --columns")
    if not isinstance(value, str) or not value.strip():
        raise EvalDataError(f"{path} {where}: {column!r} is {json.dumps(value)[:60]}, not a non-empty text")
    return value


def _named(path: Path, split: str | None, **read: Any) -> EvalData:
    data = EvalData(path.name or str(path), _digest(path), split if path.is_dir() else None, **read)
    if not data.size:
        raise EvalDataError(f"{path} holds no examples (only blank lines or an empty list); give some")
    return data


def load_texts(path: str | os.PathLike, column: str = "text", split: str | None = None) -> EvalData:
    """A GPT's evaluation documents: a .txt file is one document; each .jsonl/.json/datasets row's `column` one."""
    path = _checked_path(Path(path))
    if path.is_file() and path.suffix not in ROW_SUFFIXES:
        text = _text(path)
        if not text.strip():
            raise EvalDataError(f"{path} holds only white space; give a file with the text to evaluate on")
        return _named(path, split, texts=[text])
    return _named(path, split, texts=[_field(path, where, row, column) for where, row in _rows(path, split)])


def load_pairs(path: str | os.PathLike, columns: Sequence[str], split: str | None = None) -> EvalData:
    """(first, second) text pairs: a .tsv/.txt file's two tab-separated columns, or two `columns` of .jsonl/.json/
    datasets rows. A line with another number of columns is an error naming it."""
    if len(columns) != 2:
        raise EvalDataError(f"pairs need exactly two columns, got {list(columns)}")
    path = _checked_path(Path(path))
    if path.is_file() and path.suffix not in ROW_SUFFIXES:
        pairs = []
        for number, line in _lines(_text(path)):
            fields = line.split("\t")
            if len(fields) != 2 or not all(field.strip() for field in fields):
                raise EvalDataError(
                    f"{path} line {number} has {len(fields)} tab-separated field(s)"
                    + ("" if len(fields) != 2 else ", one of them empty")
                    + ": each line must be `first<TAB>second`"
                )
            pairs.append((fields[0], fields[1]))
        return _named(path, split, pairs=pairs)
    rows = _rows(path, split)
    return _named(
        path,
        split,
        pairs=[(_field(path, where, row, columns[0]), _field(path, where, row, columns[1])) for where, row in rows],
    )


__all__ = ["EvalData", "EvalDataError", "load_pairs", "load_texts"]
