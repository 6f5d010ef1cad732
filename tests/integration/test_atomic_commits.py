"""A routed batch's tables commit in one catalog transaction: REST and JDBC (SQLite).

A concurrent reader polling two routed tables through the catalog never sees them at
different batches; a kill -9 mid-stream leaves each batch in both tables or in neither, and
the restart ends with every record once in each; a conflicting commit on one table fails the
whole transaction, nothing committed to the other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.config.models import CatalogConfig
from tests.integration.rest_server import RestServer, rest_server
from tests.integration.test_routing import produce_json

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OFFSETS = "frazil.offsets"


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    # A server whose multi-table commit is atomic to readers, as a catalog built for it
    # (Polaris, Nessie) is: Iceberg's reference adapter commits the tables one by one, and a
    # reader polling without pause sees one ahead now and then (docs/exactly-once.md).
    with rest_server(tmp_path_factory.mktemp("rest-catalog")) as server:
        yield server


class Lake:
    """A catalog the tests commit to: its frazil configuration and a PyIceberg reader."""

    def __init__(self, config: CatalogConfig) -> None:
        self.config = config

    def reader(self) -> Any:
        if self.config.type == "rest":
            from pyiceberg.catalog import load_catalog

            assert self.config.uri is not None
            return load_catalog(
                "rest_reader", type="rest", uri=self.config.uri, warehouse=self.config.warehouse
            )
        from pyiceberg.catalog.sql import SqlCatalog

        # The embedded catalog's SQLite file: the JDBC catalog's rows, read by PyIceberg's.
        path = self.config.resolved_uri().removeprefix("jdbc:sqlite:")
        return SqlCatalog(
            self.config.name,
            uri=f"sqlite:///{path}",
            warehouse=Path(self.config.warehouse).resolve().as_uri(),
        )


@pytest.fixture(params=["rest", "jdbc"])
def lake(request: pytest.FixtureRequest, tmp_path: Path, unique: str) -> Lake:
    if request.param == "rest":
        server: RestServer = request.getfixturevalue("rest")
        return Lake(
            CatalogConfig(name="lake", type="rest", uri=server.uri, warehouse=server.warehouse)
        )
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    return Lake(CatalogConfig(name=f"jdbc_{unique}", type="jdbc", warehouse=str(warehouse)))


def _catalog(lake: Lake) -> Any:
    return lake.reader()


def _offsets(catalog: Any, table: str) -> dict[str, Any] | None:
    """The frazil marker's offsets of ``table``'s current snapshot (None: no snapshot)."""
    snapshot = catalog.load_table(table).current_snapshot()
    if snapshot is None:
        return None
    raw = snapshot.summary.additional_properties.get(OFFSETS)
    return None if raw is None else dict(json.loads(raw))


def _ids(catalog: Any, table: str) -> list[int]:
    return [int(v) for v in catalog.load_table(table).scan().to_arrow().column("id").to_pylist()]


class Reader(threading.Thread):
    """Polls two tables' markers: table a, table b, table a again. When both reads of a agree,
    b was read while a held that batch; a and b at different batches then is a torn view."""

    def __init__(self, lake: Lake, first: str, second: str) -> None:
        super().__init__(daemon=True)
        self.catalog = _catalog(lake)
        self.first, self.second = first, second
        self.stop = threading.Event()
        self.reads = 0
        self.seen: list[str] = []
        self.apart: list[tuple[Any, Any]] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                a = _offsets(self.catalog, self.first)
                b = _offsets(self.catalog, self.second)
                if a != _offsets(self.catalog, self.first):
                    continue  # a commit between: this look proves nothing
                self.reads += 1
                key = json.dumps(a, sort_keys=True)
                if not self.seen or self.seen[-1] != key:
                    self.seen.append(key)
                if a != b:
                    self.apart.append((a, b))
        except BaseException as exc:  # reported by the test
            self.error = exc


def _config(tmp_path: Path, lake: Lake, bootstrap: str, name: str, topic: str,
            tables: list[str]) -> list[str]:  # fmt: skip
    path = tmp_path / "frazil.yaml"
    catalog: dict[str, Any] = {
        "name": lake.config.name,
        "type": lake.config.type,
        "warehouse": lake.config.warehouse,
    }
    if lake.config.uri:
        catalog["uri"] = lake.config.uri
    path.write_text(
        yaml.safe_dump(
            {
                "catalog": catalog,
                "kafka": {"bootstrap_servers": bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "pipelines": [
                    {
                        "name": name,
                        "topics": [topic],
                        "schema": {"id": "long", "kind": "string"},
                        # Every record to both tables: each batch commits both.
                        "route": {"field": "kind", "tables": {"/.*/": tables}},
                    }
                ],
            }
        )
    )
    return [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(path)]


def _both_hold_a_batch(catalog: Any, first: str, second: str) -> bool:
    """Whether both tables exist and hold the same batch (their markers' offsets). A table
    just created holds a marker without offsets (``{}``, batch -1) until its first batch
    commits: both at that marker are not yet at a batch."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        held = _offsets(catalog, first)
        return bool(held) and held == _offsets(catalog, second)
    except (NoSuchNamespaceError, NoSuchTableError):
        return False


def _run_to_the_end(command: list[str]) -> None:
    done = subprocess.run(
        [*command, "--until-caught-up"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_reader_never_sees_two_routed_tables_at_different_batches_even_across_a_kill(
    lake: Lake, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, name = f"atomic-{unique}", f"at_{unique}"
    first, second = f"at{unique}.a", f"at{unique}.b"
    command = _config(tmp_path, lake, kafka_bootstrap, name, topic, [first, second])
    total = 0

    def produce(count: int) -> None:
        nonlocal total
        produce_json(kafka_bootstrap, topic, [{"id": total + n, "kind": "k"} for n in range(count)])
        total += count

    produce(20)
    # Each commit is held back a moment before it is sent, so that the kill below most
    # likely lands while a batch is written and not committed.
    env = {**os.environ, "FRAZIL_TEST_PAUSE_BEFORE_WRITE": f"{second}:1.5"}
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    catalog = _catalog(lake)
    try:
        # The run's first batch creates the tables, each committed on its own (a creation
        # cannot join the multi-table commit, see docs/exactly-once.md); the reader starts
        # once both hold that batch. (Not a run of its own first: CI time, a JVM start.)
        deadline = time.monotonic() + 300
        while not _both_hold_a_batch(catalog, first, second):
            assert time.monotonic() < deadline, "the first batch did not reach both tables"
            assert proc.poll() is None, "frazil exited before its first batch"
            time.sleep(0.2)
        reader = Reader(lake, first, second)
        reader.start()
        deadline = time.monotonic() + 300
        while len(reader.seen) < 5:
            assert time.monotonic() < deadline, f"only {reader.seen} seen"
            assert proc.poll() is None, "frazil exited before the kill"
            assert reader.error is None, reader.error
            produce(10)
            time.sleep(0.4)
        produce(10)
        time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    # All or none: the batch in flight is in both tables or in neither.
    assert _offsets(catalog, first) == _offsets(catalog, second)

    produce(30)
    _run_to_the_end(command)  # the reader goes on polling through the restart
    reader.stop.set()
    reader.join(60)
    assert reader.error is None, reader.error
    assert reader.apart == [], f"torn views: {reader.apart[:3]}"
    assert len(reader.seen) >= 5 and reader.reads > 0
    expected = list(range(total))
    for table in (first, second):
        counts = Counter(_ids(catalog, table))
        assert sorted(counts) == expected, table
        assert max(counts.values()) == 1, f"{table} holds duplicates"


def test_a_conflicting_commit_on_one_table_fails_the_whole_transaction(
    spark: Any, lake: Lake, unique: str
) -> None:
    """A commit of someone else to one table since the transaction's base fails the whole
    multi-table commit (nothing in the other table); so does a stale marker, before anything is
    sent; without either, both tables commit together."""
    import pyarrow as pa

    from frazil.engine.catalog_conf import catalog_spark_conf
    from frazil.sink.iceberg import iceberg_catalog

    jvm = spark.sparkContext._jvm
    name = f"{lake.config.type}_{unique}"
    config = lake.config.model_copy(update={"name": name})
    for key, value in catalog_spark_conf(config).items():
        spark.conf.set(key, value)
    catalog = iceberg_catalog(spark, name)
    assert jvm.dev.frazil.iceberg.MarkedCatalog.commitsTablesAtOnce(catalog)
    reader = Lake(config).reader()
    namespace = f"cf{unique}"
    reader.create_namespace(namespace)
    names = [f"{namespace}.a", f"{namespace}.b"]
    for table in names:
        reader.create_table(table, schema=pa.schema([pa.field("id", pa.int64())]))
    identifiers = [jvm.org.apache.iceberg.catalog.TableIdentifier.parse(t) for t in names]

    def pending(summaries: list[dict[str, str]]) -> tuple[Any, Any, Any]:
        """Each table's append applied in memory (as TablesTransaction.appendAll applies it)."""
        bases, updated, ids = (jvm.java.util.ArrayList() for _ in range(3))
        for identifier, summary in zip(identifiers, summaries, strict=True):
            table = catalog.loadTable(identifier)
            txn = jvm.org.apache.iceberg.Transactions.newTransaction(
                identifier.toString(), table.operations()
            )
            append = txn.newFastAppend()
            for key, value in summary.items():
                append.set(key, value)
            append.commit()
            bases.add(txn.startMetadata())
            updated.add(txn.currentMetadata())
            ids.add(identifier)
        return ids, bases, updated

    def snapshots(table: str) -> list[dict[str, str]]:
        loaded = reader.load_table(table)
        return [dict(s.summary.additional_properties) for s in loaded.snapshots()]

    # Someone else commits to b after the transaction was planned: nothing commits.
    planned = pending([{"batch": "1"}, {"batch": "1"}])
    catalog.loadTable(identifiers[1]).newFastAppend().set("other", "writer").commit()
    with pytest.raises(Exception, match="CommitFailedException"):
        catalog.commitTables(*planned)
    assert snapshots(names[0]) == []
    assert [s.get("other") for s in snapshots(names[1])] == ["writer"]

    # A batch planned after a marker the table does not hold: refused before it is sent.
    stale = {"frazil.pipeline": "p", "frazil.offsets": "{}", "frazil.after": "c0"}
    with pytest.raises(Exception, match="StaleMarkerException"):
        catalog.commitTables(*pending([{"batch": "2"}, stale]))
    assert snapshots(names[0]) == []
    assert len(snapshots(names[1])) == 1

    # Planned again on the tables as they are: both commit, in one transaction.
    catalog.commitTables(*pending([{"batch": "3"}, {"batch": "3"}]))
    assert [s.get("batch") for s in snapshots(names[0])] == ["3"]
    assert [s.get("batch") for s in snapshots(names[1])] == [None, "3"]


def test_with_atomic_commits_off_each_table_commits_on_its_own(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """``catalog.atomic_commits: false`` on the embedded JDBC catalog: a batch's known tables
    commit each on its own (``RoutedCommits.appendEach``), every record once in each."""
    from frazil.engine.catalog_conf import catalog_spark_conf
    from frazil.engine.runner import run
    from frazil.sink.iceberg import iceberg_catalog

    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    config = CatalogConfig(
        name=f"each_{unique}", type="jdbc", warehouse=str(warehouse), atomic_commits=False
    )
    for key, value in catalog_spark_conf(config).items():
        spark.conf.set(key, value)
    jvm = spark.sparkContext._jvm
    catalog = iceberg_catalog(spark, config.name)
    assert not jvm.dev.frazil.iceberg.MarkedCatalog.commitsTablesAtOnce(catalog)
    topic, tables = f"each-{unique}", [f"e{unique}.a", f"e{unique}.b"]
    pipeline = {
        "name": f"each_{unique}",
        "topics": [topic],
        "schema": {"id": "long", "kind": "string"},
        "route": {"field": "kind", "tables": {"/.*/": tables}},
    }
    frazil_config = make_config(
        [pipeline],
        catalog={"name": config.name, "warehouse": str(warehouse), "atomic_commits": False},
    )
    produce_json(kafka_bootstrap, topic, [{"id": n, "kind": "k"} for n in range(10)])
    run(frazil_config, until_caught_up=True, spark=spark)  # creates both tables
    produce_json(kafka_bootstrap, topic, [{"id": n, "kind": "k"} for n in range(10, 25)])
    run(frazil_config, until_caught_up=True, spark=spark)  # known tables, one commit each
    reader = Lake(config).reader()
    for table in tables:
        assert sorted(_ids(reader, table)) == list(range(25)), table
        offsets = _offsets(reader, table)
        assert offsets is not None and sum(int(o) for o in offsets[topic].values()) == 25
