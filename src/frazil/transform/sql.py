"""Spark SQL inside the transform chain: user expressions bound to the batch's columns.

A batch is one ``select`` over the raw Kafka rows (:mod:`frazil.columns`), so an expression
such as ``amount * 150`` cannot name ``amount``: there is no such column under the select,
only the expression that decodes it. :func:`parse` reads the text once with the session's own
SQL parser; :meth:`SqlExpression.bind` puts the batch's column expressions in place of the
names (a few py4j calls per reference, once per projection, never per record). Everything
stays a Catalyst expression evaluated in the JVM.

:func:`guarded` evaluates an expression that may raise (ANSI mode: overflow, a bad cast, a
datetime pattern) so that a bad value makes a null and a failure flag instead of failing the
batch; :func:`parse_timestamp` parses in a given time zone. Both build Catalyst expressions
through py4j, as no public API offers them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

#: Names Spark reads as functions when no column has them (``current_date`` without
#: parentheses is parsed as a column name and resolved to the function by the analyser).
LITERAL_FUNCTIONS = frozenset(
    {"current_date", "current_timestamp", "current_time", "current_user", "user", "session_user"}
)

#: Expression nodes refused in transforms: one record in, one record out, no other table.
_REFUSED = {
    "UnresolvedStar": "'*' (name the columns)",
    "UnresolvedRegex": "a column regex (name the columns)",
    "ScalarSubquery": "a subquery",
    "Exists": "a subquery",
    "ListQuery": "a subquery",
    "InSubquery": "a subquery",
    "LateralSubquery": "a subquery",
    "NamedParameter": "a parameter marker",
    "PosParameter": "a parameter marker",
}


def spark_errors() -> tuple[type[Exception], ...]:
    """What a call into Spark raises when Spark refuses something (analysis, parsing, JVM)."""
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JError)


class SqlError(ValueError):
    """An expression does not parse or uses what transforms refuse; the message says why."""


@dataclass(frozen=True)
class _Node:
    """A node of the parsed tree with a column reference below it.

    ``children`` is aligned with the JVM node's children: None where nothing below refers
    to a column, so that subtree is reused as it is.
    """

    expression: Any  # the JVM Catalyst expression
    children: tuple[_Node | None, ...]
    reference: tuple[str, ...] | None  # name parts, when the node is a column reference


@dataclass(frozen=True)
class Jvm:
    """The handles of a session's JVM that the chain builds Catalyst expressions with."""

    spark: SparkSession

    @property
    def _jvm(self) -> Any:
        return self.spark._jvm

    @property
    def catalyst(self) -> Any:
        """The ``org.apache.spark.sql.catalyst.expressions`` package."""
        return self._jvm.org.apache.spark.sql.catalyst.expressions

    def expression(self, column: Column) -> Any:
        """The Catalyst expression of a column."""
        utils = self._jvm.org.apache.spark.sql.classic.ExpressionUtils
        return utils.expression(column._jc)

    def column(self, expression: Any) -> Column:
        """A column of a Catalyst expression."""
        from pyspark.sql import Column

        utils = self._jvm.org.apache.spark.sql.classic.ExpressionUtils
        return Column(utils.column(expression))

    def seq(self, items: list[Any]) -> Any:
        """A Scala ``Seq`` of JVM objects."""
        return self._jvm.org.apache.spark.api.python.PythonUtils.toSeq(items)

    def option(self, value: Any) -> Any:
        """A Scala ``Option`` (``None`` for a Python None)."""
        return self._jvm.scala.Option.apply(value)


def _parts(seq: Any) -> tuple[str, ...]:
    return tuple(str(seq.apply(i)) for i in range(seq.length()))


@dataclass(frozen=True)
class SqlExpression:
    """A parsed Spark SQL expression and the columns it refers to.

    Attributes:
        text: The expression as written.
        references: The name parts of each column reference (``customer.name`` →
            ``("customer", "name")``), in order of appearance, without repeats.
    """

    text: str
    references: tuple[tuple[str, ...], ...]
    _tree: Any
    _root: _Node | None

    def bind(self, jvm: Jvm, resolve: Callable[[tuple[str, ...]], Column]) -> Column:
        """The expression over the batch: each reference replaced by ``resolve(parts)``."""

        def build(node: _Node) -> Any:
            if node.reference is not None:
                return jvm.expression(resolve(node.reference))
            originals = node.expression.children()
            children = [
                originals.apply(i) if child is None else build(child)
                for i, child in enumerate(node.children)
            ]
            return node.expression.withNewChildren(jvm.seq(children))

        if self._root is None:
            return jvm.column(self._tree)
        return jvm.column(build(self._root))


def parse(jvm: Jvm, text: str) -> SqlExpression:
    """Parse ``text`` with the session's SQL parser.

    Raises:
        SqlError: It does not parse, or holds ``*``, a subquery or a parameter marker.
    """
    parser = jvm.spark._jsparkSession.sessionState().sqlParser()
    try:
        tree = parser.parseExpression(text)
    except spark_errors() as exc:
        raise SqlError(f"invalid Spark SQL expression {text!r}: {first_line(exc)}") from None
    references: list[tuple[str, ...]] = []
    root = _mirror(tree, frozenset(), references)
    return SqlExpression(text, tuple(dict.fromkeys(references)), tree, root)


def _mirror(node: Any, bound: frozenset[str], references: list[tuple[str, ...]]) -> _Node | None:
    """The part of the tree that leads to column references (None: no reference below).

    Inside a lambda (``transform(xs, x -> x + amount)``) the parser makes every name a lambda
    variable; those not bound by an enclosing lambda's arguments are columns.
    """
    kind = node.getClass().getSimpleName()
    if kind in _REFUSED:
        raise SqlError(f"transforms cannot use {_REFUSED[kind]}")
    if kind == "UnresolvedAttribute" or (
        kind == "UnresolvedNamedLambdaVariable" and _parts(node.nameParts())[0] not in bound
    ):
        parts = _parts(node.nameParts())
        if len(parts) == 1 and parts[0].lower() in LITERAL_FUNCTIONS:
            return None
        references.append(parts)
        return _Node(node, (), parts)
    if kind == "LambdaFunction":
        arguments = node.arguments()
        bound = bound | {
            _parts(arguments.apply(i).nameParts())[0] for i in range(arguments.length())
        }
    children = node.children()
    mirrored = tuple(
        _mirror(children.apply(i), bound, references) for i in range(children.length())
    )
    return _Node(node, mirrored, None) if any(mirrored) else None


def guarded(jvm: Jvm, value: Column, inputs: list[Column]) -> tuple[Column, Column]:
    """Evaluate ``value`` so that an exception makes a null: ``(result, failed)``.

    ``failed`` is true when evaluating raised (an ANSI overflow, a bad cast, …), whatever
    the result would have been. Built as ``CASE WHEN <inputs are there> THEN
    TRY_EVAL(struct(value)) END``: the struct tells a raised error (null) from a null result.

    The ``CASE`` is what makes it safe. Spark evaluates a subexpression that occurs more than
    once in a projection only once, *before* the expressions that use it, outside any
    ``TRY_EVAL``: ``cast(s AS int)`` in two derived columns would be hoisted and raise.
    Subexpressions inside a ``CASE`` branch are never hoisted, while the inputs in the
    always-evaluated condition (``atleastnnonnulls(0, …)``, always true and never folded
    away) still share the batch's decoded columns.
    """
    from pyspark.sql import functions as F

    x = jvm.catalyst
    wrapped = jvm.column(x.TryEval(jvm.expression(F.struct(value.alias("v")))))
    guard = jvm.column(x.AtLeastNNonNulls(0, jvm.seq([jvm.expression(c) for c in inputs])))
    safe = F.when(guard, wrapped) if inputs else wrapped
    return safe["v"], safe.isNull()


def parse_timestamp(jvm: Jvm, text: Column, pattern: str | None, timezone: str | None) -> Column:
    """``try_to_timestamp(text[, pattern])``, reading wall-clock times in ``timezone``.

    A string with its own offset (``+09:00``, ``Z``) keeps it; ``timezone`` None means the
    session's. Bad values give null (never an exception, ANSI or not).
    """
    from pyspark.sql import functions as F

    x = jvm.catalyst
    timestamp = jvm._jvm.org.apache.spark.sql.types.DataType.fromDDL("timestamp")
    fmt = jvm.option(None if pattern is None else jvm.expression(F.lit(pattern)))
    # ParseToTimestamp is what try_to_timestamp builds (failOnError = false); a time zone
    # set here is kept by the analyser, which only fills in the session's when it is unset.
    parsed = x.ParseToTimestamp(jvm.expression(text), fmt, timestamp, jvm.option(timezone), False)
    return jvm.column(parsed)


def check_pattern(jvm: Jvm, pattern: str) -> None:
    """Check a datetime pattern once, at build time: bad ones raise even in ``try_`` forms.

    The parse of a sample is evaluated in the driver's JVM directly (no query, no job).

    Raises:
        SqlError: Spark refuses the pattern.
    """
    x = jvm.catalyst
    types = jvm._jvm.org.apache.spark.sql.types.DataType
    sample = x.Literal.create("2000-01-01 00:00:00", types.fromDDL("string"))
    fmt = jvm.option(x.Literal.create(pattern, types.fromDDL("string")))
    timestamp = types.fromDDL("timestamp")
    parse = x.ParseToTimestamp(sample, fmt, timestamp, jvm.option("UTC"), False)
    try:
        parse.replacement().eval(None)
    except spark_errors() as exc:  # IllegalArgumentException, SparkUpgradeException
        raise SqlError(f"invalid datetime format {pattern!r}: {first_line(exc)}") from None


def check_timezone(jvm: Jvm, timezone: str) -> None:
    """Check a time zone id the way Spark reads it.

    Raises:
        SqlError: Java does not know the zone.
    """
    try:
        jvm._jvm.org.apache.spark.sql.catalyst.util.DateTimeUtils.getZoneId(timezone)
    except spark_errors():
        raise SqlError(
            f"unknown time zone {timezone!r} (a region such as Asia/Tokyo, or an offset "
            "such as +09:00)"
        ) from None


def first_line(exc: BaseException) -> str:
    """The message of a Spark error without its error class, SQLSTATE and stack trace."""
    lines = []
    for line in str(exc).strip().splitlines():
        line = line.strip()
        if not line or line.startswith(("==", "JVM stacktrace", "SQLSTATE", "1)")):
            break
        lines.append(line)
    text = " ".join(lines) or type(exc).__name__
    text = text.split(" SQLSTATE:")[0]
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    text = text.removeprefix("You may get a different result due to the upgrading to Spark >= 3.0:")
    text = text.strip()
    return text if len(text) <= 300 else text[:299] + "…"


@contextmanager
def quiet() -> Iterator[None]:
    """Silence PySpark's logging of the analysis errors that a check expects and reports.

    PySpark logs every error that carries a query context at ERROR level, stack trace
    included, before raising it; while transforms are checked, such an error becomes the
    one-line :class:`~frazil.errors.ConfigError` instead.
    """
    from pyspark.logger import PySparkLogger

    # PySparkLogger.getLogger, not logging.getLogger: PySpark logs an error's query context
    # through whatever logger has the name, with keyword arguments (``file=``, ``line=``)
    # only a PySparkLogger takes. A plain Logger created here first (under --verbose nothing
    # else creates them before) turned each later analysis error into "Logger._log() got an
    # unexpected keyword argument 'file'", raised in place of Spark's own.
    loggers = [
        PySparkLogger.getLogger(n) for n in ("DataFrameQueryContextLogger", "SQLQueryContextLogger")
    ]
    before = [logger.disabled for logger in loggers]
    for logger in loggers:
        logger.disabled = True
    try:
        yield
    finally:
        for logger, disabled in zip(loggers, before, strict=True):
            logger.disabled = disabled
