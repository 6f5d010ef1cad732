"""The write's tap (``dev.frazil.spark.RowTap``): the counts an append takes of its rows as
they stream by, inside the stage's generated code, equal to Spark's ``observe`` of the same
rows; the plan holds no ``CollectMetrics`` boundary."""

from __future__ import annotations

from typing import Any

import pytest

from frazil import columns as c
from frazil.engine.table_rows import ObservedMetrics

pytestmark = pytest.mark.integration

PARTITIONS = (("orders", 0), ("orders", 1), ("orders", 2), ("refunds", 0), ("idle", 0))


def _rows(spark: Any) -> Any:
    """600 rows over three topics' partitions in 4 tasks: some dropped, some not wanted, some
    without a timestamp; partition ("idle", 0) has none."""
    from pyspark.sql import functions as F

    n = F.col("id")
    topic = F.when(n % 5 == 4, F.lit("refunds")).otherwise(F.lit("orders"))
    partition = F.when(n % 5 == 4, F.lit(0)).otherwise((n % 3).cast("int"))
    return (
        spark.range(0, 600, 1, 4)
        .select(
            n,
            topic.alias(c.TOPIC),
            partition.alias(c.PARTITION),
            F.when(n % 17 == 0, F.lit(None)).otherwise(n * 1000 + 7).alias(c.TIMESTAMP_MS),
            (n % 7 == 3).alias("skip"),
            (n % 11 == 5).alias("bad"),
        )
        .select("*", (~F.col("skip") & ~F.col("bad")).alias("ok"))
    )


def _expected(spark: Any) -> dict[str, Any]:
    """What Spark's own ``observe`` counts of the same rows, as the append path did."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation("expected")
    wanted = F.col("ok")
    _rows(spark).observe(
        observation,
        F.count(F.when(wanted, F.lit(1))).alias("records"),
        F.count(F.when(F.col("skip"), F.lit(1))).alias("dropped"),
        *[
            F.max(
                F.when(
                    wanted & (F.col(c.TOPIC) == t) & (F.col(c.PARTITION) == p),
                    F.col(c.TIMESTAMP_MS),
                )
            ).alias(f"ts_{i}")
            for i, (t, p) in enumerate(PARTITIONS)
        ],
    ).collect()
    return dict(observation.get)


def _tapped(spark: Any) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    frame = _rows(spark)
    tap, counts = ObservedMetrics().tap(
        spark.sparkContext._jvm, F.col("ok"), F.col("skip"), PARTITIONS
    )
    return frame.select("*", tap.alias(c.WANTED)).where(F.col(c.WANTED)).drop(c.WANTED), counts


def test_tap_counts_as_observe_does_in_generated_code(spark: Any) -> None:
    expected = _expected(spark)
    assert expected["ts_4"] is None and expected["dropped"] > 0  # the shapes are there

    rows, counts = _tapped(spark)
    written = rows.collect()

    assert counts.get == expected
    assert len(written) == expected["records"]
    assert all(r["ok"] for r in written)
    plan = rows._jdf.queryExecution().executedPlan().toString()
    assert "frazil_tap" in plan
    assert "CollectMetrics" not in plan
    # One generated stage ("*(1)") holds the range, the tap, the filter and the projections.
    operators = [line.strip(" +-:") for line in plan.splitlines() if line.strip()]
    assert operators and all(op.startswith("*(1) ") for op in operators), plan


def test_tap_interpreted_counts_the_same(spark: Any) -> None:
    expected = _expected(spark)
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    try:
        rows, counts = _tapped(spark)
        assert len(rows.collect()) == expected["records"]
    finally:
        spark.conf.unset("spark.sql.codegen.wholeStage")
        spark.conf.unset("spark.sql.codegen.factoryMode")
    assert counts.get == expected


def test_each_tap_counts_its_own_rows_once(spark: Any) -> None:
    """Two taps of the same rows keep their own counts; a tap's rows read again by a second
    job count once (the last stage that ran them)."""
    first_rows, first = _tapped(spark)
    second_rows, second = _tapped(spark)
    first_rows.collect()
    assert second.get["records"] == 0
    second_rows.collect()
    assert first.get == second.get
    first_rows.collect()
    assert first.get == second.get


def test_rows_read_twice_by_a_range_distribution_count_once(spark: Any) -> None:
    """A range distribution (a table sorted, or ``write.distribution-mode: range``) runs a
    sampling job over every row before the write's stage: Spark's ``observe`` counts the rows
    twice, the tap keeps the counts of the last stage that ran it."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    expected = _expected(spark)
    rows, counts = _tapped(spark)
    spread = rows.repartitionByRange(3, "id")
    assert len(spread.collect()) == expected["records"]
    assert counts.get == expected

    observation = Observation("twice")
    _rows(spark).observe(observation, F.count(F.lit(1)).alias("n")).repartitionByRange(
        3, "id"
    ).collect()
    assert observation.get["n"] == 2 * 600  # what the tap is not
