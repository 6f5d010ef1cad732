"""The same config on the local production-shaped stack: a Spark standalone cluster, the
object store (S3FileIO for the tables, S3A for the checkpoints) and Iceberg's REST catalog.

One ``frazil run`` of seven pipelines shares one Spark application (CI time): the quickstart's
payments with dead letters to a table and a topic, a routed topic written in one job by
frazil's Java classes on the executors, an upsert and a Debezium CDC stream (MERGE), and
three formats through the schema registry, decoded on the executors: Avro, JSON Schema and
Protobuf (frazil's Java decoder); ``frazil tables`` and a maintenance pass that removes an
orphan file on the store (listed and deleted through the table's S3FileIO) follow in the run's
process and Spark application. Everything is read back through PyIceberg's REST catalog from
the object store, row by row; then ``frazil status`` and the status page (``frazil ui``).
``frazil status`` and ``frazil ui`` with credentials the store refuses stop with one line that
names the variables, never their values.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer

from frazil.generate.producer import ensure_topic
from tests.integration.helpers import in_one_process, payments_pipeline, produce_payments
from tests.integration.registry_helpers import (
    produce_avro,
    produce_json_schema,
    produce_protobuf,
    protobuf_classes,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FRAZIL = str(Path(sys.executable).parent / "frazil")


def frazil(
    *args: str, env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FRAZIL, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **env, "COLUMNS": "200"},
    )


def _produce(
    bootstrap: str, topic: str, values: list[bytes | None], keys: list[str] | None = None
) -> None:
    ensure_topic(bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for index, value in enumerate(values):
        producer.produce(topic, value, key=keys[index] if keys else None)
    producer.flush(30)


def _consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"t-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    found: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(found) < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                found.append(message.value())
    finally:
        consumer.close()
    return found


def _first_line(path: Path) -> str:
    with path.open(errors="replace") as handle:
        return handle.readline()


def _column(catalog: Any, table: str, column: str) -> list[Any]:
    return sorted(catalog.load_table(table).scan().to_arrow().column(column).to_pylist())


ORDER = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "long"}],
    }
)

#: A JSON Schema for the registry's JSON wire format (JSONSerializer).
EVENT = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Event",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "count": {"type": "integer"},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "who": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
        "required": ["id", "count"],
    }
)

#: A Protobuf schema with a nested message, a repeated field, a map and a well-known import.
READING = """syntax = "proto3";
package {package};
import "google/protobuf/timestamp.proto";
message Reading {{
  message Place {{ string city = 1; int32 floor = 2; }}
  string id = 1;
  int64 value = 2;
  Place place = 3;
  repeated string tags = 4;
  map<string, int64> counts = 5;
  google.protobuf.Timestamp at = 6;
}}
"""


def _debezium(op: str, before: int | None, after: int | None, lsn: int) -> bytes:
    """A Debezium change event (JSON converter, schemas.enable=false) of a ``customers`` row."""

    def row(key: int | None) -> dict[str, Any] | None:
        return None if key is None else {"id": key, "email": f"{key}-{lsn}@x"}

    return json.dumps(
        {
            "before": row(before),
            "after": row(after),
            "op": op,
            "ts_ms": 1_700_000_000_000 + lsn,
            "source": {"connector": "postgresql", "lsn": lsn, "table": "customers"},
            "transaction": None,
        }
    ).encode()


def _changes() -> tuple[list[str], list[bytes | None], dict[int, tuple[str, int]]]:
    """A snapshot of 40 rows, then updates, deletes (each followed by its tombstone),
    re-inserts and new rows: the keys, the values, and the rows the table must end with
    (id -> (email, source.lsn))."""
    keys: list[str] = []
    values: list[bytes | None] = []
    table: dict[int, tuple[str, int]] = {}
    lsn = 0

    def event(op: str, key: int) -> None:
        nonlocal lsn
        lsn += 1
        before = None if op in ("r", "c") else key
        after = None if op == "d" else key
        keys.append(str(key))
        values.append(_debezium(op, before, after, lsn))
        if op == "d":
            table.pop(key, None)
            keys.append(str(key))
            values.append(None)  # the tombstone Debezium sends after a delete
        else:
            table[key] = (f"{key}-{lsn}@x", lsn)

    for key in range(40):
        event("r", key)
    for key in range(0, 40, 3):
        event("u", key)
    for key in range(0, 40, 5):
        event("d", key)
    for key in (10, 20):
        event("c", key)
    for key in range(40, 50):
        event("c", key)
    event("u", 41)
    event("u", 41)
    return keys, values, table


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=120) as answer:
        return answer.status, answer.read()


def _serve_ui(path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """``frazil ui`` on a free port: the process and its base URL (from its first line)."""
    ui = subprocess.Popen(
        [FRAZIL, "ui", "-c", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env, "COLUMNS": "200"},
    )
    assert ui.stderr is not None
    seen = []
    for line in ui.stderr:  # a library's warning may come first
        seen.append(line)
        found = re.search(r"frazil ui on (http://\S+/)", line)
        if found is not None:
            return ui, found.group(1)
    ui.kill()
    raise AssertionError("".join(seen)[-3000:])


def test_the_quickstart_routing_dead_letters_changes_formats_and_upkeep_on_the_stack(
    stack: Any, kafka_bootstrap: str, schema_registry_url: str, unique: str, tmp_path: Path
) -> None:
    from pyiceberg.catalog import load_catalog

    u = unique
    env = stack.aws_environment()
    ns = f"c_{u}"

    # The quickstart's payments, and three records that are not JSON.
    pay_topic, dead_topic = f"pay-{u}", f"dead-{u}"
    ids = produce_payments(kafka_bootstrap, pay_topic, 300, seed=27, partitions=2)
    bad = [b"not json {", b"\xff\xfe", b"[1, 2"]
    _produce(kafka_bootstrap, pay_topic, bad)
    payments = payments_pipeline(
        f"pay_{u}",
        pay_topic,
        f"{ns}.payments",
        starting_offsets="earliest",
        errors={"tolerance": "all", "dlq_table": f"{ns}.dead", "dlq_topic": dead_topic},
    )
    # A routed topic: one table per kind, written in one job on the executors.
    route_topic = f"route-{u}"
    routed = [{"id": n, "kind": "pay" if n % 3 else "user", "v": n * 10} for n in range(60)]
    _produce(kafka_bootstrap, route_topic, [json.dumps(r).encode() for r in routed])
    router = {
        "name": f"route_{u}",
        "topics": [route_topic],
        "starting_offsets": "earliest",
        "schema": {"id": "long", "kind": "string", "v": "long"},
        "route": {"field": "kind", "table": f"{ns}.t_{{value}}"},
        "trigger": "1s",
    }
    # Upserts: 20 keys written 5 times each; the table keeps each key's last value.
    up_topic = f"up-{u}"
    changes = [{"id": seq % 20, "seq": seq} for seq in range(100)]
    final = {change["id"]: change["seq"] for change in changes}
    _produce(
        kafka_bootstrap,
        up_topic,
        [json.dumps(c).encode() for c in changes],
        keys=[str(c["id"]) for c in changes],
    )
    upsert = {
        "name": f"up_{u}",
        "topics": [up_topic],
        "table": f"{ns}.upserted",
        "starting_offsets": "earliest",
        "schema": {"id": "long", "seq": "long"},
        "write": {"mode": "upsert", "key": ["id"]},
        "trigger": "1s",
    }
    # Avro through the schema registry, decoded on the executors (spark-avro shipped there).
    avro_topic = f"avro-{u}"
    orders = [{"id": f"o{n}", "amount": n} for n in range(40)]
    produce_avro(kafka_bootstrap, schema_registry_url, avro_topic, ORDER, orders, partitions=2)
    avro = {
        "name": f"avro_{u}",
        "topics": [avro_topic],
        "table": f"{ns}.orders",
        "starting_offsets": "earliest",
        "format": "avro",
        "trigger": "1s",
    }
    # JSON Schema through the registry (JSONSerializer's wire format).
    js_topic = f"js-{u}"
    events = [
        {"id": f"e{n}", "count": n, "at": f"2026-01-02T03:04:{n:02d}Z", "tags": ["a", str(n)],
         "who": {"name": f"n{n}"}}
        for n in range(50)
    ]  # fmt: skip
    produce_json_schema(kafka_bootstrap, schema_registry_url, js_topic, EVENT, events,
                        partitions=2)  # fmt: skip
    json_schema = {
        "name": f"js_{u}",
        "topics": [js_topic],
        "table": f"{ns}.events",
        "starting_offsets": "earliest",
        "subject": f"{js_topic}-value",
        "trigger": "1s",
    }
    # Protobuf through the registry: frazil's Java decoder on the executors.
    pb_topic = f"pb-{u}"
    proto = tmp_path / f"reading_{u}.proto"
    proto.write_text(READING.format(package=f"cl{u}"))
    reading = protobuf_classes([proto])[f"cl{u}.Reading"]
    readings = []
    for n in range(50):
        message = reading(id=f"r{n}", value=n * 1000, tags=["t", str(n)])
        message.place.city, message.place.floor = "Kyoto", n
        message.counts["n"] = n
        message.at.FromDatetime(dt.datetime(2026, 1, 2, 3, 4, n % 60))
        readings.append(message)
    produce_protobuf(kafka_bootstrap, schema_registry_url, pb_topic, readings, partitions=2)
    protobuf = {
        "name": f"pb_{u}",
        "topics": [pb_topic],
        "table": f"{ns}.readings",
        "starting_offsets": "earliest",
        "format": "protobuf",
        "trigger": "1s",
    }
    # Debezium change events applied by MERGE: snapshot, updates, deletes with tombstones,
    # re-inserts; keyed by id, so each key's events stay in order in one partition.
    cdc_topic = f"cdc-{u}"
    cdc_keys, cdc_values, customers = _changes()
    _produce(kafka_bootstrap, cdc_topic, cdc_values, keys=cdc_keys)
    cdc = {
        "name": f"cdc_{u}",
        "topics": [cdc_topic],
        "table": f"{ns}.customers",
        "starting_offsets": "earliest",
        "schema": {"id": "long", "email": "string"},
        "write": {"mode": "cdc", "key": ["id"], "debezium": True,
                  "debezium_fields": ["source.lsn"]},
        "trigger": "1s",
    }  # fmt: skip
    pipelines = [payments, router, upsert, avro, json_schema, protobuf, cdc]
    config = {
        **stack.config("s3", "rest-catalog", "spark-cluster"),
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "schema_registry": {"url": schema_registry_url},
        # The checkpoints on the object store too, through S3A.
        "state_dir": f"s3a://{stack.bucket}/{u}/state",
        "pipelines": pipelines,
    }
    assert config["spark"]["master"].startswith("spark://")
    assert config["catalog"]["type"] == "rest"
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))

    # An orphan on the store, older than orphans.older_than (3d), where the payments table's
    # data files will be: the maintenance pass below must list it through the table's
    # S3FileIO and delete it; the table's own files stay.
    data = stack.state_dir / "s3" / "data" / stack.bucket / "warehouse" / ns / "payments" / "data"
    data.mkdir(parents=True)
    orphan = data / "orphan-from-a-failed-write.parquet"
    orphan.write_bytes(b"PAR1 not referenced by any snapshot")
    four_days_ago = time.time() - 4 * 86400
    os.utime(orphan, (four_days_ago, four_days_ago))

    # `frazil run`, then `frazil tables` and `frazil optimize`, in one process: one Spark
    # application on the cluster for the three (CI time: each started a driver and an
    # executor per worker); each with its own exit code and output.
    ran, listed, upkeep = in_one_process(
        ["run", "-c", str(path), "--until-caught-up"],
        ["tables", "-c", str(path)],
        ["optimize", "-c", str(path), "-t", f"{ns}.payments"],
        env={**env, "COLUMNS": "200"},
    )
    for result in (ran, listed, upkeep):
        assert result.returncode == 0, (result.args, result.stderr[-3000:], result.stdout[-3000:])
        # The credentials are never printed.
        assert env["AWS_SECRET_ACCESS_KEY"] not in result.stdout + result.stderr

    # frazil's own classes (the one-job routed write) reached both workers' executors: on
    # their classpath at launch, the stack's workers sharing this machine's jars (each
    # executor's stderr starts with its command line).
    launched = (stack.state_dir / "spark").glob("worker-*/work/app-*/*/stderr")
    with_jar = {log.parts[-5] for log in launched if "frazil-jvm.jar" in _first_line(log)}
    assert with_jar == {"worker-1", "worker-2"}

    catalog = load_catalog("lake", **stack.pyiceberg_properties())
    assert _column(catalog, f"{ns}.payments", "id") == sorted(ids)
    assert catalog.load_table(f"{ns}.dead").scan().to_arrow().num_rows == len(bad)
    assert sorted(_consume(kafka_bootstrap, dead_topic, len(bad))) == sorted(bad)
    assert _column(catalog, f"{ns}.t_pay", "id") == [r["id"] for r in routed if r["kind"] == "pay"]
    assert _column(catalog, f"{ns}.t_user", "id") == [
        r["id"] for r in routed if r["kind"] == "user"
    ]
    rows = catalog.load_table(f"{ns}.upserted").scan().to_arrow().to_pylist()
    assert {row["id"]: row["seq"] for row in rows} == final
    assert len(rows) == len(final)
    got = catalog.load_table(f"{ns}.orders").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["amount"]) for r in got) == sorted(
        (o["id"], o["amount"]) for o in orders
    )
    got = {r["id"]: r for r in catalog.load_table(f"{ns}.events").scan().to_arrow().to_pylist()}
    assert sorted(got) == sorted(e["id"] for e in events)
    for n in range(50):
        row = got[f"e{n}"]
        assert (row["count"], row["tags"], row["who"]) == (n, ["a", str(n)], {"name": f"n{n}"})
        assert row["at"] == dt.datetime(2026, 1, 2, 3, 4, n, tzinfo=dt.timezone.utc)
    got = {r["id"]: r for r in catalog.load_table(f"{ns}.readings").scan().to_arrow().to_pylist()}
    assert sorted(got) == sorted(f"r{n}" for n in range(50))
    for n in range(50):
        row = got[f"r{n}"]
        assert (row["value"], row["tags"]) == (n * 1000, ["t", str(n)])
        assert row["place"] == {"city": "Kyoto", "floor": n}
        assert dict(row["counts"]) == {"n": n}
        assert row["at"] == dt.datetime(2026, 1, 2, 3, 4, n % 60, tzinfo=dt.timezone.utc)
    got = catalog.load_table(f"{ns}.customers").scan().to_arrow().to_pylist()
    assert {r["id"]: (r["email"], r["__source_lsn"]) for r in got} == customers
    assert len(got) == len(customers)
    # Checkpoints on the store: the run's offset and commit logs are objects there.
    checkpoints = stack.state_dir / "s3" / "data" / stack.bucket / u / "state" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted(p["name"] for p in pipelines)

    status = frazil("status", "-c", str(path), "-o", "json", env=env, timeout=300)
    assert status.returncode == 0, status.stderr[-3000:]
    found = {s["pipeline"]: s for s in json.loads(status.stdout)}
    assert found[f"pay_{u}"]["tables"][0]["records"] == len(ids)
    assert found[f"pay_{u}"]["lag_records"] == {pay_topic: 0}
    assert sum(found[f"pay_{u}"]["dead_letters"].values()) == len(bad)
    assert found[f"up_{u}"]["tables"][0]["records"] == len(final)
    assert found[f"cdc_{u}"]["tables"][0]["records"] == len(customers)
    assert found[f"pb_{u}"]["lag_records"] == {pb_topic: 0}

    # The status page against the stack: its JSON has the same figures, its history a point
    # per commit, the page itself loads.
    ui, url = _serve_ui(path, env)
    try:
        code, page = _get(url)
        assert code == 200 and b"<title>frazil" in page
        code, body = _get(url + "api/status")
        assert code == 200, body[:2000]
        shown = {s["pipeline"]: s for s in json.loads(body)["pipelines"]}
        assert sorted(shown) == sorted(p["name"] for p in pipelines)
        assert all(not s["problems"] for s in shown.values()), shown
        assert shown[f"pay_{u}"]["tables"][0]["records"] == len(ids)
        assert sum(shown[f"pay_{u}"]["dead_letters"].values()) == len(bad)
        assert shown[f"js_{u}"]["lag_records"] == {js_topic: 0}
        assert {t["table"]: t["records"] for t in shown[f"route_{u}"]["tables"]} == {
            f"{ns}.t_pay": 40, f"{ns}.t_user": 20,
        }  # fmt: skip
        assert shown[f"cdc_{u}"]["tables"][0]["records"] == len(customers)
        code, body = _get(url + "api/history")
        assert code == 200, body[:2000]
        history = json.loads(body)
        points = history[f"pay_{u}"][f"{ns}.payments"]
        assert points and sum(p["records"] for p in points) == len(ids)
        assert points[-1]["data_files"] >= 1
        assert sum(p["records"] for p in history[f"pb_{u}"][f"{ns}.readings"]) == 50
    finally:
        ui.terminate()
        ui.wait(30)

    # Credentials the store refuses: status and the page stop with one line naming the
    # variables, never the secret; nothing of the tables is shown.
    wrong = {**env, "AWS_SECRET_ACCESS_KEY": "not-the-secret-" + u}
    commands = (["status", "-o", "json"], ["ui", "--port", "0"])
    with ThreadPoolExecutor(len(commands)) as pool:  # side by side: CI time
        refusals = list(pool.map(lambda c: frazil(*c, "-c", str(path), env=wrong, timeout=120),
                                 commands))  # fmt: skip
    for command, refused in zip(commands, refusals, strict=True):
        assert refused.returncode == 1, (command, refused.stdout[-2000:], refused.stderr[-2000:])
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1, (command, refused.stderr)
        assert lines[0].startswith(f"error: the object store at {stack.s3_endpoint} refused"), lines
        assert "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment" in lines[0]
        assert wrong["AWS_SECRET_ACCESS_KEY"] not in refused.stdout + refused.stderr
        assert refused.stdout == ""

    # What `frazil tables` listed and what `frazil optimize` did (after the run, above).
    for table in ("payments", "t_pay", "t_user", "upserted", "events", "readings", "customers"):
        assert f"{ns}.{table}" in listed.stdout
    assert "1 orphan files older than 3d removed" in " ".join(upkeep.stdout.split())
    assert not orphan.exists()
    assert _column(catalog, f"{ns}.payments", "id") == sorted(ids)


def test_credentials_the_store_refuses_stop_the_run_and_are_not_shown(
    stack: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic = f"creds-{unique}"
    produce_payments(kafka_bootstrap, topic, 10, seed=1, partitions=1)
    wrong = "not-the-secret-" + unique
    config = {
        **stack.config("s3", "rest-catalog"),
        "spark": {"master": "local[1]"},
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "state_dir": f"s3a://{stack.bucket}/{unique}/state",
        "pipelines": [
            payments_pipeline(f"creds_{unique}", topic, f"creds_{unique}.payments"),
        ],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**stack.aws_environment(), "AWS_SECRET_ACCESS_KEY": wrong}

    result = frazil("run", "-c", str(path), "--until-caught-up", env=env, timeout=600)

    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: the object store at http://127.0.0.1:"), lines
    assert "refused the credentials" in lines[0]
    assert "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment" in lines[0]
    assert wrong not in result.stderr + result.stdout
    # Nothing written: no checkpoint, no table.
    assert not (stack.state_dir / "s3" / "data" / stack.bucket / unique).exists()
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("lake", **stack.pyiceberg_properties())
    assert f"creds_{unique}" not in [ns[0] for ns in catalog.list_namespaces()]
