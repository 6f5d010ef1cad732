"""Entry point of the ``frazil`` command."""

from __future__ import annotations

import sys

from rich.markup import escape

from frazil.cli import (  # noqa: F401  (imported for their command registrations)
    dlq_cmd,
    generate_cmd,
    local_cmd,
    plan_cmd,
    quickstart_cmd,
    run_cmd,
    setup_cmd,
    sql_cmd,
    status_cmd,
    tables_cmd,
    ui_cmd,
    validate_cmd,
)
from frazil.cli.app import GLOBALS, app, err_console
from frazil.cli.failures import describe
from frazil.config.secrets import scrub


def main() -> None:
    """Run the CLI: every error prints as a line or two (:func:`describe`), without a stack
    trace unless ``--verbose``, whichever command and library it comes from."""
    try:
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
