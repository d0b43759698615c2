"""Write conversion results: an output folder that appears whole or not at all, and a safetensors file
written one tensor at a time (peak memory: about one tensor, not one model)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from .checkpoint import ConversionError, check_weight

logger = logging.getLogger(__name__)

TORCH_TO_SAFETENSORS = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
    torch.bool: "BOOL",
}


# Work and trash folders beside `out`: `.NAME.converting-PID-XXXXXXXX` (the new folder being written) and
# `.NAME.old-PID-XXXXXXXX` (the previous folder while it is being replaced). PID is the writing process, so a
# later run can tell the leftovers of a killed run (its process is gone) from a run still in progress.
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>converting|old)-(?:(?P<pid>\d+)-)?[0-9a-f]{8}")


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def check_output_dir(out: str | Path, overwrite: bool, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Refuse, before any work, an output path that is a file or a non-empty folder (unless `overwrite`),
    or that equals or contains one of the `inputs` or the current folder (replacing it would delete them)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConversionError(f"--out {out} exists and is not a folder; choose a folder path.")
    target = _resolved(out)
    for path in inputs:
        if path is None or not Path(path).exists():
            continue
        source = _resolved(path)
        if source == target or source.is_relative_to(target):
            raise ConversionError(
                f"--out {out} {'is' if source == target else 'holds'} the input {path}: writing there would delete "
                "it. Choose an --out folder outside the input's folder."
            )
    if Path.cwd().resolve().is_relative_to(target) and out.is_dir():
        raise ConversionError(f"--out {out} is or holds the current folder, which replacing it would delete; "
                              "choose a folder beside it or inside it.")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ConversionError(f"--out {out} is not empty; choose another folder or pass --overwrite to replace it.")
    return out


def existing_paths(*values) -> list[Path]:
    """The values (or items of list values) that name existing files or folders: what an output must not hold."""
    flat = [item for value in values for item in (value if isinstance(value, (list, tuple)) else [value])]
    return [Path(item) for item in flat if isinstance(item, (str, Path)) and item and Path(item).exists()]


def input_paths(args: argparse.Namespace) -> list[Path]:
    """The existing files and folders a command's options name, other than --out: what --out must not hold."""
    return existing_paths(*(value for key, value in vars(args).items() if key != "out"))


def _process_alive(pid: int | None) -> bool:
    """Whether the process that made a leftover folder may still be writing it (unknown: assume not, for
    folders named before the PID was part of the name; non-POSIX systems: assume it is)."""
    if pid is None:
        return False
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_leftovers(out: str | Path) -> list[str]:
    """Remove what killed earlier runs left beside `out`, and restore a previous folder a run was replacing
    when it died (`out` missing, its `.old-` copy present). Returns one line per action, for the user."""
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return []
    actions = []
    for leftover in sorted(out.parent.iterdir()):
        match = _LEFTOVER.fullmatch(leftover.name)
        if not match or match["name"] != out.name or not leftover.is_dir():
            continue
        if _process_alive(int(match["pid"]) if match["pid"] else None):
            continue
        if match["kind"] == "old" and not out.exists():
            os.replace(leftover, out)
            actions.append(f"restored {out} from {leftover.name}, left by an interrupted earlier run")
        else:
            shutil.rmtree(leftover, ignore_errors=True)
            actions.append(f"removed {leftover}, left by an interrupted earlier run")
    for action in actions:
        logger.warning(action)
    return actions


@contextmanager
def atomic_output_dir(out: str | Path, overwrite: bool = False,
                      inputs: Iterable[str | Path | None] = ()) -> Iterator[Path]:
    """Yield a temporary sibling folder of `out`; on success it replaces `out`, on any error it is removed.

    So an interrupted or failed conversion never leaves a partial folder at `out`, and an existing
    folder (with `overwrite`) is only replaced once the new one is complete. Leftovers of runs killed
    earlier (kill -9, power loss) are removed first (`clean_stale_leftovers`), with a warning that says so.
    """
    inputs = list(inputs)
    clean_stale_leftovers(out)
    out = check_output_dir(out, overwrite, inputs).absolute()
    created = [parent for parent in out.parents if not parent.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    work = out.parent / f".{out.name}.converting-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        work.mkdir()
        yield work
        check_output_dir(out, overwrite, inputs)
        trash = None
        if out.exists():
            trash = out.parent / f".{out.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
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
            data = cast_for_output(tensor, plan.dtype, plan.label).contiguous().reshape(-1)
            if data.numel():
                file.write(data.view(torch.uint8).numpy().data)
            del tensor, data


__all__ = [
    "TensorPlan", "atomic_output_dir", "cast_for_output", "check_output_dir", "clean_stale_leftovers", "input_paths",
    "write_safetensors",
]
