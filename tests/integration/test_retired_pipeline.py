"""A pipeline renamed with ``--reset-offsets`` retires its old name in the table: a host still
on the old config must not go on from the old name's marker (its records would be written a
second time)."""

from __future__ import annotations

from typing import Any

import pytest

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
