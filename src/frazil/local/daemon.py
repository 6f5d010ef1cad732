"""One detached local server process: its pid file, log, health wait and stop.

Every service ``frazil local`` runs is one or more such processes, each run from its own
folder under the state dir: the Kafka broker (:mod:`frazil.local.broker`) or each node of a
cluster (:mod:`frazil.local.broker_cluster`), the schema registry
(:mod:`frazil.local.registry`), and the production-shaped stack (:mod:`frazil.local.stack`:
the object store, the REST catalog, the Spark master and workers). A folder holds:

* ``<stem>.log``: the process's stdout and stderr (rotated between runs when large),
* ``<stem>.pid``: JSON with its pid, start time, address and ports, read and written by
  :class:`~frazil.local.pid_record.PidRecord` (which tells the service's process from one
  that got its pid later),
* ``.lock``: serializes starts and stops of that folder across processes.

Processes run in their own session (they outlive the command that started them) and are
stopped with SIGTERM, then SIGKILL to their whole process group after a bounded wait. A JVM
service may write a class-data-sharing archive as it exits (:mod:`frazil.local.cds`); it is
kept only when the process stopped cleanly.

Every failure is a :class:`~frazil.errors.ServiceError` naming the service, its address and
its log file, with the log's last lines when the process stopped or never answered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.local.cds import settle_archive
from frazil.local.host import port_taken
from frazil.local.pid_record import (
    LegacyPidFile,
    PidRecord,
    Running,
    adopt,
    alive,
    kill_group,
    reap,
    sigterm,
    wait_exit,
)
from frazil.paths import locked
from frazil.procs import start_time

_POLL_INTERVAL_S = 0.2
_LOG_TAIL_LINES = 30
# The logs are appended to by the servers, which cannot roll them; rotate between runs.
_LOG_ROTATE_BYTES = 16 * 1024 * 1024

# The key of the pid file's info naming the class-data archive the process writes at exit.
_CDS_INFO_KEY = "cds_partial"


@dataclasses.dataclass(frozen=True)
class Launched:
    """What :meth:`Daemon.launch` found running or started.

    Attributes:
        running: The process.
        log_offset: Where the output of this start begins in the log; None when the process
            ran already (this call started nothing).
    """

    running: Running
    log_offset: int | None = None

    @property
    def fresh(self) -> bool:
        """Whether this call started the process."""
        return self.log_offset is not None


class Daemon:
    """One local server process living in ``directory``.

    Args:
        name: How messages name the service (``"the local object store (s3proxy)"``).
        directory: Its folder (created on start); holds the pid file and the log.
        stem: Base name of the pid and log files.
        service: The ``frazil local`` name of the service it belongs to (``s3``), for the
            command that stops it alone; empty for the plain ``frazil local down``.
        legacy: How to read a pid file of this service from before it ran as a Daemon, for
            a state dir whose service was started then; None if there never was one.
    """

    def __init__(
        self,
        name: str,
        directory: Path,
        stem: str,
        service: str = "",
        legacy: LegacyPidFile | None = None,
    ) -> None:
        self.name = name
        self.service = service
        self.directory = Path(directory)
        self.stem = stem
        self.legacy = legacy
        self.pid_file = self.directory / f"{stem}.pid"
        self.log_file = self.directory / f"{stem}.log"
        self.record = PidRecord(self.pid_file, legacy)

    @property
    def down_command(self) -> str:
        """The command that stops this service (and, without a service name, the others)."""
        return f"frazil local down --only {self.service}" if self.service else "frazil local down"

    def running(self) -> Running | None:
        """The live process recorded in the pid file, else None."""
        return self.record.running()

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold the folder's lock (starts and stops of one service never interleave)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        return locked(self.directory / ".lock")

    def start(
        self,
        command: Sequence[str],
        *,
        address: str,
        ports: Sequence[int],
        healthy: Callable[[float], bool],
        timeout: float,
        env: Mapping[str, str] | None = None,
        info: Mapping[str, Any] | None = None,
        port_hint: str = "",
        cds_partial: Path | None = None,
    ) -> Running:
        """Start the process unless it runs already, and wait until ``healthy`` says so.

        Call with :meth:`locked` held. :meth:`launch`, :meth:`wait` and :meth:`rollback` in
        one: a process this call started and that does not answer is stopped again.

        Args:
            command: The program and its arguments (only run when nothing runs yet).
            address: What clients use; recorded and named in messages.
            ports: Ports it will listen on on 127.0.0.1; each must be free.
            healthy: Called with the seconds left; True once the service answers.
            timeout: Seconds to wait for ``healthy`` before stopping it and failing.
            env: Extra environment variables for the process (on top of this one's).
            info: Service-specific details to record in the pid file.
            port_hint: Appended to the "port in use" message (which option picks another).
            cds_partial: Where ``command`` makes the JVM write a class-data archive at exit
                (:func:`~frazil.local.cds.cds_options`); installed when the process stops cleanly.

        Returns:
            The running process.

        Raises:
            ServiceError: If it already runs elsewhere, a port is in use, or it exits or does
                not answer within ``timeout`` (with its log's last lines).
        """
        deadline = time.monotonic() + timeout
        launched = self.launch(
            command,
            address=address,
            ports=ports,
            env=env,
            info=info,
            port_hint=port_hint,
            cds_partial=cds_partial,
        )
        with self.rollback(launched):
            self.wait(launched, healthy, timeout, deadline)
        return launched.running

    def launch(
        self,
        command: Sequence[str],
        *,
        address: str,
        ports: Sequence[int],
        env: Mapping[str, str] | None = None,
        info: Mapping[str, Any] | None = None,
        port_hint: str = "",
        cds_partial: Path | None = None,
    ) -> Launched:
        """Start the process unless it runs already; do not wait for it to answer.

        Call with :meth:`locked` held. The arguments are those of :meth:`start`.

        Returns:
            The process, and where the output of this start begins in its log.

        Raises:
            ServiceError: If it already runs at another address, a port is in use, or the
                program cannot be run.
        """
        current = self.running()
        if current is not None:
            if current.address != address:
                raise ServiceError(
                    f"{self.name} is already running at {current.address} (pid {current.pid}); "
                    f"stop it (`{self.down_command}`) to move it to {address}"
                )
            return Launched(current)
        self.record.remove()
        self.check_ports(address, ports, port_hint)
        self._rotate_log()
        with self.log_file.open("ab") as log:
            log.write(f"\n=== frazil: starting {self.name} at {time.ctime()} ===\n".encode())
            log.flush()
            log_offset = log.tell()
            try:
                proc = subprocess.Popen(
                    list(command),
                    cwd=self.directory,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env={**os.environ, **(env or {})},
                )
            except OSError as exc:
                raise ServiceError(
                    f"cannot start {self.name} at {address}: {command[0]}: {exc.strerror}"
                ) from None
        adopt(proc)
        started = start_time(proc.pid) or 0
        details = dict(info or {})
        if cds_partial is not None:
            details[_CDS_INFO_KEY] = str(cds_partial)
        running = Running(proc.pid, started, address, tuple(ports), details)
        self.record.write(running)
        return Launched(running, log_offset)

    def check_ports(self, address: str, ports: Sequence[int], port_hint: str = "") -> None:
        """Fail unless every port is free (:meth:`launch` checks; a service that prepares
        slowly before it launches checks first).

        Raises:
            ServiceError: Naming the first port in use, with ``port_hint`` and the log.
        """
        for port in ports:
            if port_taken("127.0.0.1", port):
                hint = f" ({port_hint})" if port_hint else ""
                raise ServiceError(
                    f"cannot start {self.name} at {address}: 127.0.0.1:{port} is already in "
                    f"use{hint}; its log: {self.log_file}"
                )

    def wait(
        self,
        launched: Launched,
        healthy: Callable[[float], bool],
        timeout: float,
        deadline: float | None = None,
    ) -> None:
        """Wait until ``healthy`` says the process answers.

        Args:
            launched: The process (from :meth:`launch`, or ``Launched(running)``).
            healthy: Called with the seconds left; True once the service answers.
            timeout: Seconds to wait (named in the message).
            deadline: When to give up (:func:`time.monotonic`), if earlier work counts
                against ``timeout``; else ``timeout`` from now.

        Raises:
            ServiceError: If the process exits or does not answer in time (with its log's
                last lines since this start); it is left as it is.
        """
        if deadline is None:
            deadline = time.monotonic() + timeout
        pid, address = launched.running.pid, launched.running.address
        while True:
            if not alive(pid):
                code = reap(pid)
                exit_note = f" with exit code {code}" if code is not None else ""
                raise ServiceError(
                    f"{self.name} (pid {pid}) exited{exit_note} while starting at {address}; "
                    f"last lines of its log {self.log_file}:\n"
                    f"{self.log_tail(launched.log_offset)}"
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ServiceError(
                    f"{self.name} (pid {pid}) did not answer at {address} within "
                    f"{timeout:g} s; last lines of its log {self.log_file}:\n"
                    f"{self.log_tail(launched.log_offset)}"
                )
            if healthy(min(remaining, 2.0)):
                return
            time.sleep(_POLL_INTERVAL_S)

    @contextlib.contextmanager
    def rollback(self, launched: Launched) -> Iterator[None]:
        """Stop the process again if the block fails and :meth:`launch` started it.

        A process that ran before is left running. Its class-data archive, if it was to
        write one, is dropped.
        """
        try:
            yield
        except BaseException:
            if launched.fresh:
                self._stop(launched.running, timeout=10, keep_archive=False)
            raise

    def stop(self, timeout: float = 30) -> bool:
        """Stop the process (SIGTERM; SIGKILL to its group after ``timeout`` seconds).

        Call with :meth:`locked` held.

        Returns:
            Whether a running process was stopped.
        """
        running = self.running()
        if running is None:
            self.record.remove()
            return False
        self._stop(running, timeout)
        return True

    def down(self, timeout: float = 30) -> bool:
        """:meth:`stop` with the lock held; nothing (not even the folder) is made for a
        service that never ran.

        Returns:
            Whether a running process was stopped.
        """
        if not self.directory.is_dir():
            return False
        with self.locked():
            return self.stop(timeout)

    def terminate(self) -> bool:
        """Send the process SIGTERM and return at once: to stop several side by side, then
        each with :meth:`stop` (which waits).

        Returns:
            Whether a process was running.
        """
        running = self.running()
        if running is not None:
            sigterm(running)
        return running is not None

    def log_tail(self, offset: int | None = None) -> str:
        """The log's last lines (from ``offset`` on, if given)."""
        try:
            with self.log_file.open("rb") as log:
                if offset is not None:
                    log.seek(offset)
                text = log.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        lines = text.splitlines()[-_LOG_TAIL_LINES:]
        return "\n".join(lines) if lines else "(log is empty)"

    # -- internals --------------------------------------------------------------------

    def _stop(self, running: Running, timeout: float, *, keep_archive: bool = True) -> None:
        sigterm(running)
        clean = wait_exit(running, timeout)
        partial = running.info.get(_CDS_INFO_KEY)
        if not clean and not kill_group(running):
            raise ServiceError(
                f"{self.name} (pid {running.pid}) did not stop; its log: {self.log_file}"
            )
        self.record.remove()
        if partial:
            # The JVM writes the archive while it exits; only a clean exit leaves it whole.
            settle_archive(Path(str(partial)), keep=clean and keep_archive)

    def _rotate_log(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            if self.log_file.stat().st_size > _LOG_ROTATE_BYTES:
                os.replace(self.log_file, self.log_file.with_name(self.log_file.name + ".1"))
