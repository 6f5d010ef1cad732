"""Making sure one pipeline never runs twice at once, even after a kill -9.

PySpark's JVM outlives a killed Python driver for a moment (it exits once it sees its stdin
close) and could still finish an Iceberg commit. Before starting, frazil waits for (or kills)
the JVM of a previous run of the same checkpoint, and refuses to start beside a live run.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from frazil.errors import PipelineError
from frazil.procs import cmdline, pid_alive


def _run_file(state_dir: str, pipeline: str) -> Path:
    # Kept outside the checkpoint so that deleting a checkpoint does not lose the fence.
    return Path(state_dir) / "runs" / f"{pipeline}.json"


def acquire(state_dir: str, pipeline: str, wait_seconds: float = 30.0) -> None:
    """Check that no other run of this pipeline is alive; wait out a killed run's JVM.

    Raises:
        PipelineError: Another frazil process is running this pipeline right now.
    """
    path = _run_file(state_dir, pipeline)
    if not path.exists():
        return
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    driver = int(record.get("driver_pid", 0))
    jvm = int(record.get("jvm_pid", 0))
    if driver == os.getpid():
        return  # this process ran it before (tests, notebooks): same JVM, nothing to fence
    if driver and driver != os.getpid() and pid_alive(driver) and "frazil" in cmdline(driver):
        raise PipelineError(f"pipeline {pipeline!r} is already running (pid {driver})")
    if jvm and pid_alive(jvm) and "java" in cmdline(jvm):
        deadline = time.monotonic() + wait_seconds
        while pid_alive(jvm) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(jvm):
            os.kill(jvm, signal.SIGKILL)
            while pid_alive(jvm):
                time.sleep(0.1)


def record(state_dir: str, pipeline: str, jvm_pid: int) -> None:
    """Note this run's driver and JVM pids under the state folder."""
    path = _run_file(state_dir, pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"driver_pid": os.getpid(), "jvm_pid": jvm_pid}))


def run_file(state_dir: str, pipeline: str) -> Path:
    """Where the pids of a pipeline's current (or last) run are noted."""
    return _run_file(state_dir, pipeline)
