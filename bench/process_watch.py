"""What the processes of a benchmark run did: CPU seconds per service and thread, Python
workers, class-data archives (Linux ``/proc``), polled while the run lasts.

:class:`Watch` sorts processes by a piece of their command line (:data:`ROLES`): the driver
JVM, the executors, the stack's servers, Spark's daemons, the broker, frazil's Python.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from bench.cpu_profile import proc_stat, thread_group
from frazil.procs import processes


def python_workers(roots: set[int]) -> set[int]:
    """PySpark's Python worker processes (what a Python UDF would start) under ``roots``."""
    table = processes()
    found = set()
    for pid, (parent, cmdline) in table.items():
        if b"pyspark.daemon" not in cmdline and b"pyspark.worker" not in cmdline:
            continue
        seen = set()
        while parent not in roots and parent in table and parent not in seen:
            seen.add(parent)
            parent = table[parent][0]
        if parent in roots:
            found.add(pid)
    return found


#: Which service a JVM or process is, by a piece of its command line: the CPU each takes
#: during a run is reported under these names.
ROLES = (
    (b"CoarseGrainedExecutorBackend", "executors"),
    (b"SparkSubmit", "driver JVM"),
    (b"frazil.cli.entry", "frazil (Python)"),
    (b"frazil.cli.main", "frazil (Python)"),
    (b"s3proxy", "s3proxy"),
    (b"RESTCatalogServer", "REST catalog"),
    (b"deploy.master.Master", "Spark master + workers"),
    (b"deploy.worker.Worker", "Spark master + workers"),
    (b"kafka.Kafka", "Kafka broker"),
)


def thread_cpu_of(pid: int) -> dict[tuple[int, int], tuple[str, str, float]]:
    """Every thread of one process: (pid, tid) → (process, thread name, CPU s)."""
    found: dict[tuple[int, int], tuple[str, str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        thread = proc_stat(f"/proc/{pid}/task/{tid}/stat")
        if thread is not None:
            found[(pid, int(tid))] = ("java", thread[0], thread[1])
    return found


def maps_archive(pid: int) -> bool:
    """Whether a JVM maps a class-data archive of frazil's (not only the JDK's ``classes.jsa``)."""
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False
    return any(
        line.endswith(".jsa") and not line.endswith("/classes.jsa") for line in maps.splitlines()
    )


def role_of(cmdline: bytes) -> str | None:
    """The service a process is (``ROLES``), None for any other."""
    return next((name for piece, name in ROLES if piece in cmdline), None)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` (``/proc/<pid>/stat``), None once it is gone."""
    found = proc_stat(f"/proc/{pid}/stat")
    return None if found is None else found[1]


class Watch(threading.Thread):
    """Polls the process table while a run lasts.

    * Python workers under the given processes (the cluster's worker JVMs, whose children
      are the executors);
    * the CPU seconds each service (``ROLES``) used during the run: processes that ran before
      it (the broker, the stack's servers) from their figure at the start, the run's own
      (driver, executors) from zero; the last figure seen counts for one that exits.
    """

    def __init__(self, roots: set[int]) -> None:
        super().__init__(daemon=True)
        self.roots = roots
        self.stop = threading.Event()
        self.python_workers: set[int] = set()
        self.before: dict[int, float] = {}
        self.last: dict[int, tuple[str, float]] = {}
        self.threads: dict[tuple[int, int], tuple[str, str, float]] = {}
        #: pid -> (role, whether it maps a class-data archive other than the JDK's own).
        self.archives: dict[int, tuple[str, bool]] = {}
        for pid, (_, cmdline) in processes().items():
            seconds = cpu_seconds(pid) if role_of(cmdline) else None
            if seconds is not None:
                self.before[pid] = seconds

    def poll(self) -> None:
        for pid, (_, cmdline) in processes().items():
            role = role_of(cmdline)
            seconds = cpu_seconds(pid) if role else None
            if role and seconds is not None:
                self.last[pid] = (role, seconds)
            if role in ("driver JVM", "executors"):
                if not self.archives.get(pid, (role, False))[1]:
                    # Checked until seen: a JVM that has just started maps it a moment later.
                    self.archives[pid] = (role, maps_archive(pid))
                for (p, tid), (_, thread, spent) in thread_cpu_of(pid).items():
                    self.threads[(p, tid)] = (role, thread_group("java", thread), spent)

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.poll()
            if self.roots:
                self.python_workers |= python_workers(self.roots)

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds per service during the run, after a last poll."""
        self.poll()
        totals: dict[str, float] = {}
        for pid, (role, seconds) in self.last.items():
            totals[role] = totals.get(role, 0.0) + seconds - self.before.get(pid, 0.0)
        return {role: round(totals[role], 2) for role in sorted(totals)}

    def cpu_by_thread(self) -> dict[str, dict[str, float]]:
        """The driver's and the executors' CPU seconds by thread group (JIT, GC, tasks...)."""
        found: dict[str, dict[str, float]] = {}
        for role, group, spent in self.threads.values():
            groups = found.setdefault(role, {})
            groups[group] = groups.get(group, 0.0) + spent
        return {
            role: {g: round(s, 2) for g, s in sorted(groups.items(), key=lambda kv: -kv[1])[:8]}
            for role, groups in found.items()
        }
