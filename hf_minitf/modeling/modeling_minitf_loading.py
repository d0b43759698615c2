"""Checks around `from_pretrained` of every MiniTF model, for folders that come from elsewhere: weights that
transformers would read wrongly are refused before loading, a pickled weights file that holds code is named
(without torch's advice to load it unrestricted), and a config that asks for base-model weights the folder does
not hold (more layers) is an error rather than a model with random weights.

transformers memory-maps `pytorch_model.bin`: it takes each zip entry's bytes as they lie in the file, so a zip
re-packed with compression would load as tensors of compressed bytes. Missing weights are only a warning in
transformers (they are initialized at random, as for fine-tuning a new head): a new head still is, but a MiniTF
folder holds every weight of its base model, so a missing one there means config.json does not describe the
weights beside it. This file is copied beside saved models with the modeling code: it imports nothing heavy.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path

from .modeling_minitf_hooks import PACKAGE_HOOKS


def refused_pickle_error(error: pickle.UnpicklingError, places: list[Path]) -> pickle.UnpicklingError:
    """The error to raise when torch refused a pickled weights file: the file named, without torch's advice to load
    it unrestricted."""
    if PACKAGE_HOOKS.pickle_diagnosis is None:
        where = ", ".join(map(str, places)) or "this model"
        return pickle.UnpicklingError(
            f"refused to load a pickled weights file of {where}: it holds code, which "
            "would run on this machine; use weights saved as safetensors."
        )
    file_safety = PACKAGE_HOOKS.pickle_diagnosis()
    return file_safety.RefusedPickleError(file_safety.refused_pickle_message(error, places))


def compressed_zip_entry(path: str | os.PathLike) -> str | None:
    """The first entry of the zip `path` that is not stored as it is (so cannot be memory-mapped), or None."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
                return info.filename
    return None


def check_weight_files(folder: Path) -> None:
    """Refuse the torch zip weight files of `folder` that memory-mapped loading would read as garbage."""
    for path in sorted(folder.glob("*.bin")):
        if zipfile.is_zipfile(path):
            entry = compressed_zip_entry(path)
            if entry is not None:
                raise ValueError(
                    f"{path}: its zip entry {entry} is compressed or encrypted, which transformers' memory-mapped "
                    "loading would read as raw tensor bytes (every weight would be wrong); save the weights again "
                    "with save_pretrained (safetensors) or torch.save."
                )


class CheckedLoadingMixin:
    """`from_pretrained` with the checks of this module (see the module docstring)."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        subfolder = kwargs.get("subfolder") or ""
        folder = Path(pretrained_model_name_or_path or "", subfolder)
        if pretrained_model_name_or_path is not None and folder.is_dir():
            check_weight_files(folder)
        wants_info = kwargs.pop("output_loading_info", False)
        try:
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *args, output_loading_info=True, **kwargs
            )
        except pickle.UnpicklingError as error:  # torch's message would advise loading it unrestricted
            places = [folder] if folder.is_dir() else []
            raise refused_pickle_error(error, places) from None
        missing = sorted(info.get("missing_keys") or [])
        prefix = getattr(model, "base_model_prefix", "")
        if prefix and hasattr(model, prefix):  # a model with a head: a new head (fine-tuning) is no error
            missing = [key for key in missing if key.startswith(prefix + ".")]
        if missing:
            shown = ", ".join(missing[:6]) + (f", ... ({len(missing) - 6} more)" if len(missing) > 6 else "")
            raise ValueError(
                f"{pretrained_model_name_or_path}: the weights lack {len(missing)} tensors that its config asks for "
                f"({shown}); config.json does not describe the weights beside it (check num_hidden_layers, "
                "architectures and the other sizes)."
            )
        return (model, info) if wants_info else model


__all__ = ["CheckedLoadingMixin", "check_weight_files", "compressed_zip_entry"]
