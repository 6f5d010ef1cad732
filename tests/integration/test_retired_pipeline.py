"""A pipeline renamed with ``--reset-offsets`` retires its old name in the table: a host still
on the old config must not go on from the old name's marker (its records would be written a
second time)."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.engine.explain import explain
from frazil.engine.runner import run
from frazil.errors import PipelineError
from tests.integration.helpers import payments_pipeline, produce_payments, table_ids

pytestmark = pytest.mark.integration


def test_the_old_name_of_a_renamed_pipeline_is_refused_not_run_again(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table = f"ret-{unique}", f"db.ret_{unique}"
    old, new = f"old_{unique}", f"new_{unique}"
    before = make_config([payments_pipeline(old, topic, table)])
    ids = produce_payments(kafka_bootstrap, topic, 200, seed=700)
    run(before, until_caught_up=True, spark=spark)
    more = produce_payments(kafka_bootstrap, topic, 150, seed=701)
    renamed = make_config([payments_pipeline(new, topic, table)])
    # The new name takes over where the old one stopped (its offsets; here: what the table
    # does not hold yet is everything after the first 200).
    run(renamed, until_caught_up=True, spark=spark, reset_offsets="latest")
    later = produce_payments(kafka_bootstrap, topic, 100, seed=702)
    run(renamed, until_caught_up=True, spark=spark)
    assert sorted(table_ids(spark, table)) == sorted(ids + later)

    # `frazil plan` says so before any run (the run's own walk of the table's markers).
    [planned] = explain(spark, before, [])
    [warning] = [w for w in planned.warnings if "retired" in w]
    assert warning.startswith(f"the run would refuse to start: pipeline {old!r}: table {table}")
    assert not [w for w in explain(spark, renamed, [])[0].warnings if "retired" in w]

    with pytest.raises(PipelineError) as caught:
        run(before, until_caught_up=True, spark=spark)

    message = str(caught.value)
    assert f"pipeline {old!r}" in message and table in message
    assert "retired" in message and "--reset-offsets" in message
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids + later)
    assert not set(more) & set(got)

    # Taken back on purpose: the old name's own reset says where it continues.
    run(before, until_caught_up=True, spark=spark, reset_offsets="latest")
    last = produce_payments(kafka_bootstrap, topic, 50, seed=703)
    run(before, until_caught_up=True, spark=spark)
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids + later + last)


def test_a_reset_by_a_pipeline_of_other_topics_leaves_the_other_writer_running(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Two configs writing one table from two topics: the second joins with --reset-offsets,
    which retires the first one's marker from pinning expiry, but takes over none of its
    topics: the first goes on from its marker, nothing read twice."""
    table = f"db.two_{unique}"
    eu, us = f"eu-{unique}", f"us-{unique}"
    first = make_config([payments_pipeline(f"eu_{unique}", eu, table)])
    second = make_config([payments_pipeline(f"us_{unique}", us, table)])
    ids = produce_payments(kafka_bootstrap, eu, 120, seed=710)
    run(first, until_caught_up=True, spark=spark)
    ids += produce_payments(kafka_bootstrap, us, 80, seed=711)
    run(second, until_caught_up=True, spark=spark, reset_offsets="earliest", confirm_reset=None)
    ids += produce_payments(kafka_bootstrap, eu, 60, seed=712)
    ids += produce_payments(kafka_bootstrap, us, 40, seed=713)

    run(first, until_caught_up=True, spark=spark)
    run(second, until_caught_up=True, spark=spark)

    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(ids)
    retired = spark.sql(
        f"SELECT summary['frazil.retires'] FROM lake.{table}.snapshots "
        "WHERE summary['frazil.retires'] IS NOT NULL"
    ).collect()
    assert [r[0] for r in retired] == [f'["eu_{unique}"]']  # retired, yet not taken over
