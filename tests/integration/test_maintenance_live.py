"""Maintenance next to live ingestion: `frazil maintain` compacts and expires the tables that
a running `frazil run` keeps committing to, again and again; at the end every table holds
exactly what was produced, compaction really cut the file count, and neither process
reports an unrecovered error."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.generate.producer import ensure_topic, produce_events
from frazil.progress.events import CommitEvent
from tests.integration.helpers import drain, payments_pipeline, table_ids

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAYMENTS = 30_000  # 30 s at RATE: many commits and maintenance passes
RATE = 1_000
KEYS = 300


class _Command:
    """A `frazil` subprocess whose output is read as it comes (to wait on what it printed)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "frazil.cli.main", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.terminated = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self) -> str:
        return "".join(self.lines)

    def terminate(self) -> None:
        """One SIGTERM: a second one, once the run's handler is gone, would kill the process."""
        if not self.terminated:
            self.terminated = True
            self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 180) -> tuple[int, str]:
        self.terminate()
        code = self.proc.wait(timeout)
        self.reader.join(30)
        return code, self.output()


def _wait_for(what: str, done: Any, *commands: _Command, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        for command in commands:
            assert command.proc.poll() is None, command.output()[-3000:]
        assert time.monotonic() < deadline, f"no {what}: " + commands[0].output()[-3000:]
        time.sleep(0.5)


def test_maintain_next_to_a_live_run_keeps_every_record_and_cuts_files(
    spark: Any, lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table = f"live-{unique}", f"db.live_{unique}"
    ctopic, ctable = f"livec-{unique}", f"db.livec_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    ensure_topic(kafka_bootstrap, ctopic, partitions=2)
    config_path = tmp_path / "frazil.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "catalog": {"warehouse": str(lake_dir / "warehouse")},
                "kafka": {"bootstrap_servers": kafka_bootstrap},
                "state_dir": str(tmp_path / "state"),
                "spark": {"driver_memory": "1g"},
                "maintenance": {
                    "interval": "2s",
                    # A MERGE that lost to a compaction holds the table's rewrites off this
                    # long (10m by default, longer than the test): compaction resumes after,
                    # and a MERGE's retries (0.5 s, 1 s, 2 s, 4 s apart) each note it again.
                    "merge_backoff": "5s",
                    "compaction": {"min_small_files": 3},
                    "expire": {"older_than": "1ms", "retain_last": 2},
                    "manifests": {"min_manifests": 5},
                },
                "pipelines": [
                    payments_pipeline(
                        f"lp_{unique}",
                        topic,
                        table,
                        trigger="500ms",
                        # At least 15 commits however loaded the machine is (one batch
                        # took in all 40,000 records once, and compaction had nothing).
                        max_offsets_per_trigger=2000,
                    ),
                    {
                        "name": f"lc_{unique}",
                        "topics": [ctopic],
                        "table": ctable,
                        "schema": {"id": "long", "seq": "long"},
                        "write": {"mode": "upsert", "key": ["id"]},
                        "trigger": "500ms",
                        # Small batches: several MERGE commits even on a slow machine, where
                        # the first MERGE alone can take most of the produce phase.
                        "max_offsets_per_trigger": 1000,
                    },
                ],
            }
        )
    )
    ingest = _Command("run", "-c", str(config_path))
    maintain = _Command("maintain", "-c", str(config_path), "--output", "json")
    payments = threading.Thread(
        target=produce_events,
        args=(kafka_bootstrap, topic, PAYMENTS),
        kwargs={"rate": RATE, "progress": False, "seed": 77},
        daemon=True,
    )
    payments.start()
    final: dict[int, int] = {}
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
    rng = random.Random(3)
    seq = 0
    while payments.is_alive():
        for _ in range(50):
            key = rng.randrange(KEYS)
            producer.produce(ctopic, json.dumps({"id": key, "seq": seq}), key=str(key))
            final[key] = seq
            seq += 1
        producer.poll(0)
        time.sleep(0.2)
    producer.flush(30)
    payments.join()
    # Both up (a commit of each table; maintain's passes), then a pass more against a
    # settling table (a SIGTERM before a process is up kills it).
    _wait_for("commits", lambda: all(f"→ {n} " in ingest.output() for n in (table, ctable)), ingest)
    settled = len(_pass_arrays(maintain.output())) + 1
    _wait_for("passes", lambda: len(_pass_arrays(maintain.output())) >= settled, maintain)
    # A MERGE that lost to a compaction late holds the upsert table's off for merge_backoff.
    _wait_for(
        "compaction of both tables",
        lambda: all(_cuts(_passes(maintain.output()), n) for n in (table, ctable)),
        maintain,
        timeout=180,
    )
    # Both stop at once: each finishes its pass or batch in flight.
    ingest.terminate()
    code, maintain_out = maintain.stop()
    assert code == 0, maintain_out[-3000:]
    code, ingest_out = ingest.stop()
    assert code == 0, ingest_out[-3000:]
    # The rest, in the session's Spark (no JVM start of its own); its commits count too.
    drained: list[CommitEvent] = []
    drain(spark, config_path, on_commit=drained.append)

    from frazil.generate.payments import generate_payments

    expected = [json.loads(v)["id"] for _, v in generate_payments(PAYMENTS, seed=77)]
    got = table_ids(spark, table)
    assert len(got) == len(set(got)) and sorted(got) == sorted(expected)
    rows = {r[0]: r[1] for r in spark.sql(f"SELECT id, seq FROM lake.{ctable}").collect()}
    assert rows == final

    results = [
        (report["table"], action)
        for report in _passes(maintain_out)
        for action in report["results"]
    ]
    assert not [r for r in results if r[1]["error"]], maintain_out[-3000:]
    for out in (ingest_out, maintain_out):
        assert "Traceback" not in out and "error:" not in out, out[-3000:]
    for name in (table, ctable):
        commits = sum(1 for line in ingest_out.splitlines() if f"→ {name} " in line)
        commits += sum(1 for c in drained if c.table.endswith(name))
        # Each compaction pass left fewer files than it rewrote. The table's file count at
        # the end is no measure: MERGE commits after the last pass add files again (and
        # maintain backs off a table whose MERGE lost to it, for merge_backoff).
        cuts = _cuts(_passes(maintain_out), name)
        assert commits >= 5 and cuts, (name, commits, maintain_out[-3000:])
        assert all(added < rewritten for rewritten, added in cuts), (name, cuts)


def _cuts(reports: list[dict[str, Any]], table: str) -> list[tuple[int, ...]]:
    """(files rewritten, files added) of each compaction of ``table`` that rewrote any."""
    return [
        tuple(int(n) for n in m.groups())
        for report in reports
        if report["table"].endswith(table)
        for action in report["results"]
        if action["action"] == "compaction"
        for m in [re.match(r"(\d+) data files .* rewritten into (\d+)", action["detail"])]
        if m and m.group(1) != "0"
    ]


def _passes(out: str) -> list[dict[str, Any]]:
    """The table reports of every pass `frazil maintain --output json` printed."""
    return [report for reports in _pass_arrays(out) for report in reports]


def _pass_arrays(out: str) -> list[list[dict[str, Any]]]:
    """One list of table reports per pass `frazil maintain --output json` printed (one JSON
    array per pass, between log lines)."""
    decoder = json.JSONDecoder()
    passes: list[list[dict[str, Any]]] = []
    at = 0
    while (at := out.find("[", at)) >= 0:
        if at == 0 or out[at - 1] == "\n":
            try:
                doc, end = decoder.raw_decode(out, at)
            except json.JSONDecodeError:
                at += 1
                continue
            if isinstance(doc, list) and all(isinstance(r, dict) and "table" in r for r in doc):
                passes.append(doc)
            at = end
        else:
            at += 1
    return passes
