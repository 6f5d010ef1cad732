"""Shared benchmark plumbing: a private broker, result files, the machine's description."""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.local.broker import LocalBroker

BENCH_DIR = Path(__file__).resolve().parent
WORK_DIR = BENCH_DIR / "work"
RESULTS_DIR = BENCH_DIR / "results"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_broker(name: str) -> LocalBroker:
    """A private broker for one benchmark, on free ports, data under bench/work/."""
    port, controller = free_port(), free_port()
    broker = LocalBroker(WORK_DIR / name / "state", port=port, controller_port=controller)
    broker.up(timeout=120)
    return broker


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    """Write ``bench/results/<name>.json`` (latest) and a timestamped copy."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    data = {
        "benchmark": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        **data,
    }
    latest = RESULTS_DIR / f"{name}.json"
    latest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return latest


def payments_config(
    work: Path, bootstrap: str, topic: str, table: str, **pipeline: Any
) -> dict[str, Any]:
    """A frazil config reading payments from ``topic`` into ``bench.<table>`` under ``work``.

    The table is laid out as every benchmark's: ``days(created_at)``; ``pipeline`` adds or
    overrides pipeline settings.
    """
    return {
        "catalog": {"warehouse": str(work / "lake")},
        "kafka": {"bootstrap_servers": bootstrap},
        "state_dir": str(work / "state" / table),
        "pipelines": [
            {
                "name": table,
                "topics": [topic],
                "table": f"bench.{table}",
                "schema": dict(PAYMENTS_SCHEMA),
                "partition_by": ["days(created_at)"],
                **pipeline,
            }
        ],
    }


def open_table(catalog: str, warehouse: Path, table: str) -> Any:
    """A PyIceberg handle on a benchmark table.

    Args:
        catalog: ``lake`` for frazil's tables (the warehouse folder holds ``catalog.db`` and
            the tables), ``iceberg`` for the Kafka Connect harness's (tables under
            ``warehouse/``).
    """
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = warehouse.resolve()
    location = warehouse if catalog == "lake" else warehouse / "warehouse"
    return SqlCatalog(
        catalog, uri=f"sqlite:///{warehouse}/catalog.db", warehouse=location.as_uri()
    ).load_table(table)


def metadata_location(catalog_db: Path, namespace: str, name: str) -> Path | None:
    """The path of a table's current metadata file in a JDBC/SQLite catalog, read-only; None
    while the catalog or the table cannot be read (a benchmark's run is still writing them)."""
    if not catalog_db.exists():
        return None
    try:
        con = sqlite3.connect(f"file:{catalog_db}?mode=ro", uri=True, timeout=1)
        try:
            row = con.execute(
                "SELECT metadata_location FROM iceberg_tables "
                "WHERE table_namespace = ? AND table_name = ?",
                (namespace, name),
            ).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    if not row:
        return None
    return Path(row[0].removeprefix("file:").removeprefix("//"))


def table_metadata(catalog_db: Path, namespace: str, name: str) -> dict[str, Any] | None:
    """A table's current metadata (the JSON file) from a JDBC/SQLite catalog, read-only; None
    while the catalog, the table or its metadata file cannot be read (a benchmark's run is
    still writing them)."""
    location = metadata_location(catalog_db, namespace, name)
    if location is None:
        return None
    try:
        data: dict[str, Any] = json.loads(location.read_text())
    except (OSError, ValueError):
        return None
    return data


def descendants(root: int) -> list[int]:
    """``root`` and every process below it, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def start_frazil_run(config: Path) -> subprocess.Popen[str]:
    """``frazil run --until-caught-up`` on ``config`` as a subprocess of this interpreter's
    frazil; its stderr is kept (read it with ``communicate``) to report a failed run."""
    return subprocess.Popen(
        [sys.executable, "-m", "frazil.cli.entry", "run", "-c", str(config), "--until-caught-up"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_frazil(*args: str) -> subprocess.Popen[bytes]:
    """A ``frazil`` command as a subprocess of this interpreter's frazil, output discarded, in
    a session of its own: a Ctrl-C at the terminal is the benchmark's, not the command's."""
    return subprocess.Popen(
        [sys.executable, "-m", "frazil.cli.entry", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=True,
    )


def stop_process(proc: subprocess.Popen[bytes]) -> int:
    """SIGTERM ``proc`` unless it has ended, and wait for its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return proc.wait(300)
