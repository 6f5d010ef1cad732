"""The root Typer application and options shared by every command."""

from __future__ import annotations

import enum
import logging

import typer
from rich.console import Console

from frazil.config.secrets import RedactingFilter

app = typer.Typer(
    name="frazil",
    help="Exactly-once streaming ingestion from Apache Kafka into Apache Iceberg tables.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

#: Human output goes to stdout through this console; diagnostics go to ``err_console``.
console = Console()
err_console = Console(stderr=True)


class OutputFormat(str, enum.Enum):
    """How a command prints its result: for people (``text``) or for scripts (``json``)."""

    text = "text"
    json = "json"


class _Globals:
    verbose: bool = False


GLOBALS = _Globals()


@app.callback()
def _root(
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show stack traces and Spark/Kafka logs on errors."
    ),
) -> None:
    GLOBALS.verbose = verbose
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for handler in logging.getLogger().handlers:
        # Secrets of the loaded config never reach a log line, whichever module logs it.
        handler.addFilter(RedactingFilter())
    if not verbose:
        # py4j logs the full Python traceback of a failing foreachBatch call; frazil reports
        # the error itself (with --verbose the traceback is shown).
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
