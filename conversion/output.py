"""Write conversion results: an output folder that appears whole or not at all, and a safetensors file
written one tensor at a time (peak memory: about one tensor, not one model)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoint import ConversionError

TORCH_TO_SAFETENSORS = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}


def check_output_dir(out: str | Path, overwrite: bool) -> Path:
    """Refuse, before any work, an output path that is a file or a non-empty folder (unless `overwrite`)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConversionError(f"--out {out} exists and is not a folder; choose a folder path.")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConversionError(f"--out {out} is not empty; choose another folder or pass --overwrite to replace it.")
    return out


@contextmanager
def atomic_output_dir(out: str | Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling folder of `out`; on success it replaces `out`, on any error it is removed.

    So an interrupted or failed conversion never leaves a partial folder at `out`, and an existing
    folder (with `overwrite`) is only replaced once the new one is complete.
    """
    out = check_output_dir(out, overwrite).absolute()
    created = [parent for parent in out.parents if not parent.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.converting-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        yield work
        check_output_dir(out, overwrite)
        trash = None
        if out.exists():
            trash = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
            os.replace(out, trash)
        try:
            os.replace(work, out)
        except OSError:
            if trash is not None:
                os.replace(trash, out)
            raise
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for parent in created:  # innermost first: only the folders made for this output, and only if empty
            if parent.exists() and not any(parent.iterdir()):
                parent.rmdir()
        raise


@dataclass
class TensorPlan:
    """One tensor of an output file: its name, expected shape and dtype, and how to produce it."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    produce: Callable[[], torch.Tensor]
    origin: str = ""


def write_safetensors(path: str | Path, plans: Sequence[TensorPlan], metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file tensor by tensor: the header comes from the plans' shapes and dtypes, then
    each tensor is produced, checked against its plan, cast, written and dropped."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for plan in plans:
        if plan.dtype not in TORCH_TO_SAFETENSORS:
            raise ConversionError(f"Cannot write {plan.name} with dtype {plan.dtype}.")
        size = torch.Size(plan.shape).numel() * torch.empty((), dtype=plan.dtype).element_size()
        header[plan.name] = {"dtype": TORCH_TO_SAFETENSORS[plan.dtype], "shape": list(plan.shape),
                             "data_offsets": [offset, offset + size]}
        offset += size
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(header_bytes)))
        file.write(header_bytes)
        for plan in plans:
            tensor = plan.produce()
            if tuple(tensor.shape) != tuple(plan.shape):
                source = f" (from {plan.origin})" if plan.origin else ""
                raise ConversionError(
                    f"{plan.name}{source} has shape {list(tensor.shape)}, the model expects {list(plan.shape)}."
                )
            data = tensor.detach().to(device="cpu", dtype=plan.dtype).contiguous().reshape(-1)
            if data.numel():
                file.write(data.view(torch.uint8).numpy().data)
            del tensor, data


__all__ = ["TensorPlan", "atomic_output_dir", "check_output_dir", "write_safetensors"]
