"""The run fence, with real processes: locks, a killed run's JVM, pid reuse, URI state folders.

Stand-in "JVMs" are Python processes that sleep with ``-Dfrazil.run=<token>`` in their argv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from frazil import procs
from frazil.errors import PipelineError
from frazil.progress import fence
from frazil.progress.fence import RunRecord

SLEEPER = "import time; time.sleep(120)"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRAZIL_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started by a test, killed afterwards whatever happened."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@pytest.fixture
def state_dir(tmp_path: Path) -> str:
    return str(tmp_path / "state")


def wait_exec(pid: int, args: list[str]) -> None:
    """Wait until ``pid``'s command line reads ``args``.

    Popen returns once the child has exec'd, but the kernel fills in the new command line a
    moment later: until then /proc/<pid>/cmdline reads empty.
    """
    deadline = time.monotonic() + 10
    while procs.cmdline_args(pid) != args:
        assert time.monotonic() < deadline, procs.cmdline_args(pid)
        time.sleep(0.01)


def fake_jvm(
    spawned: list[subprocess.Popen[bytes]], *argv: str, code: str = SLEEPER
) -> subprocess.Popen[bytes]:
    """A sleeping process with ``argv`` on its command line."""
    args = [sys.executable, "-c", code, *argv]
    proc = subprocess.Popen(args)
    spawned.append(proc)
    wait_exec(proc.pid, args)
    return proc


def dead_process() -> tuple[int, int]:
    """The identity of a process that has exited (and been reaped)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    started = procs.start_time(proc.pid)
    assert started is not None
    proc.communicate(b"")
    return proc.pid, started


def write_record(
    state_dir: str, pipeline: str, jvm: subprocess.Popen[bytes], **changes: object
) -> None:
    """A record of a killed run (its driver is gone) whose JVM is ``jvm``."""
    driver_pid, driver_start = dead_process()
    jvm_start = procs.start_time(jvm.pid)
    fields: dict[str, object] = {
        "driver_pid": driver_pid,
        "driver_start_time": driver_start,
        "jvm_pid": jvm.pid,
        "jvm_start_time": jvm_start,
        "run_token": "frazil-run-leftover",
        **changes,
    }
    path = fence.run_file(state_dir, pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    RunRecord(**fields).write(path)  # type: ignore[arg-type]


def test_jvm_option_and_token() -> None:
    assert fence.jvm_option("frazil-run-abc") == "-Dfrazil.run=frazil-run-abc"


def test_start_time_identifies_a_process() -> None:
    with open(f"/proc/{os.getpid()}/stat") as stat:
        field22 = int(stat.read().rpartition(")")[2].split()[19])
    assert procs.start_time(os.getpid()) == field22
    assert procs.is_running(os.getpid(), field22)
    assert not procs.is_running(os.getpid(), field22 + 1)
    pid, started = dead_process()
    assert not procs.is_running(pid, started)


def test_a_matching_leftover_jvm_is_waited_out_then_killed(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    jvm = fake_jvm(spawned, fence.jvm_option("frazil-run-leftover"))
    write_record(state_dir, "p", jvm)
    began = time.monotonic()
    with fence.hold(state_dir, ["p"], wait_seconds=0.5):
        assert time.monotonic() - began >= 0.5
        assert jvm.wait(5) == -9


def test_a_leftover_jvm_that_exits_by_itself_is_not_killed(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    jvm = fake_jvm(spawned, "-Dfrazil.run=frazil-run-leftover", code="import time; time.sleep(1)")
    write_record(state_dir, "p", jvm)
    began = time.monotonic()
    with fence.hold(state_dir, ["p"], wait_seconds=30):
        assert time.monotonic() - began < 20
    assert jvm.wait(5) == 0


def test_a_killed_driver_s_jvm_is_fenced_by_the_next_run(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # A real driver process takes the fence, starts its "JVM" with the token, records it
    # and is killed with SIGKILL; its JVM (now an orphan) lingers.
    driver_code = textwrap.dedent(
        f"""
        import subprocess, sys, time
        from frazil import procs
        from frazil.progress import fence
        with fence.hold({state_dir!r}, ["p"]) as f:
            args = [sys.executable, "-c", {SLEEPER!r}, fence.jvm_option(f.token)]
            jvm = subprocess.Popen(args)
            while procs.cmdline_args(jvm.pid) != args:  # see wait_exec
                time.sleep(0.01)
            f.record_jvm(jvm.pid)
            print(jvm.pid, flush=True)
            time.sleep(120)
        """
    )
    driver = subprocess.Popen([sys.executable, "-c", driver_code], stdout=subprocess.PIPE)
    spawned.append(driver)
    assert driver.stdout is not None
    jvm_pid = int(driver.stdout.readline())
    jvm_start = procs.start_time(jvm_pid)
    assert jvm_start is not None
    try:
        refused = rf"already running \(pid {driver.pid}\)"
        with pytest.raises(PipelineError, match=refused), fence.hold(state_dir, ["p"]):
            pass
        driver.kill()
        driver.wait(10)
        assert procs.is_running(jvm_pid, jvm_start)
        with fence.hold(state_dir, ["p"], wait_seconds=0.3):
            assert not procs.is_running(jvm_pid, jvm_start)
    finally:
        if procs.is_running(jvm_pid, jvm_start):
            os.kill(jvm_pid, 9)


@pytest.mark.parametrize(
    "argv",
    [[], ["-Dfrazil.run=frazil-run-other"], ["frazil-run-leftove"]],
    ids=["no-token", "other-token", "partial-token"],
)
def test_a_process_without_the_token_is_never_signalled(
    state_dir: str, spawned: list[subprocess.Popen[bytes]], argv: list[str]
) -> None:
    jvm = fake_jvm(spawned, *argv)
    write_record(state_dir, "p", jvm)
    began = time.monotonic()
    with fence.hold(state_dir, ["p"], wait_seconds=5):
        assert time.monotonic() - began < 4  # not even waited for
    assert jvm.poll() is None


def test_a_reused_pid_is_never_signalled(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    jvm = fake_jvm(spawned, fence.jvm_option("frazil-run-leftover"))
    started = procs.start_time(jvm.pid)
    assert started is not None
    # Same pid and token but another start time: another process that got the pid.
    write_record(state_dir, "p", jvm, jvm_start_time=started + 1)
    with fence.hold(state_dir, ["p"], wait_seconds=0.2):
        pass
    assert jvm.poll() is None


def test_a_record_without_token_or_start_time_is_ignored(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    jvm = fake_jvm(spawned, fence.jvm_option("frazil-run-leftover"))
    write_record(state_dir, "p", jvm, run_token=None)
    with fence.hold(state_dir, ["p"], wait_seconds=0.2):
        pass
    path = fence.run_file(state_dir, "p")
    path.write_text(json.dumps({"driver_pid": 1, "jvm_pid": jvm.pid}))  # an older format
    with fence.hold(state_dir, ["p"], wait_seconds=0.2):
        pass
    assert jvm.poll() is None


def test_a_second_run_in_this_process_leaves_the_live_driver_s_jvm_alone(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # run() twice in one process (tests, notebooks): the JVM is still this process's own.
    with fence.hold(state_dir, ["p"]) as first:
        jvm = fake_jvm(spawned, fence.jvm_option(first.token))
        first.record_jvm(jvm.pid)
    with fence.hold(state_dir, ["p"], wait_seconds=0.2) as second:
        second.record_jvm(jvm.pid)  # the reused JVM keeps the first run's token
    assert jvm.poll() is None
    record = RunRecord.read(fence.run_file(state_dir, "p"))
    assert record is not None
    assert record.run_token == first.token
    assert record.driver_pid == os.getpid()
    assert record.jvm_start_time == procs.start_time(jvm.pid)


def test_a_jvm_without_token_is_recorded_without_one_and_never_signalled(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # A SparkSession built before the run: its JVM carries no token (or a foreign one).
    jvm = fake_jvm(spawned, "-Dfrazil.run=frazil-run-not-issued-here")
    with fence.hold(state_dir, ["p"]) as run_fence:
        run_fence.record_jvm(jvm.pid)
    path = fence.run_file(state_dir, "p")
    data = json.loads(path.read_text())
    assert data["run_token"] is None and data["jvm_pid"] == jvm.pid
    # Even once its driver is gone.
    data["driver_pid"], data["driver_start_time"] = dead_process()
    path.write_text(json.dumps(data))
    with fence.hold(state_dir, ["p"], wait_seconds=0.2):
        pass
    assert jvm.poll() is None


def test_a_second_hold_refuses_while_the_first_is_held(state_dir: str) -> None:
    with fence.hold(state_dir, ["p"]):
        with pytest.raises(PipelineError) as excinfo, fence.hold(state_dir, ["p"]):
            pass
        assert str(excinfo.value) == f"pipeline 'p' is already running (pid {os.getpid()})"
        with fence.hold(state_dir, ["q"]):  # another pipeline is not fenced
            pass
    with fence.hold(state_dir, ["p"]):
        pass


def test_a_refusal_releases_the_pipelines_already_locked(state_dir: str) -> None:
    with fence.hold(state_dir, ["b"]):
        refused = "'b' is already running"
        with pytest.raises(PipelineError, match=refused), fence.hold(state_dir, ["a", "b"]):
            pass
        with fence.hold(state_dir, ["a"]):
            pass


def test_a_lock_held_by_another_process_refuses(
    state_dir: str, spawned: list[subprocess.Popen[bytes]]
) -> None:
    lock = fence.runs_dir(state_dir) / "p.lock"
    lock.parent.mkdir(parents=True)
    code = textwrap.dedent(
        f"""
        import fcntl, time
        f = open({str(lock)!r}, "a")
        fcntl.flock(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(120)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    spawned.append(holder)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == b"locked"
    refused = r"'p' is already running \(lock .* is held\)"
    with pytest.raises(PipelineError, match=refused), fence.hold(state_dir, ["p"]):
        pass
    holder.kill()  # kill -9 releases the lock
    holder.wait(10)
    with fence.hold(state_dir, ["p"]):
        pass


def test_a_remote_state_dir_keeps_the_fence_in_the_local_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with fence.hold("s3a://bucket/state", ["p"]) as run_fence:
        run_fence.record_jvm(os.getpid())
    folder = fence.runs_dir("s3a://bucket/state/")
    assert folder.parent == tmp_path / "cache" / "runs"
    assert len(folder.name) == 16 and int(folder.name, 16) >= 0
    assert (folder / "p.json").exists() and (folder / "p.lock").exists()
    assert fence.runs_dir("s3a://bucket/other") != folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # no "s3a:" folder here


def test_the_cache_defaults_to_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FRAZIL_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    folder = fence.runs_dir("s3a://bucket/state")
    assert folder.parent == tmp_path / "home" / ".cache" / "frazil" / "runs"


def test_a_local_state_dir_keeps_the_fence_inside(tmp_path: Path) -> None:
    assert fence.runs_dir(str(tmp_path / "s")) == tmp_path / "s" / "runs"
    assert fence.runs_dir((tmp_path / "s").as_uri()) == tmp_path / "s" / "runs"
    assert fence.run_file(str(tmp_path / "s"), "p") == tmp_path / "s" / "runs" / "p.json"


def test_the_run_token_is_found_among_java_options() -> None:
    options = f"-Dlog4j2.configurationFile=x {fence.jvm_option('a1b2')} -Xss4m"

    assert fence.run_token_in(options) == "a1b2"
    assert fence.run_token_in("-Dfrazil.runner=x -Xss4m") is None
