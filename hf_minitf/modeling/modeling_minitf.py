"""What every MiniTF model class shares: `MiniTFPreTrainedModel`, the base of each family's `*PreTrainedModel`.

It declares what transformers asks of a model class (attention backends, gradient checkpointing, compilation), runs
hkproj's fixed-mask attention in eager mode, and gives saved and pushed models a card. Cards are written by
hf_minitf's card writer (`hf_minitf.cards`) when the package is imported, which hands it over through
`modeling_minitf_hooks`, so it is never copied beside the model as remote code. Where hf_minitf is not installed
(a folder loaded with `trust_remote_code=True`), a saved or pushed model keeps the card of the folder it was loaded
from.
This file is copied beside saved models with the modeling files, so it imports only transformers and
huggingface_hub.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

from transformers import PreTrainedModel
from transformers.utils import ModelOutput, logging

from .modeling_minitf_hooks import PACKAGE_HOOKS
from .modeling_minitf_loading import CheckedLoadingMixin

logger = logging.get_logger(__name__)

README = "README.md"


def find_card_writer() -> ModuleType | None:
    """hf_minitf's card writer when the package is imported (its hook, see modeling_minitf_hooks), else None."""
    return PACKAGE_HOOKS.card_writer() if PACKAGE_HOOKS.card_writer is not None else None


def open_mode(folder: Path) -> int:
    """The permission bits a plain `open()` gives a new file in `folder` (the user's umask, the folder's default
    ACL), found by making one."""
    probe = folder / f".mode-probe-{os.getpid()}-{id(folder):x}"
    probe.touch()
    try:
        return probe.stat().st_mode & 0o777
    finally:
        probe.unlink()


def give_weights_the_open_mode(folder: Path) -> None:
    """safetensors writes weights 0600 (through a temporary file) beside a 0644 config.json: give them the mode a
    plain `open()` gives, so that whoever can read the config can read the weights."""
    mode = open_mode(folder)
    for weights in folder.glob("*.safetensors"):
        os.chmod(weights, mode)


def is_blank_card(text: str) -> bool:
    """Whether a card is empty or transformers' placeholder (what `push_to_hub` writes when a repo has none)."""
    return "[More Information Needed]" in text or not text.strip()


def source_card(source: str | os.PathLike | None) -> Path | None:
    """The card of the folder or Hub repo a model was loaded from, if it has one (None offline or without one)."""
    if not source:
        return None
    if os.path.isdir(source):
        path = Path(source) / README
        return path if path.is_file() else None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(str(source), README))
    except Exception:  # no such repo or file, offline, no network: the model simply has no card to keep
        return None


def keep_source_card(folder: str | os.PathLike, source: str | os.PathLike | None) -> None:
    """Copy the source's card into `folder` where `folder` has none, or only a blank one."""
    card = Path(folder) / README
    if card.is_file() and not is_blank_card(card.read_text(encoding="utf-8", errors="replace")):
        return
    found = source_card(source)
    if found is not None and found.resolve() != card.resolve():
        shutil.copyfile(found, card)


def prepare_card_for_upload(folder: str | os.PathLike, repo_id: str, source: str | os.PathLike | None) -> None:
    """Before `push_to_hub` uploads `folder`: the MiniTF card naming `repo_id` (with hf_minitf installed), else the
    card of `source`, the folder or repo the model was loaded from, over transformers' blank one."""
    card_writer = find_card_writer()
    if card_writer is not None:
        card_writer.prepare_upload(folder, repo_id, source_folder=source or None)
    else:
        keep_source_card(folder, source)


def carried_outputs(outputs: ModelOutput, *replaced: str) -> dict[str, Any]:
    """The fields of a base model's output that a head model returns as they are: all but `replaced` (the head
    computes those from them), keyed by name, for the head's output class."""
    return {name: value for name, value in outputs.items() if name not in replaced}


class MiniTFPreTrainedModel(CheckedLoadingMixin, PreTrainedModel):
    """Base of the MiniTF model classes: weight init, attention backends, gradient checkpointing and model cards.

    A family's `*PreTrainedModel` only names its `config_class`.
    """

    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["PreNormLayer"]
    _supports_sdpa = True
    _supports_flex_attn = True
    _supports_flash_attn = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def _check_and_adjust_attn_implementation(self, attn_implementation: str | None, *args, **kwargs) -> str:
        """hkproj's fixed mask value (`config.attention_mask_value`, -1e9) exists only in eager attention: such a
        model always runs eager, whatever implementation is asked for."""
        if self.config.attention_mask_value is not None:
            if attn_implementation not in (None, "eager"):
                logger.info(
                    f"attention_mask_value={self.config.attention_mask_value} needs eager attention; "
                    f"{attn_implementation!r} is not used."
                )
            return "eager"
        return super()._check_and_adjust_attn_implementation(attn_implementation, *args, **kwargs)

    def _use_cache(self, use_cache: bool | None) -> bool:
        """Whether a forward pass keeps keys/values in a cache: `use_cache`, else the config's; never while training
        with gradient checkpointing, which runs each layer again."""
        if self.gradient_checkpointing and self.training:
            return False
        return use_cache if use_cache is not None else self.config.use_cache

    def save_pretrained(self, save_directory: str | os.PathLike, *args, **kwargs) -> None:
        """transformers' `save_pretrained`, then the model card: written by hf_minitf when installed, else the
        card of the folder this model was loaded from, copied."""
        super().save_pretrained(save_directory, *args, **kwargs)
        if not kwargs.get("is_main_process", True) or not os.path.isfile(os.path.join(save_directory, "config.json")):
            return
        give_weights_the_open_mode(Path(save_directory))
        card_writer = find_card_writer()
        if card_writer is not None:
            card_writer.write_model_card(
                save_directory, source_folder=self.name_or_path or None, keep_unreadable=True
            )  # the weights are saved: a bad card must not stop it
        else:
            keep_source_card(save_directory, self.name_or_path)

    def _upload_modified_files(self, working_dir: str | os.PathLike, repo_id: str, *args, **kwargs):
        """`push_to_hub` uploads this model's card (naming the repo with hf_minitf installed) instead of
        transformers' blank one."""
        prepare_card_for_upload(working_dir, repo_id, self.name_or_path)
        return super()._upload_modified_files(working_dir, repo_id, *args, **kwargs)


__all__ = [
    "MiniTFPreTrainedModel",
    "carried_outputs",
    "find_card_writer",
    "give_weights_the_open_mode",
    "is_blank_card",
    "keep_source_card",
    "open_mode",
    "prepare_card_for_upload",
]
