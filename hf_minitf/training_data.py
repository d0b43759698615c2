"""Read training data: texts for a GPT, text pairs for an encoder or a seq2seq model, from a .txt/.tsv file,
.jsonl/.json rows, a folder saved by `datasets`' save_to_disk, or a Hub dataset name (what `minitf train --data`
reads). `datasets` is imported only for the last two.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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
                f"{local} is a folder but not one saved by datasets' save_to_disk: {error}") from None
        if isinstance(dataset, DatasetDict):
            if split not in dataset:
                raise TrainingDataError(f"{local} has the splits {', '.join(dataset)}, not {split!r}; "
                                        "pick one with --split")
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
        raise TrainingDataError(f"{local} is not a file or folder that training reads (.txt, .tsv, .jsonl, .json, or "
                                "a datasets folder)" if local.exists() else f"{local} does not exist")
    from datasets import load_dataset

    return load_dataset(str(path), split=split).to_list()


def _column(rows: list[dict[str, Any]], name: str, source: str | Path) -> list[str]:
    if not rows:
        raise TrainingDataError(f"{source} holds no rows")
    if name not in rows[0]:
        raise TrainingDataError(f"{source} has no column {name!r}; its columns are {', '.join(rows[0])} "
                                "(use --columns)")
    values = [row.get(name) for row in rows]
    bad = next((index for index, value in enumerate(values) if not isinstance(value, str)), None)
    if bad is not None:
        raise TrainingDataError(f"{source} row {bad}: column {name!r} is {values[bad]!r}, not a text")
    return values


def load_texts(path: str | Path, column: str = "text", split: str = "train") -> list[str]:
    """GPT training texts: a .txt file is one text; jsonl/json/datasets rows give one text each."""
    local = Path(path)
    if local.is_file() and local.suffix not in (".jsonl", ".json"):
        try:
            return [local.read_text(encoding="utf-8")]
        except UnicodeDecodeError as error:
            raise TrainingDataError(f"{local} is not UTF-8 text: {error}") from None
    return _column(_dataset_rows(path, split), column, path)


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


__all__ = ["TrainingDataError", "load_pairs", "load_texts"]
