"""frazil.local.daemon (its pid record, class-data archives, port check) with small shell
processes standing in for the servers (no JVM)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from frazil.errors import ServiceError
from frazil.local.cds import cds_archive, cds_options, settle_archive
from frazil.local.daemon import Daemon, Launched
from frazil.local.host import port_taken
from frazil.local.pid_record import LegacyPidFile
from tests.conftest import free_ports

NAME = "the test service"


def never(_timeout: float) -> bool:
    return False


def always(_timeout: float) -> bool:
    return True


def daemon(tmp_path: Path) -> Daemon:
    return Daemon(NAME, tmp_path / "svc", "svc")


def start(d: Daemon, command: list[str], **kwargs: object) -> None:
    options: dict[str, object] = {
        "address": "http://127.0.0.1:1",
        "ports": [],
        "healthy": always,
        "timeout": 10.0,
    }
    options.update(kwargs)
    with d.locked():
        d.start(command, **options)  # type: ignore[arg-type]


def test_a_service_that_never_answers_fails_naming_it_its_address_and_log(
    tmp_path: Path,
) -> None:
    d = daemon(tmp_path)
    script = "echo starting up; exec sleep 60"
    with pytest.raises(ServiceError) as failure:
        start(d, ["sh", "-c", script], address="http://127.0.0.1:4242", healthy=never, timeout=1)
    message = str(failure.value)
    assert NAME in message
    assert "did not answer at http://127.0.0.1:4242 within 1 s" in message
    assert str(d.log_file) in message
    assert "starting up" in message  # the log's tail
    # It was stopped: nothing left running, no pid file.
    assert d.running() is None
    assert not d.pid_file.exists()


def test_a_service_that_exits_while_starting_fails_with_its_exit_code_and_log(
    tmp_path: Path,
) -> None:
    d = daemon(tmp_path)
    with pytest.raises(ServiceError) as failure:
        start(d, ["sh", "-c", "echo cannot bind >&2; exit 3"], healthy=never)
    message = str(failure.value)
    assert f"{NAME} (pid " in message
    assert "exited with exit code 3 while starting at http://127.0.0.1:1" in message
    assert "cannot bind" in message
    assert str(d.log_file) in message


def test_a_port_in_use_fails_before_starting_and_names_address_and_log(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        assert port_taken("127.0.0.1", port)
        with pytest.raises(ServiceError) as failure:
            start(
                d,
                ["sh", "-c", "exit 0"],
                address=f"http://127.0.0.1:{port}",
                ports=[port],
                port_hint="pick another with --x-port",
            )
    message = str(failure.value)
    assert f"cannot start {NAME} at http://127.0.0.1:{port}" in message
    assert f"127.0.0.1:{port} is already in use (pick another with --x-port)" in message
    assert str(d.log_file) in message
    assert d.running() is None


def test_a_port_shared_with_so_reuseport_still_counts_as_taken() -> None:
    # Jetty binds the REST catalog with SO_REUSEPORT; a second such server would share it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        assert port_taken("127.0.0.1", other.getsockname()[1])
    (free,) = free_ports(1)
    assert not port_taken("127.0.0.1", free)


def test_start_is_idempotent_and_stop_ends_the_process(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    start(d, ["sleep", "60"], info={"k": "v"})
    running = d.running()
    assert running is not None
    assert running.info == {"k": "v"}
    # Same address: the running one is kept (the command is not run again).
    start(d, ["sh", "-c", "exit 9"])
    again = d.running()
    assert again is not None and again.pid == running.pid
    # Another address: refused while it runs.
    with pytest.raises(ServiceError, match=r"already running at http://127\.0\.0\.1:1 "):
        start(d, ["sleep", "60"], address="http://127.0.0.1:2")
    with d.locked():
        assert d.stop(timeout=10)
        assert d.running() is None
        assert not d.stop(timeout=10)


def test_stop_kills_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    # Python, not sh: sh's trap only runs between commands, so sleep would end the test.
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    start(d, [sys.executable, "-c", ignore])
    time.sleep(0.5)  # let it install the handler
    with d.locked():
        assert d.stop(timeout=1)
    assert d.running() is None


def test_a_pid_file_of_a_gone_process_means_not_running(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    d.directory.mkdir(parents=True)
    # The pid of this very process but another start time: a reused pid, not the service.
    record = {"pid": os.getpid(), "started": 1, "address": "x", "ports": [], "info": {}}
    d.pid_file.write_text(json.dumps(record))
    assert d.running() is None
    d.pid_file.write_text("not json")
    assert d.running() is None


def test_class_data_archive_is_named_after_jvm_and_jars_and_can_be_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FRAZIL_CACHE_DIR", str(tmp_path / "cache"))
    jar = tmp_path / "a.jar"
    jar.write_bytes(b"x")
    archive = cds_archive("s3proxy", sys.executable, [jar])
    assert archive is not None
    assert archive.parent == tmp_path / "cache" / "cds"
    assert archive.name.startswith("s3proxy-") and archive.suffix == ".jsa"
    assert cds_archive("s3proxy", sys.executable, [jar]) == archive
    other = tmp_path / "b.jar"
    other.write_bytes(b"y")
    assert cds_archive("s3proxy", sys.executable, [jar, other]) != archive
    monkeypatch.setenv("FRAZIL_CDS", "0")
    assert cds_archive("s3proxy", sys.executable, [jar]) is None
    assert cds_options(None) == ([], None)


def test_class_data_archive_is_written_once_then_mapped(tmp_path: Path) -> None:
    archive = tmp_path / "cds" / "svc-0123.jsa"
    options, partial = cds_options(archive)
    assert partial is not None and partial.name.startswith("svc-0123.jsa.")
    assert options[0] == f"-XX:ArchiveClassesAtExit={partial}"
    # A process that stopped cleanly leaves its archive, which replaces other versions'.
    old = tmp_path / "cds" / "svc-old.jsa"
    old.write_bytes(b"old")
    partial.write_bytes(b"archive")
    settle_archive(partial, keep=True)
    assert archive.read_bytes() == b"archive"
    assert not old.exists() and not partial.exists()
    options, partial = cds_options(archive)
    assert (options[0], partial) == (f"-XX:SharedArchiveFile={archive}", None)
    # A killed process's half-written archive is dropped.
    _, partial = cds_options(tmp_path / "cds" / "svc-4567.jsa")
    assert partial is not None
    partial.write_bytes(b"half")
    settle_archive(partial, keep=False)
    assert not partial.exists()
    assert not (tmp_path / "cds" / "svc-4567.jsa").exists()


def test_a_pid_file_from_before_the_daemon_is_read_by_the_command_line(tmp_path: Path) -> None:
    marker = f"-Dmarker={tmp_path}"
    legacy = LegacyPidFile("url", ("-c", marker), ("extra",))
    d = Daemon(NAME, tmp_path / "svc", "svc", legacy=legacy)
    d.directory.mkdir(parents=True)
    # Such a file has no start time; only a process with the service's arguments counts.
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", marker],
        start_new_session=True,
    )
    try:
        record = {"pid": proc.pid, "url": "http://127.0.0.1:1", "extra": "x", "gone": None}
        d.pid_file.write_text(json.dumps(record))
        deadline = time.monotonic() + 10
        while d.running() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # until the child has exec'd
        running = d.running()
        assert running is not None
        assert (running.pid, running.address, dict(running.info)) == (
            proc.pid,
            "http://127.0.0.1:1",
            {"extra": "x"},
        )
        # This very process has the pid of no such service.
        d.pid_file.write_text(json.dumps({**record, "pid": os.getpid()}))
        assert d.running() is None
        d.pid_file.write_text(json.dumps(record))
        assert d.down(timeout=10)
        assert proc.wait(timeout=10) is not None
        assert not d.pid_file.exists()
    finally:
        proc.kill()
        proc.wait()


def test_launch_waits_for_nothing_and_rollback_stops_only_what_it_started(
    tmp_path: Path,
) -> None:
    d = daemon(tmp_path)
    with d.locked():
        launched = d.launch(["sleep", "60"], address="http://127.0.0.1:1", ports=[])
    assert launched.fresh and d.running() == launched.running
    again = Launched(launched.running)
    assert not again.fresh
    # A failure after a launch that started nothing leaves the process running...
    with pytest.raises(RuntimeError), d.rollback(again):
        raise RuntimeError("later step failed")
    assert d.running() is not None
    # ... after the launch that started it, stops it.
    timed_out = pytest.raises(ServiceError, match=r"did not answer at \S+ within 0\.5 s")
    with timed_out, d.rollback(launched):
        d.wait(launched, never, timeout=0.5)
    assert d.running() is None and not d.pid_file.exists()


def test_terminate_signals_without_waiting_and_down_needs_no_folder(tmp_path: Path) -> None:
    d = daemon(tmp_path)
    assert not d.down(timeout=1)
    assert not d.directory.exists()  # nothing made for a service that never ran
    assert not d.terminate()
    start(d, ["sleep", "60"])
    assert d.terminate()
    # Whether it was still exiting or gone already, down leaves nothing behind.
    d.down(timeout=10)
    assert d.running() is None and not d.pid_file.exists()
