"""Constant maps as one Spark literal (``dev.frazil.spark.ConstantMaps``).

Spark's ``map(...)`` keeps a map builder inside the expression and fills it whenever the map
is evaluated, on the driver too (constant folding, ``from_avro`` reading its options). The
tables of one batch are planned from several threads on one analyzed frame, so its maps'
builders are shared: two threads filling one at once fail with ``DUPLICATED_MAP_KEY`` or hand
one of them a map with entries missing. A literal is built once and only read after.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from frazil.jvm.columns import jvm_column

if TYPE_CHECKING:
    from pyspark.sql import Column


def string_map(entries: Mapping[str, str]) -> Column:
    """A ``map<string,string>`` literal of ``entries``."""
    return _literal("strings", entries)


def long_map(entries: Mapping[str, int]) -> Column:
    """A ``map<string,bigint>`` literal of ``entries``."""
    return _literal("longs", entries)


def _literal(method: str, entries: Mapping[str, object]) -> Column:
    return jvm_column("dev.frazil.spark.ConstantMaps", method, json.dumps(dict(entries)))
