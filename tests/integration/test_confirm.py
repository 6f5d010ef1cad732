"""Destructive operations say what they will do and ask: ``--reset-offsets`` on a table that
holds data of its pipeline needs ``--yes`` (no prompt without a terminal), and ``frazil plan``
warns about declared types an existing table's columns conflict with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.engine.runner import run
from frazil.errors import PipelineError
from frazil.progress.start import TableReset
from tests.integration.helpers import frazil_snapshots, payments_pipeline, produce_payments

#: Where the first run continues: the table's start again.
RESET = ("--until-caught-up", "--reset-offsets", "earliest")


def _frazil(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", *args],
        capture_output=True,
        stdin=subprocess.DEVNULL,  # no terminal: nothing to ask on
        text=True,
        timeout=600,
    )


def _count(spark: Any, table: str) -> int:
    return int(spark.sql(f"SELECT count(*) FROM lake.{table}").collect()[0][0])


def test_reset_offsets_without_yes_and_without_a_terminal_changes_nothing(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"reset-{unique}", f"db.reset_{unique}", f"reset_{unique}"
    produce_payments(kafka_bootstrap, topic, 300, seed=26, partitions=2)
    config = make_config([payments_pipeline(name, topic, table)])
    run(config, until_caught_up=True, spark=spark)
    assert _count(spark, table) == 300
    before = frazil_snapshots(spark, table)
    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))

    refused = _frazil("run", "-c", str(path), "--until-caught-up", "--reset-offsets", "earliest")

    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    text = " ".join(refused.stderr.split())
    assert f"{table}: 300 rows; pipeline {name} continues at {topic}/0 " in text
    assert "reset to earliest: " in text
    assert "300 records read again (appended again: duplicate rows)" in text
    assert f"--reset-offsets earliest not applied to {table}" in text
    assert "nothing was changed" in text and "--yes" in text
    spark.sql(f"REFRESH TABLE lake.{table}")
    assert _count(spark, table) == 300
    assert frazil_snapshots(spark, table) == before  # the marker and every snapshot as they were

    # On a terminal it asks; "n" changes nothing either.
    terminal, typed = os.openpty()
    try:
        os.write(terminal, b"n\n")  # waits in the terminal until the question reads it
        declined = subprocess.run(
            [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(path), *RESET],
            stdin=typed,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        os.close(terminal)
        os.close(typed)
    assert declined.returncode != 0
    assert "Traceback" not in declined.stderr
    text = " ".join(declined.stderr.split())
    assert "Reset these tables' offsets? [y/N]:" in text
    assert f"--reset-offsets earliest not applied to {table}: nothing was changed" in text
    spark.sql(f"REFRESH TABLE lake.{table}")
    assert frazil_snapshots(spark, table) == before

    accepted = _frazil(
        "run", "-c", str(path), "--until-caught-up", "--reset-offsets", "earliest", "--yes"
    )

    assert accepted.returncode == 0, accepted.stderr[-3000:]
    spark.sql(f"REFRESH TABLE lake.{table}")
    assert _count(spark, table) == 600  # read again from the start, as a reset always did
    assert frazil_snapshots(spark, table)[len(before)]["frazil.reset"] == "earliest"


def test_a_declined_reset_changes_nothing_and_an_empty_table_is_not_asked_about(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str
) -> None:
    topic, table, name = f"decline-{unique}", f"db.decline_{unique}", f"decline_{unique}"
    produce_payments(kafka_bootstrap, topic, 50, seed=27, partitions=1)
    config = make_config([payments_pipeline(name, topic, table)])
    asked: list[list[TableReset]] = []

    def no(resets: list[TableReset]) -> bool:
        asked.append(resets)
        return False

    # A new table holds nothing: the reset goes on without asking.
    run(config, until_caught_up=True, spark=spark, reset_offsets="latest", confirm_reset=no)
    assert asked == [] and _count(spark, table) == 0
    run(config, until_caught_up=True, spark=spark, reset_offsets="earliest", confirm_reset=no)
    assert asked == [] and _count(spark, table) == 50
    before = frazil_snapshots(spark, table)

    with pytest.raises(PipelineError, match=f"not applied to {table}: nothing was changed"):
        run(config, until_caught_up=True, spark=spark, reset_offsets="latest", confirm_reset=no)

    [[shown]] = asked
    assert (shown.table, shown.rows, shown.again(), shown.skipped()) == (table, 50, 0, 0)
    assert frazil_snapshots(spark, table) == before


def test_plan_warns_about_declared_types_an_existing_table_cannot_take(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    from frazil.engine.explain import explain
    from frazil.generate.producer import ensure_topic

    topic = f"plan-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    stops, dead = f"db.plan_stop_{unique}", f"db.plan_dlq_{unique}"
    for table in (stops, dead):
        spark.sql(f"CREATE TABLE lake.{table} (id string, amount bigint, n int) USING iceberg")
    config = make_config(
        [
            # amount now text: the run would stop; n int → bigint is a promotion (no warning).
            {"name": f"stop_{unique}", "topics": [topic], "table": stops,
             "schema": {"id": "string", "amount": "string", "n": "long"}},
            # amount now double (bigint cannot become double): the records go to the DLQ.
            {"name": f"dlq_{unique}", "topics": [topic], "table": dead,
             "schema": {"id": "string", "amount": "double", "n": "int"},
             # The table is unpartitioned: the run would warn that it keeps its spec.
             "partition_by": ["bucket(4, id)"],
             "errors": {"tolerance": "all", "dlq_table": f"db.plan_dead_{unique}"}},
        ]
    )  # fmt: skip
    stop_warning = (
        f"field amount is string in the records but bigint in table {stops}: Iceberg cannot "
        "change a bigint column to string; the run would stop at the first batch with a value "
        "in amount, committing nothing of it (errors.tolerance: none)"
    )
    dlq_warning = (
        f"field amount is double in the records but bigint in table {dead}: Iceberg cannot "
        "change a bigint column to double; the run would send every record with a value in "
        "amount to the dead-letter queue"
    )

    spec_warning = (
        f"table {dead}: it is partitioned by nothing (unpartitioned), the config's "
        "partition_by says bucket(4, id): partition_by applies when frazil creates a table, "
        "and the table keeps its own. To change it, use Iceberg's ALTER TABLE … ADD / DROP / "
        "REPLACE PARTITION FIELD (e.g. through frazil sql): new data is then written by the new "
        "spec"
    )

    explained = explain(spark, config, [])

    assert [e.warnings for e in explained] == [(stop_warning,), (spec_warning, dlq_warning)]
    assert explained[0].to_json()["warnings"] == [stop_warning]

    path = tmp_path / "frazil.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    printed = subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", "plan", "-c", str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "400"},  # one warning per line
    )
    assert printed.returncode == 0, printed.stderr[-3000:]
    assert f"warning: {stop_warning}" in printed.stdout
    # An existing table's columns as they are, then the records' where they differ.
    assert "table columns (the table's now)" in printed.stdout
    assert "columns the records bring" in printed.stdout
    assert f"warning: {dlq_warning}" in printed.stdout
    # Spark resolving only, the tables read from their metadata (the default), says what
    # Spark reading them through its catalog says.
    ways = [
        subprocess.run(
            [sys.executable, "-m", "frazil.cli.main", "plan", "-c", str(path), "-o", "json"],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "FRAZIL_READS": reads},
        )
        for reads in ("", "spark")
    ]
    assert [w.returncode for w in ways] == [0, 0], [w.stderr[-3000:] for w in ways]
    metadata, catalog = (json.loads(w.stdout) for w in ways)
    assert metadata == catalog
    assert [(e["table_exists"], e["warnings"]) for e in metadata] == [
        (True, [stop_warning]),
        (True, [spec_warning, dlq_warning]),
    ]
    assert [f["name"] for f in metadata[0]["existing_table_schema"]["fields"]] == [
        "id",
        "amount",
        "n",
    ]
    # Nothing was created or changed.
    assert [tuple(r) for r in spark.sql(f"DESCRIBE lake.{stops}").collect()][:3] == [
        ("id", "string", None),
        ("amount", "bigint", None),
        ("n", "int", None),
    ]
