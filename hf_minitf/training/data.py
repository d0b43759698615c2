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


def _dataset_rows(path: str | Path, split: str) -> list[dict[str, Any]]:
    """Rows of a .jsonl/.json file, a folder saved by `datasets`' save_to_disk, or a Hub dataset name."""
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
        return dataset.to_list()
    if local.suffix in (".jsonl", ".json"):
        text = local.read_text(encoding="utf-8")
        try:
            if local.suffix == ".json":
                rows = json.loads(text)
            else:
                rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            lines = " lines" if local.suffix == ".jsonl" else ""
            raise TrainingDataError(f"{local} is not valid JSON{lines}: {error}") from None
        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            raise TrainingDataError(f"{local} must hold JSON objects (one per line for .jsonl, a list for .json)")
        return rows
    if local.exists() or local.suffix or len(local.parts) > 2:
        raise TrainingDataError(
            f"{local} is not a file or folder that training reads (.txt, .tsv, .jsonl, .json, or a datasets folder)"
            if local.exists()
            else f"{local} does not exist"
        )
    from datasets import load_dataset

    return load_dataset(str(path), split=split).to_list()


def _column(rows: list[dict[str, Any]], name: str, source: str | Path) -> list[str]:
    if not rows:
        raise TrainingDataError(f"{source} holds no rows")
    if name not in rows[0]:
        raise TrainingDataError(
            f"{source} has no column {name!r}; its columns are {', '.join(rows[0])} (use --columns)"
        )
    values = [row.get(name) for row in rows]
    bad = next((index for index, value in enumerate(values) if not isinstance(value, str)), None)
    if bad is not None:
        raise TrainingDataError(f"{source} row {bad}: column {name!r} is {values[bad]!r}, not a text")
    return cast(list[str], values)  # each value checked above


def load_texts(path: str | Path, column: str = "text", split: str = "train") -> list[str]:
    """GPT training texts: a .txt file is one text; jsonl/json/datasets rows give one text each."""
    local = Path(path)
    if local.is_file() and local.suffix not in (".jsonl", ".json"):
        try:
            return [local.read_text(encoding="utf-8")]
        except UnicodeDecodeError as error:
            raise TrainingDataError(f"{local} is not UTF-8 text: {error}") from None
    return _column(_dataset_rows(path, split), column, path)


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
                except UnicodeDecodeError as error:
                    raise TrainingDataError(f"{self.path} is not UTF-8 text: {error}") from None

            yield safe_chunks(pieces(), chunk_chars)

    def _row_text(self, line: bytes, number: int) -> str:
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise TrainingDataError(f"{self.path} is not valid JSON lines: line {number}: {error}") from None
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
        for number, line in enumerate(local.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) < 2:
                raise TrainingDataError(f"{local} line {number} has no tab: each line must be `first<TAB>second`")
            pairs.append((fields[0], fields[1]))
        return pairs
    rows = _dataset_rows(path, split)
    return list(zip(_column(rows, columns[0], path), _column(rows, columns[1], path)))


__all__ = [
    "CHUNK_CHARS",
    "TextFile",
    "TokenBlocks",
    "TrainingDataError",
    "encode_to_file",
    "load_pairs",
    "load_texts",
    "open_texts",
    "safe_chunks",
    "text_chunks",
]
