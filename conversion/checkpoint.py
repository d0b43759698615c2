"""Read original checkpoints safely and lazily.

Safetensors files are opened with `safe_open` and read one tensor at a time. `torch.save` files go through
torch's weights-only unpickler (memory-mapped, so tensors are read from disk only when used): it builds
tensors and plain containers and refuses every other pickled global *before* calling anything, so a
crafted file cannot run code. A converter may allow-list named stand-in classes, such as FrawdLLM's
`src.model.config.ModelConfig`, whose instances only receive their pickled fields.
"""

from __future__ import annotations

import pickle
import re
import struct
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from hf_minitf.safety.pickles import refused_content


class ConversionError(ValueError):
    """A checkpoint, tokenizer or option that cannot be converted; the message says what and how to fix it."""


SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


# Pickled classes of known training checkpoints, to point at the right converter when another one reads them.
KNOWN_GLOBALS = {
    "src.model.config.ModelConfig": "it looks like a FrawdLLM training checkpoint: use `minitf convert frawdllm`",
}


class PickledRecord:
    """Stand-in for a pickled config class: it has no code, its instances only receive the pickled fields
    (read them with `vars(record)`).

    Subclasses name the original class through `__module__` and `__qualname__`, which is what the
    weights-only unpickler matches against the pickle's global reference.
    """


def stand_in_class(full_name: str) -> type[PickledRecord]:
    """A `PickledRecord` subclass that the unpickler accepts in place of the class `full_name`."""
    module, _, name = full_name.rpartition(".")
    return type(name, (PickledRecord,), {"__module__": module, "__qualname__": name})


def check_weight(tensor: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    """Refuse, naming the tensor, a weight that would convert into a model that is silently wrong: an integer or
    quantized tensor bound for a floating-point weight (its scales and zero points are not part of the cast), or
    one holding NaN or infinite values."""
    if dtype.is_floating_point and not tensor.is_floating_point():
        kind = "quantized" if tensor.is_quantized else "integer"
        raise ConversionError(
            f"{name} is stored as {kind} {str(tensor.dtype).removeprefix('torch.')}, but the model needs "
            "floating-point weights: casting it would give a model that is silently wrong. Convert the floating-point (unquantized) "
            "checkpoint."
        )
    if tensor.is_floating_point() and tensor.numel() and not torch.isfinite(tensor).all():
        bad = int((~torch.isfinite(tensor)).sum())
        raise ConversionError(
            f"{name} holds {bad} NaN or infinite values of {tensor.numel()}: a model with it gives NaN or inf outputs. "
            "Convert a checkpoint saved before training diverged."
        )


def _detect_format(path: Path) -> str:
    with open(path, "rb") as file:
        head = file.read(16)
    if head.startswith(b"PK\x03\x04"):
        return "torch"
    if len(head) >= 9 and head[8:9] == b"{":
        (header_length,) = struct.unpack("<Q", head[:8])
        if header_length < path.stat().st_size:
            return "safetensors"
    if head[:1] == b"\x80":
        return "torch-legacy"
    raise ConversionError(
        f"{path} is neither a safetensors file nor a torch.save checkpoint (unrecognized first bytes {head[:8]!r}); "
        "pass the model file the original code saved (model.safetensors, or the .pt/.pth file of torch.save)."
    )


def _refusal(path: Path, error: Exception, allowed: Iterable[str]) -> ConversionError:
    text = str(error)
    found = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"unrecognized function (\S+)", text)
    what = refused_content(error)
    allowed_text = ", ".join(sorted(allowed)) or "no class"
    global_name = found.group(1) if found else None
    known = KNOWN_GLOBALS.get(global_name) if global_name is not None else None
    if known:
        return ConversionError(f"{path} holds a pickled `{global_name}`; {known}. Nothing from the file was executed.")
    return ConversionError(
        f"Refusing to load {path}: it contains {what}, which a checkpoint of this kind does not need. Only tensors, "
        f"plain Python containers and numbers (and {allowed_text}) are accepted. Nothing from the file was executed. "
        "If the file is yours and genuine, re-save its state_dict with the original code as plain tensors "
        "(torch.save(model.state_dict(), ...) or safetensors) and convert that."
    )


def can_memory_map(path: Path) -> bool:
    """Whether torch can memory-map the zip `path`: only when every entry is stored as it is. Memory-mapped
    reading takes an entry's bytes from the file as they lie, so a zip re-packed with compression (ZIP_DEFLATED)
    would give tensors of compressed bytes; such a file is read through the zip reader instead. An encrypted
    entry, which neither way can read, is refused by name."""
    try:
        with zipfile.ZipFile(path) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError) as error:
        raise ConversionError(
            f"Cannot read {path} as a torch.save checkpoint (truncated or corrupt zip?): {error}"
        ) from None
    encrypted = [entry.filename for entry in entries if entry.flag_bits & 0x1]
    if encrypted:
        raise ConversionError(
            f"{path}: the zip entry {encrypted[0]} is encrypted; re-save the checkpoint with torch.save, unencrypted."
        )
    return all(entry.compress_type == zipfile.ZIP_STORED for entry in entries)


def _torch_load(path: Path, allowed_classes: Iterable[type]) -> Any:
    allowed_classes = list(allowed_classes)
    allowed_globals: list[Callable[..., Any] | tuple[Callable[..., Any], str]] = [*allowed_classes]
    names = [f"{cls.__module__}.{cls.__qualname__}" for cls in allowed_classes]
    memory_map = zipfile.is_zipfile(path) and can_memory_map(path)
    try:
        with torch.serialization.safe_globals(allowed_globals):
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=memory_map)
            except RuntimeError as error:
                if "mmap" not in str(error) or not memory_map:
                    raise
                return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise _refusal(path, error, names) from None
    except (RuntimeError, EOFError, OSError, ValueError) as error:
        raise ConversionError(
            f"Cannot read {path} as a torch.save checkpoint (truncated or corrupt file?): {error}"
        ) from error
    except Exception as error:  # e.g. an allow-listed stand-in called with arguments by a crafted pickle
        raise ConversionError(
            f"{path} holds pickled content that is not a checkpoint of this kind: {error!r}. "
            "Nothing else from the file was executed."
        ) from error


def _is_state_dict(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(isinstance(key, str) for key in value)


class Checkpoint:
    """The tensors of an original checkpoint, read lazily, and its other top-level entries (`extras`).

    Use as a context manager (or call `close`). `get` reads one tensor; `shape` and `dtype` read nothing.
    With `key_prefix`, stored keys that start with it are presented without it (a wrapper's `model.` prefix,
    as in FrawdLLM's own Hugging Face folders); other keys keep their names.
    """

    def __init__(
        self,
        path: Path,
        tensors: Mapping[str, torch.Tensor] | None,
        extras: dict[str, Any],
        safetensors_handle=None,
        key_prefix: str = "",
    ) -> None:
        self.path = path
        self.extras = extras
        self._tensors = tensors
        self._handle = safetensors_handle
        if safetensors_handle is not None:
            stored = list(safetensors_handle.keys())
        else:
            assert tensors is not None  # a torch.save checkpoint's tensors, where no safetensors handle reads them
            stored = list(tensors)
        self._stored = {key.removeprefix(key_prefix) if key_prefix else key: key for key in stored}
        self._keys = list(self._stored)

    def keys(self) -> list[str]:
        return list(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._stored

    def shape(self, key: str) -> tuple[int, ...]:
        key = self._stored[key]
        if self._handle is not None:
            return tuple(self._handle.get_slice(key).get_shape())
        return tuple(self._loaded_tensors()[key].shape)

    def dtype(self, key: str) -> torch.dtype:
        key = self._stored[key]
        if self._handle is not None:
            name = self._handle.get_slice(key).get_dtype()
            if name not in SAFETENSORS_DTYPES:
                raise ConversionError(f"{self.path}: tensor {key} has dtype {name}, which conversion does not handle.")
            return SAFETENSORS_DTYPES[name]
        return self._loaded_tensors()[key].dtype

    def get(self, key: str) -> torch.Tensor:
        stored = self._stored[key]
        try:
            if self._handle is not None:
                return self._handle.get_tensor(stored)
            return self._loaded_tensors()[stored]
        except Exception as error:  # a truncated or corrupt tensor surfaces only when it is read
            raise ConversionError(
                f"Cannot read tensor {key} from {self.path} (truncated or corrupt file?): {error}"
            ) from error

    def _loaded_tensors(self) -> Mapping[str, torch.Tensor]:
        """The tensors of a torch.save checkpoint, in memory (a safetensors file is read through its handle)."""
        assert self._tensors is not None, f"{self.path} is closed"
        return self._tensors

    def close(self) -> None:
        if self._handle is not None:
            self._handle.__exit__(None, None, None)
        self._handle = self._tensors = None

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_checkpoint(
    path: str | Path,
    state_dict_keys: Iterable[str] = ("model_state_dict", "state_dict", "model"),
    allowed_classes: Iterable[type] = (),
    key_prefix: str = "",
) -> Checkpoint:
    """Open a safetensors file or a torch.save checkpoint (a bare state_dict, or a training checkpoint dict
    holding the state_dict under one of `state_dict_keys`) without executing any pickled code.

    `allowed_classes` are `PickledRecord` stand-ins the unpickler may build (see `stand_in_class`);
    `key_prefix` is stripped from the keys that carry it (see `Checkpoint`).
    """
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"Checkpoint {path} does not exist or is not a file.")
    kind = _detect_format(path)
    if kind == "safetensors":
        try:
            handle = safe_open(str(path), framework="pt").__enter__()
            metadata = handle.metadata() or {}
        except Exception as error:
            raise ConversionError(f"Cannot read {path} as safetensors (truncated or corrupt file?): {error}") from error
        return Checkpoint(path, None, {"metadata": metadata}, safetensors_handle=handle, key_prefix=key_prefix)

    loaded = _torch_load(path, allowed_classes)
    if not _is_state_dict(loaded):
        raise ConversionError(
            f"{path} holds a {type(loaded).__name__}, not a state_dict or a training checkpoint dict."
        )
    state_dict, extras = loaded, {}
    if not all(isinstance(value, torch.Tensor) for value in loaded.values()):
        found = [key for key in state_dict_keys if _is_state_dict(loaded.get(key))]
        if not found:
            raise ConversionError(
                f"{path} is a dict with entries {sorted(loaded)[:12]}, neither a state_dict (tensors only) nor a "
                f"training checkpoint with the weights under one of {list(state_dict_keys)}."
            )
        state_dict = loaded[found[0]]
        extras = {key: value for key, value in loaded.items() if key != found[0]}
    bad = [key for key, value in state_dict.items() if not isinstance(value, torch.Tensor)]
    if bad:
        raise ConversionError(f"{path}: state_dict entries {bad[:10]} are not tensors.")
    return Checkpoint(path, state_dict, extras, key_prefix=key_prefix)


__all__ = [
    "Checkpoint",
    "ConversionError",
    "PickledRecord",
    "can_memory_map",
    "check_weight",
    "open_checkpoint",
    "stand_in_class",
]
