"""What a card says about a saved MiniTF folder, read from the folder itself (config.json, the safetensors headers,
modules.json, its README.md), so the same facts serve a fresh save, a converted folder and a folder about to be
pushed."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from huggingface_hub import ModelCard

from hf_minitf.safety.card_metadata import load_model_card
from hf_minitf.safety.files import reading_roots
from hf_minitf.safety.json_files import read_json

MINITF_TAG = "minitf"
# The pipeline tag of each model head, by the end of its class name.
PIPELINE_TAGS = {
    "ForCausalLM": "text-generation",
    "ForSequenceClassification": "text-classification",
    "ForConditionalGeneration": "translation",
    "Model": "feature-extraction",
}


@dataclass(frozen=True)
class TrainingData:
    """What a card says of the data a model was trained on (its "Training data" section and metadata)."""

    name: str | None = None
    """The data as the card names it: a file name, a Hub dataset id, a description."""
    hub_id: str | None = None
    """The Hub dataset it was trained on (the card's `datasets:`); None for local data (a path names nothing)."""
    size: str | None = None
    """How much of it the model was trained on, in words: "63,412 tokens", "1,200 pairs"."""
    languages: tuple[str, ...] = ()
    """ISO 639 codes (the card's `language:`): a translator's source, then target language."""
    examples: tuple[str, ...] = ()
    """Texts of the data (held-out first) the card's example prompt is taken from (`prompts.example_texts`)."""


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_folder_json(path: Path) -> dict:
    """A saved folder's JSON object (config.json, a weights index) through the package's one reader."""
    return read_json(path, dict, "an object", "save the model again")


def read_card(path: Path) -> ModelCard | None:
    """The card at `path` (metadata errors raised as CardMetadataError), None when there is none or it is a link out
    of its folder (never read: a write then replaces the link, `safety.files.write_files_together`)."""
    if path.is_symlink() and not any(path.resolve().is_relative_to(root) for root in reading_roots(path.parent)):
        return None
    return load_model_card(path, ignore_metadata_errors=True) if path.is_file() else None


def stored_parameters(paths: Iterable[Path]) -> int:
    """Number of weights stored in safetensors files (tied weights are stored once), read from their headers (no
    tensor is loaded, nothing is memory-mapped: a sparse file may claim 256 GiB); a ValueError names a file whose
    header is malformed, in safetensors' words."""
    from safetensors import SafetensorError, safe_open

    from hf_minitf.safety.weights import DTYPE_BITS, read_safetensors_header

    total = 0
    for path in paths:
        try:
            tensors = read_safetensors_header(path)
        except ValueError:
            tensors = None
        if tensors is not None and all(tensor.dtype in DTYPE_BITS for tensor in tensors.values()):
            total += sum(math.prod(tensor.shape) for tensor in tensors.values())
            continue
        try:  # a header refused above, or a dtype safetensors may know: its own check and message
            with safe_open(path, "pt") as weights:
                total += sum(math.prod(weights.get_slice(name).get_shape()) for name in weights.keys())
        except SafetensorError as error:
            raise ValueError(
                f"{path} is not a readable safetensors file ({error}); save or convert the model again"
            ) from None
    return total


def _count_safetensors_parameters(folder: Path) -> int | None:
    """Number of the model's stored weights (model.safetensors or the shards of its index), None without them."""
    index = folder / "model.safetensors.index.json"
    files = sorted(set(read_folder_json(index)["weight_map"].values())) if index.is_file() else ["model.safetensors"]
    paths = [folder / name for name in files]
    return stored_parameters(paths) if all(path.is_file() for path in paths) else None


class FolderFacts:
    """What a card says about a saved MiniTF model, read from its config (and its folder's files)."""

    def __init__(
        self, config: dict[str, Any], *, sentence_transformers: bool = False, num_parameters: int | None = None
    ) -> None:
        self.config = config
        self.model_type: str = config.get("model_type", "")
        architectures = config.get("architectures") or []
        self.architecture: str = architectures[0] if architectures else ""
        self.sentence_transformers = sentence_transformers
        self.num_parameters = num_parameters

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, num_parameters: int | None = None) -> FolderFacts:
        folder = Path(folder)
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise ValueError(f"{folder} has no config.json; save the model with save_pretrained first.")
        return cls(
            read_folder_json(config_path),
            sentence_transformers=(folder / "modules.json").is_file(),
            num_parameters=num_parameters or _count_safetensors_parameters(folder),
        )

    @property
    def head(self) -> str:
        """The end of the class name: ForCausalLM, ForSequenceClassification, ForConditionalGeneration or Model."""
        return next((head for head in PIPELINE_TAGS if self.architecture.endswith(head)), "Model")

    @property
    def pipeline_tag(self) -> str:
        return "sentence-similarity" if self.sentence_transformers else PIPELINE_TAGS[self.head]

    @property
    def library_name(self) -> str:
        return "sentence-transformers" if self.sentence_transformers else "transformers"

    @property
    def tags(self) -> list[str]:
        tags = [MINITF_TAG, self.model_type]
        if self.sentence_transformers:
            tags += ["sentence-transformers", "feature-extraction"]
        return tags
