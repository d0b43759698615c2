"""Output folders that appear whole or not at all, for every writer of the package (training, conversion, the
sentence-transformers export, the quickstart).

`OutputFolder(out, overwrite, inputs)` checks the target once, before any work: not a file, not a symbolic link
(replacing a link would put a folder where the link was and leave the folder it points to as it was; give that
folder itself), inside a folder, empty unless `overwrite`, and with `overwrite` a model folder (`replace_refusal`:
`overwrite` replaces a model this package or the Hub wrote, never a project checkout or a home directory), not
one of the `inputs` (or a folder holding one) nor the current folder, since replacing it would delete them. Its
`write()` yields a work folder beside `out` that replaces `out` once the block succeeds and is removed on any
error, so an interrupted or failed write never leaves a partial folder and an existing folder is only replaced by
a complete one: in one atomic swap where the system has one (Linux's `renameat2(RENAME_EXCHANGE)`), so a process
reading `out` meanwhile never finds it missing, else in two renames. Leftovers of runs killed earlier (kill -9,
power loss) are cleaned up first. `atomic_output_dir(out, overwrite, inputs)` does both in one step;
`check_output_file` checks an output file (a GGUF) the same way.

The check also makes and removes a folder where the output's work folder will go, so an output that cannot be
written (read-only, no permission: mode bits, ACLs and read-only mounts alike, for root too) is refused before the
work, not after it; `space_refusal` compares a lower bound of what a writer will write with the free space.

Errors are `OutputFolderError`s worded for Python callers (`overwrite=True`); a command line words them for
its options with `worded("--out", "--overwrite")`. A write that fails because the disk is full (ENOSPC, whichever
writer met it) becomes an `OutputDiskFull`, an OSError naming the output folder and saying nothing was written;
`DiskFull` is the same for the other folders a writer fills (a temporary folder, training checkpoints).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import logging
import os
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

logger = logging.getLogger(__name__)

# Work and trash folders beside `out`: `.NAME.writing-PID-XXXXXXXX` (the new folder being written) and
# `.NAME.old-PID-XXXXXXXX` (the previous folder while it is being replaced). PID is the writing process, so a
# later run can tell the leftovers of a killed run (its process is gone) from a run still in progress. Work
# folders named `converting` instead of `writing`, or without a PID, were made by earlier versions.
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<kind>writing|converting|old)-(?:(?P<pid>\d+)-)?[0-9a-f]{8}")


class OutputFolderError(ValueError):
    """An output folder that cannot be written as asked. The message names the folder as `{out} PATH` and the
    option that allows replacing it as `{overwrite}`, so each caller words it its own way (`worded`)."""

    def __init__(self, template: str, path: str | Path, what: str = "the output folder") -> None:
        self.template, self.path = template, Path(path)
        super().__init__(self.worded(what, "overwrite=True"))

    def worded(self, out: str, overwrite: str) -> str:
        """The message with the output folder called `out` and the replacing option `overwrite`, for example
        `worded("--out", "--overwrite")` on a command line."""
        return self.template.format(out=f"{out} {self.path}", overwrite=overwrite)


class DiskFull(OSError):
    """A write failed because the disk holding `path` is full: an OSError with errno ENOSPC, as the write's own (its
    cause), whose message names the folder and what to do."""

    def __init__(self, message: str, path: str | Path) -> None:
        self.path = Path(path)
        super().__init__(errno.ENOSPC, message, str(path))

    def __str__(self) -> str:
        return str(self.strerror)


class OutputDiskFull(DiskFull):
    """Writing an output folder (or file: `what`) failed because its disk is full, saying that nothing was written
    (the work folder is gone, a previous output is as it was). The message names the output as `worded` does, so a
    command line says `OUT PATH`."""

    def __init__(self, path: str | Path, what: str = "the output folder") -> None:
        self.path = Path(path)
        super().__init__(self.worded(what), path)

    def worded(self, out: str) -> str:
        return (
            f"the disk is full ({os.strerror(errno.ENOSPC)}): nothing was written to {out} {self.path}; free some "
            "space there and run again"
        )


# numpy's `tofile` (ONNX and GGUF weight writers) reports a short write, which on a regular file means the disk is
# full, as `OSError("49152 requested and 464 written")`, with no errno.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


# torch.save's zip writer reports a failed write as a RuntimeError of its C++ code, with no errno
# (`[enforce fail at inline_container.cc:672] . unexpected pos 1801920 vs 1801808` on a full disk).
_TORCH_WRITER = "inline_container.cc"
NEARLY_FULL = 1 << 20
"""Free bytes below which a disk counts as full when a writer's error does not say why it failed (1 MiB)."""


def nearest_existing(path: str | os.PathLike) -> Path:
    """`path` (made absolute) if it exists, else its nearest existing parent."""
    path = Path(path).absolute()
    return next((candidate for candidate in (path, *path.parents) if os.path.lexists(candidate)), Path(path.anchor))


def disk_full(error: BaseException, folder: str | os.PathLike | None = None) -> bool:
    """Whether `error` says the disk is full: an OSError with errno ENOSPC, numpy's short write, or the error of a
    Rust-backed writer (safetensors' SafetensorError, tokenizers' bare Exception) holding the system's words for it;
    with the `folder` written, also torch.save's failed write when that folder's disk has under 1 MiB free."""
    if isinstance(error, OSError):
        return error.errno == errno.ENOSPC or bool(_SHORT_WRITE.fullmatch(str(error)))
    if isinstance(error, RuntimeError) and _TORCH_WRITER in str(error) and folder is not None:
        return shutil.disk_usage(nearest_existing(folder)).free < NEARLY_FULL
    rust_backed = type(error) is Exception or type(error).__name__ == "SafetensorError"
    return rust_backed and os.strerror(errno.ENOSPC) in str(error)


def size_text(count: float) -> str:
    """A number of bytes as people read it: `3.2 MiB`."""
    power = 0
    while count >= 1024 and power < 3:
        count, power = count / 1024, power + 1
    return f"{count:,.0f} bytes" if power == 0 else f"{count:,.1f} {('KiB', 'MiB', 'GiB')[power - 1]}"


def write_refusal(folder: str | os.PathLike, name: str) -> str | None:
    """Why nothing can be written in `folder` (or, where it does not exist yet, in its nearest existing parent, where
    it would be made), as a message template naming the output `{out}`; None when a new folder can be made there.
    Tried by making (and removing) a folder `.NAME.writing-PID-XXXXXXXX`, as a writer would: mode bits, ACLs and a
    read-only mount all refuse it, for root too, where `os.access` answers from the mode bits alone."""
    base = nearest_existing(folder)
    if not base.is_dir():
        return None  # a path under a file: `_path_refusal` names it
    probe = base / f".{name}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        return (
            f"{{out}} cannot be written: {_escaped(base)} refuses new files ({_escaped(reason)}); choose a folder "
            "you can write to."
        )
    probe.rmdir()
    return None


def working_folder_refusal(folder: str | os.PathLike) -> str | None:
    """Why `folder`, which a writer fills file by file (training checkpoints), cannot be made or written, as a
    message template naming it `{out}`; None when it can."""
    base = nearest_existing(folder)
    if not base.is_dir():
        return f"{{out}} cannot be made: {_escaped(base)} is not a folder; choose a folder path."
    return write_refusal(folder, Path(folder).name)


def weights_bytes(tensors: Iterable) -> int:
    """The bytes torch `tensors` (a model's `parameters()`: each shared tensor once) take: a lower bound of what a
    writer of their weights in their dtype writes."""
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


def space_refusal(folder: str | os.PathLike, needed: int, what: str) -> str | None:
    """Why the disk that will hold `folder` cannot take `needed` bytes (a lower bound of `what` will be written
    there), as a message template naming the folder `{out}`; None when it has that much free."""
    free = shutil.disk_usage(nearest_existing(folder)).free
    if free >= needed:
        return None
    return (
        f"{{out}} needs at least {size_text(needed)} for {_escaped(what)}, but its disk has {size_text(free)} free; "
        "free some space there or choose a folder on another disk."
    )


# Files that make a folder a model folder, as this package's writers and the Hub leave them: a transformers
# folder, a SentenceTransformer, a CTranslate2 or ONNX export, converted embedding weights, a training checkpoint.
MODEL_FILES = (
    "config.json",
    "modules.json",
    "config_sentence_transformers.json",
    "minitf_export.json",
    "embedding_config.json",
    "trainer_state.json",
)
# Entries no model folder holds: the files of a project checkout. Hidden entries (`.git`, `.venv`, a home's
# dotfiles) are refused too, except those the Hub and its clients leave in a model folder.
PROJECT_FILES = frozenset(
    {"pyproject.toml", "setup.py", "setup.cfg", "package.json", "Cargo.toml", "go.mod", "Makefile", "CMakeLists.txt"}
)
HIDDEN_IN_MODEL_FOLDERS = frozenset({".gitattributes", ".cache", ".huggingface", ".DS_Store"})


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def _escaped(text: object) -> str:
    """`text` safe inside a message template (`OutputFolderError` formats `{out}` and `{overwrite}`)."""
    return str(text).replace("{", "{{").replace("}", "}}")


def _listed(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return _escaped(shown)


def _holds_model_file(folder: Path) -> bool:
    return any((folder / name).is_file() for name in MODEL_FILES)


def replace_refusal(folder: Path) -> str | None:
    """Why `overwrite` must not replace the existing folder `folder` (a message template naming what it holds), or
    None for a model folder. The rule: a model folder holds one of MODEL_FILES, itself or in a subfolder (the
    quickstart's folder of three models, a checkpoint folder's `checkpoint-N`), and no project file (PROJECT_FILES)
    nor hidden entry other than HIDDEN_IN_MODEL_FOLDERS (so never a project checkout's `.git`, a home's dotfiles)."""
    entries = sorted(folder.iterdir(), key=lambda entry: entry.name)
    names = [entry.name + ("/" if entry.is_dir() else "") for entry in entries]
    foreign = [
        name
        for entry, name in zip(entries, names)
        if entry.name in PROJECT_FILES or (entry.name.startswith(".") and entry.name not in HIDDEN_IN_MODEL_FOLDERS)
    ]
    advice = "{overwrite} only replaces a model folder: choose another folder or delete it yourself."
    if foreign:
        return f"{{out}} holds {_listed(foreign)}, which no model folder holds; {advice}"
    if not (_holds_model_file(folder) or any(entry.is_dir() and _holds_model_file(entry) for entry in entries)):
        return f"{{out}} holds no model (found: {_listed(names)}); {advice}"
    return None


def _path_refusal(out: Path) -> str | None:
    """Why `out` cannot be an output path whatever it holds (a message template), or None: a symbolic link (the
    output would replace the link, not what it points to) or a path whose nearest existing parent is no folder."""
    if out.is_symlink():
        target = _escaped(os.readlink(out))
        if not out.exists():
            return (
                f"{{out}} is a symbolic link to {target}, which does not exist; remove the link or choose another path."
            )
        return (
            f"{{out}} is a symbolic link to {target}; give that path itself or another one: the output would "
            "replace the link, not what it points to."
        )
    for parent in out.absolute().parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                return f"{{out}} cannot be made: {_escaped(parent)} is not a folder; choose a path inside a folder."
            return None
    return None


def check_output_dir(out: str | os.PathLike, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Refuse an output path that is a file or a non-empty folder (unless `overwrite`), or that is or holds one
    of the `inputs` (files or folders, existing or to be made by the same run) or the current folder. Returns
    `out` as a Path."""
    out = Path(out)
    refusal = _path_refusal(out)
    if refusal is not None:
        raise OutputFolderError(refusal, out)
    target = _resolved(out)
    for path in inputs:
        if path is None:
            continue
        source = _resolved(path)
        if source == target or source.is_relative_to(target):
            relation = "is" if source == target else "holds"
            raise OutputFolderError(
                f"{{out}} {relation} the input {_escaped(path)}: writing there would delete it. Choose an output "
                "folder outside the input's folder.",
                out,
            )
    if out.exists() and not out.is_dir():
        raise OutputFolderError("{out} exists and is not a folder; choose a folder path.", out)
    if Path.cwd().resolve().is_relative_to(target) and out.is_dir():
        raise OutputFolderError(
            "{out} is or holds the current folder, which replacing it would delete; choose a "
            "folder beside it or inside it.",
            out,
        )
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise OutputFolderError("{out} is not empty; choose another folder or pass {overwrite} to replace it.", out)
        refusal = replace_refusal(out)
        if refusal is not None:
            raise OutputFolderError(refusal, out)
    refusal = write_refusal(out.absolute().parent, out.name)
    if refusal is not None:
        raise OutputFolderError(refusal, out)
    return out


def check_output_file(out: str | os.PathLike, overwrite: bool, magic: bytes, kind: str) -> Path:
    """Refuse an output file path that is a symbolic link, under a file, a folder, or an existing file unless
    `overwrite`, and with `overwrite` a file that is not a `kind` file (does not start with `magic`): `overwrite`
    replaces what such a writer wrote, nothing else. The partial files of killed earlier runs beside it are removed
    first (`clean_stale_leftovers`). Returns `out` as a Path."""
    out = Path(out)
    refusal = _path_refusal(out)
    if refusal is None and out.is_dir():
        refusal = f"{{out}} is a folder; give the path of the {kind} file to write."
    elif refusal is None and out.exists():
        if not overwrite:
            refusal = "{out} exists; choose another path or pass {overwrite} to replace it."
        else:
            with open(out, "rb") as file:
                if file.read(len(magic)) != magic:
                    refusal = (
                        f"{{out}} is not a {kind} file (it does not start with {_escaped(magic)}); "
                        f"{{overwrite}} only replaces a {kind} file: choose another path or delete it yourself."
                    )
    if refusal is None:
        refusal = write_refusal(out.absolute().parent, out.name)
    if refusal is not None:
        raise OutputFolderError(refusal, out, "the output file")
    clean_stale_leftovers(out)
    return out


@contextmanager
def output_file(out: Path) -> Iterator[Path]:
    """A partial file beside `out` for the block to write: put in place as `out` when the block ends, removed when
    it fails (a full disk raised as OutputDiskFull naming `out`), so `out` is never half-written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.parent / f".{out.name}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        yield partial
        os.replace(partial, out)
    except Exception as error:
        if disk_full(error):
            raise OutputDiskFull(out, "the output file") from error
        raise
    finally:
        partial.unlink(missing_ok=True)


def existing_paths(*values) -> list[Path]:
    """The values (or items of list values) that name existing files or folders: what an output must not hold."""
    flat = [item for value in values for item in (value if isinstance(value, (list, tuple)) else [value])]
    return [Path(item) for item in flat if isinstance(item, (str, Path)) and item and Path(item).exists()]


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


def clean_stale_leftovers(out: str | os.PathLike) -> list[str]:
    """Remove what killed earlier runs left beside `out` (a folder, or the file a single-file writer was writing),
    and restore a previous folder a run was replacing when it died (`out` missing, its `.old-` copy present).
    Returns one line per action, also logged."""
    out = Path(out).absolute()
    if not out.parent.is_dir():
        return []
    actions = []
    for leftover in sorted(out.parent.iterdir()):
        match = _LEFTOVER.fullmatch(leftover.name)
        is_file = leftover.is_file() and not leftover.is_symlink()
        if (
            not match
            or match["name"] != out.name
            or not (leftover.is_dir() or (is_file and match["kind"] == "writing"))
        ):
            continue
        if _process_alive(int(match["pid"]) if match["pid"] else None):
            continue
        if match["kind"] == "old" and not out.exists():
            os.replace(leftover, out)
            actions.append(f"restored {out} from {leftover.name}, left by an interrupted earlier run")
        else:
            if is_file:
                leftover.unlink()
            else:
                shutil.rmtree(leftover, ignore_errors=True)
            actions.append(f"removed {leftover}, left by an interrupted earlier run")
    for action in actions:
        logger.warning(action)
    return actions


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2  # Linux's values (fcntl.h, linux/fs.h)
# What renameat2 answers where it cannot swap, so two renames do instead: no such call (an old kernel, a sandbox's
# seccomp filter), a file system or flag it does not support, or `out` gone meanwhile.
_NO_EXCHANGE = frozenset({errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.ENOENT})


@functools.cache
def _renameat2() -> Callable | None:
    """The C library's renameat2 (Linux, glibc 2.28+ or musl), or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    function = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if function is not None:
        function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        function.restype = ctypes.c_int
    return function


def exchange_paths(first: str | Path, second: str | Path) -> None:
    """Swap two existing paths in one atomic step (`renameat2(RENAME_EXCHANGE)`): no moment where either is missing.
    Raises OSError(ENOSYS) where the system has no such call, and the call's own OSError when it fails."""
    renameat2 = _renameat2()
    if renameat2 is None:
        raise OSError(errno.ENOSYS, "no atomic exchange of two paths on this system", str(first))
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), str(first), None, str(second))


def open_mode(folder: Path) -> int:
    """The permission bits a plain `open()` gives a new file in `folder` (the user's umask, the folder's default
    ACL), found by making one."""
    probe = folder / f".mode-probe-{os.getpid()}-{id(folder):x}"
    probe.touch()
    try:
        return probe.stat().st_mode & 0o777
    finally:
        probe.unlink()


def give_open_modes(folder: Path) -> None:
    """Give the files under `folder` that are more private than a plain `open()` makes them that mode: safetensors
    writes weights 0600 (through a temporary file) beside a 0644 config.json, which another user or a service
    account could read but not the weights."""
    mode = open_mode(folder)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            current = path.stat().st_mode & 0o777
            if current != mode and current | mode == mode:
                os.chmod(path, mode)


def _put_in_place(work: Path, out: Path) -> None:
    """Move the finished folder `work` to `out`. A previous folder is swapped with it in one step where the system
    can (a reader never finds `out` missing) and then removed; elsewhere it is moved aside first, put back if the
    second rename fails, and removed once the new folder is in place."""
    if out.is_dir() and not out.is_symlink():
        try:
            exchange_paths(work, out)
        except OSError as error:
            if error.errno not in _NO_EXCHANGE:
                raise
            logger.debug("no atomic swap for %s (%s): replacing it in two renames", out, error)
        else:
            shutil.rmtree(work, ignore_errors=True)  # now the previous folder
            return
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


class OutputFolder:
    """A folder to be written whole: checked when made (after removing the leftovers of killed runs), written
    by `write()`. Make it before long work (training, reading a checkpoint) so a wrong output fails first."""

    def __init__(
        self, out: str | os.PathLike, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()
    ) -> None:
        clean_stale_leftovers(out)
        self.path = check_output_dir(out, overwrite, inputs)
        self.overwrite = overwrite

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def check_space(self, needed: int, what: str) -> None:
        """Refuse, before the work, an output whose disk has less free than `needed` bytes (a lower bound of `what`
        will be written)."""
        refusal = space_refusal(self.path.parent, needed, what)
        if refusal is not None:
            raise OutputFolderError(refusal, self.path)

    @contextmanager
    def write(self) -> Iterator[Path]:
        """Yield an empty work folder beside the output; when the block succeeds it takes the output's place
        (replacing a previous folder only then), on any error it is removed with the parent folders made for it."""
        out = self.path.absolute()
        created = [parent for parent in out.parents if not parent.exists()]
        out.parent.mkdir(parents=True, exist_ok=True)
        work = out.parent / f".{out.name}.writing-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            work.mkdir()
            yield work
            if out.is_dir() and any(out.iterdir()):  # filled by someone else meanwhile
                refusal = (
                    replace_refusal(out)
                    if self.overwrite
                    else (
                        "{out} was filled while this output was written; choose another folder or pass {overwrite} "
                        "to replace it."
                    )
                )
                if refusal is not None:
                    raise OutputFolderError(refusal, self.path)
            give_open_modes(work)
            _put_in_place(work, out)
        except BaseException as error:
            shutil.rmtree(work, ignore_errors=True)
            for parent in created:  # innermost first: only the folders made for this output, and only if empty
                if parent.exists() and not any(parent.iterdir()):
                    parent.rmdir()
            if isinstance(error, Exception) and disk_full(error):  # an inner output's too: named as this one
                raise OutputDiskFull(self.path) from error
            if isinstance(error, OutputFolderError) and error.path.absolute().is_relative_to(work):
                raise OutputFolderError(error.template, self.path) from None  # an inner output's disk is this one's
            raise


def output_folder(
    out: str | os.PathLike | OutputFolder, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()
) -> OutputFolder:
    """`out` itself when it is an OutputFolder already checked by the caller, else a new, checked one."""
    return out if isinstance(out, OutputFolder) else OutputFolder(out, overwrite, inputs)


@contextmanager
def atomic_output_dir(
    out: str | os.PathLike | OutputFolder, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()
) -> Iterator[Path]:
    """Check `out` (unless it is an OutputFolder already) and write it whole: yields the work folder that
    replaces `out` when the block succeeds and is removed on any error (see `OutputFolder`)."""
    with output_folder(out, overwrite, inputs).write() as work:
        yield work


__all__ = [
    "MODEL_FILES",
    "NEARLY_FULL",
    "DiskFull",
    "OutputDiskFull",
    "OutputFolder",
    "OutputFolderError",
    "atomic_output_dir",
    "check_output_dir",
    "check_output_file",
    "clean_stale_leftovers",
    "disk_full",
    "exchange_paths",
    "existing_paths",
    "nearest_existing",
    "output_file",
    "output_folder",
    "replace_refusal",
    "size_text",
    "space_refusal",
    "weights_bytes",
    "working_folder_refusal",
    "write_refusal",
]
