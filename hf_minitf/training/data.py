"""Read training data: texts for a GPT, text pairs for an encoder or a seq2seq model, from a .txt/.tsv file,
.jsonl/.json rows, a folder saved by `datasets`' save_to_disk, or a Hub dataset name (what `minitf train --data`
reads). `datasets` is imported only for the last two.

GPT text from a .txt or .jsonl file is read lazily (`open_texts` gives a `TextFile`) and every text is cut into
chunks (`safe_chunks`) where byte-level BPE and character tokenization give the same ids as on the whole text;
`encode_to_file` tokenizes the chunks into a memory-mapped file of ids whose blocks are the examples
(`TokenBlocks`), so that training on a large corpus holds a chunk of text at a time, not the file.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

CHUNK_CHARS = 1 << 14
"""Characters per chunk of text read and tokenized at a time (16 Ki: `tokenizers` encodes long texts without
white space, such as a character tokenizer's, much faster in short pieces)."""
CHUNKS_PER_BATCH = 64
"""Chunks of text handed to the tokenizer at once (it encodes a batch on all cores): about 1 Mi characters."""


class TrainingDataError(ValueError):
    """Training data that cannot be read as asked, with what to change."""


def _not_utf8(path: Path) -> TrainingDataError:
    """The error for a file that is not UTF-8, naming the line and column of its first byte that is not (found by
    reading it again line by line: a decoder's position counts from wherever its last read started)."""
    with path.open("rb") as raw:
        for number, line in enumerate(raw, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                return _not_utf8_line(path, number, line, error)
    return TrainingDataError(f"{path} is not UTF-8 text; save it as UTF-8")


def _not_utf8_line(path: Path, number: int, line: bytes, error: UnicodeDecodeError) -> TrainingDataError:
    """The error for line `number` of `path`, which `error` found not to be UTF-8."""
    return TrainingDataError(
        f"{path} is not UTF-8 text: line {number}, byte {error.start + 1} ({line[error.start]:#04x}: {error.reason}); "
        "save it as UTF-8"
    )


def _read_utf8(path: Path) -> str:
    """The text of a UTF-8 file; a TrainingDataError naming the line and column of the first byte that is not."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise _not_utf8(path) from None


def _json_lines(path: Path, text: str) -> tuple[list[Any], list[int]]:
    """The values of the non-blank lines of a .jsonl text (read with universal newlines) and their line numbers.
    Lines end at a line feed only: a text may hold U+2028 or a form feed unescaped, which `str.splitlines` cuts at."""
    rows, numbers = [], []
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise TrainingDataError(f"{path} is not valid JSON lines: {_json_error(number, error)}") from None
            numbers.append(number)
    return rows, numbers


def _json_error(number: int, error: json.JSONDecodeError) -> str:
    """Where in line `number` of a JSON or JSON-lines file the text stops parsing, and why."""
    return f"line {number}, column {error.colno}: {error.msg}"


def hub_dataset_name(path: str | Path) -> str | None:
    """`path` as the Hub dataset name training reads it as (`owner/name` or `name`, no local file or folder of that
    name, no file suffix), else None: local data, which a model card never names."""
    local = Path(path)
    if local.exists() or local.suffix or len(local.parts) > 2:
        return None
    return str(path)


def _dataset_rows(path: str | Path, split: str) -> tuple[list[dict[str, Any]], list[int] | None]:
    """Rows of a .jsonl/.json file, a folder saved by `datasets`' save_to_disk, or a Hub dataset name, with each row's
    line number for a .jsonl file (None for the others, whose rows are counted from 0)."""
    local = Path(path)
    if local.is_dir():
        from datasets import DatasetDict, load_from_disk

        try:
            dataset = load_from_disk(str(local))
        except FileNotFoundError as error:
            raise TrainingDataError(
                f"{local} is a folder but not one saved by datasets' save_to_disk: {error}"
            ) from None
        if isinstance(dataset, DatasetDict):
            if split not in dataset:
                raise TrainingDataError(
                    f"{local} has the splits {', '.join(dataset)}, not {split!r}; pick one with --split"
                )
            dataset = dataset[split]
        return dataset.to_list(), None
    if local.suffix in (".jsonl", ".json"):
        text = _read_utf8(local)
        numbers = None
        if local.suffix == ".json":
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as error:
                raise TrainingDataError(f"{local} is not valid JSON: {_json_error(error.lineno, error)}") from None
        else:
            rows, numbers = _json_lines(local, text)
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise TrainingDataError(f"{local} must hold JSON objects (one per line for .jsonl, a list for .json)")
        return rows, numbers
    if hub_dataset_name(path) is None:
        raise TrainingDataError(
            f"{local} is not a file or folder that training reads (.txt, .tsv, .jsonl, .json, or a datasets folder)"
            if local.exists()
            else f"{local} does not exist"
        )
    from datasets import load_dataset

    return load_dataset(str(path), split=split).to_list(), None


def _column(rows: list[dict[str, Any]], numbers: list[int] | None, name: str, source: str | Path) -> list[str]:
    """Column `name` of every row, each a text; an error names the row (its line in a .jsonl file: `numbers`)."""
    if not rows:
        raise TrainingDataError(f"{source} holds no rows")
    if name not in rows[0]:
        raise TrainingDataError(
            f"{source} has no column {name!r}; its columns are {', '.join(rows[0])} (use --columns)"
        )
    values = [row.get(name) for row in rows]
    bad = next((index for index, value in enumerate(values) if not isinstance(value, str)), None)
    if bad is not None:
        where = f"row {bad}" if numbers is None else f"line {numbers[bad]}"
        raise TrainingDataError(f"{source} {where}: column {name!r} is {values[bad]!r}, not a text")
    return cast(list[str], values)  # each value checked above


def load_texts(path: str | Path, column: str = "text", split: str = "train") -> list[str]:
    """GPT training texts: a .txt file is one text; jsonl/json/datasets rows give one text each."""
    local = Path(path)
    if local.is_file() and local.suffix not in (".jsonl", ".json"):
        return [_read_utf8(local)]
    return _column(*_dataset_rows(path, split), column, path)


def _safe_cut(text: str, low: int, high: int) -> int:
    """The last index in [low, high) of white space that follows a non-space character, or `high` when there is
    none (a text without one for `high - low` characters is cut there).

    There text[:i] and text[i:] pre-tokenize, byte-level BPE included, into the pieces text does: the piece
    ending before i cannot take in white space, and the pieces from i on do not depend on what comes before."""
    best = -1
    for separator in (" ", "\n", "\t", "\r"):
        index = text.rfind(separator, max(low, 1), high)
        while index > best and text[index - 1].isspace():
            index = text.rfind(separator, max(low, 1), index)
        best = max(best, index)
    return best if best > 0 else high


def safe_chunks(pieces: Iterable[str], chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """The text made of `pieces`, re-cut into chunks of at most `chunk_chars` characters (at least half that,
    but the last) at places where tokenizing chunk by chunk gives the ids of the whole text (`_safe_cut`)."""
    if chunk_chars < 2:
        raise ValueError(f"chunk_chars must be at least 2, got {chunk_chars}")
    buffer = ""
    for piece in pieces:
        buffer += piece
        while len(buffer) > chunk_chars:
            cut = _safe_cut(buffer, chunk_chars // 2, chunk_chars)
            yield buffer[:cut]
            buffer = buffer[cut:]
    if buffer:
        yield buffer


def text_chunks(text: str, chunk_chars: int = CHUNK_CHARS) -> Iterator[str]:
    """One in-memory text as `safe_chunks`."""
    return safe_chunks((text[start : start + chunk_chars] for start in range(0, len(text), chunk_chars)), chunk_chars)


@dataclass(frozen=True)
class TextFile:
    """GPT training text read lazily: a .txt file (one document, newlines read as Python's text mode does) or
    a .jsonl file (one document per row, its `column`)."""

    path: Path
    column: str = "text"

    @property
    def size(self) -> int:
        """The file's size in bytes (what `documents` reports progress in)."""
        return self.path.stat().st_size

    def documents(
        self, chunk_chars: int = CHUNK_CHARS, progress: Callable[[int], None] | None = None
    ) -> Iterator[Iterator[str]]:
        """Each document as an iterator of `safe_chunks`; `progress(bytes)` is called with the bytes read so
        far. Consume each document before asking for the next."""
        with self.path.open("rb") as raw:
            if self.path.suffix == ".jsonl":
                for number, line in enumerate(raw, start=1):
                    if progress:
                        progress(raw.tell())
                    if line.strip():
                        yield text_chunks(self._row_text(line, number), chunk_chars)
                return
            reader = io.TextIOWrapper(raw, encoding="utf-8")

            def pieces() -> Iterator[str]:
                try:
                    while piece := reader.read(chunk_chars):
                        if progress:
                            progress(raw.tell())
                        yield piece
                except UnicodeDecodeError:
                    raise _not_utf8(self.path) from None

            yield safe_chunks(pieces(), chunk_chars)

    def _row_text(self, line: bytes, number: int) -> str:
        try:
            row = json.loads(line.decode("utf-8-sig" if number == 1 else "utf-8"))  # a byte-order mark may start it
        except UnicodeDecodeError as error:
            raise _not_utf8_line(self.path, number, line, error) from None
        except json.JSONDecodeError as error:
            raise TrainingDataError(f"{self.path} is not valid JSON lines: {_json_error(number, error)}") from None
        if not isinstance(row, dict):
            raise TrainingDataError(f"{self.path} must hold JSON objects (one per line for .jsonl, a list for .json)")
        if self.column not in row:
            raise TrainingDataError(
                f"{self.path} line {number} has no column {self.column!r}; its columns are "
                f"{', '.join(row)} (use --columns)"
            )
        if not isinstance(row[self.column], str):
            raise TrainingDataError(
                f"{self.path} line {number}: column {self.column!r} is {row[self.column]!r}, not a text"
            )
        return row[self.column]


def open_texts(path: str | Path, column: str = "text", split: str = "train") -> TextFile | list[str]:
    """GPT training texts as `load_texts` reads them, but a .txt or .jsonl file read lazily (a `TextFile`)."""
    local = Path(path)
    if local.is_file() and local.suffix != ".json":
        return TextFile(local, column)
    return load_texts(path, column, split)


class TokenBlocks(torch.utils.data.Dataset):
    """Blocks of `block_size` consecutive ids of a (memory-mapped) id array as GPT examples: the blocks
    numbered `chosen`, or all but the (sorted) `excluded` ones; none is copied before it is asked for."""

    def __init__(
        self, ids: np.ndarray, block_size: int, chosen: Sequence[int] | None = None, excluded: Sequence[int] = ()
    ) -> None:
        self.ids, self.block_size = ids, block_size
        self.chosen = None if chosen is None else np.asarray(chosen, dtype=np.int64)
        excluded_ids = np.asarray(excluded, dtype=np.int64)
        self._excluded_below = excluded_ids - np.arange(len(excluded_ids))  # kept index i is block i + (these <= i)
        self._length = len(self.chosen) if self.chosen is not None else len(ids) // block_size - len(excluded_ids)

    def __len__(self) -> int:
        return self._length

    def block_index(self, index: int) -> int:
        """The number of the block that is example `index`."""
        if not 0 <= index < self._length:
            raise IndexError(f"block {index} of {self._length}")
        if self.chosen is not None:
            return int(self.chosen[index])
        return index + int(np.searchsorted(self._excluded_below, index, side="right"))

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        start = self.block_index(index) * self.block_size
        return {"input_ids": self.ids[start : start + self.block_size].tolist()}


def _batches(documents: Iterable[Iterable[str]], chunks_per_batch: int) -> Iterator[tuple[list[str], list[bool]]]:
    """The documents' chunks in batches, each chunk with whether it ends its document (an empty one stands for
    an empty document)."""
    texts: list[str] = []
    ends: list[bool] = []
    for document in documents:
        count = 0
        for chunk in document:
            texts.append(chunk)
            ends.append(False)
            count += 1
            if len(texts) > chunks_per_batch:  # keep the last chunk back: it may end the document
                yield texts[:-1], ends[:-1]
                texts, ends = texts[-1:], ends[-1:]
        if count == 0:
            texts.append("")
            ends.append(False)
        ends[-1] = True
    if texts:
        yield texts, ends


def encode_to_file(
    tokenizer: PreTrainedTokenizerBase,
    documents: Iterable[Iterable[str]],
    path: Path,
    chunks_per_batch: int = CHUNKS_PER_BATCH,
) -> np.ndarray:
    """Tokenize documents given as chunks of text (`text_chunks`), each followed by EOS, into
    `path` as raw ids; returns them memory-mapped (uint16, or uint32 for vocabularies over 65,536 tokens)."""
    dtype = np.uint16 if len(tokenizer) <= 2**16 else np.uint32
    backend, eos = tokenizer.backend_tokenizer, tokenizer.eos_token_id
    with path.open("wb") as handle:
        for texts, ends in _batches(documents, chunks_per_batch):
            for encoding, end in zip(backend.encode_batch(texts, add_special_tokens=False), ends):
                handle.write(np.asarray(encoding.ids + [eos] if end else encoding.ids, dtype=dtype).tobytes())
    return np.memmap(path, dtype=dtype, mode="r")


def load_pairs(path: str | Path, columns: Sequence[str], split: str = "train") -> list[tuple[str, str]]:
    """Text pairs: a .tsv file's first two tab-separated columns, or two `columns` of jsonl/json/datasets rows."""
    if len(columns) != 2:
        raise TrainingDataError(f"pairs need exactly two columns, got {list(columns)}")
    local = Path(path)
    if local.is_file() and local.suffix in (".tsv", ".txt"):
        pairs = []
        for number, line in enumerate(_read_utf8(local).split("\n"), start=1):  # as `_json_lines` cuts lines
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise TrainingDataError(f"{local} line {number} has no tab: each line must be `first<TAB>second`")
            pairs.append((fields[0], fields[1]))
        return pairs
    rows, numbers = _dataset_rows(path, split)
    return list(zip(_column(rows, numbers, columns[0], path), _column(rows, numbers, columns[1], path)))


__all__ = [
    "CHUNK_CHARS",
    "TextFile",
    "TokenBlocks",
    "TrainingDataError",
    "encode_to_file",
    "hub_dataset_name",
    "load_pairs",
    "load_texts",
    "open_texts",
    "safe_chunks",
    "text_chunks",
]
