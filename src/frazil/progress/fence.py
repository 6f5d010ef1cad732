"""Making sure one pipeline never runs twice at once, even after a kill -9.

Two things are fenced, per pipeline:

* **Live runs.** A run holds an exclusive ``flock`` on ``<runs>/<pipeline>.lock`` for as long as
  it runs. The kernel drops the lock when the process dies however it dies, so a second
  ``frazil run`` refuses to start exactly while the first is alive; two runs starting together
  cannot both get it. The lock is per open file, so even the same process cannot hold it twice.
* **A killed run's JVM.** PySpark's JVM outlives a killed Python driver for a moment (it exits
  once it sees its stdin close) and could still finish an Iceberg commit. Each run notes its
  driver and JVM in ``<runs>/<pipeline>.json``; the next run waits for that JVM to exit and
  SIGKILLs it after ``wait_seconds``. Only a process proved to be that JVM is ever signalled:
  same pid, same start time (so not a process that reused the pid) and the run's token on its
  command line (``-Dfrazil.run=<token>``, see :func:`jvm_option`). A JVM that cannot be proved
  so (a SparkSession created before the run, as in tests and notebooks, does not carry the
  token) is never waited for nor signalled.

``<runs>`` is ``<state_dir>/runs`` for a local state folder. A remote ``state_dir``
(``s3a://bucket/x``) can hold neither locks nor pids, so the fence then keeps its files on this
machine, in ``<cache>/runs/<first 16 hex of sha256(state_dir)>`` (``<cache>`` is
:func:`frazil.paths.cache_dir`): runs of one remote state folder are fenced on one machine only.

Typical use (the engine)::

    with fence.hold(config.state_dir, names) as run_fence:
        spark = build_spark(config, run_token=run_fence.token)  # adds jvm_option(token)
        run_fence.record_jvm(jvm_pid)
        ...  # run the queries, stop them before leaving the block
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from frazil import paths, procs
from frazil.config.locations import is_remote, local_path
from frazil.errors import PipelineError

log = logging.getLogger(__name__)

#: The JVM system property that carries a run's token.
TOKEN_PROPERTY = "frazil.run"

#: How long a SIGKILLed JVM may take to disappear before frazil gives up starting.
KILL_WAIT_SECONDS = 10.0
#: How long a previous run's JVM may take to exit before frazil says it waits for it: a run
#: that ended well leaves its JVM shutting down for a moment after its driver exits.
QUIET_WAIT_SECONDS = 2.0

# Tokens handed out by this process. A JVM carrying one of them was started by this process
# (for an earlier run, e.g. a notebook's second run reusing its SparkSession), so it is safe
# to identify it by that token; a token of any other origin proves nothing.
_ISSUED: set[str] = set()


def jvm_option(token: str) -> str:
    """The JVM option that puts a run token on the Spark driver JVM's command line."""
    return f"-D{TOKEN_PROPERTY}={token}"


def run_token_in(java_options: str) -> str | None:
    """The run token :func:`jvm_option` put in ``java_options``, if any."""
    found = re.search(rf"(?:^|\s)-D{re.escape(TOKEN_PROPERTY)}=(\S+)", java_options)
    return found.group(1) if found else None


def runs_dir(state_dir: str) -> Path:
    """The local folder holding the fence's lock and run files for ``state_dir``.

    Never derived from a remote URI's path: a remote state folder gets a folder in the
    local cache named after a hash of its URI.
    """
    if is_remote(state_dir):
        key = hashlib.sha256(state_dir.rstrip("/").encode()).hexdigest()[:16]
        return paths.cache_dir() / "runs" / key
    return Path(local_path(state_dir)) / "runs"


def run_file(state_dir: str, pipeline: str) -> Path:
    """Where the driver and JVM of a pipeline's current (or last) run are noted."""
    return runs_dir(state_dir) / f"{pipeline}.json"


@dataclass(frozen=True)
class RunRecord:
    """What a run notes about itself: its driver, its JVM and the JVM's token.

    Start times are clock ticks since boot (see :func:`frazil.procs.start_time`). ``run_token``
    is None when the JVM does not carry a token this process issued: such a JVM is never
    signalled by a later run.
    """

    driver_pid: int
    driver_start_time: int | None
    jvm_pid: int
    jvm_start_time: int | None
    run_token: str | None

    @classmethod
    def read(cls, path: Path) -> RunRecord | None:
        """The record in ``path``, or None if missing or unreadable (then nothing is fenced)."""
        try:
            data = json.loads(path.read_text())
            return cls(
                driver_pid=int(data["driver_pid"]),
                driver_start_time=_opt_int(data.get("driver_start_time")),
                jvm_pid=int(data["jvm_pid"]),
                jvm_start_time=_opt_int(data.get("jvm_start_time")),
                run_token=str(data["run_token"]) if data.get("run_token") else None,
            )
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def write(self, path: Path) -> None:
        """Write the record atomically: a reader sees the old record or the new one."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)


def _opt_int(value: object) -> int | None:
    return None if value is None else int(str(value))


class RunFence:
    """The fence of one run, handed out by :func:`hold`.

    Attributes:
        token: This run's token (``frazil-run-<hex>``); put :func:`jvm_option` of it on the
            driver JVM's command line so that a later run can recognise this run's JVM.
        pipelines: The pipelines fenced.
    """

    def __init__(self, token: str, folder: Path, pipelines: tuple[str, ...]) -> None:
        self.token = token
        self.pipelines = pipelines
        self._folder = folder

    def record_jvm(self, jvm_pid: int) -> None:
        """Note this run's driver and Spark driver JVM, for the next run to fence.

        The token recorded is the one the JVM really carries on its command line, if it is a
        token this process issued (this run's, or an earlier run's whose SparkSession is
        reused); otherwise none is recorded and that JVM will never be signalled. That is the
        case of a SparkSession built before the run (tests, notebooks) and of a JVM that is
        not on this machine (its pid then means nothing here).

        Args:
            jvm_pid: The Spark driver JVM's pid (``ProcessHandle.current().pid()`` in it).
        """
        jvm_start = procs.start_time(jvm_pid)
        token = _carried_token(jvm_pid) if jvm_start is not None else None
        if token is None:
            log.info(
                "Spark JVM pid %d carries no frazil run token: should this run be killed, "
                "the next one will not wait for this JVM",
                jvm_pid,
            )
        record = RunRecord(
            driver_pid=os.getpid(),
            driver_start_time=procs.start_time(os.getpid()),
            jvm_pid=jvm_pid,
            jvm_start_time=jvm_start,
            run_token=token,
        )
        for name in self.pipelines:
            record.write(self._folder / f"{name}.json")


def _carried_token(pid: int) -> str | None:
    prefix = jvm_option("")
    for arg in procs.cmdline_args(pid):
        if arg.startswith(prefix) and arg[len(prefix) :] in _ISSUED:
            return arg[len(prefix) :]
    return None


def _carries(pid: int, token: str) -> bool:
    return jvm_option(token) in procs.cmdline_args(pid)


@contextmanager
def hold(state_dir: str, pipelines: list[str], wait_seconds: float = 30.0) -> Iterator[RunFence]:
    """Fence ``pipelines`` for the life of the ``with`` block.

    Locks each pipeline (refusing if another run, or another ``hold`` in this process, has
    it), then waits for a killed previous run's JVM to exit, SIGKILLing it after
    ``wait_seconds``. Leave the block only once the run's queries are stopped.

    Args:
        state_dir: The config's ``state_dir`` (a local path or a URI).
        pipelines: Names of the pipelines this run runs.
        wait_seconds: How long a killed run's JVM may take to exit by itself.

    Yields:
        The run's fence: its token, and :meth:`RunFence.record_jvm` once Spark is up.

    Raises:
        PipelineError: A pipeline is already running, or a killed run's JVM did not exit.
    """
    names = tuple(dict.fromkeys(pipelines))
    folder = runs_dir(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        for name in names:
            stack.enter_context(_lock(folder / f"{name}.lock", name))
        for name in names:
            _fence_leftover(name, RunRecord.read(folder / f"{name}.json"), wait_seconds)
        token = f"frazil-run-{uuid.uuid4().hex}"
        _ISSUED.add(token)
        yield RunFence(token, folder, names)


def running_pid(state_dir: str, pipeline: str) -> int | None:
    """The pid of the process running ``pipeline`` now, or None.

    The lock file names its holder while held and is emptied on release; a holder killed
    with -9 leaves its pid behind, so the pid must also still be alive.
    """
    try:
        text = (runs_dir(state_dir) / f"{pipeline}.lock").read_text().strip()
    except OSError:
        return None
    if not text.isdigit():
        return None
    pid = int(text)
    return pid if procs.start_time(pid) is not None else None


@contextmanager
def _lock(path: Path, pipeline: str) -> Iterator[None]:
    # Lock files are never deleted: unlinking one while another process has it open would
    # let two processes lock two different files of the same name.
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise PipelineError(f"pipeline {pipeline!r}: cannot open run lock {path}: {exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            who = f"pid {holder}" if holder.isdigit() else f"lock {path} is held"
            raise PipelineError(f"pipeline {pipeline!r} is already running ({who})") from None
        # The holder's pid, for the message above; cleared on release so it never names a
        # finished run.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def _fence_leftover(pipeline: str, record: RunRecord | None, wait_seconds: float) -> None:
    """Wait for, then kill, the previous run's JVM if it is provably still there."""
    if record is None or record.run_token is None or record.jvm_start_time is None:
        return
    if record.driver_start_time is not None and procs.is_running(
        record.driver_pid, record.driver_start_time
    ):
        # Its driver is alive (this very process, or a notebook) and let go of the lock, so
        # that run ended and stopped its queries; its JVM is still the driver's to use.
        return
    jvm = procs.Process.open(record.jvm_pid, record.jvm_start_time)
    if jvm is None:
        return
    with jvm:
        if not _carries(jvm.pid, record.run_token):
            return
        quiet = min(QUIET_WAIT_SECONDS, wait_seconds)
        if jvm.wait(quiet):
            return
        log.warning(
            "%s: the previous run's Spark JVM (pid %d) is still running; waiting up to %.0f s "
            "for it to exit",
            pipeline,
            jvm.pid,
            wait_seconds,
        )
        if jvm.wait(wait_seconds - quiet):
            return
        if not _carries(jvm.pid, record.run_token):
            return
        log.warning("%s: killing the previous run's Spark JVM (pid %d)", pipeline, jvm.pid)
        jvm.kill()
        if not jvm.wait(KILL_WAIT_SECONDS):
            raise PipelineError(
                f"pipeline {pipeline!r}: the previous run's Spark JVM (pid {jvm.pid}) did not "
                f"exit {KILL_WAIT_SECONDS:.0f} s after SIGKILL; not starting beside it"
            )
