"""Spark columns built by frazil's own JVM classes (``dev.frazil.spark``).

Expressions of frazil's jar (decoders, table-name text, constant maps) are made by a static
method that takes the Java side of its column arguments and returns a Java ``Column``; this is
the one place that crosses py4j both ways, in the session's JVM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from frazil.jvm.classes import java_class

if TYPE_CHECKING:
    from pyspark.sql import Column


def jvm_column(cls: str, method: str, *args: Any) -> Column:
    """``cls.method(*args)`` in the active session's JVM, as a PySpark column.

    Args:
        cls: The fully qualified Java class (e.g. ``dev.frazil.spark.JsonDepth``).
        method: Its static method that returns a ``org.apache.spark.sql.Column``.
        *args: The method's arguments: PySpark columns are passed as their Java columns,
            anything else as py4j passes it (strings, numbers).
    """
    from pyspark import SparkContext
    from pyspark.sql import Column
    from pyspark.sql.classic.column import Column as ClassicColumn
    from pyspark.sql.classic.column import _to_java_column

    context = SparkContext._active_spark_context
    assert context is not None and context._jvm is not None
    build = getattr(java_class(context._jvm, cls), method)
    java_args = [_to_java_column(arg) if isinstance(arg, Column) else arg for arg in args]
    return ClassicColumn(build(*java_args))
