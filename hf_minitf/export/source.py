"""What every export reads, a MiniTF folder (saved, trained or converted) or the Hub repo id of one, and what the
exports share: their refusal, the rotary row order and the old name of their first argument.

A repository is downloaded through huggingface_hub with its data files only (JSON, safetensors, chat templates),
never its code, and the model is built from this package's own classes: exporting runs nothing from the source.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

import torch

from hf_minitf.catalog.exports import EXPORT_FILE
from hf_minitf.catalog.families import FAMILIES, MODEL_TYPES, family_of_model_type
from hf_minitf.catalog.limits import TOKENIZER_MAX_ENTRIES
from hf_minitf.catalog.verification import SOURCE_HASHED
from hf_minitf.catalog.wording import with_article
from hf_minitf.hub.sources import download_repo_files, looks_like_repo_id
from hf_minitf.safety.files import confined_path
from hf_minitf.safety.json_files import json_kind
from hf_minitf.safety.json_files import read_json as read_json_file

# What is downloaded from a Hub repository: everything a MiniTF folder holds except its code.
SOURCE_FILES = ("*.json", "*.safetensors", "*.jinja", "README.md", "*/*.json")


Export = TypeVar("Export", bound=Callable[..., Any])


def accepts_src(export: Export) -> Export:
    """Let `export` (first argument `source`) still take `src=`, the name export_ctranslate2, export_onnx and
    export_web gave it until 0.1, with a DeprecationWarning; it goes in the next release."""

    @functools.wraps(export)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "src" in kwargs:
            if args or "source" in kwargs:
                raise TypeError(f"{export.__name__}() got the source twice (source and src); pass source only")
            warnings.warn(
                f"{export.__name__}(src=...) is now {export.__name__}(source=...); src goes in the next release",
                DeprecationWarning,
                stacklevel=2,
            )
            kwargs["source"] = kwargs.pop("src")
        return export(*args, **kwargs)

    return cast(Export, wrapper)


class ExportRefused(ValueError):
    """A model that has no exact form in the requested format; the message names the field and why."""


class SourceFileError(ValueError):
    """A file of the source folder that is not what a MiniTF folder holds (cut off, not the JSON it should be, past
    a bound, a tokenizer larger than the model's vocabulary); the message names the file or folder and what is wrong."""


AGAIN = "save or convert the model again."
# The tokenizer files of each family's folders, as (file, the side it encodes, config.json's field of its size).
TOKENIZER_FILES = {
    "seq2seq": (
        ("source_tokenizer.json", "the source tokenizer (source_tokenizer.json)", "src_vocab_size"),
        ("target_tokenizer.json", "the target tokenizer (target_tokenizer.json)", "vocab_size"),
    ),
}
DEFAULT_TOKENIZER_FILES = (("tokenizer.json", "the tokenizer", "vocab_size"),)
# Files beside the vocabularies that transformers reads when it loads a tokenizer: each a JSON object.
TOKENIZER_SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


def read_json(path: Path, expected: type = dict, what: str = "an object") -> Any:
    """The JSON value of the source file `path` (`safety.json_files.read_json`), a SourceFileError naming it else."""
    return read_json_file(path, expected, what, AGAIN, SourceFileError)


def check_tokenizer_entries(path: Path, data: dict[str, Any]) -> None:
    """Refuse a tokenizers file whose model claims more vocab or merges entries than TOKENIZER_MAX_ENTRIES, before
    anything is done per entry."""
    model = data.get("model")
    for key in ("vocab", "merges"):
        entries = model.get(key) if isinstance(model, dict) else None
        if isinstance(entries, (list, dict)) and len(entries) > TOKENIZER_MAX_ENTRIES:
            raise SourceFileError(
                f"{path}: its model's {key} holds {len(entries):,} entries, more than the {TOKENIZER_MAX_ENTRIES:,} "
                "any real tokenizer has; it is not a tokenizer this package saved: " + AGAIN
            )


def native_refusal(config: Any) -> str | None:
    """Why this MiniTF config (a MiniTF config object) has no exact native transformers form, or None.

    The message names the field, its value and what to do. Everything else maps exactly: any activation (the native
    classes take the same `ACT2FN` names), any eps, dropouts, intermediate size, untied heads (stored as the native
    `lm_head`), `attention_bias=False` (written as zero biases), rotary positions past `max_position_embeddings`
    (GPT-NeoX computes the angles for any position, as MiniTF does).
    """
    model_type = config.model_type
    family = family_of_model_type(model_type)
    if family is FAMILIES["seq2seq"]:  # as Pegasus (hf_minitf.export.native_seq2seq)
        if config.norm_type not in ("layer_norm", "scalar_std_times_eps"):
            return (
                f"norm_type={config.norm_type!r} divides by std + eps, which no LayerNorm (sqrt(var + eps)) "
                "computes exactly; models with norm_type='layer_norm' or hkproj's first norm "
                "('scalar_std_times_eps') export."
            )
        return None
    if family is FAMILIES["gpt"]:
        if config.position_embedding_type == "learned" and config.context_overflow == "crop":
            return (
                "context_overflow='crop': GPT-2 has no sliding window; it refuses inputs past its "
                f'{config.max_position_embeddings} positions. Set "context_overflow": "error" in config.json '
                "(the same model inside its context) to export it."
            )
        return None
    if family is FAMILIES["encoder"]:
        if config.pad_token_id is None:
            return (
                "pad_token_id=null: XLM-R numbers positions after its padding id, so the export needs one; set "
                "pad_token_id to the tokenizer's padding token id."
            )
        return None
    return f"model_type={model_type!r} is not a MiniTF model."


def check_native(config: Any) -> None:
    """Raise ExportRefused when `config` has no exact native form (see `native_refusal`)."""
    reason = native_refusal(config)
    if reason is not None:
        raise ExportRefused(f"cannot export to a native architecture: {reason}")


def rotate_half_order(head_dim: int) -> torch.Tensor:
    """Row order taking interleaved rotary pairs `(x[2i], x[2i+1])` to rotate-half pairs `(x[i], x[i + d/2])`:
    even features first, then odd ones (as transformers' Llama conversion permutes Meta's weights)."""
    return torch.cat((torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)))


def split_qkv_heads(tensor: torch.Tensor, config: Any) -> torch.Tensor:
    """A fused `[q | k | v]` weight (rows) or bias as `(3, heads, head_dim, ...)`, with the q/k rows of each head
    taken from interleaved to rotate-half order when the MiniTF model rotates interleaved pairs (GPT-NeoX and
    llama.cpp rotate halves)."""
    heads = config.num_attention_heads
    head_dim = config.hidden_size // heads
    parts = tensor.reshape(3, heads, head_dim, *tensor.shape[1:])
    if config.position_embedding_type == "rope" and config.rope_interleaved:
        parts = torch.cat((parts[:2, :, rotate_half_order(head_dim)], parts[2:]))
    return parts


def source_hashes(folder: Path) -> dict[str, str]:
    """The sha256 of a MiniTF folder's config.json and of its weights (`catalog.verification.SOURCE_HASHED`; several
    safetensors files: the sha256 of their names and hashes in name order), as an export records them."""
    from hf_minitf.cards.facts import file_sha256

    hashes = {}
    for part, pattern in SOURCE_HASHED.items():
        files = sorted(folder.glob(pattern))
        if len(files) == 1:
            hashes[part] = file_sha256(files[0])
        else:
            listing = "".join(f"{path.name} {file_sha256(path)}\n" for path in files)
            hashes[part] = hashlib.sha256(listing.encode("utf-8")).hexdigest()
    return hashes


@dataclass
class MiniTFSource:
    """A MiniTF model folder on disk, with what the exports need to know about it."""

    folder: Path
    name: str  # the path or repo id the user gave, for the model card
    repo_id: str | None
    revision: str | None
    config: dict[str, Any]
    published: bool = False
    """Whether the export is written to be uploaded (`hf_minitf.publishing`): what it records of its source then
    names no folder of this machine (`recorded`)."""
    published_as: str | None = None
    """The Hub repo the source folder itself is published as (`minitf push --source-repo`), for a `published` export."""

    @property
    def family(self) -> str:
        return MODEL_TYPES[self.config["model_type"]].name

    @property
    def recorded(self) -> str | None:
        """What an export records as its source (what `minitf verify` measures it against): the repo id, else the
        folder's absolute path (a relative one would name whatever folder of that name lies where `minitf verify`
        runs); for a `published` export the repo the source is published as, else its repo id, else None (a path of
        this machine names nothing where the export is downloaded: verify it there with --source)."""
        if self.published:
            return self.published_as or self.repo_id
        return self.repo_id or str(self.folder.resolve())

    def hashes(self) -> dict[str, str]:
        """The sha256 of its config.json and weights, recorded beside `recorded` (`source_hashes`)."""
        if "hashes" not in self.loaded:
            self.loaded["hashes"] = source_hashes(self.folder)
        return self.loaded["hashes"]

    loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    """The model and the tokenizer once loaded: every writer and measurement of one export reads the same ones."""

    def load_model(self, dtype: torch.dtype | None = None):
        """The MiniTF model in eval mode (the class a folder of its family holds: the causal LM, the bare encoder,
        the translation model), in `dtype` or the saved weights'; built from this package's classes, so no code of
        the source runs. Loaded once: a later call gets the same model, or a copy of it in another `dtype` (a copy
        too is what a caller that changes the model must take)."""
        model = self.loaded.get("model")
        if model is None:
            family = FAMILIES[self.family]
            model_class = family.load(next(iter(family.auto_classes.values())))
            options = {} if dtype is None else {"dtype": dtype}
            model = self.loaded["model"] = model_class.from_pretrained(
                self.folder, trust_remote_code=False, **options
            ).eval()
        if dtype is None or model.dtype == dtype:
            return model
        return copy.deepcopy(model).to(dtype)

    @property
    def tokenizer_files(self) -> tuple[tuple[str, str, str], ...]:
        """The folder's tokenizer files: (file, the side it encodes, config.json's field of its size)."""
        return TOKENIZER_FILES.get(self.family, DEFAULT_TOKENIZER_FILES)

    def load_tokenizer(self):
        """The folder's tokenizer, after checking its files (JSON objects, within TOKENIZER_MAX_ENTRIES) and that
        it emits no id past the model's embedding (`check_vocab_sizes`): every export reads the tokenizer here, once
        (a later call gets the same tokenizer)."""
        from transformers import AutoTokenizer

        if "tokenizer" in self.loaded:
            return self.loaded["tokenizer"]

        if FAMILIES[self.family].tokenizer_class is None and not (self.folder / "tokenizer.json").is_file():
            raise ValueError(
                f"{self.name} has no tokenizer.json; export needs the model's tokenizer beside it "
                "(save it with tokenizer.save_pretrained into the folder)."
            )
        for name, _, _ in self.tokenizer_files:
            if (self.folder / name).is_file():
                check_tokenizer_entries(self.folder / name, read_json(self.folder / name))
        for name in TOKENIZER_SETTINGS:
            if (self.folder / name).is_file():
                read_json(self.folder / name)
        tokenizer = AutoTokenizer.from_pretrained(self.folder, trust_remote_code=False)
        self.check_vocab_sizes(tokenizer)
        self.loaded["tokenizer"] = tokenizer
        return tokenizer

    def check_vocab_sizes(self, tokenizer) -> None:
        """Refuse a tokenizer (each side of a seq2seq one) with more tokens, added ones included, than config.json's
        vocabulary size for it: its last ids would index past the model's embedding."""
        family = FAMILIES[self.family]
        config = family.load(family.config_class).from_pretrained(self.folder)
        sizes = (
            (tokenizer.source_vocab_size, tokenizer.target_vocab_size)
            if self.family == "seq2seq"
            else (len(tokenizer),)
        )
        for (_, side, size_field), size in zip(self.tokenizer_files, sizes):
            limit = getattr(config, size_field)
            if size > limit:
                raise SourceFileError(
                    f"{self.name}: {side} has {size} tokens (added tokens included) but config.json's {size_field} is "
                    f"{limit}; ids {limit} to {size - 1} would index past the model's embedding: give the folder "
                    f"the tokenizer the model was trained with, or a model with {size_field} >= {size}."
                )

    def load_generation_config(self):
        """The folder's generation config, or None."""
        from transformers import GenerationConfig

        if not (self.folder / "generation_config.json").is_file():
            return None
        return GenerationConfig.from_pretrained(self.folder)


def open_source(
    source: str | os.PathLike, revision: str | None = None, *, published: bool = False, published_as: str | None = None
) -> MiniTFSource:
    """The MiniTF folder `source` names (a local folder, or a Hub repo id `owner/name` downloaded without its code),
    for an export `published` or not (`MiniTFSource.published`, `published_as`).

    Raises a ValueError saying what is wrong: no such folder, no config.json, not a MiniTF model.
    """
    name = str(source)
    repo_id = None
    if looks_like_repo_id(source):
        repo_id = name
        folder = download_repo_files(repo_id, SOURCE_FILES, revision)
    elif revision is not None:
        raise ValueError(f"--revision applies to a Hub repo id, but {name} is a local path.")
    else:
        folder = Path(source)
        if not folder.is_dir():
            raise ValueError(
                f"{name} is neither a model folder nor a Hub repo id (owner/name); give the folder "
                "written by minitf train, quickstart, convert or save_pretrained."
            )
    if (folder / EXPORT_FILE).is_file():
        raise ValueError(
            f"{name} is an engine export (it holds {EXPORT_FILE}); export the MiniTF folder it was made from."
        )
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ValueError(f"{name} has no config.json; it is not a saved model folder.")
    config = read_json(config_path, object)
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if family_of_model_type(model_type) is None:
        held = f"a {model_type!r} model" if model_type else "no model_type"
        raise SourceFileError(
            (
                ""
                if isinstance(config, dict)
                else f"{config_path} holds {json_kind(config)}, not an object of config fields: "
            )
            + f"{name} holds {held}, not a MiniTF model (model_type minitf_gpt, minitf_encoder or "
            "minitf_seq2seq); only MiniTF folders can be exported."
        )
    return MiniTFSource(
        folder=folder,
        name=name,
        repo_id=repo_id,
        revision=revision,
        config=config,
        published=published,
        published_as=published_as,
    )


def open_source_of(
    src: str | os.PathLike, families: tuple[str, ...], export: str, hint: str, revision: str | None = None
) -> MiniTFSource:
    """`open_source`, refusing a model of a family `export` does not take, with `hint` on where it goes instead."""
    source = open_source(src, revision)
    if source.family not in families:
        raise ValueError(
            f"{src} is {with_article(source.family)} model; {export} takes {' or '.join(families)} models ({hint})."
        )
    return source


def check_sentence_transformer_folder(folder: Path) -> None:
    """Refuse a SentenceTransformer folder whose modules are not Transformer -> Pooling(mean) -> Normalize: the
    ONNX graph holds the Transformer only, and the documented pooling is the mean."""
    modules = read_json(folder / "modules.json", list, "an array of modules")
    if not all(isinstance(module, dict) and isinstance(module.get("type"), str) for module in modules):
        raise SourceFileError(f'{folder / "modules.json"}: every module must be an object with a "type"; {AGAIN}')
    kinds = [module["type"].rsplit(".", 1)[-1] for module in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or kinds[2:] not in ([], ["Normalize"]):
        raise ValueError(f"modules.json: the export needs Transformer -> Pooling(mean) [-> Normalize], got {kinds}.")
    pooling_folder = confined_path(folder, str(modules[1].get("path", "")), "modules.json's Pooling path")
    pooling = read_json(pooling_folder / "config.json")
    # sentence-transformers 6 writes "pooling_mode": "mean"; earlier versions one boolean per mode.
    mode = pooling.get("pooling_mode") or [
        key for key, value in pooling.items() if key.startswith("pooling_mode_") and value is True
    ]
    if mode not in ("mean", ["pooling_mode_mean_tokens"]):
        raise ValueError(
            f"{modules[1]['path']}/config.json: pooling_mode={mode!r}; the export reproduces mean pooling only."
        )
    if kinds[2:] != ["Normalize"]:
        raise ValueError(
            "modules.json: the export expects the Normalize module after Pooling (MiniTF's encoders "
            "give unit vectors); add it or save the model with save_sentence_transformer."
        )


__all__ = [
    "check_sentence_transformer_folder",
    "ExportRefused",
    "MiniTFSource",
    "SourceFileError",
    "check_native",
    "native_refusal",
    "open_source",
    "open_source_of",
    "read_json",
    "rotate_half_order",
    "source_hashes",
    "split_qkv_heads",
]
