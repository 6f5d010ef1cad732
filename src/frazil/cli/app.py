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
    # Help as Markdown: a docstring's paragraphs wrap as sentences at the terminal's width
    # (in "rich" mode Typer keeps their source line breaks, cutting sentences mid-line).
    rich_markup_mode="markdown",
)

#: Human output goes to stdout through this console; diagnostics go to ``err_console``.
console = Console()
err_console = Console(stderr=True)


class OutputFormat(str, enum.Enum):
    """How a command prints its result: for people (``text``) or for scripts (``json``)."""

    text = "text"
    json = "json"


def inherit_output(
    ctx: typer.Context, param: typer.CallbackParam, value: OutputFormat
) -> OutputFormat:
    """A command's ``-o/--output``: its own when given, else the one given before the command
    (``frazil -o json tables``, as ``--verbose`` goes there), else its default.

    Args:
        ctx: The command's context; its root holds the options given before the command.
        param: The command's ``--output`` option.
        value: Its value: given after the command, or the default.

    Returns:
        The format the command prints in.
    """
    source = ctx.get_parameter_source(param.name or "output")
    # By the source's name: Typer may bring a click of its own, with its own ParameterSource.
    if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
        return value
    given_before = ctx.find_root().params.get("output")
    return given_before if isinstance(given_before, OutputFormat) else value


#: The ``-o/--output`` option of a command that prints a result; ``frazil -o json COMMAND``
#: sets it too (:func:`inherit_output`).
OUTPUT_OPTION = typer.Option(
    OutputFormat.text, "--output", "-o", help="text or json", callback=inherit_output
)


class _Globals:
    verbose: bool = False
    log_format: object = "text"


GLOBALS = _Globals()


class LogFormat(str, enum.Enum):
    """How log lines look: for people (``text``) or for log shippers (``json``)."""

    text = "text"
    json = "json"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and a record's ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        entry: dict[str, object] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _not_from_py4j(record: logging.LogRecord) -> bool:
    """Py4J logs some failures on the root logger (``logging.exception("KeyboardInterrupt
    while sending command.")`` when Ctrl-C interrupts a call into the JVM), with a stack
    trace: the command says what happened itself."""
    return "py4j" not in record.pathname.replace("\\", "/").split("/")


def _version(value: bool) -> None:
    """``--version``: frazil's version and the versions of the parts it runs, then exit."""
    if not value:
        return
    from frazil import __version__
    from frazil.jvm.pins import ICEBERG_VERSION, KAFKA_VERSION, SPARK_VERSION

    console.print(
        f"frazil {__version__} (Spark {SPARK_VERSION}, Iceberg {ICEBERG_VERSION}, "
        f"Kafka {KAFKA_VERSION} for the local broker)",
        highlight=False,
    )
    raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        help="Print frazil's version and its parts' (Spark, Iceberg, Kafka), then exit.",
        callback=_version,
        is_eager=True,
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show stack traces and Spark/Kafka logs on errors."
    ),
    log_format: LogFormat = typer.Option(
        LogFormat.text, "--log-format", help="text, or json (one object per line) for shippers."
    ),
    output: OutputFormat | None = typer.Option(
        None,
        "--output",
        "-o",
        help="text or json, as the command's own -o (which wins when both are given).",
    ),
) -> None:
    # ``version`` ends the command in its callback. ``output`` is not used here: each
    # command's own -o reads it from this context
    # (inherit_output), so that the one after the command wins.
    import os
    import time

    GLOBALS.verbose = verbose
    GLOBALS.log_format = log_format
    if verbose:
        # The Spark driver JVM's console threshold (engine/session.py reads it).
        os.environ["FRAZIL_VERBOSE"] = "1"
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    for handler in logging.getLogger().handlers:
        # Secrets of the loaded config never reach a log line, whichever module logs it.
        handler.addFilter(RedactingFilter())
        if log_format is LogFormat.json:
            formatter = JsonFormatter()
            formatter.converter = time.gmtime
            handler.setFormatter(formatter)
    if not verbose:
        # The Kafka clients' own lines (a transient "Failed to acquire idempotence PID", a
        # "Connection refused" every 50 ms): frazil reports what they come to itself.
        logging.getLogger("frazil.kafka.client").setLevel(logging.CRITICAL)
    if not verbose:
        # py4j logs the full Python traceback of a failing foreachBatch call; frazil reports
        # the error itself (with --verbose the traceback is shown).
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        for handler in logging.getLogger().handlers:
            handler.addFilter(_not_from_py4j)
