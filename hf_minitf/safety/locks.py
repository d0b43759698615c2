"""One writer at a time for a folder the package rewrites in place (`minitf chat-template`): the second waits, then
reads what the first wrote, so neither change is lost without a word."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; concurrent rewrites there are the user's to avoid
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike) -> Iterator[None]:
    """Hold `folder` for this writer alone (an exclusive `flock` on the folder itself: no lock file is left).

    A writer replaces the folder by another (`OutputFolder.write`), so a waiter that wakes up holding the old one
    takes the lock again on the folder now at that path."""
    if fcntl is None:
        yield
        return
    path = Path(folder)
    while True:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            held, current = os.fstat(descriptor), os.stat(path)
        except BaseException:
            os.close(descriptor)
            raise
        if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
            break
        os.close(descriptor)
    try:
        yield
    finally:
        os.close(descriptor)  # releases the lock


__all__ = ["folder_lock"]
