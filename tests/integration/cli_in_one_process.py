"""Several ``frazil`` commands in one process, one after the other, sharing one Spark driver.

Usage: ``python cli_in_one_process.py NAME -- ARGS... [--- NAME -- ARGS...]...``

Each command is framed the way ``test_cli_80_columns``'s terminal script frames a command of
its own (``=== NAME``, its output, ``=== NAME exit CODE``), so the test reads it the same; on
stderr too when stderr is not where stdout goes, so each command's error lines can be told
apart (:func:`tests.integration.helpers.in_one_process`).
CI time: the commands that query tables each started a Spark driver JVM of their own
(15-30 s); their output does not depend on it (the driver's own output goes to its log file,
and the first command here starts it as a lone command would).
"""

from __future__ import annotations

import os
import sys

from frazil.cli.main import main


def _commands(argv: list[str]) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    words: list[str] = []
    for word in [*argv, "---"]:
        if word != "---":
            words.append(word)
            continue
        name, separator, *args = words
        if separator != "--":
            raise SystemExit(f"expected NAME -- ARGS..., got {words}")
        found.append((name, args))
        words = []
    return found


if __name__ == "__main__":
    # Framed on stderr too when it is a stream of its own (not the terminal stdout goes to):
    # a command's errors are read from its part of stderr.
    streams = (sys.stdout,) if os.path.sameopenfile(1, 2) else (sys.stdout, sys.stderr)
    for name, args in _commands(sys.argv[1:]):
        for stream in streams:
            print(f"=== {name}", file=stream, flush=True)
        sys.argv = ["frazil", *args]
        code: int | str | None = 0
        try:
            main()
        except SystemExit as stop:
            code = stop.code
            if code is not None and not isinstance(code, int):
                print(code, file=sys.stderr)  # as the interpreter prints it on the way out
                code = 1
        sys.stderr.flush()
        for stream in streams:
            stream.flush()
            print(f"=== {name} exit {0 if code is None else code}", file=stream, flush=True)
