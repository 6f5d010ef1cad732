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
from frazil.config.secrets import scrub
from frazil.errors import FrazilError


def main() -> None:
    """Run the CLI; print :class:`FrazilError` without a stack trace unless ``--verbose``."""
    try:
        app()
    except FrazilError as exc:
        if GLOBALS.verbose:
            err_console.print_exception()
        err_console.print(f"[bold red]error:[/] {escape(scrub(str(exc)))}", highlight=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
