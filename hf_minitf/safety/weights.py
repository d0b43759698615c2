"""Checks around `from_pretrained` of every MiniTF model, for folders that come from elsewhere: weights that
transformers would read wrongly are refused before loading, a pickled weights file that holds code is named
(without torch's advice to load it unrestricted), and a config that asks for base-model weights the folder does
not hold (more layers, an untied head) is an error rather than a model with random weights.

transformers memory-maps `pytorch_model.bin`: it takes each zip entry's bytes as they lie in the file, so a zip
re-packed with compression would load as tensors of compressed bytes. Missing weights are only a warning in
transformers (they are initialized at random, as for fine-tuning a new head): a new head still is, but a MiniTF
folder holds every weight of its base model, so a missing one there means config.json does not describe the
weights beside it; missing weights together with weights the model does not ask for mean the folder holds the weights
of another model, named by the MiniTF family its tensor names fit.

Every safetensors file of the folder (and each shard its index names) has its header read here, with plain Python,
before transformers opens it: a header whose offsets overlap, leave gaps, run past the end of the file or disagree with
a tensor's shape and dtype is refused naming the file and the tensor, and so are weights claiming more bytes than this
machine's memory (a sparse file can claim 256 GiB in a few KiB of disk), from the header alone: nothing is read or
allocated for what a file claims.

These checks are hf_minitf's, around `from_pretrained` of the MiniTF model classes where the package is installed
(`hf_minitf.registration` puts `checked_from_pretrained` in place as the model code loads); a folder's copied code,
loaded without the package, has transformers' usual behaviour.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hf_minitf.catalog.families import FAMILIES
from hf_minitf.safety.model_configs import format_bytes, machine_memory
from hf_minitf.safety.pickles import RefusedPickleError, refused_pickle_message

# What safetensors itself accepts of a header (its own bound), and the bits of each of its dtypes.
SAFETENSORS_HEADER_LIMIT = 100_000_000
SAFETENSORS_INDEX = "model.safetensors.index.json"
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "I64": 64,
    "U64": 64,
    "F64": 64,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
}
SAVE_AGAIN = "save the weights again with save_pretrained (a file from elsewhere may be damaged or hostile)"


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


@dataclass(frozen=True)
class StoredTensor:
    """A tensor as a safetensors header describes it: dtype, shape and its bytes [begin, end) of the data."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


def _refuse(path: Path, problem: str) -> ValueError:
    return ValueError(f"{path}: {problem}; {SAVE_AGAIN}.")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _stored_tensor(path: Path, name: str, entry: Any) -> StoredTensor:
    if not isinstance(entry, dict):
        raise _refuse(path, f"its header describes tensor `{name}` as {json.dumps(entry)[:80]}, not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str):
        raise _refuse(path, f"its header gives tensor `{name}` no dtype")
    if not isinstance(shape, list) or not all(map(_is_count, shape)):
        raise _refuse(path, f"its header gives tensor `{name}` the shape {json.dumps(shape)[:80]}, not a list of sizes")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_count, offsets)):
        raise _refuse(
            path, f"its header gives tensor `{name}` the data_offsets {json.dumps(offsets)[:80]}, not [begin, end]"
        )
    begin, end = offsets
    if end < begin:
        raise _refuse(path, f"tensor `{name}` has data_offsets [{begin}, {end}], which end before they begin")
    tensor = StoredTensor(name, dtype, tuple(shape), begin, end)
    bits = DTYPE_BITS.get(dtype)  # an unknown dtype is safetensors' to refuse, by its name
    if len(shape) > 1024 or any(size >= 2**64 for size in shape):  # safetensors counts elements in 64 bits
        raise _refuse(path, f"tensor `{name}` has the shape {json.dumps(shape)[:80]}, larger than any file can hold")
    if bits is not None:
        elements = math.prod(shape)
        if elements * bits != tensor.nbytes * 8:
            raise _refuse(
                path,
                f"tensor `{name}` is {dtype} of shape {list(shape)}: {elements:,} elements take "
                f"{elements * bits / 8:,g} bytes, but its data_offsets [{begin}, {end}] hold {tensor.nbytes:,} "
                "(impossible offsets)",
            )
    return tensor


def read_safetensors_header(path: str | os.PathLike) -> dict[str, StoredTensor]:
    """The tensors a safetensors file holds, from its header alone (an 8-byte little-endian length, then that much
    JSON), checked as safetensors checks them: each tensor's offsets hold its shape and dtype, the tensors neither
    overlap nor leave gaps, and they cover the file's data exactly. A ValueError names the file, the tensor and the
    offsets; no tensor data is read."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise _refuse(
                path, f"the file is {size} bytes, too short for the 8-byte header length of a safetensors file"
            )
        length = int.from_bytes(prefix, "little")
        if length > SAFETENSORS_HEADER_LIMIT:
            raise _refuse(
                path,
                f"its header claims {length:,} bytes, more than the {SAFETENSORS_HEADER_LIMIT:,} safetensors allows",
            )
        if 8 + length > size:
            raise _refuse(
                path,
                f"its header claims {length:,} bytes but the file is only {size:,} bytes (cut short, or not "
                "safetensors)",
            )
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as error:
        raise _refuse(path, f"its header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise _refuse(path, f"its header is a JSON {type(header).__name__}, not an object of tensors")
    tensors = [_stored_tensor(path, name, entry) for name, entry in header.items() if name != "__metadata__"]
    data_size = size - 8 - length
    position, previous = 0, None
    for tensor in sorted(tensors, key=lambda tensor: (tensor.begin, tensor.end)):
        where = f"tensor `{tensor.name}` has data_offsets [{tensor.begin}, {tensor.end}]"
        if tensor.end > data_size:
            raise _refuse(
                path,
                f"{where}, past the end of the file's {data_size:,} bytes of data (the file is {size:,} bytes, "
                f"{8 + length:,} of them its header): the file is cut short or its header claims more than it holds",
            )
        if previous is not None and tensor.begin < position:
            raise _refuse(
                path,
                f"{where}, which overlap those of tensor `{previous.name}` [{previous.begin}, {previous.end}] "
                "(impossible offsets)",
            )
        if tensor.begin > position:
            after = f"after tensor `{previous.name}`" if previous is not None else "at the start of the data"
            raise _refuse(
                path, f"{where}, leaving bytes [{position}, {tensor.begin}) {after} unused (impossible offsets)"
            )
        position, previous = tensor.end, tensor
    if position != data_size:
        raise _refuse(
            path,
            f"its tensors cover {position:,} of the {data_size:,} bytes of data after its header (the file is "
            f"{size:,} bytes): the rest belongs to no tensor",
        )
    return {tensor.name: tensor for tensor in tensors}


def safetensors_files(folder: Path) -> list[Path]:
    """The safetensors files of `folder`: every `*.safetensors` in it and each shard its index names."""
    paths = set(folder.glob("*.safetensors"))
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map")
        except (UnicodeDecodeError, ValueError, AttributeError):
            weight_map = None  # transformers names a malformed index itself
        if isinstance(weight_map, dict):
            paths |= {folder / name for name in weight_map.values() if isinstance(name, str)}
    return sorted(path for path in paths if path.is_file())


def _on_disk(path: Path) -> str:
    """How much of `path` is on disk, when it is a sparse file (holes read as zeros, never written)."""
    stat = path.stat()
    blocks = getattr(stat, "st_blocks", None)
    if blocks is None or blocks * 512 * 2 > stat.st_size:
        return ""
    return f", though only {format_bytes(blocks * 512)} of it is on disk (a sparse file)"


def check_safetensors_files(folder: Path, memory: int | None = None) -> dict[Path, dict[str, StoredTensor]]:
    """The tensors of each safetensors file of `folder` (see `read_safetensors_header`); a ValueError when a header
    is malformed or the files claim more bytes than `memory` (default: this machine's memory) could hold."""
    headers = {path: read_safetensors_header(path) for path in safetensors_files(folder)}
    memory = memory if memory is not None else machine_memory()
    claimed = sum(tensor.nbytes for tensors in headers.values() for tensor in tensors.values())
    if memory is not None and claimed > memory:
        path, tensors = max(headers.items(), key=lambda item: sum(tensor.nbytes for tensor in item[1].values()))
        largest = max(tensors.values(), key=lambda tensor: tensor.nbytes)
        raise _refuse(
            path,
            f"its header claims {format_bytes(sum(tensor.nbytes for tensor in tensors.values()))} of weights "
            f"(tensor `{largest.name}`: {largest.dtype} of shape {list(largest.shape)}, data_offsets "
            f"[{largest.begin}, {largest.end}]){_on_disk(path)}; the weights of {folder} would take "
            f"{format_bytes(claimed)}, more than this machine's {format_bytes(memory)} of memory could hold, so "
            "nothing was read",
        )
    return headers


def _pattern(name: str, prefix: str) -> str:
    """A weight name without the base model's prefix and with layer numbers as N (`layers.N.mlp.fc1.weight`)."""
    if prefix and name.startswith(prefix + "."):
        name = name[len(prefix) + 1 :]
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.)", "N", name)


def _known_model_classes() -> list[Any]:
    """The MiniTF model classes an Auto class loads, of every family."""
    return [family.load(dotted) for family in FAMILIES.values() for dotted in family.auto_classes.values()]


def _weight_patterns(model_class: Any) -> set[str] | None:
    """The weight names of `model_class` (as `_pattern` writes them), from a model of its default config built on
    the meta device (no memory), or None when it cannot be built so."""
    import torch

    try:
        with torch.device("meta"):
            model = model_class(model_class.config_class(num_hidden_layers=1))
    except Exception:  # an abstract class or a config that needs more: it names no family here
        return None
    prefix = getattr(model_class, "base_model_prefix", "")
    return {_pattern(name, prefix) for name in model.state_dict()}


def _shown(names: list[str], count: int = 3) -> str:
    return ", ".join(names[:count]) + (f", ... ({len(names) - count} more)" if len(names) > count else "")


def other_family_error(
    model_class: Any, folder: Path, headers: dict[Path, dict[str, StoredTensor]], config_type: str | None = None
) -> ValueError | None:
    """The error to raise when the weights of `folder` are named like another MiniTF family's than `model_class`'s
    (config.json of one family beside the weights of another), or None: the family whose weight names fit the
    stored ones best (layer numbers aside), when it fits them better than `model_class`'s own family does."""
    stored = sorted({name for tensors in headers.values() for name in tensors})
    prefix = getattr(model_class, "base_model_prefix", "")
    patterns = {_pattern(name, prefix) for name in stored}
    if not patterns:
        return None
    families: dict[Any, set[str]] = {}
    for candidate in _known_model_classes():
        candidate_patterns = _weight_patterns(candidate)
        if candidate_patterns is not None:
            families[candidate] = candidate_patterns

    def fit(candidate: Any) -> float:
        return len(patterns & families[candidate]) / len(patterns | families[candidate])

    own_type = config_type or model_class.config_class.model_type
    own = [candidate for candidate in families if candidate.config_class.model_type == own_type]
    others = [candidate for candidate in families if candidate.config_class.model_type != own_type]
    best = max(others, key=fit, default=None)
    if best is None or fit(best) <= max([0.5, *map(fit, own)]):
        return None
    asked = set().union(*(families[candidate] for candidate in own))
    foreign = [name for name in stored if _pattern(name, prefix) not in asked] or stored
    lacking = sorted(families[max(own, key=fit)] - patterns) if own else []
    needs = f", which needs {_shown(lacking)}" if lacking else ""
    files = [path for path, tensors in headers.items() if any(name in tensors for name in foreign)]
    where = ", ".join(map(str, files)) if len(files) == 1 else f"{folder} ({', '.join(path.name for path in files)})"
    return ValueError(
        f"{where} holds tensors named like a {best.config_class.model_type} model ({_shown(foreign)}) but "
        f"config.json is {own_type} ({model_class.__name__}{needs}): these are the weights of another model; put "
        "them beside the config.json saved with them, or load them with that family's class."
    )


def size_mismatch_error(
    model_class: Any, folder: Path, headers: dict[Path, dict[str, StoredTensor]]
) -> ValueError | None:
    """The error to raise when stored tensors have other shapes than the folder's config.json gives them (a
    hidden_size edited by hand), naming the file, the first such tensor and both shapes; None when none differ."""
    import torch

    try:
        config = model_class.config_class.from_pretrained(folder)
        with torch.device("meta"):
            expected = {name: tuple(tensor.shape) for name, tensor in model_class(config).state_dict().items()}
    except Exception:  # a config that cannot build a model has its own error, raised by transformers
        return None
    prefix = getattr(model_class, "base_model_prefix", "")
    mismatched = []
    for path, tensors in headers.items():
        for name, tensor in tensors.items():
            wanted = expected.get(name, expected.get(f"{prefix}.{name}", expected.get(name.removeprefix(f"{prefix}."))))
            if wanted is not None and wanted != tensor.shape:
                mismatched.append((path, name, tensor.shape, wanted))
    if not mismatched:
        return None
    path, name, stored, wanted = mismatched[0]
    others = f" (and {len(mismatched) - 1} more tensors)" if len(mismatched) > 1 else ""
    return ValueError(
        f"{path}: tensor `{name}` is {list(stored)} but config.json makes it {list(wanted)}{others}; config.json "
        "does not describe the weights beside it (check hidden_size, intermediate_size, vocab_size and the other "
        "sizes), or pass ignore_mismatched_sizes=True to train those tensors anew."
    )


def checked_from_pretrained(cls: Any, from_pretrained: Any, pretrained_model_name_or_path: Any, *args, **kwargs) -> Any:
    """`from_pretrained(pretrained_model_name_or_path, ...)` (transformers', bound to the model class `cls`) with the
    checks of this module (see the module docstring)."""
    subfolder = kwargs.get("subfolder") or ""
    folder = Path(pretrained_model_name_or_path or "", subfolder)
    headers: dict[Path, dict[str, StoredTensor]] = {}
    if pretrained_model_name_or_path is not None and folder.is_dir():
        check_weight_files(folder)
        if kwargs.get("use_safetensors") is not False:
            headers = check_safetensors_files(folder)
    wants_info = kwargs.pop("output_loading_info", False)
    try:
        model, info = from_pretrained(pretrained_model_name_or_path, *args, output_loading_info=True, **kwargs)
    except pickle.UnpicklingError as error:  # torch's message would advise loading it unrestricted
        places = [folder] if folder.is_dir() else []
        raise RefusedPickleError(refused_pickle_message(error, places)) from None
    except RuntimeError as error:  # a size mismatch: the weights of another family, or of other sizes
        if "mismatch" in str(error):
            named = other_family_error(cls, folder, headers) or size_mismatch_error(cls, folder, headers)
            if named is not None:
                raise named from None
        raise
    missing = sorted(info.get("missing_keys") or [])
    prefix = getattr(model, "base_model_prefix", "")
    saved_as = getattr(model.config, "architectures", None) or []
    if prefix and hasattr(model, prefix) and cls.__name__ not in saved_as:
        # a head on a folder saved without it (a classifier on an encoder): a new head, for fine-tuning, is no
        # error; a folder saved as this very class holds its head (an untied lm_head) and lacks none of it
        missing = [key for key in missing if key.startswith(prefix + ".")]
    if missing and info.get("unexpected_keys"):  # weights it does not ask for instead of those it does
        family = other_family_error(cls, folder, headers, getattr(model.config, "model_type", None))
        if family is not None:
            raise family from None
    if not missing and info.get("unexpected_keys"):  # more layers stored than config.json has
        own = {_pattern(name, prefix) for name in model.state_dict()}
        extra = sorted(key for key in info["unexpected_keys"] if _pattern(key, prefix) in own)
        if extra:
            raise ValueError(
                f"{pretrained_model_name_or_path}: the weights hold {len(extra)} tensors of layers its config "
                f"does not have ({_shown(extra)}); config.json does not describe the weights beside it (its "
                f"num_hidden_layers is {getattr(model.config, 'num_hidden_layers', '?')}): loading would drop "
                "those layers."
            )
    if missing:
        shown = ", ".join(missing[:6]) + (f", ... ({len(missing) - 6} more)" if len(missing) > 6 else "")
        unexpected = sorted(info.get("unexpected_keys") or [])
        instead = f", and hold {len(unexpected)} it does not ({_shown(unexpected)})" if unexpected else ""
        raise ValueError(
            f"{pretrained_model_name_or_path}: the weights lack {len(missing)} tensors that its config asks for "
            f"({shown}){instead}; config.json does not describe the weights beside it (check "
            "num_hidden_layers, tie_word_embeddings, architectures and the other sizes)."
        )
    return (model, info) if wants_info else model


__all__ = [
    "DTYPE_BITS",
    "checked_from_pretrained",
    "StoredTensor",
    "check_safetensors_files",
    "check_weight_files",
    "compressed_zip_entry",
    "read_safetensors_header",
    "safetensors_files",
]
