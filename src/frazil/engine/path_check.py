"""Paths into the variant column that no sampled record has, for ``frazil plan`` to report.

A path the config names (``route.field: payload:geo.country``; ``payload:geo.region`` or
``variant_get(payload, '$.geo.region', …)`` in a ``derive`` or a ``filter``) that no record
holds is not an error: such records read null (a route sends them to its ``default``). It is
often a typo, though, so ``frazil plan`` samples the start of the topics, decodes the records
with the pipeline's own decoder, and names each path none of them has.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from frazil.config.pipeline import PipelineConfig
from frazil.config.transforms import Derive, Filter
from frazil.config.variant_paths import VARIANT_PATH_STEPS, is_variant_path, parse_variant_path
from frazil.errors import PipelineError, first_line, short_quotes
from frazil.source.kafka import read_topics
from frazil.transform.sql import spark_errors

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from frazil.decode.registry import Decoder

#: Records sampled from the start of the topics.
SAMPLE = 1000


def config_paths(pipeline: PipelineConfig) -> list[tuple[str, str]]:
    """``(where, JSON path)`` of each path into the pipeline's variant column its config
    names: ``route.field`` and the ``derive``/``filter`` expressions, in config order, each
    path once."""
    column = pipeline.value.variant
    if column is None:
        return []
    found: list[tuple[str, str]] = []
    route_field = getattr(pipeline.route, "field", None)
    if isinstance(route_field, str) and is_variant_path(route_field):
        routed = parse_variant_path(route_field)
        if routed.column == column:
            found.append(("route.field", routed.json_path))
    colon = re.compile(rf"(?<![\w.:']){re.escape(column)}:({VARIANT_PATH_STEPS})")
    getter = re.compile(
        rf"\b(?:try_)?variant_get\(\s*{re.escape(column)}\s*,\s*'(\$[^']*)'", re.IGNORECASE
    )
    for index, step in enumerate(pipeline.transforms):
        if isinstance(step, Derive):
            texts = [(f"transforms[{index}].derive.{name}", e) for name, e in step.derive.items()]
        elif isinstance(step, Filter):
            texts = [(f"transforms[{index}].filter", step.filter)]
        else:
            continue
        for where, text in texts:
            for match in colon.finditer(text):
                found.append((where, parse_variant_path(f"{column}:{match[1]}").json_path))
            found += [(where, match[1]) for match in getter.finditer(text)]
    seen: set[str] = set()
    unique: list[tuple[str, str]] = []
    for where, json_path in found:
        if json_path not in seen:
            seen.add(json_path)
            unique.append((where, json_path))
    return unique


def absent_paths(
    spark: SparkSession,
    pipeline: PipelineConfig,
    decoder: Decoder,
    batch_options: dict[str, str],
    sample: int = SAMPLE,
) -> list[str]:
    """Warnings naming each config path that none of the first ``sample`` records has."""
    from pyspark.sql import functions as F

    paths = config_paths(pipeline)
    column = pipeline.value.variant
    if not paths or column is None:
        return []
    raw = read_topics(spark, batch_options).where(F.col("value").isNotNull()).limit(sample)
    decoded = decoder.decode(F.col("value"))
    if decoder.scalar:  # the value whole in the variant
        variant = decoded.value
    else:  # declared columns plus the rest: the variant is one of the struct's fields
        variant = decoded.value[column] if decoded.fields is None else decoded.fields[column]
    try:
        counts = raw.select(
            F.count(F.lit(1)).alias("records"),
            *[
                F.count_if(F.try_variant_get(variant, path, "variant").isNotNull()).alias(f"p{i}")
                for i, (_, path) in enumerate(paths)
            ],
        ).first()
    except spark_errors() as exc:
        # Spark's message names an expression over the decoded record, not the config keys
        # the paths come from: say which, with Spark's error class and first line.
        keys = ", ".join(dict.fromkeys(where for where, _ in paths))
        reason = short_quotes(first_line(exc, 10_000).rstrip().removesuffix(";"))[:500]
        raise PipelineError(
            f"pipeline {pipeline.name!r}: checking the {column} paths of {keys} on a sample of "
            f"the topics failed: {reason}"
        ) from exc
    assert counts is not None
    records = int(counts["records"])
    if not records:
        return []
    return [
        f"{where}: no record of the {records:,} sampled from the start of the topics has "
        f"{column} path {path!r} (records without it read null there)"
        for i, (where, path) in enumerate(paths)
        if int(counts[f"p{i}"]) == 0
    ]
