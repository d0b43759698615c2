"""Reading an export folder's files for its runner: its JSON files and their fields, its tokenizer, and the checks
that the files the engine needs are there and agree with each other. Every file that does not parse is an
ExportFolderError naming the folder and the file or field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hf_minitf.catalog.exports import EXPORT_FILE
from hf_minitf.catalog.wording import with_article
from hf_minitf.safety.files import confined_path
from hf_minitf.safety.json_files import JSON_KINDS, read_json

AGAIN = "export the model again with minitf export"


class ExportFolderError(ValueError):
    """An export folder the engine cannot run as it is; the message names the folder and the file or field."""


def folder_json(folder: Path, name: str, expected: type = dict, required: bool = False) -> Any:
    """The JSON value of the folder's file `name` (`expected()` when it is absent and not `required`); an
    ExportFolderError naming the file when it is missing, not JSON, or not a JSON `expected` (dict: an object)."""
    path = confined_path(folder, name, "the file")
    if not path.is_file():
        if required:
            raise ExportFolderError(f"{folder} has no {name}, which the export needs; {AGAIN}")
        return expected()
    wanted = "an object" if expected is dict else f"a JSON {JSON_KINDS.get(expected, expected.__name__)}"
    return read_json(path, expected, wanted, AGAIN, ExportFolderError)


def checked_field(folder: Path, config: dict, file: str, key: str, kind: str = "count") -> Any:
    """`config[key]` from the folder's `file` (None when absent) when it is a positive integer (`kind` "count"), or
    a token id or list of them ("ids": a list, possibly empty); an ExportFolderError naming file and field else."""
    value = config.get(key)
    if value is None:
        return [] if kind == "ids" else None
    values = value if kind == "ids" and isinstance(value, list) else [value]
    if not all(isinstance(item, int) and not isinstance(item, bool) and item >= (kind == "count") for item in values):
        wanted = "a positive integer" if kind == "count" else "a token id or a list of token ids"
        raise ExportFolderError(f"{folder / file}: {key} is {json.dumps(value)}, not {wanted}; {AGAIN}")
    return values if kind == "ids" else value


def load_tokenizer(folder: Path):
    """The export's tokenizer: a family's own class where its tokenizer_config names one (the translator's), else
    its tokenizer.json. No model classes and no torch: an export runs without them."""
    from transformers import PreTrainedTokenizerFast

    from hf_minitf.catalog import FAMILIES

    named = folder_json(folder, "tokenizer_config.json").get("tokenizer_class")
    for family in FAMILIES.values():
        if family.tokenizer_class and family.tokenizer_class.rpartition(".")[2] == named:
            tokenizer_class = family.load(family.tokenizer_class)  # it names its own files in its errors
            break
    else:
        folder_json(folder, "tokenizer.json", required=True)
        tokenizer_class = PreTrainedTokenizerFast
    try:
        return tokenizer_class.from_pretrained(folder)
    except ValueError:
        raise
    except Exception as error:  # the tokenizers library's parse errors are bare Exceptions
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportFolderError(f"{folder}: its tokenizer does not load ({first}); {AGAIN}") from None


def check_vocabulary(folder: Path, tokenizer_size: int, model_size: int | None, file: str) -> None:
    """Refuse a tokenizer with ids past the model's vocabulary (`model_size` rows, read from `file`)."""
    if model_size is not None and tokenizer_size > model_size:
        raise ExportFolderError(
            f"{folder}: the tokenizer has {tokenizer_size} tokens but {file} holds a vocabulary of {model_size}, "
            f"so some token ids lie past the model's; {AGAIN}"
        )


def needs_files(folder: Path, info: dict, names: tuple[str, ...]) -> None:
    """Refuse a folder whose metadata names an export (engine and kind) without the files such an export holds."""
    for name in names:
        if not confined_path(folder, name, "the file").is_file():
            raise ExportFolderError(
                f"{folder}: its {EXPORT_FILE} says it is {with_article(str(info.get('engine')))} {info.get('kind')} export, but it has no "
                f"{name}, which such an export holds; {AGAIN} (or, if this is a model folder, remove {EXPORT_FILE})"
            )


def end_ids(folder: Path) -> list[int]:
    """A generator's end token ids, from its generation_config.json (none where it names none)."""
    generation = folder_json(folder, "generation_config.json")
    return checked_field(folder, generation, "generation_config.json", "eos_token_id", "ids")


def positions(info: dict) -> tuple[int, int | None]:
    """The positions a GPT export was trained on, and the most it reads: that table for learned positions, None for
    rotary ones, which go on past it."""
    trained = info["max_position_embeddings"]
    return trained, trained if info.get("position_embedding_type") == "learned" else None
