"""An existing table's partitioning against the config's ``partition_by``: the same spec
says nothing; another one is named, both ways, with how to change it."""

from __future__ import annotations

from frazil.config.partitioning import parse_partition_field
from frazil.sink.table import spec_difference


def _want(*fields: str) -> list:  # type: ignore[type-arg]
    return [parse_partition_field(f) for f in fields]


def test_the_same_spec_in_iceberg_s_and_the_config_s_words_is_no_difference() -> None:
    have = [("day", "ts"), ("bucket[16]", "id"), ("truncate[4]", "code"), ("identity", "c")]
    want = _want("days(ts)", "bucket(16, id)", "truncate(4, code)", "c")
    assert spec_difference(have, want) is None
    assert spec_difference([], []) is None


def test_a_partition_field_added_in_the_config_is_named_with_the_way_to_apply_it() -> None:
    found = spec_difference([("day", "ts")], _want("days(ts)", "country"))
    assert found is not None
    assert found.startswith(
        "it is partitioned by days(ts), the config's partition_by says days(ts), country: "
        "partition_by applies when frazil creates a table"
    )
    assert "ALTER TABLE … ADD / DROP / REPLACE PARTITION FIELD" in found


def test_other_widths_orders_and_an_unpartitioned_table_differ() -> None:
    assert spec_difference([("bucket[8]", "id")], _want("bucket(16, id)")) is not None
    assert spec_difference([("identity", "a"), ("day", "ts")], _want("days(ts)", "a"))
    unpartitioned = spec_difference([], _want("hours(ts)"))
    assert unpartitioned is not None
    assert "partitioned by nothing (unpartitioned), the config's partition_by says hours(ts)" in (
        unpartitioned
    )
