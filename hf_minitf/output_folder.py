"""Output folders that appear whole or not at all, for every writer of the package (training, conversion, the
sentence-transformers export, the quickstart).

`OutputFolder(out, overwrite, inputs)` checks the target once, before any work: not a file, empty unless
`overwrite`, not one of the `inputs` (or a folder holding one) nor the current folder, since replacing it would
delete them. Its `write()` yields a work folder beside `out` that replaces `out` once the block succeeds and is
removed on any error, so an interrupted or failed write never leaves a partial folder and an existing folder is
only replaced by a complete one. Leftovers of runs killed earlier (kill -9, power loss) are cleaned up first.
`atomic_output_dir(out, overwrite, inputs)` does both in one step.

Errors are `OutputFolderError`s worded for Python callers (`overwrite=True`); a command line words them for
its options with `worded("--out", "--overwrite")`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
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

    def __init__(self, template: str, path: str | Path) -> None:
        self.template, self.path = template, Path(path)
        super().__init__(self.worded("the output folder", "overwrite=True"))

    def worded(self, out: str, overwrite: str) -> str:
        """The message with the output folder called `out` and the replacing option `overwrite`, for example
        `worded("--out", "--overwrite")` on a command line."""
        return self.template.format(out=f"{out} {self.path}", overwrite=overwrite)


def _resolved(path: str | Path) -> Path:
    return Path(path).expanduser().resolve()


def check_output_dir(out: str | Path, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()) -> Path:
    """Refuse an output path that is a file or a non-empty folder (unless `overwrite`), or that is or holds one
    of the `inputs` (files or folders, existing or to be made by the same run) or the current folder. Returns
    `out` as a Path."""
    out = Path(out)
    target = _resolved(out)
    for path in inputs:
        if path is None:
            continue
        source = _resolved(path)
        if source == target or source.is_relative_to(target):
            relation = "is" if source == target else "holds"
            named = str(path).replace("{", "{{").replace("}", "}}")  # the message is a template
            raise OutputFolderError(
                f"{{out}} {relation} the input {named}: writing there would delete it. Choose an output folder "
                "outside the input's folder.", out)
    if out.exists() and not out.is_dir():
        raise OutputFolderError("{out} exists and is not a folder; choose a folder path.", out)
    if Path.cwd().resolve().is_relative_to(target) and out.is_dir():
        raise OutputFolderError("{out} is or holds the current folder, which replacing it would delete; choose a "
                                "folder beside it or inside it.", out)
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise OutputFolderError("{out} is not empty; choose another folder or pass {overwrite} to replace it.", out)
    return out


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


def clean_stale_leftovers(out: str | Path) -> list[str]:
    """Remove what killed earlier runs left beside `out`, and restore a previous folder a run was replacing
    when it died (`out` missing, its `.old-` copy present). Returns one line per action, also logged."""
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


class OutputFolder:
    """A folder to be written whole: checked when made (after removing the leftovers of killed runs), written
    by `write()`. Make it before long work (training, reading a checkpoint) so a wrong output fails first."""

    def __init__(self, out: str | Path, overwrite: bool = False, inputs: Iterable[str | Path | None] = ()) -> None:
        clean_stale_leftovers(out)
        self.path = check_output_dir(out, overwrite, inputs)
        self.overwrite = overwrite

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return str(self.path)

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
            if not self.overwrite and out.is_dir() and any(out.iterdir()):  # filled by someone else meanwhile
                raise OutputFolderError("{out} was filled while this output was written; choose another folder "
                                        "or pass {overwrite} to replace it.", self.path)
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


def output_folder(out: str | Path | OutputFolder, overwrite: bool = False,
                  inputs: Iterable[str | Path | None] = ()) -> OutputFolder:
    """`out` itself when it is an OutputFolder already checked by the caller, else a new, checked one."""
    return out if isinstance(out, OutputFolder) else OutputFolder(out, overwrite, inputs)


@contextmanager
def atomic_output_dir(out: str | Path | OutputFolder, overwrite: bool = False,
                      inputs: Iterable[str | Path | None] = ()) -> Iterator[Path]:
    """Check `out` (unless it is an OutputFolder already) and write it whole: yields the work folder that
    replaces `out` when the block succeeds and is removed on any error (see `OutputFolder`)."""
    with output_folder(out, overwrite, inputs).write() as work:
        yield work


__all__ = [
    "OutputFolder", "OutputFolderError", "atomic_output_dir", "check_output_dir", "clean_stale_leftovers",
    "existing_paths", "output_folder",
]
