"""One `measure` run per measurements folder at a time."""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class LockedError(RuntimeError):
    """Another run holds the folder."""


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on folder/.lock for the duration; refuse at once if another run holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    lock_path = folder / ".lock"
    with open(lock_path, "a+", encoding="ascii") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise LockedError(f"another measure run (pid {holder}) is writing to {folder}; "
                              "wait for it or stop it") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            handle.seek(0)
            handle.truncate()
