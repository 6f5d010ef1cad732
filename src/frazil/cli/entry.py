"""The ``frazil`` command: the invoked command's module only, then the CLI.

Each command module registers its commands on :data:`frazil.cli.app.app` when imported;
:mod:`frazil.cli.main` imports them all (for tests and ``python -m``).
"""

from __future__ import annotations

import importlib
import sys

from rich.markup import escape

from frazil.cli.app import GLOBALS, app, err_console
from frazil.cli.failures import describe
from frazil.config.secrets import scrub

#: Each command (or group) and the module that registers it, in the order of ``--help``.
COMMANDS = {
    "dlq": "dlq_cmd",
    "generate": "generate_cmd",
    "local": "local_cmd",
    "plan": "plan_cmd",
    "quickstart": "quickstart_cmd",
    "run": "run_cmd",
    "setup": "setup_cmd",
    "sql": "sql_cmd",
    "status": "status_cmd",
    "tables": "tables_cmd",
    "table": "tables_cmd",
    "optimize": "tables_cmd",
    "maintain": "tables_cmd",
    "ui": "ui_cmd",
    "validate": "validate_cmd",
}


def register(argv: list[str]) -> None:
    """Import the module of the command ``argv`` names, or all of them (``--help``, a
    misspelt command): the read-only commands answer in a second or two, of which importing
    every command's dependencies (Faker, the local services, the renderers) took 0.3 s."""
    named = next((a for a in argv if a in COMMANDS), None)
    modules = [COMMANDS[named]] if named is not None else list(dict.fromkeys(COMMANDS.values()))
    for module in modules:
        importlib.import_module(f"frazil.cli.{module}")


def main() -> None:
    """Run the CLI: every error prints as a line or two (:func:`describe`), without a stack
    trace unless ``--verbose``, whichever command and library it comes from."""
    try:
        register(sys.argv[1:])
        app()
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:
        if GLOBALS.verbose:
            err_console.print_exception()
        err_console.print(
            f"[bold red]error:[/] {escape(scrub(describe(exc)))}",
            highlight=False,
            # Into a pipe or a log, a line of the message stays one line (a terminal wraps it).
            soft_wrap=not err_console.is_terminal,
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
