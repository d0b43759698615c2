"""Checks on files that come from, or leave for, somewhere else: what uploads must not carry (links out of the
folder, pickles by content whatever their names), what a refused pickle is told as, how much a card's YAML
may expand, and the JSON files a folder holds (`read_json`: named when cut off or of another kind).

Pickle is decided by content, never by name: protocol 2+ pickles start with the PROTO opcode (0x80); protocol
0/1 pickles are recognised by parsing them with `pickletools` (which reads opcodes and runs nothing): a small file
that parses whole, or a start that parses up to a code-calling opcode; torch.save's zip holds a `data.pkl`; a
numpy `.npy`/`.npz` array of dtype object is a pickle; gzip/bz2/xz/zlib streams (joblib's compressed dumps) are
opened and looked into.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
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
from typing import Any

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


# The JSON name of each kind of value json.loads returns.
JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


def json_kind(value: Any) -> str:
    """What a JSON value is, in a message: `a JSON array`, `null`."""
    return "null" if value is None else f"a JSON {JSON_KINDS.get(type(value), type(value).__name__)}"


def read_json(
    path: Path, expected: type = dict, what: str = "an object", advice: str = "", error: type[Exception] = ValueError
) -> Any:
    """The JSON value of a folder's file `path`, which must be of `expected` type (`what` in the message); an
    `error` naming the file when it is not JSON (cut off, not UTF-8) or holds another kind of value, ending with
    `advice` (what to do)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as problem:
        raise error(f"{path} is not JSON ({problem}); {advice}") from None
    if not isinstance(value, expected) or (isinstance(value, bool) and expected is not bool):
        raise error(f"{path} holds {json_kind(value)}, not {what}; {advice}")
    return value


class UnsafeFileError(ValueError):
    """A file that must not be uploaded or loaded as it is; the message names it and says why."""


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


def link_problem(path: Path, folder: Path) -> str | None:
    """Why the symlink `path` inside `folder` must not be uploaded (None when it names a regular file inside
    `folder`, which is then uploaded as a copy of that file)."""
    target = os.readlink(path)
    resolved = path.resolve()
    root = folder.resolve()
    if not resolved.is_relative_to(root):
        return f"links to {target}, outside the folder"
    if not resolved.is_file():
        return f"links to {target}, which is not a file (only links to files inside the folder are copied)"
    return None


def reading_roots(folder: str | os.PathLike) -> list[Path]:
    """Where the files of `folder` may lie once links are followed: inside the folder and, for a snapshot of the
    Hugging Face cache (`.../snapshots/REVISION`, whose files are links to the repository's `blobs/`), that
    repository's blobs."""
    root = Path(folder).resolve()
    blobs = root.parent.parent / "blobs"
    return [root, blobs] if root.parent.name == "snapshots" and blobs.is_dir() else [root]


def confined_path(folder: str | os.PathLike, name: str, what: str, within: str = "") -> Path:
    """`folder / name` for a path that a folder's own file names (`what`: the field naming it, or "the file"), when
    `name` is relative, stays inside the folder and, links followed, lies in its `reading_roots`; an UnsafeFileError
    naming the folder, `what` and the path otherwise, so a tampered folder cannot make a reader load a file from
    elsewhere on the machine. `within`: the subfolder `name` is relative to (an ONNX graph's external data)."""
    folder = Path(folder)
    normal = os.path.normpath(os.path.join(within, name))
    if os.path.isabs(name) or normal == ".." or normal.startswith(".." + os.sep):
        where = "an absolute path" if os.path.isabs(name) else "a path out of the folder"
        raise UnsafeFileError(
            f"{folder}: {what} is {name!r}, {where}; a folder's files may name only files inside it: fix or "
            "remove that entry, or export the model again"
        )
    path = folder / normal
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in reading_roots(folder)):
        raise UnsafeFileError(
            f"{folder}: {what} {name!r} links to {resolved}, outside the folder; replace the link with a copy of "
            "the file it should hold"
        )
    return path


def links_leaving(folder: str | os.PathLike) -> dict[str, str]:
    """The symbolic links under `folder` (linked folders not entered) that resolve outside its `reading_roots`:
    relative POSIX path -> where the link points."""
    folder = Path(folder)
    roots = reading_roots(folder)
    leaving = {}
    for root, directories, names in os.walk(folder):  # os.walk does not descend into linked folders
        for name in sorted([*directories, *names]):
            path = Path(root) / name
            if path.is_symlink() and not any(path.resolve().is_relative_to(top) for top in roots):
                leaving[path.relative_to(folder).as_posix()] = os.readlink(path)
    return leaving


def folder_files(folder: str | os.PathLike, skip=lambda relative: False) -> list[str]:
    """The files under `folder` (relative POSIX paths, links to files inside it included), without following a
    link out of it; an UnsafeFileError naming every symbolic link that points outside or at a folder, and every
    hard link whose file has names outside the folder (its content is a file from elsewhere). `skip(relative)`
    leaves out paths (and what is under them) before they are looked at."""
    folder = Path(folder)
    files, problems = [], []
    names_of_file: dict[tuple[int, int], list[str]] = {}  # (device, inode) of each file with several names
    for root, directories, names in os.walk(folder):  # os.walk does not descend into linked folders
        base = Path(root)
        for name in sorted([*directories, *names]):
            path = base / name
            relative = path.relative_to(folder).as_posix()
            if skip(relative):
                if name in directories:
                    directories.remove(name)
                continue
            if path.is_symlink():
                problem = link_problem(path, folder)
                if problem:
                    problems.append(f"{relative} {problem}")
                else:
                    files.append(relative)
            elif name in names and path.is_file():
                files.append(relative)
                status = path.stat()
                if status.st_nlink > 1:
                    names_of_file.setdefault((status.st_dev, status.st_ino), []).append(relative)
    for inside in names_of_file.values():
        outside = os.stat(folder / inside[0]).st_nlink - len(inside)
        if outside > 0:
            problems.append(
                f"{inside[0]} is a hard link: the same file has {outside} other name"
                f"{'s' if outside > 1 else ''} outside the folder"
            )
    if problems:
        raise UnsafeFileError(
            f"{folder} holds symbolic links or hard links that would upload files from outside it or folders twice "
            f"({'; '.join(problems)}); replace each link with a copy of the file it should hold, then push again."
        )
    return sorted(files)


def check_upload_sources(sources: Iterable[tuple[str, Path]], roots: Iterable[Path]) -> None:
    """Last check before anything leaves the machine: each (name in the repo, local file) must be a regular file
    inside one of `roots` once links are resolved, and no pickle by content; an UnsafeFileError naming each
    offending file and why, otherwise."""
    roots = [Path(root).resolve() for root in roots]
    problems = []
    for name, local in sources:
        resolved = Path(local).resolve()
        if not any(resolved.is_relative_to(root) for root in roots):
            problems.append(f"{name} would upload {resolved}, which is outside the folder")
        elif not resolved.is_file():
            problems.append(f"{name} is not a regular file")
        else:
            reason = pickle_reason(resolved)
            if reason:
                problems.append(f"{name} is a pickle: {reason}")
    if problems:
        raise UnsafeFileError(
            f"refusing to upload: {'; '.join(problems)}. Pickles run code when loaded, so they never go up: keep the "
            "weights in .safetensors files and remove the other files (or export them as JSON)."
        )


# A model card's metadata: at most this many YAML values once aliases are expanded, and this many characters.
# Real cards hold hundreds of values; an alias "bomb" of a few lines expands to billions.
CARD_METADATA_VALUES = 100_000
CARD_METADATA_CHARS = 2**20


def _expanded_size(node, sizes: dict, open_nodes: set) -> int:
    """How many values the YAML node stands for once every alias is expanded (each shared node counted once per
    use, computed once); a node that contains itself counts as unbounded."""
    import yaml

    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        return CARD_METADATA_VALUES + 1
    open_nodes.add(key)
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    else:
        children = []
    total = 1
    for child in children:
        total += _expanded_size(child, sizes, open_nodes)
        if total > CARD_METADATA_VALUES:
            break
    open_nodes.discard(key)
    sizes[key] = total
    return total


def check_card_metadata(text: str, source: str | os.PathLike = "the model card") -> None:
    """Refuse a card whose YAML metadata would expand beyond `CARD_METADATA_VALUES` values through aliases
    (`&anchor` / `*anchor`, the "billion laughs" of YAML) or is longer than `CARD_METADATA_CHARS`: reading it
    would take the machine's memory. The YAML is composed into its node graph, where an alias is one shared node,
    so checking costs no more than the text's length."""
    import yaml
    from huggingface_hub.repocard import REGEX_YAML_BLOCK

    match = REGEX_YAML_BLOCK.search(text)
    if match is None:
        return
    block = match.group(2)
    if len(block) > CARD_METADATA_CHARS:
        raise UnsafeFileError(
            f"{source}: its YAML metadata is {len(block):,} characters long, more than the "
            f"{CARD_METADATA_CHARS:,} a model card needs; shorten it."
        )
    try:
        root = yaml.compose(block, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return  # a syntax error is for the card reader to report
    if root is not None and _expanded_size(root, {}, set()) > CARD_METADATA_VALUES:
        raise UnsafeFileError(
            f"{source}: its YAML metadata expands through aliases (&name / *name) to more than "
            f"{CARD_METADATA_VALUES:,} values, which would take this machine's memory; write the metadata out "
            "without aliases."
        )


class CardMetadataError(ValueError):
    """A model card whose YAML metadata (between its `---` lines) does not parse, or is not UTF-8."""


def load_model_card(path: str | os.PathLike, **options):
    """huggingface_hub's `ModelCard` of the local file `path`, once `check_card_metadata` found it safe to read;
    a CardMetadataError naming the file and the line where its metadata does not parse."""
    import yaml
    from huggingface_hub import ModelCard

    try:
        with open(path, encoding="utf-8", newline="") as file:
            text = file.read()
    except UnicodeDecodeError as error:
        raise CardMetadataError(
            f"{path} is not UTF-8 text ({error}); save the model card as UTF-8 or remove it"
        ) from None
    check_card_metadata(text, path)
    try:
        return ModelCard(text, **options)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = (
            f" (line {mark.line + 2}, column {mark.column + 1}: {error.problem})"
            if mark is not None and getattr(error, "problem", None)
            else ""
        )
        raise CardMetadataError(
            f"{path}: its YAML metadata does not parse{where}; fix the lines between its --- "
            "markers, or remove the card"
        ) from None


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


__all__ = [
    "CARD_METADATA_CHARS",
    "CARD_METADATA_VALUES",
    "JSON_KINDS",
    "CardMetadataError",
    "RefusedPickleError",
    "UnsafeFileError",
    "check_card_metadata",
    "check_upload_sources",
    "confined_path",
    "folder_files",
    "json_kind",
    "link_problem",
    "links_leaving",
    "load_model_card",
    "pickle_reason",
    "pickle_reason_in_bytes",
    "read_json",
    "reading_roots",
    "refused_content",
    "refused_pickle_message",
]
