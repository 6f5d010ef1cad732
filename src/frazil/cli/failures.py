"""The CLI's one error boundary: any exception becomes a line or two that say what and where.

:class:`~frazil.errors.FrazilError` messages are written for people already. Errors from the
libraries underneath are not: Spark's analysis errors carry the query plan, a Py4J error the
whole Java stack, confluent-kafka a ``KafkaError{code=...}`` repr. :func:`describe` keeps the
part a user acts on (the JVM exception's own first line, Kafka's reason) and drops the rest,
and cuts short the long expressions and types a Spark message quotes (a decoded record's whole
expression tree would fill the line); ``--verbose`` still shows the full stack trace.

Library types are recognised by their module and class name, so this module imports neither
PySpark nor confluent-kafka (an exception of theirs means they are loaded already).
"""

from __future__ import annotations

from typing import Any

from frazil.errors import FrazilError, PipelineFailed, first_line, short_quotes

#: Longest line kept from a library's message (Spark's first lines can be long, but a line of a
#: Java stack is not a message).
_LIMIT = 500

#: Java exceptions that only wrap the one that says what went wrong.
_JAVA_WRAPPERS = (
    "java.util.concurrent.ExecutionException",
    "java.util.concurrent.CompletionException",
    "java.lang.reflect.InvocationTargetException",
    "java.lang.reflect.UndeclaredThrowableException",
)


def _is(exc: BaseException, *prefixes: str) -> bool:
    """Whether ``exc``'s class, or one it derives from, lives in a module under ``prefixes``."""
    return any(f"{k.__module__}.{k.__qualname__}".startswith(prefixes) for k in type(exc).__mro__)


def describe(exc: BaseException) -> str:
    """A short message for ``exc``: one or two lines, no stack trace.

    Args:
        exc: Any exception that reached the CLI.

    Returns:
        The message to print after ``error:``.
    """
    if isinstance(exc, PipelineFailed) and exc.__cause__ is not None:
        return f"{exc.head}: {describe(exc.__cause__)}"
    if isinstance(exc, FrazilError):
        return str(exc)
    if _is(exc, "py4j.protocol.Py4JJavaError"):
        return _java(exc)
    if _is(exc, "py4j.protocol.Py4JNetworkError") or (
        isinstance(exc, ConnectionError) and _raised_in_py4j(exc)
    ):
        # The socket's own error when py4j connects again to a JVM that is gone (killed, out
        # of memory), or py4j's: the Spark driver went away.
        return f"the Spark driver (JVM) stopped answering: {first_line(exc, _LIMIT)}{_GONE}"
    if _is(exc, "py4j."):
        # Py4JError: the JVM answered, but not as asked (a method its jars do not have).
        return f"the Spark driver (JVM) stopped answering: {first_line(exc, _LIMIT)}"
    if _is(exc, "pyspark.errors."):
        # PySpark turns most Py4J errors into its own (AnalysisException, UnknownException…)
        # and keeps the Java one: its chain says what and why, as a Py4J error's does.
        origin = getattr(exc, "_origin", None)  # the Java Throwable (a Py4J JavaObject)
        if origin is not None and type(origin).__name__ == "JavaObject":
            return _java_chain(origin) or _spark(exc)
        return _spark(exc)
    if _is(exc, "confluent_kafka.schema_registry"):
        return f"schema registry: {first_line(exc, _LIMIT)}"
    if _is(exc, "cimpl.KafkaException", "confluent_kafka."):
        return _kafka(exc)
    if _is(exc, "pyiceberg."):
        return f"Iceberg catalog: {type(exc).__name__}: {first_line(exc, _LIMIT)}"
    if isinstance(exc, OSError) and exc.filename is not None:
        # "[Errno 2] No such file or directory: 'x.yaml'" says it already.
        return first_line(exc, _LIMIT)
    return (
        f"{type(exc).__name__}: {first_line(exc, _LIMIT)} "
        "(an unexpected error: `frazil --verbose ...` shows where)"
    )


#: What a user checks when the driver's JVM went away.
_GONE = " (did its process exit: killed, or out of memory?)"


def _raised_in_py4j(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside py4j's code (its traceback's last frames)."""
    tb = exc.__traceback__
    modules = []
    while tb is not None:
        modules.append(str(tb.tb_frame.f_globals.get("__name__", "")))
        tb = tb.tb_next
    return any(m.startswith("py4j.") for m in modules[-3:])


def _spark(exc: BaseException) -> str:
    """Spark's own message (``[UNRESOLVED_COLUMN...] ... line 1 pos 7``) without the plan."""
    desc = getattr(exc, "_desc", None)
    text = (desc if isinstance(desc, str) and desc.strip() else str(exc)).strip()
    # The quotes shortened before the line is cut: a cut would leave a long one unclosed.
    line = short_quotes(text.splitlines()[0].rstrip().removesuffix(";")) if text else ""
    return line[:_LIMIT] or type(exc).__name__


def _java(exc: BaseException) -> str:
    """A Py4J error: its Java exception's chain, or its text when the JVM is gone."""
    return _java_chain(getattr(exc, "java_exception", None)) or _java_text(exc)


def _java_chain(java: Any) -> str | None:
    """The Java exception's first line, and its root cause's when that says something else;
    None when the JVM cannot be asked (a second Ctrl-C stopped it)."""
    lines: list[str] = []
    try:
        cause = java
        seen = 0
        while cause is not None and seen < 20:
            text = str(cause.toString()).strip()
            line = text.splitlines()[0] if text else ""
            if line:
                lines.append(line)
            cause = cause.getCause()
            seen += 1
    except Exception:
        return None
    if not lines:
        return None
    outer = next((ln for ln in lines if not ln.startswith(_JAVA_WRAPPERS)), lines[0])
    outer = _strip_class(outer)[:_LIMIT]
    root = _strip_class(lines[-1])[:_LIMIT]
    if root in outer:
        return outer
    return f"{outer}\n  caused by: {root}"


def _java_text(exc: BaseException) -> str:
    # Py4JJavaError's text: "An error occurred while calling o103.sql.\n: java.X: message\n\tat"
    try:
        text = str(exc)
    except Exception:
        text = ""
    for raw in text.splitlines()[1:]:
        line = raw.lstrip(": ").strip()
        if line and not raw.startswith("\t"):
            return _strip_class(line)[:_LIMIT]
    return f"the Spark driver (JVM) failed: {_first(text) or type(exc).__name__}"


def _strip_class(line: str) -> str:
    """``org.apache.spark.sql.AnalysisException: [X] text`` → ``[X] text``: Spark's conditions
    name the problem already; other exceptions keep their short class name, which does."""
    # Spark ends an analysis error's first line with ";" before the plan it leaves out here;
    # the expressions it quotes can be a whole decoded record's (short_quotes).
    line = short_quotes(line.rstrip().removesuffix(";"))
    head, sep, rest = line.partition(": ")
    if not sep or " " in head or "." not in head:
        return line
    if rest.startswith("["):
        return rest
    return f"{head.rsplit('.', 1)[-1]}: {rest}"


def _kafka(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else None
    reason = getattr(error, "str", None)
    name = getattr(error, "name", None)
    if callable(reason) and callable(name):
        return f"Kafka: {reason()} ({name()})"
    return f"Kafka: {first_line(exc, _LIMIT)}"


def _first(text: str) -> str:
    text = text.strip()
    return text.splitlines()[0][:_LIMIT] if text else ""
