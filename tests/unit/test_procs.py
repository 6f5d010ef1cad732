"""Local processes from ``/proc``: the process table."""

from __future__ import annotations

import os
import subprocess
import sys

from frazil.procs import processes


def test_processes_lists_a_child_with_its_parent_and_command_line() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "marker-arg"])
    try:
        table = processes()
        parent, line = table[child.pid]
        assert parent == os.getpid()
        # Arguments are joined by spaces, as a shell would show them.
        assert line.endswith(b"time.sleep(30) marker-arg")
        assert table[os.getpid()][0] == os.getppid()
    finally:
        child.kill()
        child.wait()
