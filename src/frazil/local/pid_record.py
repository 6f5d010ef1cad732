"""A local service's process as its pid file records it, and the process's own end.

A service's folder holds ``<stem>.pid``: JSON with its pid, start time, address and ports
(see :class:`Running`). A process is recognized by its pid *and* its start time
(:mod:`frazil.procs`), so a pid that the kernel handed to another process later is never
taken for the service. Pid files written before a service ran as a
:class:`~frazil.local.daemon.Daemon` hold no start time; :class:`LegacyPidFile` says how to
recognize their process by its command line instead.

The processes this Python process started are kept here (:func:`adopt`), so that they are
reaped when it stops them; the signals and waits of a stop are here too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frazil.procs import cmdline_args, is_running, start_time

# Children started by this Python process, kept so they can be reaped (no zombies, no
# "subprocess still running" warnings) when this process stops them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclasses.dataclass(frozen=True)
class Running:
    """A running service process, as its pid file records it.

    Attributes:
        pid: Its process id.
        started: Its start time (clock ticks since boot; with the pid, its identity).
        address: What clients use (a URL, a ``spark://`` address or Kafka's ``host:port``).
        ports: Every port it listens on that was chosen by frazil.
        info: Service-specific details (e.g. the object store a REST catalog uses).
    """

    pid: int
    started: int
    address: str
    ports: tuple[int, ...]
    info: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class LegacyPidFile:
    """How to read a service's pid file written before it ran as a Daemon.

    Such a file has a pid but no start time, and a pid alone may since have gone to another
    process: the process counts as the service only if its command line holds ``args``.

    Attributes:
        address: The key of the address clients use.
        args: Arguments only the service's command line holds (its main class, its folder).
        info: Keys copied into :attr:`Running.info` where the file has them.
    """

    address: str
    args: tuple[str, ...]
    info: tuple[str, ...] = ()

    def read(self, data: Mapping[str, Any]) -> Running | None:
        """The process such a file records, if it still runs and is the service."""
        pid = int(data["pid"])
        argv = cmdline_args(pid)
        started = start_time(pid)
        if started is None or not argv or any(arg not in argv for arg in self.args):
            return None
        info = {key: data[key] for key in self.info if data.get(key) is not None}
        return Running(pid, started, str(data[self.address]), (), info)


class PidRecord:
    """The pid file at ``path``: the process it records, if that one still runs.

    Args:
        path: The pid file.
        legacy: How to read a pid file of the service from before it ran as a Daemon; None
            if there never was one.
    """

    def __init__(self, path: Path, legacy: LegacyPidFile | None = None) -> None:
        self.path = path
        self.legacy = legacy

    def running(self) -> Running | None:
        """The live process recorded in the pid file, else None."""
        try:
            data = json.loads(self.path.read_text())
            recorded = self._record(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if recorded is None:
            return None
        child = _CHILDREN.get(recorded.pid)
        if child is not None and child.poll() is not None:
            _CHILDREN.pop(recorded.pid, None)
            return None
        if not is_running(recorded.pid, recorded.started):
            return None
        return recorded

    def write(self, running: Running) -> None:
        """Record ``running`` as the service's process."""
        self.path.write_text(
            json.dumps(
                {
                    "pid": running.pid,
                    "started": running.started,
                    "address": running.address,
                    "ports": list(running.ports),
                    "info": dict(running.info),
                }
            )
        )

    def remove(self) -> None:
        """Remove the pid file (nothing runs, or nothing should be taken for the service)."""
        self.path.unlink(missing_ok=True)

    def _record(self, data: Any) -> Running | None:
        """The pid file's contents as a :class:`Running` (its process not checked yet)."""
        if "started" not in data and self.legacy is not None:
            return self.legacy.read(data)
        return Running(
            int(data["pid"]),
            int(data["started"]),
            str(data["address"]),
            tuple(int(p) for p in data["ports"]),
            dict(data.get("info") or {}),
        )


def adopt(proc: subprocess.Popen[bytes]) -> None:
    """Keep ``proc``, started by this process, to reap it when it exits or is stopped."""
    _CHILDREN[proc.pid] = proc


def alive(pid: int) -> bool:
    """Whether the process ``pid`` still runs (a child of this process: not exited yet)."""
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    started = start_time(pid)
    return started is not None and is_running(pid, started)


def reap(pid: int) -> int | None:
    """Collect the exit code of a child this process started, if it is one."""
    proc = _CHILDREN.pop(pid, None)
    if proc is None:
        return None
    try:
        return proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return None


def sigterm(running: Running) -> None:
    """SIGTERM to the process, if it still is the one recorded."""
    if is_running(running.pid, running.started):
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, signal.SIGTERM)


def wait_exit(running: Running, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the process to exit; whether it did."""
    proc = _CHILDREN.get(running.pid)
    if proc is not None:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        _CHILDREN.pop(running.pid, None)
        return True
    deadline = time.monotonic() + timeout
    while is_running(running.pid, running.started):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def kill_group(running: Running) -> bool:
    """SIGKILL to the process's whole group; whether the process exited within 10 s."""
    # The whole group: a Spark worker's executors are its children.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(running.pid, signal.SIGKILL)
    return wait_exit(running, 10)
