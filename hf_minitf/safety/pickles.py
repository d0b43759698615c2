"""Pickles found by content, never by name, and how a refused one is told.

Protocol 2+ pickles start with the PROTO opcode (0x80); protocol 0/1 pickles are recognised by parsing them with
`pickletools` (which reads opcodes and runs nothing): a small file that parses whole, or a start that parses up to
a code-calling opcode; torch.save's zip holds a `data.pkl`; a numpy `.npy`/`.npz` array of dtype object is a
pickle; gzip/bz2/xz/zlib streams (joblib's compressed dumps) are opened and looked into. A file torch's
weights-only loader refused is named without torch's advice to load it unrestricted (`refused_pickle_message`).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pickle
import pickletools
import re
import warnings
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

HEAD_BYTES = 4096


# Files up to this size are parsed whole; of larger ones only the head is (a protocol 0/1 pickle of real weights
# is rare, and one that calls code does so within its first opcodes).
FULL_PARSE_BYTES = 4 * 2**20


ZIP_MEMBERS_CHECKED = 10_000


# Opcodes through which a pickle calls code: a head that parses as opcodes and uses one of them is a pickle.
_CODE_OPCODES = (" GLOBAL ", " STACK_GLOBAL", " INST ", " OBJ", " REDUCE", " BUILD", " NEWOBJ")


# How `pickletools` says that the data ended inside a pickle (rather than that it is no pickle).
_CUT_SHORT = ("exhausted before seeing STOP", "but only", "no newline found", "not enough data")


_COMPRESSED = ((b"\x1f\x8b", "gzip", gzip.open), (b"BZh", "bz2", bz2.open), (b"\xfd7zXZ\x00", "xz", lzma.open))


_NUMPY_MAGIC = b"\x93NUMPY"


class RefusedPickleError(pickle.UnpicklingError, ValueError):
    """torch's weights-only unpickler refused a file; the message names it, without torch's unsafe advice."""


def _numpy_object_array(head: bytes) -> bool:
    """Whether the start of an `.npy` file declares an object (pickled) dtype."""
    import numpy as np

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy's note on headers that Python 2 wrote
            stream = io.BytesIO(head)
            version = np.lib.format.read_magic(stream)
            header = (
                np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            )(stream)
    except Exception:  # a header cut short or malformed: not an array numpy would load
        return False
    return header[2].hasobject


def _parses_as_pickle(data: bytes, complete: bool, needs_code: bool = True) -> bool:
    """Whether `data` is a pickle opcode stream that keeps its stack and memo consistent (parsed by `pickletools`,
    never run): whole when `complete`; else a start that is cut off only by its end and, with `needs_code`, uses
    a code-calling opcode (GLOBAL, REDUCE, ...) on the way."""
    listing = io.StringIO()
    try:
        pickletools.dis(data, out=listing)
    except Exception as error:
        cut_short = any(text in str(error) for text in _CUT_SHORT)
        return (
            not complete and cut_short and (not needs_code or any(name in listing.getvalue() for name in _CODE_OPCODES))
        )
    return True


def pickle_reason_in_bytes(data: bytes, complete: bool) -> str | None:
    """Why `data` (the whole content when `complete`, else its start) is a pickle, or None."""
    if (
        data[:1] == b"\x80"
        and data[1:2]
        and 2 <= data[1] <= 5
        and _parses_as_pickle(data[:HEAD_BYTES], complete=complete and len(data) <= HEAD_BYTES, needs_code=False)
    ):
        # (a safetensors header of 640 bytes also starts with 0x80 0x02, but does not parse on as a pickle)
        return f"it starts with the pickle protocol {data[1]} opcode (0x80)"
    if data.startswith(_NUMPY_MAGIC):
        return (
            "it is a numpy array of Python objects, which numpy stores as a pickle"
            if _numpy_object_array(data)
            else None
        )
    for magic, name, opener in _COMPRESSED:
        if data.startswith(magic):
            reason = pickle_reason_in_bytes(_decompressed_head(data, opener), complete=False)
            return f"it is a {name}-compressed pickle ({reason})" if reason else None
    if data[:1] == b"\x78" and len(data) > 1 and (data[0] * 256 + data[1]) % 31 == 0:  # a zlib header
        reason = pickle_reason_in_bytes(_decompressed_head(data, None), complete=False)
        if reason:
            return f"it is a zlib-compressed pickle ({reason})"
    if complete and data.rstrip()[-1:] == b"." and _parses_as_pickle(data.rstrip(), complete=True):
        return "it parses as a protocol 0/1 pickle"
    if not complete and _parses_as_pickle(data[:HEAD_BYTES], complete=False):
        return "it starts as a protocol 0/1 pickle that calls code (a GLOBAL/REDUCE opcode)"
    return None


def _decompressed_head(data: bytes, opener) -> bytes:
    """The first bytes of a compressed stream (`opener`: gzip/bz2/lzma's `open`, None for zlib)."""
    try:
        if opener is None:
            return zlib.decompressobj().decompress(data, HEAD_BYTES)
        with opener(io.BytesIO(data)) as stream:
            return stream.read(HEAD_BYTES)
    except Exception:  # cut short (only the head was read) or not really compressed
        return b""


def _zip_pickle_reason(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            for number, info in enumerate(archive.infolist()):
                if number >= ZIP_MEMBERS_CHECKED:
                    return f"it is a zip of more than {ZIP_MEMBERS_CHECKED} entries, too many to check"
                if info.filename.endswith(".pkl"):
                    return f"it is a zip holding the pickle {info.filename} (torch.save's format)"
                with archive.open(info) as member:
                    head = member.read(HEAD_BYTES)
                reason = pickle_reason_in_bytes(head, complete=info.file_size <= HEAD_BYTES)
                if reason:
                    return f"it is a zip whose entry {info.filename} is a pickle: {reason}"
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError, EOFError):
        return None
    return None


def pickle_reason(path: str | os.PathLike) -> str | None:
    """Why the file at `path` is (or holds) a pickle, which runs code when loaded; None when it is not one."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as file:
        data = file.read(FULL_PARSE_BYTES if size <= FULL_PARSE_BYTES else HEAD_BYTES)
    if data.startswith(b"PK\x03\x04") or data.startswith(b"PK\x05\x06"):
        return _zip_pickle_reason(path)
    return pickle_reason_in_bytes(data, complete=size <= FULL_PARSE_BYTES)


def _pickle_files(places: Iterable[str | os.PathLike | None]) -> list[Path]:
    found = []
    for place in places:
        if place is None or not Path(place).exists():
            continue
        place = Path(place)
        candidates = [place] if place.is_file() else sorted(p for p in place.rglob("*") if p.is_file())
        found += [path for path in candidates[:1000] if pickle_reason(path)]
    return found


# Lines of torch's refusal that advise loading the file unrestricted, or point at its documentation.
_TORCH_ADVICE = re.compile(r"weights_only|Weights only load failed|file an issue|Check the documentation", re.I)


def refused_content(error: BaseException) -> str:
    """What torch's weights-only unpickler refused, from its error, without torch's advice to load the file with
    `weights_only=False` (which would run the code): "a pickled reference to `posix.system`", or torch's reason."""
    text = str(error)
    found = re.search(r"GLOBAL ([\w.]+)", text) or re.search(r"unrecognized function (\S+)", text)
    if found:
        return f"a pickled reference to `{found.group(1)}`"
    reasons = [line.strip() for line in text.splitlines() if line.strip() and not _TORCH_ADVICE.search(line)]
    return (
        f"pickled content other than tensors ({reasons[-1][:200]})" if reasons else "pickled content other than tensors"
    )


def refused_pickle_message(error: BaseException, places: Iterable[str | os.PathLike | None]) -> str:
    """What to say when torch's weights-only unpickler refused a file: which file (looked for among the pickle
    files in `places`), that it holds code (naming the pickled reference), and what to do instead. Never
    suggests loading it without `weights_only`."""
    if isinstance(error, RefusedPickleError):
        return str(error)
    what = refused_content(error)
    candidates = _pickle_files(places)
    culprit = _refused_file(candidates)
    named = culprit or ("one of " + ", ".join(map(str, candidates)) if candidates else "a pickle file")
    return (
        f"refused to load {named}: it holds {what}, that is code which would run on this machine; nothing of "
        "it was run. Use weights saved as safetensors (or a checkpoint you wrote yourself), not this file."
    )


def _refused_file(candidates: list[Path]) -> Path | None:
    """The first of `candidates` that torch's weights-only unpickler refuses."""
    import torch

    for path in candidates:
        try:
            torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
        except pickle.UnpicklingError:
            return path
        except Exception:  # unreadable for another reason: not the file that was refused
            continue
    return None


__all__ = ["RefusedPickleError", "pickle_reason", "pickle_reason_in_bytes", "refused_content", "refused_pickle_message"]
