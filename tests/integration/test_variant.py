"""JSON of any shape landed whole in a ``variant`` column (``variant: <column>``), end to end:
every valid record once, read back with ``variant_get``; what is not JSON or passes a limit in
the dead-letter queue with its reason; frazil's metadata reads (PyIceberg) on the table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.decode.variant import (
    EMPTY,
    LONE_SURROGATE,
    NOT_JSON,
    NOT_UTF8,
    TRAILING,
    too_deep,
    too_large,
)
from frazil.engine.runner import run
from frazil.generate.producer import ensure_topic
from tests.integration.helpers import drain

pytestmark = pytest.mark.integration

_DEPTH, _BYTES = 6, 4096
#: The ``frazil`` command of this checkout, in a process of its own.
_FRAZIL = "from frazil.cli.main import main; main()"
_WIRE = b"\x00\x00\x00\x00\x07"


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for i in range(levels):
        value = {"n": value} if i % 2 else [value]
    return value


def _good() -> list[Any]:
    """Shapes that change from record to record: fields that come and go, a field that is a
    number here and a string there, nesting, arrays, top-level scalars."""
    out: list[Any] = []
    for i in range(40):
        record: dict[str, Any] = {"id": i}
        if i % 2:
            record["amount"] = i * 10
        else:
            record["amount"] = f"{i * 10} EUR"
        if i % 3 == 0:
            record["user"] = {"name": f"u{i}", "tags": ["a", f"t{i}"], "geo": {"lat": 1.5}}
        if i % 5 == 0:
            record["items"] = [{"sku": f"s{j}", "qty": j} for j in range(i % 4 + 1)]
        if i % 7 == 0:
            record["deep"] = _nested(_DEPTH - 1)  # one level under the object: at the limit
        if i % 11 == 0:
            record["flag"] = None if i % 2 else True
        out.append(record)
    return [*out, [1, "two", {"three": 3}], "just text", 42, None, {}, []]


#: Values that are not landed, and the reason each gets.
_BAD: list[tuple[bytes, str]] = [
    (b'{"id": 1, "amount": ', NOT_JSON),
    (b"{'single': 'quotes'}", NOT_JSON),
    (b"not json at all", NOT_JSON),
    (b'{"id": NaN}', NOT_JSON),
    (b"\xff\xfe\x00garbage", NOT_UTF8),
    # Bytes Spark's parse would replace, halves it would make "?": never landed changed.
    (b'{"a": "caf\xe9"}', NOT_UTF8),  # Latin-1
    (b'{"a": "\xed\xa0\x80"}', NOT_UTF8),  # a surrogate encoded
    (b'{"\xff": 1}', NOT_UTF8),
    (b'{"a": "\\ud83d x"}', LONE_SURROGATE),
    (b'{"a": "\\ude00"}', LONE_SURROGATE),
    (b"", EMPTY),
    (b"  \n ", EMPTY),
    (b'{"a": 1} {"b": 2}', TRAILING),
    (b'"text" 7', TRAILING),
    (json.dumps({"deep": _nested(_DEPTH)}).encode(), too_deep(_DEPTH)),
    (b"[" * 1500 + b"]" * 1500, too_deep(_DEPTH)),  # deeper than Jackson reads, too
    (json.dumps({"blob": "x" * _BYTES}).encode(), too_large(_BYTES)),
]


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> dict[tuple[int, int], bytes]:
    """Produce to two partitions; each value by its (partition, offset)."""
    ensure_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    placed: dict[tuple[int, int], bytes] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None, err
        placed[(msg.partition(), msg.offset())] = msg.value() or b""

    for i, value in enumerate(values):
        producer.produce(topic, value, partition=i % 2, on_delivery=delivered)
    assert producer.flush(30) == 0
    return placed


def test_any_json_lands_whole_in_a_variant_column(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, dlq = f"variant-{unique}", f"db.variant_{unique}", f"db.variant_dead_{unique}"
    good = [json.dumps(v).encode() for v in _good()]
    good.append(_WIRE + b'{"id": "wire", "amount": 1}')  # a wire-format header is skipped
    good.append(b'{"dup": 1, "dup": 2}')  # the last value wins, as from_json reads it
    good.append(b'{"e": "\\ud83d\\ude00", "s": "\\\\ud83d"}')  # a pair; no escape
    placed = _produce(kafka_bootstrap, topic, [*good, *(v for v, _ in _BAD)])
    reasons = {value: reason for value, reason in _BAD}
    name = f"v_{unique}"
    config = make_config(
        [{"name": name, "topics": [topic], "table": table, "variant": "payload",
          "variant_max_depth": _DEPTH, "variant_max_bytes": f"{_BYTES // 1024}KiB",
          "kafka_metadata": ["partition", "offset"],
          "errors": {"tolerance": "all", "dlq_table": dlq}}]
    )  # fmt: skip

    reports = run(config, until_caught_up=True, spark=spark)

    target = spark.table(f"lake.{table}")
    assert {f.name: f.dataType.simpleString() for f in target.schema} == {
        "payload": "variant",
        "_kafka_partition": "int",
        "_kafka_offset": "bigint",
    }
    properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES lake.{table}").collect()}
    assert properties["format-version"] == "3"

    rows = spark.sql(
        f"SELECT _kafka_partition AS p, _kafka_offset AS o, to_json(payload) AS j FROM lake.{table}"
    ).collect()
    landed = [(r["p"], r["o"]) for r in rows]
    assert len(landed) == len(set(landed)), "a record landed twice"
    expected = {
        at: json.loads(value[5:] if value.startswith(_WIRE) else value)
        for at, value in placed.items()
        if value not in reasons
    }
    assert set(landed) == set(expected)
    for r in rows:
        assert json.loads(r["j"]) == expected[(r["p"], r["o"])], (r["p"], r["o"])

    # Paths into the variant, typed as each record holds them.
    by_id = {
        r["id"]: r
        for r in spark.sql(
            f"""SELECT variant_get(payload, '$.id', 'int') AS id,
                       try_variant_get(payload, '$.amount', 'int') AS amount_int,
                       variant_get(payload, '$.amount', 'string') AS amount_text,
                       variant_get(payload, '$.user.tags[1]', 'string') AS tag,
                       variant_get(payload, '$.user.geo.lat', 'double') AS lat,
                       variant_get(payload, '$.items[0].qty', 'int') AS qty,
                       schema_of_variant(variant_get(payload, '$.amount')) AS amount_type
                FROM lake.{table}
                WHERE try_variant_get(payload, '$.id', 'int') IS NOT NULL"""
        ).collect()
    }
    assert sorted(by_id) == list(range(40))
    assert by_id[3]["amount_int"] == 30 and by_id[3]["amount_type"] == "BIGINT"
    assert by_id[4]["amount_int"] is None and by_id[4]["amount_text"] == "40 EUR"
    assert by_id[4]["amount_type"] == "STRING"
    assert by_id[3]["tag"] == "t3" and by_id[3]["lat"] == 1.5 and by_id[4]["tag"] is None
    assert by_id[5]["qty"] == 0 and by_id[6]["qty"] is None
    deep = spark.sql(
        f"SELECT variant_get(payload, '$.deep[0].n[0].n[0]', 'string') AS d FROM lake.{table} "
        "WHERE try_variant_get(payload, '$.id', 'int') = 7"
    ).collect()
    assert [r["d"] for r in deep] == ["bottom"]

    dead = spark.sql(
        f"SELECT partition, offset, reason, stage FROM lake.{dlq} WHERE pipeline = '{name}'"
    ).collect()
    assert sorted((r["partition"], r["offset"]) for r in dead) == sorted(
        at for at, value in placed.items() if value in reasons
    )
    for r in dead:
        assert r["stage"] == "decode"
        assert r["reason"] == reasons[placed[(r["partition"], r["offset"])]], r
    assert sum(reports[0].dead_letters.values()) == len(_BAD)

    # A second run finds nothing new: each record stays landed once.
    run(config, until_caught_up=True, spark=spark)
    assert spark.table(f"lake.{table}").count() == len(expected)


def test_metadata_reads_without_spark_on_a_variant_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """PyIceberg 0.12 does not know the variant type; frazil's reads without Spark (status,
    tables, optimize --dry-run, the run's summary) read the table's metadata all the same, and
    say what Spark's reads say."""
    from frazil.maintenance.passes import config_tables, measure, run_pass
    from frazil.observe import catalog as metadata
    from frazil.observe.catalog import pyiceberg_catalog
    from frazil.observe.status import read_status

    topic, table = f"variant-meta-{unique}", f"db.variant_meta_{unique}"
    _produce(kafka_bootstrap, topic, [json.dumps({"n": i, "s": [i]}).encode() for i in range(10)])
    config = make_config(
        [{"name": f"vm_{unique}", "topics": [topic], "table": table, "variant": "doc",
          "partition_by": ["_kafka_partition"], "kafka_metadata": ["partition"]}]
    )  # fmt: skip
    run(config, until_caught_up=True, spark=spark)

    catalog = pyiceberg_catalog(config)
    loaded = catalog.load_table(table)
    assert loaded.metadata.format_version == 3
    assert str(loaded.schema().find_field("doc").field_type) == "variant"
    assert metadata.CatalogTable(loaded, table).total_records() == 10
    refs = config_tables(spark, config)
    assert [r.name for r in metadata.config_tables(catalog, config)] == [r.name for r in refs]
    assert [r.name for r in refs] == [table]
    assert metadata.measure(catalog, config, refs[0]) == measure(spark, config, refs[0])
    planned = metadata.plan_pass(catalog, config, refs)
    dry = run_pass(spark, config, refs, dry_run=True)
    assert [(r.table, r.planned) for r in planned] == [(r.table, r.planned) for r in dry]
    (status,) = read_status(config, None, catalog)
    assert [(t.table, t.records) for t in status.tables] == [(table, 10)]
    assert status.problems == []

    # The commands themselves, without Spark.
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "SPARK_HOME")}
    env["PATH"] = str(Path(sys.executable).parent)
    for command in (["tables"], ["status"], ["optimize", "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "-c", _FRAZIL, *command, "-c", str(path), "-o", "json"],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr)
        assert table in done.stdout, (command, done.stdout)


@pytest.mark.slow
def test_kill_minus_9_mid_stream_keeps_each_variant_record_once(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A `frazil run` of a variant pipeline killed with SIGKILL (driver and JVM) after its
    first commits, then drained: every record in the table once, by its Kafka offset."""
    from tests.integration.test_kill9 import FrazilProcess

    topic, table, name = f"variant-kill-{unique}", f"db.variant_kill_{unique}", f"vk_{unique}"
    records = 20_000
    values = [
        json.dumps({"i": i, "v": i if i % 2 else str(i), "tags": ["x"] * (i % 3)}).encode()
        for i in range(records)
    ]
    placed = _produce(kafka_bootstrap, topic, values)
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": kafka_bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {"name": name, "topics": [topic], "table": table, "variant": "doc",
                     "kafka_metadata": ["partition", "offset"], "max_offsets_per_trigger": 2000,
                     "first_batch_max_offsets": 1000, "trigger": "1s"}
                ],
            }
        )
    )  # fmt: skip
    run_process = FrazilProcess(config_path)
    assert run_process.wait_commits(2, timeout=180), run_process.output()
    run_process.kill9(with_jvm=True)

    drain(spark, config_path)

    rows = spark.sql(
        f"SELECT _kafka_partition AS p, _kafka_offset AS o, variant_get(doc, '$.i', 'int') AS i "
        f"FROM lake.{table}"
    ).collect()
    landed = Counter((r["p"], r["o"]) for r in rows)
    assert [at for at, n in landed.items() if n > 1] == []
    assert set(landed) == set(placed)
    assert all(json.loads(placed[(r["p"], r["o"])])["i"] == r["i"] for r in rows)


def test_variant_records_routed_by_topic_to_tables_made_for_them(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """Routed by topic, each table is created with its variant column (format version 3) and
    written in the routed batch's one job."""
    for part, count in (("a", 3), ("b", 5)):
        values = [json.dumps({"part": part, "n": n, "x": [n] * n}).encode() for n in range(count)]
        _produce(kafka_bootstrap, f"vr_{unique}.{part}", values)
    config = make_config(
        [{"name": f"vr_{unique}", "topic_pattern": f"vr_{unique}\\..*", "variant": "doc",
          "route": {"topic": f"vr_{unique}\\.(\\w+)", "table": f"db.vr_{unique}_{{1}}"}}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    for part, count in (("a", 3), ("b", 5)):
        table = f"lake.db.vr_{unique}_{part}"
        assert [f.dataType.simpleString() for f in spark.table(table).schema] == ["variant"]
        found = spark.sql(
            f"SELECT variant_get(doc, '$.part', 'string') AS part, "
            f"variant_get(doc, '$.n', 'int') AS n, variant_get(doc, '$.x', 'array<int>') AS x "
            f"FROM {table}"
        ).collect()
        assert sorted((r["part"], r["n"], list(r["x"])) for r in found) == [
            (part, n, [n] * n) for n in range(count)
        ]
        properties = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
        assert properties["format-version"] == "3"


@pytest.mark.parametrize(
    ("value", "depth"),
    [
        (b"", 0),
        (b"  42 ", 0),
        (b'"x"', 0),
        (b"null", 0),
        (b"{}", 1),
        (b'{"a": [1, {"b": 2}]}', 3),
        (b'[[], [[]], {"k": [[[]]]}]', 5),
        (b'{"s": "]]}}[[{{", "t": "\\"[["}', 1),  # brackets and escaped quotes in strings
        (b'  {"a": 1}  \n', 1),
        (b"\x00\x00\x00\x5b\x7b" + b'{"a": {}}', 2),  # a wire header's id bytes are skipped
        (b'{"a": 1} {"b": 2}', -1),
        (b'{"a": 1}x', -1),
        (b"1 2", -1),
        (b'"a" "b"', -1),
        (b"1]", -1),
        (b"true[", -1),
        (b"[1, 2", 1),  # truncated: parse_json refuses it
    ],
)
def test_how_deep_a_value_nests(spark: Any, value: bytes, depth: int) -> None:
    from pyspark.sql import functions as F

    from frazil.decode.variant import json_depth

    one = spark.createDataFrame([(bytearray(value),)], "value binary")
    assert one.select(json_depth(F.col("value"))).first()[0] == depth


def test_plan_shows_the_variant_column_without_creating_the_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    from frazil.engine.explain import explain

    topic, table = f"variant-plan-{unique}", f"db.variant_plan_{unique}"
    _produce(kafka_bootstrap, topic, [b'{"a": 1, "geo": {"cc": "DE"}}', b"[2]"])
    config = make_config(
        [{"name": f"vp_{unique}", "topics": [topic], "variant": "doc",
          "kafka_metadata": ["partition"],
          "transforms": [{"derive": {"cc": "doc:geo.cc::string",
                                     "zip": "try_variant_get(doc, '$.geo.zip', 'string')"}},
                         {"filter": "doc:a IS NOT NULL OR doc:missing IS NULL"}],
          "route": {"field": "doc:geo.country", "tables": {"DE": table}, "default": "skip"}}]
    )  # fmt: skip

    (explained,) = explain(spark, config, [])

    assert explained.value_schema_source == "variant"
    assert explained.source_schema.simpleString() == "struct<doc:variant,_kafka_partition:int>"
    assert explained.table_exists is False
    assert not spark.catalog.tableExists(f"lake.{table}")
    # Paths no sampled record has are reported, not refused; those some record has are not.
    assert list(explained.warnings) == [
        f"{where}: no record of the 2 sampled from the start of the topics has doc path "
        f"{path!r} (records without it read null there)"
        for where, path in [
            ("route.field", "$.geo.country"),
            ("transforms[0].derive.zip", "$.geo.zip"),
            ("transforms[1].filter", "$.missing"),
        ]
    ]


def test_maintenance_compacts_a_variant_table(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """``frazil optimize`` (Spark's procedures) rewrites a variant table's small files and
    expires its snapshots; the values read the same after."""
    from frazil.maintenance.passes import config_tables, run_pass

    topic, table = f"variant-opt-{unique}", f"db.variant_opt_{unique}"
    config = make_config(
        [{"name": f"vo_{unique}", "topics": [topic], "table": table, "variant": "doc"}],
        maintenance={
            "compaction": {"min_small_files": 2},
            "expire": {"older_than": "1ms", "retain_last": 1},
        },
    )
    for round_no in range(3):
        values = [json.dumps({"r": round_no, "n": n, "v": [n, "x"]}).encode() for n in range(5)]
        _produce(kafka_bootstrap, topic, values)
        run(config, until_caught_up=True, spark=spark)
    before = sorted(
        spark.sql(f"SELECT to_json(doc) FROM lake.{table}").collect(), key=lambda r: r[0]
    )
    files = spark.sql(f"SELECT count(*) FROM lake.{table}.files").first()[0]

    (report,) = run_pass(spark, config, config_tables(spark, config))

    assert [r.error for r in report.results] == [None] * len(report.results)
    assert "compaction" in {r.action for r in report.results}, report.results
    assert spark.sql(f"SELECT count(*) FROM lake.{table}.files").first()[0] < files
    after = sorted(
        spark.sql(f"SELECT to_json(doc) FROM lake.{table}").collect(), key=lambda r: r[0]
    )
    assert after == before and len(after) == 15


def test_partitioned_by_paths_into_the_variant(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    """``partition_by`` names paths: each is derived into a column of its own (null where a
    record has no value there), and the table is partitioned by it."""
    topic, table = f"variant-part-{unique}", f"db.variant_part_{unique}"
    values = [
        {"at": "2026-11-28T10:00:00Z", "geo": {"country": "DE"}},
        {"at": "2026-11-29T10:00:00Z", "geo": {"country": "FR"}},
        {"at": "2026-11-29T11:00:00Z", "geo": {"country": "DE"}},
        {"at": "not a time"},
        [1, 2],
    ]
    _produce(kafka_bootstrap, topic, [json.dumps(v).encode() for v in values])
    config = make_config(
        [{"name": f"vpart_{unique}", "topics": [topic], "table": table, "variant": "doc",
          "partition_by": ["days(doc:at::timestamp)", "doc:geo.country"]}]
    )  # fmt: skip

    run(config, until_caught_up=True, spark=spark)

    full = f"lake.{table}"
    assert [f.name for f in spark.table(full).schema] == ["doc", "doc_at", "doc_geo_country"]
    spec = spark.sql(f"DESCRIBE TABLE EXTENDED {full}").collect()
    partitioning = [r["data_type"] for r in spec if r["col_name"].startswith("Part ")]
    assert partitioning == ["days(doc_at)", "doc_geo_country"]
    rows = spark.sql(
        f"SELECT CAST(doc_at AS STRING) AS at, doc_geo_country AS cc FROM {full}"
    ).collect()
    assert sorted((r["at"] or "", r["cc"] or "") for r in rows) == sorted(
        [
            ("2026-11-28 10:00:00", "DE"),
            ("2026-11-29 10:00:00", "FR"),
            ("2026-11-29 11:00:00", "DE"),
            ("", ""),
            ("", ""),
        ]
    )
    files = spark.sql(f"SELECT DISTINCT partition FROM {full}.files").collect()
    assert len(files) == 4  # the three (day, country) pairs, and the records without them
