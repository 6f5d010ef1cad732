"""Several ``frazil`` commands in one process, one after the other, sharing one Spark driver.

Usage: ``python cli_in_one_process.py NAME -- ARGS... [--- NAME -- ARGS...]...``

Each command is framed the way ``test_cli_80_columns``'s terminal script frames a command of
its own (``=== NAME``, its output, ``=== NAME exit CODE``), so the test reads it the same.
CI time: the commands that query tables each started a Spark driver JVM of their own
(15-30 s); their output does not depend on it (the driver's own output goes to its log file,
and the first command here starts it as a lone command would).
"""

from __future__ import annotations

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
    for name, args in _commands(sys.argv[1:]):
        print(f"=== {name}", flush=True)
        sys.argv = ["frazil", *args]
        code: int | str | None = 0
        try:
            main()
        except SystemExit as stop:
            code = stop.code
        sys.stdout.flush()
        sys.stderr.flush()
        print(f"=== {name} exit {0 if code is None else code}", flush=True)
