"""GGUF files as the package reads them from a folder it did not write: the gguf package's reader, whose errors on
a damaged file ("Sorry, file appears to be version 3146747232 which we cannot handle", "None is not a valid
LlamaFileType") become one message naming the file and what to do."""

from __future__ import annotations

import os
from typing import Any


class GGUFReadError(ValueError):
    """A file that is not a GGUF file the package can read; the message names it."""


def _refusal(path: str | os.PathLike, what: str) -> GGUFReadError:
    return GGUFReadError(
        f"{path} is not a GGUF file the package can read ({what}); export the model to GGUF again "
        "(minitf export gguf) or give the file it wrote"
    )


def read_gguf(path: str | os.PathLike) -> Any:
    """The gguf package's `GGUFReader` of `path`; a GGUFReadError naming the file when it cannot read it."""
    from gguf import GGUFReader

    try:
        return GGUFReader(str(path))
    except (ValueError, KeyError, IndexError, TypeError, OverflowError, MemoryError) as error:
        raise _refusal(path, f"{type(error).__name__}: {error}") from None


def gguf_file_type(path: str | os.PathLike, reader: Any) -> str:
    """The file's precision as llama.cpp names it (f32, f16, q8_0, ...), from its `general.file_type`."""
    from gguf import LlamaFileType

    field = reader.get_field("general.file_type")
    value = None if field is None else field.contents()
    if not isinstance(value, int) or value not in {file_type.value for file_type in LlamaFileType}:
        raise _refusal(path, f"general.file_type is {value!r}, not one of llama.cpp's file types")
    file_type = LlamaFileType(value)
    return file_type.name.removeprefix("ALL_").removeprefix("MOSTLY_").lower()


__all__ = ["GGUFReadError", "gguf_file_type", "read_gguf"]
