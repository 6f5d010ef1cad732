"""Pid files of the broker and the registry without a start time are still recognized.

A stand-in process carries the arguments the real one would (no JVM is started).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from frazil.local.broker import LocalBroker
from frazil.local.registry import LocalRegistry
from frazil.procs import cmdline_args


@contextlib.contextmanager
def stand_in(*args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A sleeping process whose command line holds ``args``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", *args],
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while args[-1] not in cmdline_args(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.02)  # until it has exec'd
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_running_broker_with_an_old_pid_file_shows_its_listeners_and_stops(
    tmp_path: Path,
) -> None:
    kafka = tmp_path.resolve() / "kafka"
    kafka.mkdir()
    with stand_in("kafka.Kafka", str(kafka / "server.properties")) as proc:
        record = {
            "pid": proc.pid,
            "bootstrap": "127.0.0.1:19092",
            "port": 19092,
            "controller_port": 19093,
            "sasl_port": None,
            "sasl_bootstrap": None,
            "sasl_ssl_bootstrap": "127.0.0.1:19094",
            "mtls_bootstrap": "127.0.0.1:19095",
        }
        (kafka / "broker.pid").write_text(json.dumps(record))
        status = LocalBroker(tmp_path).status()
        assert status.running and status.pid == proc.pid
        assert status.bootstrap == "127.0.0.1:19092"
        assert status.sasl_bootstrap is None
        assert (status.sasl_ssl_bootstrap, status.mtls_bootstrap) == (
            "127.0.0.1:19094",
            "127.0.0.1:19095",
        )
        assert LocalBroker(tmp_path).down(timeout=10) is True
        assert proc.wait(timeout=10) is not None
        assert not (kafka / "broker.pid").exists()


def test_a_running_registry_with_an_old_pid_file_is_found_and_stopped(tmp_path: Path) -> None:
    folder = tmp_path.resolve() / "schema-registry"
    folder.mkdir()
    url = "http://127.0.0.1:18081/apis/ccompat/v7"
    with stand_in(f"-Dfrazil.registry.dir={folder}") as proc:
        record = {"pid": proc.pid, "port": 18081, "url": url, "cds_partial": None}
        (folder / "registry.pid").write_text(json.dumps(record))
        status = LocalRegistry(tmp_path).status()
        assert status.running and (status.pid, status.url) == (proc.pid, url)
        assert LocalRegistry(tmp_path).down(timeout=10) is True
        assert proc.wait(timeout=10) is not None


def test_an_old_pid_file_naming_another_process_means_not_running(tmp_path: Path) -> None:
    # The pid went to a process that is neither the broker nor the registry.
    with stand_in("unrelated") as proc:
        record = {"pid": proc.pid, "bootstrap": "127.0.0.1:19092", "url": "http://x"}
        for folder, stem in (("kafka", "broker"), ("schema-registry", "registry")):
            (tmp_path / folder).mkdir()
            (tmp_path / folder / f"{stem}.pid").write_text(json.dumps(record))
        assert not LocalBroker(tmp_path).status().running
        assert not LocalRegistry(tmp_path).status().running
        assert LocalBroker(tmp_path).down(timeout=1) is False
        assert proc.poll() is None  # left alone
