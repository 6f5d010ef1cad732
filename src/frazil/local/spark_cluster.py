"""A local Spark standalone cluster: one master and two workers, from pyspark's own jars.

``frazil local up --with spark-cluster`` starts, with pyspark's ``bin/spark-class`` (so the
very Spark frazil's driver runs), ``org.apache.spark.deploy.master.Master`` on
``spark://127.0.0.1:7077`` (web UI 8090) and two ``org.apache.spark.deploy.worker.Worker``
processes of 1 core and 2 GiB each (web UIs 8091 and 8092): sized for a 2-core machine,
where each worker runs one task at a time. The daemons themselves get a 256 MiB heap.

Everything lives under ``<state_dir>/spark/``: ``master/`` and ``worker-<n>/`` each with its
pid file and log; a worker's ``work/`` holds its executors' folders (their stdout/stderr)
and ``tmp/`` its shuffle and spill files. The daemons get this interpreter as
``PYSPARK_PYTHON``, but which Python an executor's Python workers run is the driver's choice
(pyspark's ``SparkContext`` ships the driver's ``PYSPARK_PYTHON``, default ``python3`` on
the PATH), so a driver using this cluster names frazil's interpreter itself.

The master's JSON (``http://127.0.0.1:<ui>/json/``) lists the workers and their state; the
cluster counts as up once every worker is ALIVE there.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import os
import sys
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.jvm.fetch import java_executable, pyspark_jars_dir
from frazil.local.cds import cds_archive, cds_options
from frazil.local.daemon import Daemon
from frazil.local.host import http_get

DEFAULT_MASTER_PORT = 7077
DEFAULT_MASTER_UI_PORT = 8090
DEFAULT_WORKER_UI_PORTS = (8091, 8092)
WORKER_CORES = 1
WORKER_MEMORY = "2g"
_DAEMON_HEAP = "256m"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Its name for `frazil local down --only` (frazil.local.stack.SPARK_CLUSTER, which imports
# this module).
_SERVICE = "spark-cluster"


@dataclasses.dataclass(frozen=True)
class SparkClusterStatus:
    """What :meth:`LocalSparkCluster.status` reports.

    Attributes:
        running: Whether the master runs.
        master_url: ``spark://host:port`` (of the running master, if any).
        master_ui: The master's web UI.
        master_pid: Its process id, if running.
        workers: One entry per worker: ``ui``, ``pid`` (None if stopped), ``state`` (as the
            master sees it: ``ALIVE``, ``DEAD``, ... or None when unknown), ``log_file``.
        log_file: The master's log.
    """

    running: bool
    master_url: str
    master_ui: str
    master_pid: int | None
    workers: tuple[dict[str, Any], ...]
    log_file: Path

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready view (paths as strings)."""
        data = dataclasses.asdict(self)
        data["log_file"] = str(self.log_file)
        data["workers"] = [dict(w) for w in self.workers]
        return data


class LocalSparkCluster:
    """A Spark standalone master and its workers under ``state_dir/spark``.

    Args:
        state_dir: frazil's state folder; the cluster uses its ``spark`` subfolder.
        master_port: The master's RPC port (``spark://127.0.0.1:<port>``).
        master_ui_port: The master's web UI port.
        worker_ui_ports: One web UI port per worker; their number is the number of workers.

    Raises:
        ValueError: If no worker is asked for or two ports are the same.
    """

    def __init__(
        self,
        state_dir: Path,
        master_port: int = DEFAULT_MASTER_PORT,
        master_ui_port: int = DEFAULT_MASTER_UI_PORT,
        worker_ui_ports: Sequence[int] = DEFAULT_WORKER_UI_PORTS,
    ) -> None:
        ports = [master_port, master_ui_port, *worker_ui_ports]
        if not worker_ui_ports:
            raise ValueError("a Spark cluster needs at least one worker")
        if len(set(ports)) != len(ports):
            raise ValueError(f"the Spark cluster's ports must differ, got {ports}")
        self.state_dir = Path(state_dir).resolve()
        self.spark_dir = self.state_dir / "spark"
        self.master_port = master_port
        self.master_ui_port = master_ui_port
        self.worker_ui_ports = tuple(worker_ui_ports)
        self.master = Daemon(
            "the local Spark master", self.spark_dir / "master", "spark-master", _SERVICE
        )
        self.workers = [
            Daemon(
                f"local Spark worker {n}",
                self.spark_dir / f"worker-{n}",
                f"spark-worker-{n}",
                _SERVICE,
            )
            for n in range(1, len(self.worker_ui_ports) + 1)
        ]

    @property
    def master_url(self) -> str:
        """The ``spark://`` URL drivers connect to."""
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def master_ui(self) -> str:
        """The master's web UI (its JSON view is at ``<ui>/json/``)."""
        return f"http://127.0.0.1:{self.master_ui_port}"

    def up(self, timeout: float = 120) -> str:
        """Start the master, then the workers, and wait until every worker is ALIVE.

        Idempotent: processes already running on the same ports are kept.

        Args:
            timeout: Seconds to wait for the master, and again for the workers.

        Returns:
            The master URL.

        Raises:
            ServiceError: If a port is in use, a process exits or it does not answer in time
                (the message names its address and log).
        """
        spark_class = _spark_class()
        env = self._environment()
        conf_dir = Path(env["SPARK_CONF_DIR"])
        # One archive for the master and the workers: the same JVM and classpath (the conf
        # folder, then pyspark's jars), whatever the state dir.
        archive = cds_archive(
            "spark-daemons",
            java_executable(),
            [conf_dir, *sorted(pyspark_jars_dir().glob("*.jar"))],
        )
        with self.master.locked():
            cds, partial = cds_options(archive) if self.master.running() is None else ([], None)
            self.master.start(
                [
                    spark_class,
                    _MASTER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.master_port),
                    "--webui-port",
                    str(self.master_ui_port),
                ],
                address=self.master_url,
                ports=[self.master_port, self.master_ui_port],
                healthy=lambda t: self._master_json(t) is not None,
                timeout=timeout,
                env={**env, "SPARK_DAEMON_JAVA_OPTS": _java_options(cds)},
                cds_partial=partial,
                info={"ui": self.master_ui},
                port_hint="pick others with --spark-port/--spark-ui-port",
            )
        # The workers start side by side: each waits for its JVM and its registration.
        with concurrent.futures.ThreadPoolExecutor(len(self.workers)) as pool:
            futures = [
                pool.submit(self._start_worker, worker, ui_port, spark_class, env, archive, timeout)
                for worker, ui_port in zip(self.workers, self.worker_ui_ports, strict=True)
            ]
            for future in futures:
                future.result()
        return self.master_url

    def _start_worker(
        self,
        worker: Daemon,
        ui_port: int,
        spark_class: str,
        env: dict[str, str],
        archive: Path | None,
        timeout: float,
    ) -> None:
        with worker.locked():
            # Only the master writes a missing archive: each dump costs seconds of CPU at
            # stop, and the workers load mostly the same classes.
            writes = archive is not None and not archive.is_file()
            cds, partial = (
                cds_options(archive) if worker.running() is None and not writes else ([], None)
            )
            (worker.directory / "work").mkdir(parents=True, exist_ok=True)
            (worker.directory / "tmp").mkdir(parents=True, exist_ok=True)
            worker.start(
                [
                    spark_class,
                    _WORKER_CLASS,
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(ui_port),
                    "--cores",
                    str(WORKER_CORES),
                    "--memory",
                    WORKER_MEMORY,
                    "--work-dir",
                    str(worker.directory / "work"),
                    self.master_url,
                ],
                address=f"http://127.0.0.1:{ui_port}",
                ports=[ui_port],
                healthy=functools.partial(self._worker_alive, ui_port),
                timeout=timeout,
                env={
                    **env,
                    "SPARK_LOCAL_DIRS": str(worker.directory / "tmp"),
                    "SPARK_DAEMON_JAVA_OPTS": _java_options(cds),
                },
                cds_partial=partial,
                info={"master": self.master_url},
                port_hint="pick others with --spark-worker-ui-ports",
            )

    def down(self, timeout: float = 30) -> bool:
        """Stop the workers (and their executors) side by side, then the master.

        Returns:
            Whether any of them ran.
        """
        with concurrent.futures.ThreadPoolExecutor(len(self.workers)) as pool:
            stopped = list(pool.map(lambda d: d.down(timeout), self.workers))
        return self.master.down(timeout) or any(stopped)

    def status(self) -> SparkClusterStatus:
        """Whether the master runs, and each worker with its state as the master sees it."""
        running = self.master.running()
        ui = str(running.info.get("ui", self.master_ui)) if running else self.master_ui
        states = _worker_states(http_get(f"{ui}/json/", 2.0)) if running else {}
        workers = []
        for worker, ui_port in zip(self.workers, self.worker_ui_ports, strict=True):
            w = worker.running()
            address = w.address if w else f"http://127.0.0.1:{ui_port}"
            port = _port_of(address)
            workers.append(
                {
                    "ui": address,
                    "pid": w.pid if w else None,
                    "state": states.get(port) if port is not None else None,
                    "log_file": str(worker.log_file),
                }
            )
        return SparkClusterStatus(
            running=running is not None,
            master_url=running.address if running else self.master_url,
            master_ui=ui,
            master_pid=running.pid if running else None,
            workers=tuple(workers),
            log_file=self.master.log_file,
        )

    # -- internals --------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        return {
            "SPARK_HOME": str(_spark_home()),
            # Master and Worker daemons only; executors get the application's memory.
            "SPARK_DAEMON_MEMORY": _DAEMON_HEAP,
            # Bind and advertise loopback only, without resolving the host name.
            "SPARK_LOCAL_IP": "127.0.0.1",
            # For tools run by the daemons; executors' Python workers run what the driver
            # names (its PYSPARK_PYTHON), checked in the tests.
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            # No spark-env.sh or spark-defaults.conf of the user's Spark installation:
            # pyspark's own folder (none ships; frazil's driver has it on its classpath too),
            # the same for every state dir so the daemons' classpath (which starts with it)
            # and so their class-data archive are too. An executor's classpath is frazil's
            # jars and then the worker's, so with it the executors' is the driver's: they
            # map the driver's class-data archive (engine/session.py).
            "SPARK_CONF_DIR": str(_spark_home() / "conf"),
        }

    def _master_json(self, timeout: float) -> dict[str, Any] | None:
        answer = http_get(f"{self.master_ui}/json/", timeout)
        if answer is None or answer[0] != 200:
            return None
        try:
            data = json.loads(answer[1])
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _worker_alive(self, ui_port: int, timeout: float) -> bool:
        states = _worker_states(http_get(f"{self.master_ui}/json/", timeout))
        return states.get(ui_port) == "ALIVE"


def master_workers(master_json: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``workers`` list of a master's ``/json/`` answer (empty if absent)."""
    workers = master_json.get("workers")
    return [w for w in workers if isinstance(w, dict)] if isinstance(workers, list) else []


def _worker_states(answer: tuple[int, bytes] | None) -> dict[int, str]:
    """Each worker's state by its web UI port, from a master's ``/json/`` answer.

    A worker that restarted on the same port shows up twice (DEAD, then ALIVE): an ALIVE
    entry wins.
    """
    if answer is None or answer[0] != 200:
        return {}
    try:
        data = json.loads(answer[1])
    except ValueError:
        return {}
    if not isinstance(data, dict):
        return {}
    states: dict[int, str] = {}
    for worker in master_workers(data):
        port = _port_of(str(worker.get("webuiaddress", "")))
        state = str(worker.get("state", ""))
        if port is not None and states.get(port) != "ALIVE":
            states[port] = state
    return states


def _port_of(url: str) -> int | None:
    tail = url.rstrip("/").rpartition(":")[2]
    return int(tail) if tail.isdigit() else None


def _java_options(cds: list[str]) -> str:
    """``SPARK_DAEMON_JAVA_OPTS``: the daemons are light; one GC thread and C1 suit them."""
    options = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *cds]
    # Spark's launcher splits this string itself and honours double quotes.
    return " ".join(f'"{o}"' if " " in o else o for o in options)


def _spark_home() -> Path:
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed: the local Spark cluster runs its jars")
    return Path(spec.origin).parent


def _spark_class() -> str:
    path = _spark_home() / "bin" / "spark-class"
    if not os.access(path, os.X_OK):
        raise ServiceError(f"{path} is missing or not executable: the local Spark cluster needs it")
    return str(path)
