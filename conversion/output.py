"""Write converted weights: a safetensors file written one tensor at a time (peak memory: about one tensor, not
one model), each tensor checked against its plan and cast to the output dtype. The folder around it is written
whole by `hf_minitf.safety.output_folders`."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from hf_minitf.conversion.checkpoint import ConversionError, check_weight

TORCH_TO_SAFETENSORS = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def cast_for_output(tensor: torch.Tensor, dtype: torch.dtype, name: str) -> torch.Tensor:
    """`tensor` in `dtype`; an error naming the tensor when a finite value does not fit (float16 tops out at
    65504), rather than a file of inf weights, or when the tensor is no finite float weight (`check_weight`)."""
    check_weight(tensor, dtype, name)
    cast = tensor.detach().to(device="cpu", dtype=dtype)
    if cast.is_floating_point() and tensor.is_floating_point() and tensor.dtype != dtype:
        overflow = torch.isinf(cast) & torch.isfinite(tensor.detach().cpu())
        if overflow.any():
            largest = tensor.detach().abs().max().item()
            raise ConversionError(
                f"{name} has values up to {largest:.4g}, beyond {str(dtype).removeprefix('torch.')}'s range "
                f"(largest {torch.finfo(dtype).max:.4g}): {int(overflow.sum())} of its values would become inf. "
                "Choose --dtype bfloat16 or float32."
            )
    return cast


@dataclass
class TensorPlan:
    """One tensor of an output file: its name, expected shape and dtype, and how to produce it."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    produce: Callable[[], torch.Tensor]
    origin: str = ""

    @property
    def label(self) -> str:
        """The tensor as messages name it: its name and, when known, the original tensor it comes from."""
        return f"{self.name} (from {self.origin})" if self.origin else self.name


def write_safetensors(path: str | Path, plans: Sequence[TensorPlan], metadata: dict[str, str] | None = None) -> None:
    """Write a safetensors file tensor by tensor: the header comes from the plans' shapes and dtypes, then
    each tensor is produced, checked against its plan, cast, written and dropped."""
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for plan in plans:
        if plan.dtype not in TORCH_TO_SAFETENSORS:
            raise ConversionError(f"Cannot write {plan.name} with dtype {plan.dtype}.")
        size = torch.Size(plan.shape).numel() * torch.empty((), dtype=plan.dtype).element_size()
        header[plan.name] = {
            "dtype": TORCH_TO_SAFETENSORS[plan.dtype],
            "shape": list(plan.shape),
            "data_offsets": [offset, offset + size],
        }
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
            data = cast_for_output(tensor, plan.dtype, plan.label).contiguous().reshape(-1)
            if data.numel():
                file.write(data.view(torch.uint8).numpy().data)
            del tensor, data


__all__ = ["TensorPlan", "cast_for_output", "write_safetensors"]
