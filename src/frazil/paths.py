"""Where frazil keeps things on disk: the state folder and the JVM artifact cache."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STATE_DIR_ENV = "FRAZIL_STATE_DIR"
CACHE_DIR_ENV = "FRAZIL_CACHE_DIR"


def state_dir() -> Path:
    """Folder for local runtime state (broker data, checkpoints, pid files).

    Defaults to ``./.frazil`` in the working directory; ``FRAZIL_STATE_DIR`` overrides it.
    """
    return Path(os.environ.get(STATE_DIR_ENV, ".frazil")).resolve()


def cache_dir() -> Path:
    """Folder for fetched JVM artifacts, shared by every checkout on the machine.

    Defaults to ``~/.cache/frazil``; ``FRAZIL_CACHE_DIR`` overrides it.
    """
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "frazil"
    return Path(os.environ.get(CACHE_DIR_ENV, default)).resolve()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) across processes.

    A lock file next to what it guards (a cache entry, a broker's folder, a catalog), not
    the file itself, so readers of the guarded files need no lock.
    """
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
