"""A folder's files as what leaves or is read from it: which files a folder holds (`folder_files`: none behind a
link out of it), names confined to the folder (`confined_path`), and the last check of what an upload sends
(`check_upload_sources`: inside its roots, no pickle). `UnsafeFileError` is the refusal of all of them.

Pickles by content are `safety.pickles`, JSON files `safety.json_files`, a card's metadata `safety.card_metadata`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from hf_minitf.safety.pickles import pickle_reason


class UnsafeFileError(ValueError):
    """A file that must not be uploaded or loaded as it is; the message names it and says why."""


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


def folder_for_writing(folder: Path, relative: str) -> Path:
    """`folder / relative` for a file the package writes into a model folder, its parent folders made inside it: a
    parent that is a link (out of the folder or not) is replaced by a real folder, never followed; a `relative`
    that is absolute or climbs out is refused (the package names its own files, so that is a bug, not bad input).
    The file itself may be a link: `write_files_together` renames over it, which replaces the link."""
    normal = os.path.normpath(relative)
    if os.path.isabs(relative) or normal == ".." or normal.startswith(".." + os.sep):
        raise ValueError(f"{relative!r} is not a path inside {folder}")
    parent = folder
    for part in Path(normal).parts[:-1]:
        parent = parent / part
        if parent.is_symlink():
            parent.unlink()
        parent.mkdir(exist_ok=True)
    return folder / normal


def write_files_together(folder: str | os.PathLike, texts: dict[str, str]) -> list[Path]:
    """Write the files `texts` (path relative to `folder` -> text) into the model folder `folder` as one change:
    each written beside its place under a temporary name first, then all renamed over their places, each previous
    file kept (hard-linked) aside until every one is in place. A failure at any point puts the previous files back
    and leaves no temporary file: every file is new, or none is (a kill can fall only between two renames). A link
    at a file's place, at a parent folder or at a temporary name is replaced, never followed (`folder_for_writing`),
    so a downloaded folder cannot make a write land elsewhere. Returns the paths written."""
    folder = Path(folder)
    pid = os.getpid()
    staged: list[tuple[Path, Path]] = []
    kept: list[tuple[Path, Path | None]] = []
    try:
        for relative, text in texts.items():
            path = folder_for_writing(folder, relative)
            temporary = path.with_name(f".{path.name}.writing-{pid}")
            temporary.unlink(missing_ok=True)  # a link planted under this name is removed, not written through
            staged.append((path, temporary))
            with open(temporary, "x", encoding="utf-8", newline="") as handle:  # "x": made here, never via a link
                handle.write(text)
        for path, temporary in staged:
            previous = None
            if path.is_symlink() or path.exists():
                previous = path.with_name(f".{path.name}.previous-{pid}")
                previous.unlink(missing_ok=True)
                try:
                    os.link(path, previous, follow_symlinks=False)
                except OSError:  # a file system without hard links: a copy (a link copied as a link)
                    shutil.copy2(path, previous, follow_symlinks=False)
            kept.append((path, previous))
            os.replace(temporary, path)
    except BaseException:
        for path, previous in reversed(kept):
            if previous is None:
                path.unlink(missing_ok=True)
            elif os.path.lexists(path) and os.path.samestat(os.lstat(path), os.lstat(previous)):
                previous.unlink()  # not replaced yet (renaming a file's link over another is a no-op: removed)
            else:
                os.replace(previous, path)
        for _, temporary in staged:
            temporary.unlink(missing_ok=True)
        raise
    for _, previous in kept:
        if previous is not None:
            previous.unlink(missing_ok=True)
    return [path for path, _ in staged]


__all__ = [
    "UnsafeFileError",
    "check_upload_sources",
    "confined_path",
    "folder_files",
    "folder_for_writing",
    "link_problem",
    "links_leaving",
    "reading_roots",
    "write_files_together",
]
