"""Entry point of ``python -m frazil.cli.main``: every command registered (the installed
``frazil`` command, :mod:`frazil.cli.entry`, imports only the one it runs)."""

from __future__ import annotations

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
from frazil.cli.app import app
from frazil.cli.entry import main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
