"""Upsert and CDC: tables that equal the source's current state, applied with MERGE."""

from __future__ import annotations

import base64
import decimal
import json
from decimal import Decimal
from typing import Any

import pytest
from confluent_kafka import Producer

from frazil.engine.runner import run
from frazil.errors import FrazilError
from frazil.generate.producer import ensure_topic
from frazil.maintenance.passes import TableRef, measure
from frazil.observe.status import read_status

pytestmark = pytest.mark.integration

SCHEMA = {"id": "long", "name": "string", "amount": "long", "op": "string"}


def _produce(
    bootstrap: str, topic: str, records: list[tuple[str | None, dict[str, Any] | None, int]]
) -> None:
    """``(key, value, partition)`` in order; a None value is a tombstone."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for key, value, partition in records:
        producer.produce(
            topic,
            None if value is None else json.dumps(value).encode(),
            key=None if key is None else key.encode(),
            partition=partition,
        )
    producer.flush(10)


def _rows(spark: Any, table: str, columns: str = "id, name, amount") -> dict[int, tuple[Any, ...]]:
    rows = spark.sql(f"SELECT {columns} FROM lake.{table}").collect()
    return {r[0]: tuple(r[1:]) for r in rows}


def _pipeline(name: str, topic: str, table: str, **extra: Any) -> dict[str, Any]:
    pipeline: dict[str, Any] = {
        "name": name,
        "topics": [topic],
        "table": table,
        "schema": dict(SCHEMA),
        "trigger": "1s",
    }
    pipeline.update(extra)
    return pipeline


def test_upsert_keeps_the_last_record_of_each_key_across_batches(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"ups-{unique}", f"db.ups_{unique}", f"u_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    # Several versions of a key inside one batch, and on both partitions (keyed by id).
    first = [
        (str(i % 5), {"id": i % 5, "name": f"v{i}", "amount": i}, (i % 5) % 2) for i in range(20)
    ]
    _produce(kafka_bootstrap, topic, first)
    config = make_config([_pipeline(name, topic, table, write={"mode": "upsert", "key": ["id"]})])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {k: (f"v{15 + k}", 15 + k) for k in range(5)}

    _produce(kafka_bootstrap, topic, [("2", {"id": 2, "name": "late", "amount": 0}, 0)])
    _produce(kafka_bootstrap, topic, [("9", {"id": 9, "name": "new", "amount": 9}, 1)])
    reports = run(config, until_caught_up=True, spark=spark)
    expected = {k: (f"v{15 + k}", 15 + k) for k in range(5)}
    expected[2] = ("late", 0)
    expected[9] = ("new", 9)
    assert _rows(spark, table) == expected
    # Every view counts live rows: the replaced row of key 2 is still in a data file (its
    # position delete hides it), so the table's total-records is one more.
    current = spark.sql(f"SELECT summary FROM lake.{table}.snapshots").collect()[-1][0]
    assert int(current["total-records"]) == len(expected) + 1
    assert reports[0].table_rows == len(expected)
    assert read_status(config, [name])[0].tables[0].records == len(expected)
    health = measure(spark, config, TableRef(table, config.pipelines[0]))
    assert health.records == len(expected)

    # A table for upserts: identified by its key, merge-on-read, no equality deletes.
    props = dict(
        spark.sql(f"SHOW TBLPROPERTIES lake.{table}").collect()  # type: ignore[arg-type]
    )
    assert props["write.merge.mode"] == "merge-on-read"
    summaries = [
        dict(r["summary"])
        for r in spark.sql(f"SELECT summary FROM lake.{table}.snapshots").collect()
    ]
    assert all(s.get("added-equality-delete-files", "0") == "0" for s in summaries)
    assert any(s.get("frazil.pipeline") == name and "added-records" in s for s in summaries)
    # Running again adds nothing.
    before = len(summaries)
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == expected
    assert len(spark.sql(f"SELECT * FROM lake.{table}.snapshots").collect()) == before


@pytest.mark.parametrize("dead_letters", [False, True], ids=["none", "dead-letters"])
def test_a_sorted_tables_upsert_counts_each_change_once(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, dead_letters: bool
) -> None:
    """A sorted table's MERGE writes with a range distribution, whose sampling job reads
    the rows before the write's own stage: the changes and the records filtered out are
    counted once."""
    topic, table, name = f"upss-{unique}", f"db.upss_{unique}", f"us_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    _produce(
        kafka_bootstrap,
        topic,
        [(str(i % 8), {"id": i % 8, "name": f"v{i}", "amount": i}, 0) for i in range(24)],
    )
    extra: dict[str, Any] = {
        "write": {"mode": "upsert", "key": ["id"]},
        "sort_by": ["amount desc"],
        "table_properties": {"write.merge.distribution-mode": "range"},
        "transforms": [{"filter": "amount >= 4"}],
    }
    if dead_letters:
        extra["errors"] = {"tolerance": "all", "dlq_table": f"db.upss_dead_{unique}"}
    config = make_config([_pipeline(name, topic, table, **extra)])

    [report] = run(config, until_caught_up=True, spark=spark)

    assert _rows(spark, table) == {k: (f"v{16 + k}", 16 + k) for k in range(8)}
    assert report.filtered_skipped == 4
    assert report.rows_written == {table: 20}


def test_cdc_inserts_updates_deletes_and_reinserts(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"cdc-{unique}", f"db.cdc_{unique}", f"c_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    changes = [
        {"id": 1, "name": "a", "amount": 1, "op": "I"},
        {"id": 2, "name": "b", "amount": 2, "op": "I"},
        {"id": 3, "name": "c", "amount": 3, "op": "I"},
        {"id": 1, "name": "a2", "amount": 10, "op": "U"},
        {"id": 2, "op": "D"},  # a delete may carry only the key
        {"id": 3, "op": "D"},
        {"id": 3, "name": "c-again", "amount": 30, "op": "I"},
        {"id": 4, "op": "D"},  # deleting a key never seen is harmless
    ]
    _produce(kafka_bootstrap, topic, [(str(v["id"]), v, 0) for v in changes])
    write = {"mode": "cdc", "key": ["id"], "op_field": "op"}
    config = make_config([_pipeline(name, topic, table, write=write)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {1: ("a2", 10), 3: ("c-again", 30)}
    # The operation field is consumed, not a column of the table.
    assert "op" not in spark.table(f"lake.{table}").columns

    _produce(kafka_bootstrap, topic, [("1", {"id": 1, "op": "D"}, 0)])
    _produce(kafka_bootstrap, topic, [("2", {"id": 2, "name": "b2", "amount": 5, "op": "U"}, 0)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {2: ("b2", 5), 3: ("c-again", 30)}


def test_order_by_decides_across_partitions_and_against_the_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"ord-{unique}", f"db.ord_{unique}", f"o_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    schema = {"id": "long", "name": "string", "version": "long"}
    # Key 1's newest version arrives on partition 0 at a lower offset than an older one.
    _produce(
        kafka_bootstrap,
        topic,
        [
            (None, {"id": 1, "name": "new", "version": 3}, 0),
            (None, {"id": 1, "name": "old", "version": 1}, 1),
            (None, {"id": 1, "name": "older", "version": 0}, 1),
        ],
    )
    write = {"mode": "upsert", "key": ["id"], "order_by": "version"}
    config = make_config([_pipeline(name, topic, table, schema=schema, write=write)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table, "id, name, version") == {1: ("new", 3)}
    # An older change arriving later does not overwrite the table's newer row.
    _produce(kafka_bootstrap, topic, [(None, {"id": 1, "name": "stale", "version": 2}, 1)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table, "id, name, version") == {1: ("new", 3)}
    _produce(kafka_bootstrap, topic, [(None, {"id": 1, "name": "newest", "version": 4}, 1)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table, "id, name, version") == {1: ("newest", 4)}


def test_a_null_order_by_applies_in_arrival_order_inside_a_batch_as_across_batches(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Against the table a change with a null ``order_by`` applies (docs/changes.md): inside
    one batch it wins over the changes before it too, and later ones compare as usual. The
    same changes give the same table in one batch and in one batch each."""
    schema = {"id": "long", "name": "string", "version": "long"}
    changes = [
        (1, "a", 5), (1, "b", None),  # a null after a value: applies
        (2, "c", None), (2, "d", 3),  # a value after a null: applies
        (3, "e", 7), (3, "f", None), (3, "g", 2), (3, "h", 1),  # after the null: largest
        (4, "i", None), (4, "j", None),  # nulls only: the last
        (5, "k", 4), (5, "l", 9), (5, "m", 6),  # values only: the largest
        (6, "n", 6), (6, "o", None), (6, "p", 5),  # after the null, against a larger value
    ]  # fmt: skip
    expected = {
        1: ("b", None), 2: ("d", 3), 3: ("g", 2), 4: ("j", None), 5: ("l", 9), 6: ("p", 5),
    }  # fmt: skip
    write = {"mode": "upsert", "key": ["id"], "order_by": "version"}
    values = [(str(i), {"id": i, "name": n, "version": v}, 0) for i, n, v in changes]
    firsts = [v for j, v in enumerate(values) if j == 0 or values[j - 1][0] != v[0]]
    batchings = {
        "one": [values],
        "each": [[v] for v in values],
        # Each key's first change in a batch of its own, the rest against it in the next.
        "first": [firsts, [v for v in values if v not in firsts]],
    }
    for label, batches in batchings.items():
        topic, table = f"ordn{label}-{unique}", f"db.ordn{label}_{unique}"
        name = f"on{label}_{unique}"
        ensure_topic(kafka_bootstrap, topic, partitions=1)
        config = make_config([_pipeline(name, topic, table, schema=schema, write=write)])
        for batch in batches:
            _produce(kafka_bootstrap, topic, batch)
            run(config, until_caught_up=True, spark=spark)
        assert _rows(spark, table, "id, name, version") == expected, label


def test_changes_collapsed_per_key_stay_partitioned_by_key(spark: Any) -> None:
    """The MERGE joins the collapsed changes with the table by key: the collapse's own
    shuffle by key is the only one the changes need (one per side of the join)."""
    from frazil import columns as c
    from frazil.sink.merge import latest_changes

    changes = spark.createDataFrame(
        [(1, "a", "upsert", 10, 0), (1, "b", "upsert", 11, 0), (2, "c", "delete", 12, 1)],
        f"id long, name string, {c.OP} string, {c.OFFSET} long, {c.PARTITION} int",
    )
    latest = latest_changes(changes, ["id"], None)
    rows = sorted(tuple(r) for r in latest.select("id", "name", c.OP).collect())
    assert rows == [(1, "b", "upsert"), (2, "c", "delete")]
    table = spark.createDataFrame([(1, "x")], "id long, name string")
    joined = table.join(latest.withColumnRenamed("name", "new_name"), "id", "right_outer")
    plan = joined._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Exchange hashpartitioning") == 2, plan


def test_a_change_without_key_or_with_an_unknown_op_stops_or_goes_to_the_dlq(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"cbad-{unique}", f"db.cbad_{unique}", f"cb_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    _produce(
        kafka_bootstrap,
        topic,
        [
            (None, {"id": 1, "name": "a", "op": "I"}, 0),
            (None, {"name": "no key", "op": "I"}, 0),
            (None, {"id": 2, "name": "b", "op": "X"}, 0),
            (None, {"id": 3, "name": "c", "op": "U"}, 0),
        ],
    )
    write = {"mode": "cdc", "key": ["id"], "op_field": "op"}
    config = make_config([_pipeline(name, topic, table, write=write)])
    with pytest.raises(FrazilError) as failed:
        run(config, until_caught_up=True, spark=spark)
    message = str(failed.value)
    assert "offset 1" in message and "no value in key column id" in message
    assert "unknown operation 'X' in op (expected I, U, D)" in message
    assert _rows(spark, table) == {}

    dlq = f"db.cbad_dead_{unique}"
    config = make_config(
        [
            _pipeline(
                name,
                topic,
                table,
                write=write,
                errors={"tolerance": "all", "dlq_table": dlq},
            )
        ]
    )
    [report] = run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {1: ("a", None), 3: ("c", None)}
    # The changes applied are counted, the dead letters apart, not among them.
    assert report.rows_written == {table: 2} and report.records_ingested == 2
    assert report.dead_lettered == 2
    dead = spark.sql(
        f"SELECT offset, stage, reason, detail FROM lake.{dlq} ORDER BY offset"
    ).collect()
    assert [(r[0], r[1]) for r in dead] == [(1, "mode"), (2, "mode")]
    # The reason names the key column; the detail is the change as decoded (no id).
    assert dead[0][2] == "no value in key column id"
    assert json.loads(dead[0][3]) == {"name": "no key"}
    assert "unknown operation" in dead[1][2]


def test_a_cdc_tables_dead_letters_name_it_at_every_stage(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A one-table CDC pipeline takes the cached way with a dead-letter queue: a record that
    fails to decode (before any table) names the table as one failing at the MERGE does, and
    neither counts among the changes written."""
    topic, table, name = f"cdead-{unique}", f"db.cdead_{unique}", f"cd_{unique}"
    dlq = f"db.cdead_dlq_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for value in (
        {"id": 1, "name": "a", "op": "I"},
        b"{not json",
        {"name": "no key", "op": "I"},
        {"id": 2, "name": "b", "op": "I"},
        {"id": 1, "name": "a2", "op": "U"},
    ):
        producer.produce(topic, value if isinstance(value, bytes) else json.dumps(value).encode())
    producer.flush(10)
    write = {"mode": "cdc", "key": ["id"], "op_field": "op"}
    errors = {"tolerance": "all", "dlq_table": dlq}
    config = make_config([_pipeline(name, topic, table, write=write, errors=errors)])
    [report] = run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {1: ("a2", None), 2: ("b", None)}
    assert report.rows_written == {table: 3} and report.dead_lettered == 2
    dead = spark.sql(
        f"SELECT offset, stage, target_table FROM lake.{dlq} ORDER BY offset"
    ).collect()
    assert [tuple(r) for r in dead] == [(1, "decode", table), (2, "mode", table)]


def _debezium(
    op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, lsn: int, wrapped: bool
) -> dict[str, Any]:
    payload = {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
        "source": {"connector": "postgresql", "lsn": lsn, "table": "customers"},
        "transaction": None,
    }
    if not wrapped:
        return payload
    row = {"type": "struct", "optional": True, "fields": [{"field": "id", "type": "int64"}]}
    schema = {"type": "struct", "fields": [{"field": "before", **row}, {"field": "after", **row}]}
    return {"schema": schema, "payload": payload}


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "schemas-enable"])
def test_debezium_envelopes_create_update_delete_read_and_tombstone(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, wrapped: bool
) -> None:
    topic, table, name = f"dbz-{unique}", f"db.dbz_{unique}", f"z_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    def row(i: int, email: str) -> dict[str, Any]:
        return {"id": i, "email": email}

    events = [
        ("1", _debezium("r", None, row(1, "a@x"), 1, wrapped)),  # snapshot read
        ("2", _debezium("r", None, row(2, "b@x"), 2, wrapped)),
        ("3", _debezium("c", None, row(3, "c@x"), 3, wrapped)),  # create
        ("1", _debezium("u", row(1, "a@x"), row(1, "a2@x"), 4, wrapped)),  # update
        ("2", _debezium("d", row(2, "b@x"), None, 5, wrapped)),  # delete: row in before
        ("2", None),  # the tombstone Debezium sends after a delete
        ("4", _debezium("c", None, row(4, "d@x"), 6, wrapped)),
    ]
    _produce(kafka_bootstrap, topic, [(k, v, 0) for k, v in events])
    write = {
        "mode": "cdc",
        "key": ["id"],
        "debezium": True,
        "debezium_fields": ["source.lsn", "op"],
    }
    pipeline = _pipeline(name, topic, table, schema={"id": "long", "email": "string"}, write=write)
    config = make_config([pipeline])
    run(config, until_caught_up=True, spark=spark)
    rows = _rows(spark, table, "id, email, __source_lsn, __op")
    assert rows == {1: ("a2@x", 4, "u"), 3: ("c@x", 3, "c"), 4: ("d@x", 6, "c")}

    # A tombstone deletes by its Kafka key when asked to (here without a delete event first).
    _produce(kafka_bootstrap, topic, [("4", None, 0)])
    tombstones = {**write, "tombstones": "delete"}
    pipeline = _pipeline(
        name,
        topic,
        table,
        schema={"id": "long", "email": "string"},
        write=tombstones,
        key_format="string",
        key_column="kafka_key",
        transforms=[{"drop": ["kafka_key"]}],
    )
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert set(_rows(spark, table, "id, email")) == {1, 3}


def test_order_by_a_kept_source_lsn_of_a_declared_envelope_compares_numbers(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A declared schema reads the envelope's ``source`` as text: the LSN kept for
    ``order_by`` is a number again, so 1000 is newer than 999 inside a batch and against
    the table (as text, "999" > "1000" dropped the newer changes)."""
    topic, table, name = f"dbzo-{unique}", f"db.dbzo_{unique}", f"zo_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)

    def change(i: int, email: str, lsn: int) -> dict[str, Any]:
        return _debezium("u", None, {"id": i, "email": email}, lsn, False)

    # Key 1: the newer change (LSN 1000) on partition 0 before the older one on partition 1.
    first = [("1", change(1, "new", 1000), 0), ("1", change(1, "old", 999), 1)]
    first += [("2", change(2, "b", 9), 0)]
    _produce(kafka_bootstrap, topic, first)
    write = {
        "mode": "cdc",
        "key": ["id"],
        "debezium": True,
        "debezium_fields": ["source.lsn"],
        "order_by": "__source_lsn",
    }
    schema = {"id": "long", "email": "string"}
    config = make_config([_pipeline(name, topic, table, schema=schema, write=write)])
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table, "id, email, __source_lsn") == {1: ("new", 1000), 2: ("b", 9)}
    assert dict(spark.table(f"lake.{table}").dtypes)["__source_lsn"] == "bigint"
    # Against the table: 10 is newer than 9, 999 older than 1000.
    _produce(
        kafka_bootstrap, topic, [("2", change(2, "b2", 10), 0), ("1", change(1, "stale", 999), 1)]
    )
    run(config, until_caught_up=True, spark=spark)
    assert _rows(spark, table, "id, email, __source_lsn") == {1: ("new", 1000), 2: ("b2", 10)}
    # An LSN that is no number marks its record; it is not written with a null LSN.
    odd = change(3, "c", 0)
    odd["source"]["lsn"] = "0/16B6C50"
    _produce(kafka_bootstrap, topic, [("3", odd, 0), ("4", change(4, "d", 11), 0)])
    dlq = f"db.dbzo_dead_{unique}"
    errors = {"tolerance": "all", "dlq_table": dlq}
    config = make_config([_pipeline(name, topic, table, schema=schema, write=write, errors=errors)])
    run(config, until_caught_up=True, spark=spark)
    assert set(_rows(spark, table, "id, email")) == {1, 2, 4}
    [dead] = spark.sql(f"SELECT stage, reason FROM lake.{dlq}").collect()
    assert dead[0] == "decode"
    assert "envelope field 'source.lsn' (int64) is not a number: '0/16B6C50'" in dead[1]


@pytest.mark.parametrize("wrapped", [False, True], ids=["plain", "schemas-enable"])
def test_debezium_tombstones_delete_by_a_json_struct_key(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, wrapped: bool
) -> None:
    # Debezium's keys are JSON structs ({"id": 2}, or Kafka Connect's {schema, payload} with
    # schemas.enable): a tombstone deletes the row of the key's field of the key column's name.
    topic, table, name = f"dbzk-{unique}", f"db.dbzk_{unique}", f"zk_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    def key(i: int) -> str:
        plain = {"id": i}
        if not wrapped:
            return json.dumps(plain)
        schema = {"type": "struct", "fields": [{"field": "id", "type": "int64"}], "optional": False}
        return json.dumps({"schema": schema, "payload": plain})

    def row(i: int) -> dict[str, Any]:
        return {"id": i, "email": f"{i}@x"}

    events = [
        (key(1), _debezium("c", None, row(1), 1, wrapped)),
        (key(2), _debezium("c", None, row(2), 2, wrapped)),
        (key(3), _debezium("c", None, row(3), 3, wrapped)),
        (key(2), None),  # a tombstone without a delete event first
    ]
    _produce(kafka_bootstrap, topic, [(k, v, 0) for k, v in events])
    write = {"mode": "cdc", "key": ["id"], "debezium": True, "tombstones": "delete"}
    pipeline = {
        "name": name, "topics": [topic], "table": table, "trigger": "1s",
        "key_format": "json", "write": write,
    }  # fmt: skip
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert set(_rows(spark, table, "id, email")) == {1, 3}


def test_a_tombstone_deletes_by_its_key_field_whose_name_another_differs_from_in_case(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A JSON key with ``id`` and ``ID``: Spark's names are case-insensitive, so reading
    ``id`` of it was ambiguous and stopped every batch naming no record. The field of the
    key column's exact name is read."""
    topic, table, name = f"tcase-{unique}", f"db.tcase_{unique}", f"tc_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    def key(i: int) -> str:
        return json.dumps({"id": i, "ID": f"shard-{i % 2}"})

    values: list[tuple[str | None, dict[str, Any] | None, int]] = [
        (key(i), {"id": i, "name": f"n{i}", "amount": i}, 0) for i in range(1, 5)
    ]
    values += [(key(2), None, 0), (key(4), None, 0)]
    _produce(kafka_bootstrap, topic, values)
    write = {"mode": "upsert", "key": ["id"], "tombstones": "delete"}
    pipeline = _pipeline(
        name, topic, table, write=write, key_format="json", key_column="kafka_key",
        transforms=[{"drop": ["kafka_key"]}],
    )  # fmt: skip
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    assert _rows(spark, table) == {1: ("n1", 1), 3: ("n3", 3)}


def test_debezium_keys_with_schemas_enable_are_their_payload_in_the_rows_types(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Keys of Connect's JSON converter with schemas.enable carry their schema: the key
    column holds the payload in the schema's types (``int32`` an ``int``), and a tombstone
    deletes its row without widening the ``int`` key column to ``bigint``."""
    topic, table, name = f"dbzw-{unique}", f"db.dbzw_{unique}", f"zw_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    key_schema = {
        "type": "struct", "optional": False, "name": "dbserver1.inventory.orders.Key",
        "fields": [{"field": "order_id", "type": "int32", "optional": False}],
    }  # fmt: skip
    row = [
        {"field": "order_id", "type": "int32", "optional": False},
        {"field": "qty", "type": "int32", "optional": True},
    ]

    def key(i: int) -> str:
        return json.dumps({"schema": key_schema, "payload": {"order_id": i}})

    def event(op: str, before: Any, after: Any) -> dict[str, Any]:
        return {
            "schema": _connect_envelope(row),
            "payload": {"before": before, "after": after, "op": op},
        }

    events = [(key(i), event("c", None, {"order_id": i, "qty": i})) for i in range(1, 5)]
    events += [
        (key(2), event("u", None, {"order_id": 2, "qty": 20})),
        (key(3), event("d", {"order_id": 3, "qty": 3}, None)),
        (key(3), None),  # the tombstone after a delete
        (key(4), None),  # a tombstone alone
    ]
    _produce(kafka_bootstrap, topic, [(k, v, 0) for k, v in events])
    write = {"mode": "cdc", "key": ["order_id"], "debezium": True, "tombstones": "delete"}
    pipeline = {
        "name": name, "topics": [topic], "table": table, "trigger": "1s",
        "key_format": "json", "write": write,
    }  # fmt: skip
    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    schema = spark.table(f"lake.{table}").schema
    assert [(f.name, f.dataType.simpleString()) for f in schema] == [
        ("order_id", "int"), ("qty", "int"), ("key", "struct<order_id:int>"),
    ]  # fmt: skip
    rows = spark.sql(f"SELECT order_id, qty, key.order_id FROM lake.{table}").collect()
    assert sorted(tuple(r) for r in rows) == [(1, 1, 1), (2, 20, 2)]


def test_debezium_json_topics_per_source_table_routed_by_topic_with_their_tombstones(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Debezium's layout: a topic per source table, each with its own row and key schema
    (embedded, ``schemas.enable``), one pipeline over them routed by topic. Every table's
    schema is read at the start (a key column named only by the second table is there), and
    a tombstone deletes in its own topic's table."""
    prefix = f"dbzr{unique}.inv"
    customers, orders = f"{prefix}.customers", f"{prefix}.orders"
    for topic in (customers, orders):
        ensure_topic(kafka_bootstrap, topic, partitions=2)
    decimal = {"name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}}
    customer_row = [
        {"field": "id", "type": "int32"},
        {"field": "email", "type": "string", "optional": True},
    ]
    order_row = [
        {"field": "order_id", "type": "int64"},
        {"field": "customer", "type": "int32", "optional": True},
        {"field": "total", "type": "bytes", "optional": True, **decimal},
    ]

    def key(name: str, kind: str, value: int) -> str:
        schema = {"type": "struct", "fields": [{"field": name, "type": kind}]}
        return json.dumps({"schema": schema, "payload": {name: value}})

    def event(row: list[Any], op: str, before: Any, after: Any) -> dict[str, Any]:
        payload = {"before": before, "after": after, "op": op}
        return {"schema": _connect_envelope(row), "payload": payload}

    def cents(n: int) -> str:
        return base64.b64encode(n.to_bytes(4, "big", signed=True)).decode()

    def order(i: int, customer: int, total: int) -> dict[str, Any]:
        return {"order_id": i, "customer": customer, "total": cents(total)}

    _produce(kafka_bootstrap, customers, [
        (key("id", "int32", 1), event(customer_row, "c", None, {"id": 1, "email": "a@x"}), 0),
        (key("id", "int32", 2), event(customer_row, "c", None, {"id": 2, "email": "b@x"}), 1),
        (key("id", "int32", 2), None, 1),  # a tombstone alone
        (key("id", "int32", 1), event(customer_row, "u", None, {"id": 1, "email": "a2@x"}), 0),
    ])  # fmt: skip
    _produce(kafka_bootstrap, orders, [
        (key("order_id", "int64", 10), event(order_row, "c", None, order(10, 1, 1234)), 0),
        (key("order_id", "int64", 11), event(order_row, "c", None, order(11, 2, -5)), 1),
        (key("order_id", "int64", 12), event(order_row, "c", None, order(12, 2, 7)), 1),
        (key("order_id", "int64", 11), event(order_row, "d", order(11, 2, -5), None), 1),
        (key("order_id", "int64", 11), None, 1),  # the tombstone after a delete
        (key("order_id", "int64", 12), None, 1),
    ])  # fmt: skip
    write = {"mode": "cdc", "key": ["id"], "debezium": True, "tombstones": "delete"}
    tables = f"db.dbzr_{unique}_{{1}}"
    pipeline = {
        "name": f"zr_{unique}", "topic_pattern": f"dbzr{unique}\\.inv\\..*", "trigger": "1s",
        "key_format": "json", "transforms": [{"drop": ["key"]}], "write": write,
        "route": {"topic": f"dbzr{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {
            tables.replace("{1}", "orders"): {"write": {"key": ["order_id"]}},
            # A table of a source table added later, declared ahead: its key column is
            # unknown until its records come.
            tables.replace("{1}", "shipments"): {"write": {"key": ["shipment_id"]}},
        },
    }  # fmt: skip

    kept = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    # Each batch's decoded rows (a local checkpoint the tables' MERGEs read) are let go.
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) == kept

    def table(name: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        frame = spark.table(f"lake.{tables.replace('{1}', name)}")
        fields = [(f.name, f.dataType.simpleString()) for f in frame.schema]
        return fields, sorted(tuple(r) for r in frame.collect())

    assert table("customers") == ([("id", "int"), ("email", "string")], [(1, "a2@x")])
    order_fields = [("order_id", "bigint"), ("customer", "int"), ("total", "decimal(38,2)")]
    assert table("orders") == (order_fields, [(10, 1, Decimal("12.34"))])

    # The source table added: its topic, its rows, its tombstone.
    shipments = f"{prefix}.shipments"
    shipment_row = [
        {"field": "shipment_id", "type": "int64"},
        {"field": "carrier", "type": "string", "optional": True},
    ]
    ensure_topic(kafka_bootstrap, shipments, partitions=1)
    ups, dhl = {"shipment_id": 7, "carrier": "ups"}, {"shipment_id": 8, "carrier": "dhl"}
    _produce(kafka_bootstrap, shipments, [
        (key("shipment_id", "int64", 7), event(shipment_row, "c", None, ups), 0),
        (key("shipment_id", "int64", 8), event(shipment_row, "c", None, dhl), 0),
        (key("shipment_id", "int64", 8), event(shipment_row, "d", dhl, None), 0),
        (key("shipment_id", "int64", 8), None, 0),
    ])  # fmt: skip
    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert table("shipments") == ([("shipment_id", "bigint"), ("carrier", "string")], [(7, "ups")])
    assert table("orders") == (order_fields, [(10, 1, Decimal("12.34"))])


def test_debezium_topics_routed_without_a_pipeline_key_take_each_tables_own(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """No ``write.key``: each listed table merges by its own key; the changes of a topic whose
    table ``tables:`` does not list go to the dead-letter queue naming that table, and the
    other tables are written in the same batches."""
    prefix = f"dbzk{unique}.inv"
    customers, orders, notes = f"{prefix}.customers", f"{prefix}.orders", f"{prefix}.notes"
    for topic in (customers, orders, notes):
        ensure_topic(kafka_bootstrap, topic, partitions=1)
    customer_row = [{"field": "id", "type": "int32"}, {"field": "email", "type": "string"}]
    order_row = [{"field": "order_id", "type": "int64"}, {"field": "qty", "type": "int32"}]
    note_row = [{"field": "note_id", "type": "int64"}, {"field": "text", "type": "string"}]

    def event(row: list[Any], op: str, before: Any, after: Any) -> dict[str, Any]:
        payload = {"before": before, "after": after, "op": op}
        return {"schema": _connect_envelope(row), "payload": payload}

    _produce(kafka_bootstrap, customers, [
        (None, event(customer_row, "c", None, {"id": 1, "email": "a@x"}), 0),
        (None, event(customer_row, "c", None, {"id": 2, "email": "b@x"}), 0),
        (None, event(customer_row, "u", None, {"id": 1, "email": "a2@x"}), 0),
    ])  # fmt: skip
    _produce(kafka_bootstrap, orders, [
        (None, event(order_row, "c", None, {"order_id": 10, "qty": 1}), 0),
        (None, event(order_row, "c", None, {"order_id": 11, "qty": 2}), 0),
        (None, event(order_row, "d", {"order_id": 10, "qty": 1}, None), 0),
    ])  # fmt: skip
    _produce(kafka_bootstrap, notes, [
        (None, event(note_row, "c", None, {"note_id": 5, "text": "hi"}), 0),
        (None, event(note_row, "u", None, {"note_id": 5, "text": "ho"}), 0),
    ])  # fmt: skip
    tables = f"db.dbzk_{unique}_{{1}}"
    dlq = f"ops.dbzk_dlq_{unique}"
    pipeline = {
        "name": f"zk_{unique}", "topic_pattern": f"dbzk{unique}\\.inv\\..*", "trigger": "1s",
        "write": {"mode": "cdc", "debezium": True},
        "route": {"topic": f"dbzk{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {
            tables.replace("{1}", "customers"): {"write": {"key": ["id"]}},
            tables.replace("{1}", "orders"): {"write": {"key": ["order_id"]}},
        },
        "errors": {"tolerance": "all", "dlq_table": dlq},
    }  # fmt: skip

    from frazil.engine.explain import explain

    # The plan names the table that would take no change.
    [explained] = explain(spark, make_config([pipeline]), [])
    notes_table = tables.replace("{1}", "notes")
    assert [w for w in explained.warnings if "no key" in w] == [
        f"table {notes_table}: no key (set tables.{notes_table}.write.key, or write.key); "
        "its changes would go to the dead-letter queue"
    ]

    [report] = run(make_config([pipeline]), until_caught_up=True, spark=spark)

    def rows(name: str) -> list[tuple[Any, ...]]:
        return sorted(
            tuple(r) for r in spark.table(f"lake.{tables.replace('{1}', name)}").collect()
        )

    assert rows("customers") == [(1, "a2@x"), (2, "b@x")]
    assert rows("orders") == [(11, 2)]
    assert not spark.catalog.tableExists(f"lake.{notes_table}")
    dead = spark.sql(
        f"SELECT topic, offset, stage, reason, target_table FROM lake.{dlq} ORDER BY offset"
    ).collect()
    reason = f"no key for table {notes_table}: set its tables.<name>.write.key, or write.key"
    assert [tuple(r) for r in dead] == [
        (notes, 0, "mode", reason, notes_table),
        (notes, 1, "mode", reason, notes_table),
    ]
    assert report.dead_lettered == 2


#: A Debezium ``source`` block of the PostgreSQL connector (its Connect schema's fields).
_PG_SOURCE = [
    {"field": name, "type": kind, "optional": optional}
    for name, kind, optional in [
        ("version", "string", False), ("connector", "string", False), ("name", "string", False),
        ("ts_ms", "int64", False), ("snapshot", "string", True), ("db", "string", False),
        ("sequence", "string", True), ("schema", "string", False), ("table", "string", False),
        ("txId", "int64", True), ("lsn", "int64", True), ("xmin", "int64", True),
    ]
]  # fmt: skip
_TIMESTAMP = {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}
_DECIMAL = {
    "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
    "parameters": {"scale": "2", "connect.decimal.precision": "10"},
}  # fmt: skip


def _value(field: dict[str, Any], i: int) -> tuple[Any, Any]:
    """Row ``i``'s value of ``field`` as Debezium sends it and as the table holds it (a
    timestamp as its epoch milliseconds)."""
    name = field.get("name")
    if name == "io.debezium.time.Timestamp":
        return 1_700_000_000_000 + i, 1_700_000_000_000 + i
    if name == "org.apache.kafka.connect.data.Decimal":
        cents = 1_000 + i * 7
        return base64.b64encode(cents.to_bytes(4, "big", signed=True)).decode(), Decimal(
            cents
        ).scaleb(-2)
    if field["type"] == "string":
        return f"{field['field']}{i}", f"{field['field']}{i}"
    if field["type"] == "float64":
        return i / 4, i / 4
    return i, i


def _postgres_changes(
    table: str, key_name: str, row: list[dict[str, Any]]
) -> tuple[list[tuple[str | None, dict[str, Any] | None, int]], list[tuple[Any, ...]]]:
    """Debezium's PostgreSQL connector's changes of source table ``table`` (JSON converter,
    schemas on; a tombstone after each delete): creates of 12 rows, updates of every other
    one, deletes of every third one, each key on one partition; and the rows they leave, in
    the table's values."""
    key_schema = {
        "type": "struct", "optional": False, "name": f"dbserver1.inventory.{table}.Key",
        "fields": [f for f in row if f["field"] == key_name],
    }  # fmt: skip
    envelope = _connect_envelope(
        row,
        {"type": "struct", "optional": False, "fields": _PG_SOURCE, "field": "source"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    )
    events: list[tuple[str | None, dict[str, Any] | None, int]] = []
    live: dict[int, int] = {}

    def values(i: int, version: int, sent: bool) -> dict[str, Any]:
        """Row ``i`` at ``version``: its key column from ``i``, the others from it."""
        return {
            f["field"]: _value(f, i if f["field"] == key_name else version)[0 if sent else 1]
            for f in row
        }

    def change(i: int, op: str, version: int | None) -> None:
        seq = len(events) + 1
        before = live.get(i)
        payload = {
            "before": None if before is None else values(i, before, sent=True),
            "after": None if version is None else values(i, version, sent=True),
            "source": {
                "version": "2.7.0.Final", "connector": "postgresql", "name": "dbserver1",
                "ts_ms": 1_700_000_000_000 + seq, "snapshot": "false", "db": "inventory",
                "sequence": None, "schema": "public", "table": table, "txId": 1000 + seq,
                "lsn": seq, "xmin": None,
            },
            "op": op, "ts_ms": 1_700_000_000_000 + seq,
        }  # fmt: skip
        key = json.dumps({"schema": key_schema, "payload": {key_name: i}})
        events.append((key, {"schema": envelope, "payload": payload}, i % 2))
        if version is None:
            live.pop(i)
            events.append((key, None, i % 2))
        else:
            live[i] = version

    for i in range(12):
        change(i, "c", i)
    for i in range(0, 12, 2):
        change(i, "u", i + 100)
    for i in range(0, 12, 3):
        change(i, "d", None)
    rows = sorted(tuple(values(i, v, sent=False).values()) for i, v in live.items())
    return events, rows


def test_debezium_routed_without_a_pipeline_key_deletes_by_tombstones_of_each_tables_key(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """No ``write.key``, keys of Connect's JSON converter, ``tombstones: delete`` and the
    PostgreSQL connector's envelopes of three source tables: each listed table's changes and
    tombstones apply by that table's key, and the changes of the unlisted table's topic, its
    tombstones among them, go to the dead-letter queue."""
    prefix = f"dbzt{unique}.inv"
    shapes: dict[str, tuple[str, list[dict[str, Any]]]] = {
        "customers": ("id", [
            {"field": "id", "type": "int32", "optional": False},
            {"field": "first_name", "type": "string", "optional": False},
            {"field": "last_name", "type": "string", "optional": False},
            {"field": "email", "type": "string", "optional": True},
            {"field": "created_at", "optional": True, **_TIMESTAMP},
        ]),
        "orders": ("order_id", [
            {"field": "order_id", "type": "int64", "optional": False},
            {"field": "customer_id", "type": "int32", "optional": False},
            {"field": "amount", "optional": False, **_DECIMAL},
            {"field": "status", "type": "string", "optional": True},
            {"field": "ordered_at", "optional": False, **_TIMESTAMP},
        ]),
        "products": ("id", [
            {"field": "id", "type": "int32", "optional": False},
            {"field": "name", "type": "string", "optional": False},
            {"field": "description", "type": "string", "optional": True},
            {"field": "weight", "type": "float64", "optional": True},
        ]),
    }  # fmt: skip
    expected: dict[str, list[tuple[Any, ...]]] = {}
    produced: dict[str, list[int]] = {}
    for table, (key_name, row) in shapes.items():
        topic = f"{prefix}.{table}"
        ensure_topic(kafka_bootstrap, topic, partitions=2)
        events, expected[table] = _postgres_changes(table, key_name, row)
        _produce(kafka_bootstrap, topic, events)
        produced[table] = [sum(1 for e in events if e[2] == p) for p in (0, 1)]
    tables = f"db.dbzt_{unique}_{{1}}"
    dlq = f"ops.dbzt_dlq_{unique}"
    pipeline = {
        "name": f"zt_{unique}", "topic_pattern": f"dbzt{unique}\\.inv\\..*", "trigger": "1s",
        "format": "json", "key_format": "json",
        "write": {"mode": "cdc", "debezium": True, "tombstones": "delete"},
        "route": {"topic": f"dbzt{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {
            tables.replace("{1}", "customers"): {"write": {"key": ["id"]}},
            tables.replace("{1}", "orders"): {"write": {"key": ["order_id"]}},
        },
        "errors": {"tolerance": "all", "dlq_table": dlq},
    }  # fmt: skip

    [report] = run(make_config([pipeline]), until_caught_up=True, spark=spark)

    for table in ("customers", "orders"):
        row = shapes[table][1]
        columns = ", ".join(
            f"unix_millis({f['field']})" if f.get("name", "").endswith("Timestamp") else f["field"]
            for f in row
        )
        name = tables.replace("{1}", table)
        got = sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM lake.{name}").collect())
        assert got == expected[table], table
    products = tables.replace("{1}", "products")
    assert not spark.catalog.tableExists(f"lake.{products}")
    dead = spark.sql(
        f"SELECT topic, partition, offset, stage, reason, target_table FROM lake.{dlq}"
    ).collect()
    reason = f"no key for table {products}: set its tables.<name>.write.key, or write.key"
    for partition, count in enumerate(produced["products"]):
        offsets = sorted(r.offset for r in dead if r.partition == partition)
        assert offsets == list(range(count))
    assert {(r.topic, r.stage, r.reason, r.target_table) for r in dead} == {
        (f"{prefix}.products", "mode", reason, products)
    }
    assert report.dead_lettered == sum(produced["products"])


def test_inferred_json_over_two_topics_meets_both_shapes_at_the_start(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A schema inferred from the start of every partition of every topic: the second
    topic's key column, named by its table's key, is known before the first batch."""
    users, orders = f"infu-{unique}", f"info-{unique}"
    for topic in (users, orders):
        ensure_topic(kafka_bootstrap, topic, partitions=2)
    _produce(
        kafka_bootstrap, users, [(None, {"user_id": i, "name": f"u{i}"}, i % 2) for i in range(50)]
    )
    _produce(kafka_bootstrap, orders, [(None, {"order_id": 7, "qty": q}, 0) for q in (1, 2)])
    table = f"db.inf_{unique}_{{1}}"
    pipeline = {
        "name": f"inf_{unique}", "topics": [users, orders], "trigger": "1s",
        "write": {"mode": "upsert", "key": ["user_id"]},
        "route": {"topic": f"inf(\\w)-{unique}", "table": table},
        "tables": {table.replace("{1}", "o"): {"write": {"key": ["order_id"]}}},
    }  # fmt: skip

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    rows = spark.table(f"lake.{table.replace('{1}', 'o')}").select("order_id", "qty").collect()
    assert [tuple(r) for r in rows] == [(7, 2)]
    assert spark.table(f"lake.{table.replace('{1}', 'u')}").count() == 50


#: Debezium's Avro envelope for a table ``inventory.customers`` (as its Avro converter
#: registers it: Value records in before/after, a Source block, op and ts_ms).
DEBEZIUM_AVRO = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.customers",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "int"},
                        {"name": "email", "type": "string"},
                        {"name": "score", "type": ["null", "double"], "default": None},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                    {"name": "ts_ms", "type": "long"},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}


def test_debezium_avro_through_the_registry(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    from tests.integration.registry_helpers import produce_avro

    topic, table, name = f"dbza-{unique}", f"db.dbza_{unique}", f"za_{unique}"

    def event(op: str, before: Any, after: Any, lsn: int) -> dict[str, Any]:
        source = {"connector": "postgresql", "lsn": lsn, "ts_ms": lsn}
        return {"before": before, "after": after, "source": source, "op": op, "ts_ms": lsn}

    def row(i: int, email: str, score: float | None = None) -> dict[str, Any]:
        return {"id": i, "email": email, "score": score}

    events = [
        event("r", None, row(1, "a@x"), 10),
        event("c", None, row(2, "b@x", 1.5), 11),
        event("u", row(1, "a@x"), row(1, "a2@x", 2.0), 12),
        event("d", row(2, "b@x", 1.5), None, 13),
        event("c", None, row(3, "c@x"), 14),
        event("t", None, None, 15),  # a truncate is no row change: it fails its record
    ]
    produce_avro(kafka_bootstrap, schema_registry_url, topic, json.dumps(DEBEZIUM_AVRO), events)
    write = {"mode": "cdc", "key": ["id"], "debezium": True, "debezium_fields": ["source.lsn"]}
    pipeline = {
        "name": name,
        "topics": [topic],
        "table": table,
        "format": "avro",
        "write": write,
        "errors": {"tolerance": "all", "dlq_table": f"db.dbza_dead_{unique}"},
    }
    run(
        make_config([pipeline], schema_registry={"url": schema_registry_url}),
        until_caught_up=True,
        spark=spark,
    )
    rows = _rows(spark, table, "id, email, score, __source_lsn")
    assert rows == {1: ("a2@x", 2.0, 12), 3: ("c@x", None, 14)}
    dead = spark.sql(f"SELECT offset, stage, detail FROM lake.db.dbza_dead_{unique}").collect()
    assert [(r[0], r[1], r[2]) for r in dead] == [(5, "mode", "t")]


def _envelope(table: str, fields: list[dict[str, Any]]) -> str:
    """Debezium's Avro value schema of a source table: an ``Envelope`` in its namespace."""
    row = {"type": "record", "name": "Value", "fields": fields}
    return json.dumps({
        "type": "record", "name": "Envelope", "namespace": f"dbserver1.inventory.{table}",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
        ],
    })  # fmt: skip


def _event(op: str, before: Any, after: Any) -> dict[str, Any]:
    return {"before": before, "after": after, "op": op}


def test_debezium_avro_topics_per_source_table_routed_by_topic(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    """Debezium's Avro converter: an Envelope per source table, each under its topic's own
    subject. One pipeline over the topics, routed by topic, reads each record with its own
    record type's schemas; each table gets its own columns and rows, and a new version of
    one table's schema evolves that table only."""
    from tests.integration.registry_helpers import produce_avro

    customers, orders = f"dbzav_{unique}.inv.customers", f"dbzav_{unique}.inv.orders"

    customer_fields = [{"name": "id", "type": "int"}, {"name": "email", "type": "string"}]
    order_fields = [{"name": "order_id", "type": "long"}, {"name": "qty", "type": "int"}]
    url = schema_registry_url
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("c", None, {"id": 1, "email": "a@x"}),
        _event("c", None, {"id": 2, "email": "b@x"}),
        _event("u", {"id": 1, "email": "a@x"}, {"id": 1, "email": "a2@x"}),
    ], partitions=2)  # fmt: skip
    produce_avro(kafka_bootstrap, url, orders, _envelope("orders", order_fields), [
        _event("c", None, {"order_id": 10, "qty": 1}),
        _event("c", None, {"order_id": 11, "qty": 2}),
        _event("d", {"order_id": 11, "qty": 2}, None),
    ])  # fmt: skip
    tables = f"db.dbzav_{unique}_{{1}}"
    pipeline = {
        "name": f"zav_{unique}", "topics": [customers, orders], "format": "avro",
        "trigger": "1s", "write": {"mode": "cdc", "key": ["id"], "debezium": True},
        "route": {"topic": f"dbzav_{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {tables.replace("{1}", "orders"): {"write": {"key": ["order_id"]}}},
    }  # fmt: skip
    config = make_config([pipeline], schema_registry={"url": url})

    run(config, until_caught_up=True, spark=spark)

    def table(name: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        frame = spark.table(f"lake.{tables.replace('{1}', name)}")
        fields = [(f.name, f.dataType.simpleString()) for f in frame.schema]
        return fields, sorted(tuple(r) for r in frame.collect())

    assert table("customers") == ([("id", "int"), ("email", "string")], [(1, "a2@x"), (2, "b@x")])
    assert table("orders") == ([("order_id", "bigint"), ("qty", "int")], [(10, 1)])

    # Orders gain a column at the source: its new version becomes orders' reader only.
    grown = [*order_fields, {"name": "note", "type": ["null", "string"], "default": None}]
    produce_avro(kafka_bootstrap, url, orders, _envelope("orders", grown), [
        _event("c", None, {"order_id": 12, "qty": 3, "note": "gift"}),
    ])  # fmt: skip
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("d", {"id": 2, "email": "b@x"}, None),
    ])  # fmt: skip
    run(config, until_caught_up=True, spark=spark)

    assert table("customers") == ([("id", "int"), ("email", "string")], [(1, "a2@x")])
    assert table("orders") == (
        [("order_id", "bigint"), ("qty", "int"), ("note", "string")],
        [(10, 1, None), (12, 3, "gift")],
    )


def test_debezium_avro_keys_and_tombstones_over_three_record_types_in_one_batch(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    """Debezium's Avro converter for keys and values, three source tables in one batch (a
    topic pattern, each key and value record type met while running), tombstones deleting,
    failures to a dead-letter table: each table equals its source, its ``key`` column holds
    the decoded key's fields only, and only a truncate is a dead letter, of the table its topic
    routes to. The tables' writes are
    planned at once from several threads on one decoded batch."""
    from tests.integration.registry_helpers import produce_avro

    prefix = f"dbzak_{unique}.inv"
    shapes = {
        "customers": ("id", "int", [{"name": "email", "type": "string"}]),
        "orders": ("order_id", "long", [{"name": "qty", "type": "int"}]),
        "parts": ("sku", "string", [{"name": "kg", "type": ["null", "double"], "default": None}]),
    }
    values = {
        "customers": [{"id": 1, "email": "a@x"}, {"id": 2, "email": "b@x"}],
        "orders": [{"order_id": 10, "qty": 1}, {"order_id": 11, "qty": 2}],
        "parts": [{"sku": "p1", "kg": 1.5}, {"sku": "p2", "kg": None}],
    }
    url = schema_registry_url
    for name, (key, key_type, rest) in shapes.items():
        topic = f"{prefix}.{name}"
        fields = [{"name": key, "type": key_type}, *rest]
        key_schema = json.dumps({
            "type": "record", "name": "Key", "namespace": f"dbserver1.inventory.{name}",
            "fields": [{"name": key, "type": key_type}],
        })  # fmt: skip
        first, second = values[name]
        produce_avro(kafka_bootstrap, url, topic, _envelope(name, fields), [
            _event("c", None, first), _event("c", None, second), _event("d", second, None),
        ], key=lambda e, k=key: {k: (e["after"] or e["before"])[k]},
            key_schema_str=key_schema, partitions=2)  # fmt: skip
        produce_avro(kafka_bootstrap, url, topic, _envelope(name, fields), [None],
            key=lambda _, k=key, v=second[key]: {k: v}, key_schema_str=key_schema)  # fmt: skip
        if name == "orders":  # a truncate: no row change, a dead letter of its table
            produce_avro(kafka_bootstrap, url, topic, _envelope(name, fields),
                [_event("t", None, None)], key=lambda _, k=key: {k: 0},
                key_schema_str=key_schema)  # fmt: skip
    tables = f"db.dbzak_{unique}_{{1}}"
    pipeline = {
        "name": f"zak_{unique}", "topic_pattern": f"dbzak_{unique}\\.inv\\..*",
        "format": "avro", "subject": f"{prefix}.customers-value",
        "key_format": "avro", "key_subject": f"{prefix}.customers-key",
        "write": {"mode": "cdc", "key": ["id"], "debezium": True, "tombstones": "delete"},
        "route": {"topic": f"dbzak_{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {
            tables.replace("{1}", "orders"): {"write": {"key": ["order_id"]}},
            tables.replace("{1}", "parts"): {"write": {"key": ["sku"]}},
        },
        "errors": {"tolerance": "all", "dlq_table": f"ops.dbzak_{unique}_dlq"},
    }  # fmt: skip
    config = make_config([pipeline], schema_registry={"url": url})

    run(config, until_caught_up=True, spark=spark)

    for name, (key, _, _) in shapes.items():
        frame = spark.table(f"lake.{tables.replace('{1}', name)}")
        first = values[name][0]
        assert frame.schema["key"].dataType.fieldNames() == [
            "id", "order_id", "sku"
        ], name  # fmt: skip
        rows = [r.asDict(recursive=True) for r in frame.collect()]
        assert [{k: r[k] for k in first} for r in rows] == [first], name
        assert rows[0]["key"][key] == first[key], name
    # Failed at the mode, after routing: it names the table it was routed to, and its code.
    dead = spark.table(f"lake.ops.dbzak_{unique}_dlq").select(
        "topic", "stage", "reason", "detail", "target_table"
    )
    assert [tuple(r) for r in dead.collect()] == [(
        f"{prefix}.orders", "mode", "not a row change: Debezium op 't' is not c, r, u or d",
        "t", tables.replace("{1}", "orders"),
    )]  # fmt: skip


def test_debezium_avro_source_table_added_later_gets_its_own_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    """A routed pipeline over a topic pattern, its subject the first table's: a source table
    added later (a new topic, a new subject, another record type) is read with its own
    schema when its records come, and gets its own table; nothing is marked."""
    from tests.integration.registry_helpers import produce_avro

    customers, shipments = f"dbzgr_{unique}.inv.customers", f"dbzgr_{unique}.inv.shipments"

    customer_fields = [{"name": "id", "type": "int"}, {"name": "email", "type": "string"}]
    url = schema_registry_url
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("c", None, {"id": 1, "email": "a@x"}),
        _event("c", None, {"id": 2, "email": "b@x"}),
    ])  # fmt: skip
    tables = f"db.dbzgr_{unique}_{{1}}"
    pipeline = {
        "name": f"zgr_{unique}", "topic_pattern": f"dbzgr_{unique}\\.inv\\..*",
        "format": "avro", "subject": f"{customers}-value", "trigger": "1s",
        "write": {"mode": "cdc", "key": ["id"], "debezium": True},
        "route": {"topic": f"dbzgr_{unique}\\.inv\\.(\\w+)", "table": tables},
        "tables": {tables.replace("{1}", "shipments"): {"write": {"key": ["shipment_id"]}}},
    }  # fmt: skip
    config = make_config([pipeline], schema_registry={"url": url})
    run(config, until_caught_up=True, spark=spark)

    shipment_fields = [
        {"name": "shipment_id", "type": "long"},
        {"name": "carrier", "type": ["null", "string"], "default": None},
    ]
    produce_avro(kafka_bootstrap, url, shipments, _envelope("shipments", shipment_fields), [
        _event("c", None, {"shipment_id": 7, "carrier": "ups"}),
        _event("c", None, {"shipment_id": 8, "carrier": None}),
        _event("u", {"shipment_id": 7, "carrier": "ups"}, {"shipment_id": 7, "carrier": "dhl"}),
        _event("d", {"shipment_id": 8, "carrier": None}, None),
    ], partitions=2)  # fmt: skip
    # Its second version, in the same run: the newest reads both (schema_evolution: evolve).
    weighed = [*shipment_fields, {"name": "kg", "type": ["null", "double"], "default": None}]
    produce_avro(kafka_bootstrap, url, shipments, _envelope("shipments", weighed), [
        _event("c", None, {"shipment_id": 9, "carrier": "ups", "kg": 2.5}),
    ])  # fmt: skip
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("d", {"id": 1, "email": "a@x"}, None),
    ])  # fmt: skip
    run(config, until_caught_up=True, spark=spark)

    def table(name: str) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
        frame = spark.table(f"lake.{tables.replace('{1}', name)}")
        fields = [(f.name, f.dataType.simpleString()) for f in frame.schema]
        return fields, sorted(tuple(r) for r in frame.collect())

    assert table("customers") == ([("id", "int"), ("email", "string")], [(2, "b@x")])
    assert table("shipments") == (
        [("shipment_id", "bigint"), ("carrier", "string"), ("kg", "double")],
        [(7, "dhl", None), (9, "ups", 2.5)],
    )


def test_a_source_table_spark_cannot_read_is_dead_lettered_and_the_others_go_on(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:
    """A routed pipeline meeting a record type with a decimal of 40 digits (valid Avro, no
    Spark type): its records go to the dead-letter queue with the reason, the rest land."""
    from tests.integration.registry_helpers import produce_avro

    customers, ledger = f"dbzwide_{unique}.inv.customers", f"dbzwide_{unique}.inv.ledger"
    url = schema_registry_url
    customer_fields = [{"name": "id", "type": "int"}, {"name": "email", "type": "string"}]
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("c", None, {"id": 1, "email": "a@x"}),
    ])  # fmt: skip
    wide = {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 2}
    ledger_fields = [{"name": "id", "type": "int"}, {"name": "total", "type": wide}]
    produce_avro(kafka_bootstrap, url, ledger, _envelope("ledger", ledger_fields), [
        _event("c", None, {"id": 5, "total": decimal.Decimal("1" * 38 + ".50")}),
    ])  # fmt: skip
    produce_avro(kafka_bootstrap, url, customers, _envelope("customers", customer_fields), [
        _event("c", None, {"id": 2, "email": "b@x"}),
    ])  # fmt: skip
    tables, dead = f"db.dbzwide_{unique}_{{1}}", f"db.dbzwide_dead_{unique}"
    pipeline = {
        "name": f"zw_{unique}", "topic_pattern": f"dbzwide_{unique}\\.inv\\..*",
        "format": "avro", "subject": f"{customers}-value",
        "write": {"mode": "cdc", "key": ["id"], "debezium": True},
        "route": {"topic": f"dbzwide_{unique}\\.inv\\.(\\w+)", "table": tables},
        "errors": {"tolerance": "all", "dlq_table": dead},
    }  # fmt: skip
    config = make_config([pipeline], schema_registry={"url": url})

    # The new record type stopped the run: NameError, before that spark-avro's refusal.
    run(config, until_caught_up=True, spark=spark)

    rows = spark.table(f"lake.{tables.replace('{1}', 'customers')}").collect()
    assert sorted(tuple(r) for r in rows) == [(1, "a@x"), (2, "b@x")]
    [letter] = spark.sql(f"SELECT topic, reason FROM lake.{dead}").collect()
    assert letter["topic"] == ledger
    assert letter["reason"].endswith(
        "which Spark cannot read: field 'before.total' is decimal(40,2): Spark's decimals hold "
        "at most 38 digits"
    ), letter["reason"]
    # No table for a source table none of whose records could be written: it would have
    # had the first record type's columns.
    assert not spark.catalog.tableExists(f"lake.{tables.replace('{1}', 'ledger')}")


def test_routed_tables_each_with_their_own_key_and_format_version_3(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, name = f"rcdc-{unique}", f"r_{unique}"
    users, orders = f"db.users_{unique}", f"db.orders_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    schema = {"kind": "string", "user_id": "long", "order_id": "long", "v": "long", "op": "string"}

    def change(kind: str, user: int, order: int, v: int, op: str = "U") -> dict[str, Any]:
        return {"kind": kind, "user_id": user, "order_id": order, "v": v, "op": op}

    records = [
        change("user", 1, 0, 1, "I"),
        change("order", 1, 100, 1, "I"),
        change("order", 1, 101, 1, "I"),
        change("user", 1, 0, 2),  # user 1 updated: one row per user
        change("order", 2, 100, 2),  # order 100 moves to user 2: one row per order
        change("order", 1, 101, 0, "D"),
        change("user", 2, 0, 1, "I"),
    ]
    _produce(kafka_bootstrap, topic, [(None, r, 0) for r in records[:3]])
    pipeline = _pipeline(
        name,
        topic,
        users,
        schema=schema,
        write={"mode": "cdc", "key": ["user_id"], "op_field": "op"},
        tables={
            orders: {
                "write": {"key": ["order_id"]},
                "table_properties": {"format-version": "3"},
            }
        },
    )
    del pipeline["table"]
    pipeline["route"] = {"field": "kind", "tables": {"user": users, "order": orders}}
    config = make_config([pipeline])
    run(config, until_caught_up=True, spark=spark)
    # The changes in a later batch: rows already in the tables are updated and deleted.
    _produce(kafka_bootstrap, topic, [(None, r, 0) for r in records[3:]])
    run(config, until_caught_up=True, spark=spark)

    got_users = _rows(spark, users, "user_id, order_id, v")
    assert got_users == {1: (0, 2), 2: (0, 1)}
    got_orders = _rows(spark, orders, "order_id, user_id, v")
    assert got_orders == {100: (2, 2)}
    props = dict(spark.sql(f"SHOW TBLPROPERTIES lake.{orders}").collect())  # type: ignore[arg-type]
    assert props["format-version"] == "3"
    # Format 3: row-level deletes as deletion vectors (Puffin files), not position files.
    formats = {
        r[0] for r in spark.sql(f"SELECT file_format FROM lake.{orders}.delete_files").collect()
    }
    assert formats == {"PUFFIN"}, formats


def _b64_decimal(unscaled: int) -> str:
    """A Connect Decimal's bytes (big-endian two's complement) as the JSON converter sends
    them: base64 text."""
    size = (unscaled.bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()


#: Row fields of a Debezium table with semantic types, as the JSON converter describes them.
_SEMANTIC_ROW = [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "field": "created"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "field": "seen"},
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.time.ZonedTimestamp",
        "field": "zoned",
    },
    {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "field": "born"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "field": "at"},
    {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "field": "price",
    },
    {
        "type": "struct",
        "optional": True,
        "name": "io.debezium.data.VariableScaleDecimal",
        "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}],
        "field": "ratio",
    },
]
_SEMANTIC_SCHEMA = {
    "type": "struct",
    "name": "dbserver1.inventory.items.Envelope",
    "fields": [
        {"type": "struct", "optional": True, "fields": _SEMANTIC_ROW, "field": "before"},
        {"type": "struct", "optional": True, "fields": _SEMANTIC_ROW, "field": "after"},
        {
            "type": "struct",
            "fields": [
                {"type": "string", "field": "connector"},
                {"type": "int64", "optional": True, "field": "lsn"},
            ],
            "field": "source",
        },
        {"type": "string", "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"},
    ],
}
#: 2024-03-01T10:15:30.123Z in ms, and the same instant written with a +02:00 offset.
_CREATED_MS = 1_709_288_130_123
_ZONED = "2024-03-01T12:15:30.123456+02:00"


def _semantic_row(i: int, price_cents: int) -> dict[str, Any]:
    return {
        "id": i,
        "created": _CREATED_MS + i,
        "seen": (_CREATED_MS + i) * 1000 + 456,
        "zoned": _ZONED,
        "born": 19_000 + i,  # days since 1970-01-01: 2022-01-08 for 0
        "at": 3_600_000_000 + i,  # 01:00 in microseconds, kept as a count
        "price": _b64_decimal(price_cents),
        "ratio": {"scale": 3, "value": _b64_decimal(-1234 - i)},
    }


_SEMANTIC_TYPES = {
    "id": "bigint",
    "created": "timestamp",
    "seen": "timestamp",
    "zoned": "timestamp",
    "born": "date",
    "at": "bigint",
    "price": "decimal(10,2)",
    "ratio": "string",
    "__source_lsn": "bigint",
}


def _assert_semantic_table(spark: Any, table: str) -> None:
    types = {f.name: f.dataType.simpleString() for f in spark.table(f"lake.{table}").schema}
    assert {k: types.get(k) for k in _SEMANTIC_TYPES} == _SEMANTIC_TYPES
    rows = spark.sql(
        f"SELECT id, unix_millis(created), unix_micros(seen), unix_micros(zoned), "
        f"CAST(born AS STRING), at, CAST(price AS STRING), ratio, __source_lsn "
        f"FROM lake.{table} ORDER BY id"
    ).collect()
    zoned = 1_709_288_130_123_456
    assert [tuple(r) for r in rows] == [
        (1, _CREATED_MS + 1, (_CREATED_MS + 1) * 1000 + 456, zoned, "2022-01-09",
         3_600_000_001, "-12.34", "-1.235", 11),
        (2, _CREATED_MS + 2, (_CREATED_MS + 2) * 1000 + 456, zoned, "2022-01-10",
         3_600_000_002, "123456.78", "-1.236", 12),
    ]  # fmt: skip


@pytest.mark.parametrize("declared", [False, True], ids=["inferred", "declared"])
def test_debezium_semantic_types_from_the_embedded_json_schema(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, declared: bool
) -> None:
    """Timestamps, dates, decimals and source.lsn by what the embedded Connect schema says
    they are, whether the row's fields are inferred or declared as Debezium sends them."""
    topic, table, name = f"dbzt-{unique}", f"db.dbzt_{unique}", f"zt_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    def event(op: str, after: dict[str, Any], lsn: int) -> dict[str, Any]:
        payload = {
            "before": None,
            "after": after,
            "op": op,
            "ts_ms": 1_700_000_000_000,
            "source": {"connector": "postgresql", "lsn": lsn},
        }
        return {"schema": _SEMANTIC_SCHEMA, "payload": payload}

    events = [
        event("r", _semantic_row(1, -1234), 11),
        event("c", _semantic_row(2, 12_345_678), 12),
    ]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    write = {"mode": "cdc", "key": ["id"], "debezium": True, "debezium_fields": ["source.lsn"]}
    pipeline = _pipeline(name, topic, table, write=write)
    if declared:
        # The types Debezium sends: frazil maps them as the schema says.
        pipeline["schema"] = {
            "id": "long",
            "created": "long",
            "seen": "long",
            "zoned": "string",
            "born": "int",
            "at": "long",
            "price": "string",
            "ratio": "struct<scale:int,value:string>",
        }
    else:
        del pipeline["schema"]
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    _assert_semantic_table(spark, table)


#: The Avro converter's envelope of the same table: connect.name on each semantic type
#: (and Avro's own logicalType for Decimal, as the converter writes it).
_SEMANTIC_AVRO = {
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.items",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "long"},
                        {
                            "name": "created",
                            "type": {"type": "long", "connect.name": "io.debezium.time.Timestamp"},
                        },
                        {
                            "name": "seen",
                            "type": {
                                "type": "long",
                                "connect.name": "io.debezium.time.MicroTimestamp",
                            },
                        },
                        {
                            "name": "zoned",
                            "type": {
                                "type": "string",
                                "connect.name": "io.debezium.time.ZonedTimestamp",
                            },
                        },
                        {
                            "name": "born",
                            "type": {"type": "int", "connect.name": "io.debezium.time.Date"},
                        },
                        {
                            "name": "at",
                            "type": {"type": "long", "connect.name": "io.debezium.time.MicroTime"},
                        },
                        {
                            "name": "price",
                            "type": {
                                "type": "bytes",
                                "scale": 2,
                                "precision": 10,
                                "connect.parameters": {
                                    "scale": "2",
                                    "connect.decimal.precision": "10",
                                },
                                "connect.name": "org.apache.kafka.connect.data.Decimal",
                                "logicalType": "decimal",
                            },
                        },
                        {
                            "name": "ratio",
                            "type": {
                                "type": "record",
                                "name": "VariableScaleDecimal",
                                "namespace": "io.debezium.data",
                                "fields": [
                                    {"name": "scale", "type": "int"},
                                    {"name": "value", "type": "bytes"},
                                ],
                                "connect.name": "io.debezium.data.VariableScaleDecimal",
                            },
                        },
                    ],
                },
            ],
            "default": None,
        },
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "connector", "type": "string"},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                ],
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}


def test_debezium_semantic_types_from_the_avro_converters_schema(
    spark: Any, make_config: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str
) -> None:

    from tests.integration.registry_helpers import produce_avro

    topic, table, name = f"dbzv-{unique}", f"db.dbzv_{unique}", f"zv_{unique}"

    def row(i: int, price: str) -> dict[str, Any]:
        found = _semantic_row(i, 0)
        unscaled = -1234 - i
        size = (unscaled.bit_length() + 8) // 8
        found["price"] = Decimal(price)
        found["ratio"] = {"scale": 3, "value": unscaled.to_bytes(size, "big", signed=True)}
        return found

    def event(op: str, after: dict[str, Any], lsn: int) -> dict[str, Any]:
        source = {"connector": "postgresql", "lsn": lsn}
        return {"before": None, "after": after, "source": source, "op": op, "ts_ms": lsn}

    events = [event("r", row(1, "-12.34"), 11), event("c", row(2, "123456.78"), 12)]
    produce_avro(kafka_bootstrap, schema_registry_url, topic, json.dumps(_SEMANTIC_AVRO), events)
    write = {"mode": "cdc", "key": ["id"], "debezium": True, "debezium_fields": ["source.lsn"]}
    pipeline = {"name": name, "topics": [topic], "table": table, "format": "avro", "write": write}
    run(
        make_config([pipeline], schema_registry={"url": schema_registry_url}),
        until_caught_up=True,
        spark=spark,
    )
    _assert_semantic_table(spark, table)


def _connect_envelope(row: list[dict[str, Any]], *extra: dict[str, Any]) -> dict[str, Any]:
    """A JSON converter's embedded Connect schema of a Debezium envelope around ``row``."""
    return {
        "type": "struct",
        "fields": [
            {"type": "struct", "optional": True, "fields": row, "field": "before"},
            {"type": "struct", "optional": True, "fields": row, "field": "after"},
            {"type": "string", "field": "op"},
            *extra,
        ],
    }


def test_debezium_json_inferred_takes_the_embedded_schema_not_sampled_values(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A topic that starts with creates (``before`` null in every sampled record) and only
    later holds deletes: the envelope's shape comes from the embedded Connect schema, in its
    field order and types (``int32`` an ``int``), so a delete's ``before`` is a row."""
    from frazil.decode.json_infer import INFER_SAMPLE

    topic, table, name = f"dbzi-{unique}", f"db.dbzi_{unique}", f"zi_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    row = [
        {"type": "int32", "optional": True, "field": "qty"},
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
    ]
    schema = _connect_envelope(
        row,
        {"type": "int64", "optional": True, "field": "ts_ms"},
        {"type": "int64", "optional": True, "field": "ts_us"},
    )

    def event(op: str, before: Any, after: Any) -> dict[str, Any]:
        payload = {"before": before, "after": after, "op": op, "ts_ms": 1, "ts_us": 1000}
        return {"schema": schema, "payload": payload}

    creates = INFER_SAMPLE + 10
    events = [event("c", None, {"qty": i, "id": i, "name": f"n{i}"}) for i in range(creates)]
    events += [event("d", {"qty": i, "id": i, "name": f"n{i}"}, None) for i in range(0, 40, 2)]
    events += [event("u", None, {"qty": -i, "id": i, "name": f"u{i}"}) for i in range(1, 40, 2)]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    pipeline = _pipeline(name, topic, table, write={"mode": "cdc", "key": ["id"], "debezium": True})
    del pipeline["schema"]

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    fields = [(f.name, f.dataType.simpleString()) for f in spark.table(f"lake.{table}").schema]
    assert fields == [("qty", "int"), ("id", "bigint"), ("name", "string")]
    expected = {i: (i, f"n{i}") for i in range(40, creates)}
    expected.update({i: (-i, f"u{i}") for i in range(1, 40, 2)})
    assert _rows(spark, table, "id, qty, name") == expected


def test_debezium_json_schema_growing_mid_stream_evolves_the_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A column added to the source table: later envelopes' embedded schema and rows have
    it; the table gets the column, earlier rows null there."""
    topic, table, name = f"dbzg-{unique}", f"db.dbzg_{unique}", f"zg_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    first = [{"type": "int64", "field": "id"}, {"type": "string", "field": "name"}]
    second = [*first, {"type": "int32", "optional": True, "field": "stock"}]

    def event(schema: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        return {"schema": schema, "payload": {"before": None, "after": after, "op": "c"}}

    events = [event(_connect_envelope(first), {"id": i, "name": f"n{i}"}) for i in range(5)]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    pipeline = _pipeline(name, topic, table, write={"mode": "cdc", "key": ["id"], "debezium": True})
    del pipeline["schema"]
    run(make_config([pipeline]), until_caught_up=True, spark=spark)
    grown = _connect_envelope(second)
    later = [event(grown, {"id": i, "name": f"n{i}", "stock": i * 2}) for i in (3, 7)]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(later)])

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert [f.name for f in spark.table(f"lake.{table}").schema] == ["id", "name", "stock"]
    assert _rows(spark, table, "id, name, stock") == {
        0: ("n0", None), 1: ("n1", None), 2: ("n2", None), 3: ("n3", 6), 4: ("n4", None),
        7: ("n7", 14),
    }  # fmt: skip


def test_debezium_json_schema_changing_mid_run_evolves_in_its_types_malformed_is_a_dead_letter(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Columns added at the source while the pipeline runs (within one batch): the table
    gets them in the types their embedded schema states (``int32`` an ``int``, a Connect
    ``Decimal`` a decimal, not its base64 text); an envelope whose schema Connect cannot
    read goes to the dead-letter queue with the reason, even when its row fits."""
    topic, table, name = f"dbzw-{unique}", f"db.dbzw_{unique}", f"zw_{unique}"
    dead = f"db.dbzw_dead_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    first = [{"type": "int64", "field": "id"}, {"type": "string", "field": "name"}]
    price = {
        "type": "bytes",
        "optional": True,
        "name": "org.apache.kafka.connect.data.Decimal",
        "parameters": {"scale": "2", "connect.decimal.precision": "9"},
        "field": "price",
    }
    second = [*first, {"type": "int32", "optional": True, "field": "stock"}, price]
    broken = [*first, {"type": "int128", "optional": True, "field": "stock"}]

    def event(schema: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        return {"schema": schema, "payload": {"before": None, "after": after, "op": "c"}}

    events = [event(_connect_envelope(first), {"id": i, "name": f"n{i}"}) for i in range(4)]
    grown = _connect_envelope(second)
    events += [
        event(grown, {"id": i, "name": f"g{i}", "stock": i * 2, "price": _b64_decimal(i * 101)})
        for i in (2, 5)
    ]
    # Offset 6: its row has a field no schema names; it must not become a column.
    events.append(event(_connect_envelope(broken), {"id": 6, "name": "b6", "ghost": 1}))
    events.append(event({"type": "struct", "fields": "none"}, {"id": 7, "name": "b7"}))
    events.append(event(_connect_envelope(first), {"id": 8, "name": "n8"}))
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    pipeline = _pipeline(
        name,
        topic,
        table,
        write={"mode": "cdc", "key": ["id"], "debezium": True},
        errors={"tolerance": "all", "dlq_table": dead},
    )
    del pipeline["schema"]
    config = make_config([pipeline])

    # A dry run says which sampled schemas it could not read, and that their columns are
    # not among those shown.
    from frazil.engine.explain import explain

    (explained,) = explain(spark, config, [name])
    unread = [w for w in explained.warnings if "not one Kafka Connect reads" in w]
    # (Offset 7's schema names no fields at all: nothing shows it is an envelope's.)
    assert len(unread) == 1 and "field 'after.stock' has type 'int128'" in unread[0]
    assert "the dead-letter queue" in unread[0]

    run(config, until_caught_up=True, spark=spark)

    fields = [(f.name, f.dataType.simpleString()) for f in spark.table(f"lake.{table}").schema]
    assert fields == [
        ("id", "bigint"), ("name", "string"), ("stock", "int"), ("price", "decimal(9,2)"),
    ]  # fmt: skip
    rows = spark.sql(f"SELECT id, name, stock, CAST(price AS STRING) FROM lake.{table}")
    assert {r[0]: tuple(r[1:]) for r in rows.collect()} == {
        0: ("n0", None, None), 1: ("n1", None, None), 2: ("g2", 4, "2.02"),
        3: ("n3", None, None), 5: ("g5", 10, "5.05"), 8: ("n8", None, None),
    }  # fmt: skip
    reasons = sorted(
        (r[0], r[1]) for r in spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    )
    assert reasons == [
        (6, "the embedded Connect schema is malformed: field 'after.stock' has type 'int128', "
            "not a Connect type"),
        (7, "the embedded Connect schema is malformed: its 'fields' is not a list"),
    ]  # fmt: skip


def test_debezium_json_with_a_declared_schema_dead_letters_a_malformed_embedded_schema(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """The row's columns declared: an embedded schema met later that Connect reads (a
    column added at the source) changes nothing, the declared columns are the contract; one
    Connect cannot read is a dead letter with the reason, as without a declared schema."""
    topic, table, name = f"dbzd-{unique}", f"db.dbzd_{unique}", f"zd_{unique}"
    dead = f"db.dbzd_dead_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    first = [{"type": "int64", "field": "id"}, {"type": "string", "field": "name"}]
    grown = [*first, {"type": "int32", "optional": True, "field": "stock"}]
    broken = [*first, {"type": "int128", "optional": True, "field": "stock"}]

    def event(schema: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
        return {"schema": schema, "payload": {"before": None, "after": after, "op": "c"}}

    events = [event(_connect_envelope(first), {"id": i, "name": f"n{i}"}) for i in range(3)]
    events.append(event(_connect_envelope(grown), {"id": 3, "name": "g3", "stock": 6}))
    events.append(event(_connect_envelope(broken), {"id": 4, "name": "b4", "stock": 8}))
    events.append(event({"type": "struct", "fields": "none"}, {"id": 5, "name": "b5"}))
    events.append(event(_connect_envelope(first), {"id": 6, "name": "n6"}))
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    pipeline = _pipeline(
        name,
        topic,
        table,
        schema={"id": "bigint", "name": "string"},
        write={"mode": "cdc", "key": ["id"], "debezium": True},
        errors={"tolerance": "all", "dlq_table": dead},
    )

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    assert [f.name for f in spark.table(f"lake.{table}").schema] == ["id", "name"]
    rows = spark.sql(f"SELECT id, name FROM lake.{table}").collect()
    assert {r[0]: r[1] for r in rows} == {0: "n0", 1: "n1", 2: "n2", 3: "g3", 6: "n6"}
    reasons = sorted(
        (r[0], r[1]) for r in spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    )
    assert reasons == [
        (4, "the embedded Connect schema is malformed: field 'after.stock' has type 'int128', "
            "not a Connect type"),
        (5, "the embedded Connect schema is malformed: its 'fields' is not a list"),
    ]  # fmt: skip


def test_a_debezium_value_its_semantic_type_cannot_hold_is_a_dead_letter_not_a_null(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A Decimal wider than its column (``connect.decimal.precision`` 4, scale 2) and a
    ZonedTimestamp whose text does not parse: the record is marked, never written null."""
    topic, table, name = f"dbzo-{unique}", f"db.dbzo_{unique}", f"zo_{unique}"
    dead = f"db.dbzo_dead_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    row = [
        {"type": "int64", "field": "id"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "4"},
            "field": "price",
        },
        {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp",
         "field": "at"},
    ]  # fmt: skip
    schema = _connect_envelope(row)

    def event(i: int, cents: int, at: str) -> dict[str, Any]:
        after = {"id": i, "price": _b64_decimal(cents), "at": at}
        return {"schema": schema, "payload": {"before": None, "after": after, "op": "c"}}

    good = "2024-03-01T12:15:30+02:00"
    events = [
        event(1, 1234, good),
        event(2, 123456, good),
        event(3, 99, "soon"),
        event(4, -5, good),
    ]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    write = {"mode": "cdc", "key": ["id"], "debezium": True}
    pipeline = _pipeline(
        name, topic, table, write=write, errors={"tolerance": "all", "dlq_table": dead}
    )
    del pipeline["schema"]

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    rows = spark.sql(f"SELECT id, CAST(price AS STRING) FROM lake.{table} ORDER BY id").collect()
    assert [tuple(r) for r in rows] == [(1, "12.34"), (4, "-0.05")]
    reasons = sorted(
        (r[0], r[1]) for r in spark.sql(f"SELECT offset, reason FROM lake.{dead}").collect()
    )
    assert reasons == [
        (1, "field 'price' (org.apache.kafka.connect.data.Decimal) does not convert to "
            "decimal(4,2): '1234.56'"),
        (2, "field 'at' (io.debezium.time.ZonedTimestamp) does not convert to timestamp: "
            "'soon'"),
    ]  # fmt: skip


def test_debezium_json_without_a_schema_keeps_the_rows_column_order(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Inferred from plain envelopes (``schemas.enable=false``): the table's columns come in
    the order the rows hold them, not sorted by name as Spark's inference has them."""
    topic, table, name = f"dbzp-{unique}", f"db.dbzp_{unique}", f"zp_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)

    def row(i: int) -> dict[str, Any]:
        return {"order_id": i, "sku": f"s{i}", "qty": i, "created": "2026-01-01T00:00:00Z"}

    events = [_debezium("c", None, row(i), i, wrapped=False) for i in range(1, 4)]
    _produce(kafka_bootstrap, topic, [(str(i), v, 0) for i, v in enumerate(events)])
    write = {"mode": "cdc", "key": ["order_id"], "debezium": True}
    pipeline = _pipeline(name, topic, table, write=write)
    del pipeline["schema"]

    run(make_config([pipeline]), until_caught_up=True, spark=spark)

    fields = [(f.name, f.dataType.simpleString()) for f in spark.table(f"lake.{table}").schema]
    assert fields == [
        ("order_id", "bigint"), ("sku", "string"), ("qty", "bigint"), ("created", "timestamp"),
    ]  # fmt: skip
    assert _rows(spark, table, "order_id, sku, qty") == {i: (f"s{i}", i) for i in range(1, 4)}


def test_a_declared_type_the_embedded_schema_sends_otherwise_stops_naming_the_type(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """A declared ``timestamp`` for an ``io.debezium.time.Timestamp`` (epoch ms, a JSON
    number) was read as seconds: 2026 landed as year 57971, silently. A declared type that
    misreads what the embedded schema sends stops the pipeline, naming the type to declare;
    the type sent is mapped as ever."""
    topic, table, name = f"dbzd-{unique}", f"db.dbzd_{unique}", f"zd_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    row = [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp",
         "field": "updated_at"},
    ]  # fmt: skip
    after = {"id": 1, "updated_at": 1_767_225_600_000}  # 2026-01-01T00:00:00Z
    event = {
        "schema": _connect_envelope(row),
        "payload": {"before": None, "after": after, "op": "c"},
    }
    _produce(kafka_bootstrap, topic, [("1", event, 0)])
    write = {"mode": "cdc", "key": ["id"], "debezium": True}
    wrong = _pipeline(
        name, topic, table, schema={"id": "long", "updated_at": "timestamp"}, write=write
    )
    with pytest.raises(FrazilError) as failed:
        run(make_config([wrong]), until_caught_up=True, spark=spark)
    assert (
        "schema.updated_at: declared timestamp, but the embedded Connect schema sends it as "
        "int64 (io.debezium.time.Timestamp), which reads wrong as that: declare bigint, the "
        "type sent, and frazil makes it timestamp"
    ) in str(failed.value)

    right = _pipeline(name, topic, table, schema={"id": "long", "updated_at": "long"}, write=write)
    run(make_config([right]), until_caught_up=True, spark=spark)
    [got] = spark.sql(f"SELECT id, CAST(updated_at AS STRING) FROM lake.{table}").collect()
    assert tuple(got) == (1, "2026-01-01 00:00:00")
