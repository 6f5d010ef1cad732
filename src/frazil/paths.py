"""Where frazil keeps things on disk: the state folder and the JVM artifact cache."""

from __future__ import annotations

import os
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
