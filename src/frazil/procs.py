"""Small helpers about local processes (Linux ``/proc``).

A pid alone does not name a process: once it exits, the kernel hands its pid to the next
process started. A process's identity is ``(pid, start time)``, the start time being field 22
of ``/proc/<pid>/stat`` (clock ticks since boot), which no later process with the same pid
can share.
"""

from __future__ import annotations

import os
import select
import signal
import time
from pathlib import Path
from types import TracebackType


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3 and on of ``/proc/<pid>/stat`` (index 0 is the state), or None if gone."""
    try:
        # Bytes decoded leniently: the kernel cuts a command name at 15 bytes, maybe inside a
        # character.
        stat = Path(f"/proc/{pid}/stat").read_bytes().decode(errors="replace")
    except OSError:
        return None
    # Field 2 (the command name, in parentheses) may itself hold spaces and ')'.
    return stat.rpartition(")")[2].split()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; zombies count as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat_fields(pid)
    if not fields:
        return True
    return fields[0] != "Z"


def start_time(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot, or None if there is no such process.

    Together with the pid this identifies one process for the machine's uptime.
    """
    fields = _stat_fields(pid)
    try:
        return int(fields[19]) if fields else None  # field 22, counted from field 3
    except (IndexError, ValueError):
        return None


def is_running(pid: int, started: int) -> bool:
    """Whether the process ``(pid, started)`` is still alive (not exited, not a zombie)."""
    fields = _stat_fields(pid)
    if not fields or len(fields) < 20:
        return False
    return fields[0] != "Z" and fields[19] == str(started)


def processes() -> dict[int, tuple[int, bytes]]:
    """Every process now: ``pid -> (parent pid, command line)``, arguments space-separated."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        try:
            line = (entry / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
            parent = int(fields[1]) if fields else None
        except (OSError, IndexError, ValueError):
            continue
        if parent is not None:
            found[int(entry.name)] = (parent, line)
    return found


def cmdline(pid: int) -> str:
    """The process's command line with spaces between arguments, or '' if unknown."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def cmdline_args(pid: int) -> list[str]:
    """The process's arguments (``argv``), or ``[]`` if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    if not raw:
        return []
    return [arg.decode(errors="replace") for arg in raw.rstrip(b"\0").split(b"\0")]


class Process:
    """A handle on one process by identity, immune to pid reuse; not necessarily a child.

    Uses a pidfd (Linux 5.3+): once opened and checked against the start time, it refers to
    that very process even if it exits and its pid goes to another, so waiting and killing
    can never reach a stranger. On older kernels the identity is checked again before each
    step instead (leaving a window of microseconds for reuse).

    Use :meth:`open`, and close the handle (it is a context manager).
    """

    def __init__(self, pid: int, started: int, pidfd: int | None) -> None:
        self.pid = pid
        self.started = started
        self._pidfd = pidfd

    @classmethod
    def open(cls, pid: int, started: int) -> Process | None:
        """A handle on the live process ``(pid, started)``, or None if it is not running."""
        pidfd: int | None
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            return None
        except OSError:
            pidfd = None  # kernel without pidfd_open
        # Checked after opening the pidfd: if it matches now, the pidfd is that process.
        if not is_running(pid, started):
            if pidfd is not None:
                os.close(pidfd)
            return None
        return cls(pid, started, pidfd)

    def alive(self) -> bool:
        """Whether the process is still running (a zombie has exited)."""
        if self._pidfd is None:
            return is_running(self.pid, self.started)
        return not self._exited_within(0)

    def _exited_within(self, seconds: float) -> bool:
        assert self._pidfd is not None
        poller = select.poll()
        # A pidfd becomes readable when its process exits, whoever its parent is.
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(max(0, int(seconds * 1000))))

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the process to exit; whether it did."""
        if self._pidfd is not None:
            return self._exited_within(timeout)
        deadline = time.monotonic() + timeout
        while is_running(self.pid, self.started):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        """Send SIGKILL to the process, if it is still running."""
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            elif is_running(self.pid, self.started):
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it exited meanwhile

    def close(self) -> None:
        """Release the pidfd."""
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __enter__(self) -> Process:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
