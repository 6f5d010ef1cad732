"""What people see on an 80x24 terminal, and output that scales with the work.

The commands run in a real terminal (tmux, 80 columns by 24 lines) against real tables: no
line the terminal had to fold (``capture-pane -J`` joins those back), no name or header cut
with ``…``, the query hint whole on one line, query values in full, dead-letter reasons on a
line of their own. A routed run to 30 tables prints a line per batch and a summary of a
handful of lines, while ``-o json`` still lists every table.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Producer

from frazil.generate.producer import ensure_topic

from .helpers import payments_pipeline, produce_payments

needs_tmux = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed: the 80-column checks run in a real 80x24 terminal",
)

FRAZIL = f"{shlex.quote(sys.executable)} -m frazil.cli.main"
#: Several frazil commands in one process: one Spark driver for the commands that query tables.
IN_ONE_PROCESS = f"{shlex.quote(sys.executable)} " + shlex.quote(
    str(Path(__file__).with_name("cli_in_one_process.py"))
)


def _write_config(make_config: Any, path: Path, pipelines: list[dict[str, Any]]) -> Path:
    config = make_config(pipelines)
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", by_alias=True)))
    return path


def _in_tmux(
    folder: Path, commands: list[tuple[str, str]], timeout: float = 900, inner: tuple[str, ...] = ()
) -> dict[str, str]:
    """Run each (name, command) in one 80x24 tmux terminal, in ``folder``; return what each
    printed as the terminal shows it, with the lines the terminal folded joined back.

    ``inner`` names the commands an ``IN_ONE_PROCESS`` command framed itself."""
    socket = f"frazil-80-{uuid.uuid4().hex[:8]}"
    conf = folder / "tmux.conf"
    conf.write_text("set -g history-limit 50000\n")
    script = folder / "commands.sh"
    body = [f"cd {shlex.quote(str(folder))}", "export COLUMNS=80 LINES=24"]
    for name, command in commands:
        body += [f"echo '=== {name}'", command, f'echo "=== {name} exit $?"']
    body.append("echo '=== done'")
    script.write_text("\n".join(body) + "\n")
    tmux = ["tmux", "-L", socket, "-f", str(conf)]
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "80", "-y", "24", f"bash {script}; sleep 3600"],
        check=True,
    )
    try:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = subprocess.run(
                [*tmux, "capture-pane", "-p", "-J", "-S", "-", "-E", "-"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            if "=== done" in text:
                break
            time.sleep(0.5)
        assert "=== done" in text, text[-3000:]
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
        # tmux leaves its socket file behind.
        tmp = Path(os.environ.get("TMUX_TMPDIR", "/tmp"))
        (tmp / f"tmux-{os.getuid()}" / socket).unlink(missing_ok=True)
    sections: dict[str, str] = {}
    for name in [*(name for name, _ in commands), *inner]:
        start = text.index(f"=== {name}\n") + len(f"=== {name}\n")
        end = text.index(f"=== {name} exit ")
        code = text[end:].split("\n", 1)[0].rsplit(" ", 1)[-1]
        assert code == "0", f"{name} exited {code}:\n{text[start:end]}"
        sections[name] = text[start:end]
    return sections


def _long_lines(text: str, *allowed: str) -> list[str]:
    """Lines wider than the terminal (folded by it), but those that start with ``allowed``."""
    return [
        line
        for line in text.splitlines()
        if len(line.rstrip()) > 80 and not line.strip().startswith(allowed)
    ]


@needs_tmux
def test_commands_at_80_columns(
    make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"c80-{unique}", f"db.c80_{unique}", f"c80_{unique}"
    dlq_table = f"db.c80_dead_{unique}"
    ids = produce_payments(kafka_bootstrap, topic, 1_500, seed=80)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for n in range(3):
        producer.produce(topic, f"not json {n}".encode(), partition=0)
    assert producer.flush(30) == 0
    _write_config(
        make_config,
        tmp_path / "frazil.yaml",
        [
            payments_pipeline(
                name,
                topic,
                table,
                starting_offsets="earliest",
                errors={"tolerance": "all", "dlq_table": dlq_table},
            )
        ],
    )
    first = sorted(ids)[:3]
    query = f"SELECT * FROM lake.{table} ORDER BY id LIMIT 3"
    out = _in_tmux(
        tmp_path,
        [
            ("run", f"{FRAZIL} run -c frazil.yaml --until-caught-up"),
            (
                "tables, sql, dlq",
                f"{IN_ONE_PROCESS} tables -- tables -c frazil.yaml"
                f" --- sql -- sql -c frazil.yaml {shlex.quote(query)}"
                " --- dlq -- dlq show -c frazil.yaml",
            ),
            ("status", f"{FRAZIL} status -c frazil.yaml"),
            ("help", f"{FRAZIL} --help"),
            ("run help", f"{FRAZIL} run --help"),
        ],
        inner=("tables", "sql", "dlq"),
    )

    # The run: a line per batch, the summary, and the hint whole on its own line.
    run = out["run"]
    hint = f"frazil sql -c frazil.yaml 'SELECT * FROM {table} LIMIT 10'"
    assert f"  {hint}" in run.splitlines(), run
    # A batch line is never wrapped by frazil (table names stay whole for grep; the terminal
    # folds it): its length depends on the seconds and freshness, 81 columns on a slow day.
    assert _long_lines(run, "frazil sql -c", f"{name} batch ") == [], run
    assert f"✓ {name}" in run and "records written" in run
    assert " records → " in run and "…" not in run

    # Tables: every name and header whole (columns left out, not cut).
    tables = out["tables"]
    assert _long_lines(tables) == [] and "…" not in tables, tables
    assert f"db.c80_{unique}" in tables  # as the config names it
    for header in ("table", "score", "data", "files"):
        assert header in tables
    assert "not shown at this width:" in tables

    # SQL: too wide for a table, so one block per row, every value whole.
    sql = out["sql"]
    assert _long_lines(sql) == [] and "…" not in sql, sql
    assert "-[ row 3 ]-" in sql and "(3 rows)" in sql
    for id_ in first:
        assert id_ in sql

    # dlq show: the reason on a line of its own, whole.
    dlq = out["dlq"]
    assert _long_lines(dlq) == [] and "…" not in dlq, dlq
    reasons = [line for line in dlq.splitlines() if line.strip().startswith("reason")]
    assert reasons and all(len(line.split()) > 3 for line in reasons), dlq
    assert f"{name}  decode  3 record(s)" in dlq

    for what in ("status", "help", "run help"):
        assert _long_lines(out[what]) == [] and "…" not in out[what], out[what]
    assert "throughput over recent commits, freshness, last" in out["help"]


def test_a_routed_run_prints_a_line_per_batch_and_a_short_summary(
    make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, name = f"r30-{unique}", f"r30_{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
    for n in range(3_000):
        record = {"id": n, "k": f"t{n % 30:02d}"}
        producer.produce(topic, json.dumps(record).encode(), partition=n % 2)
    assert producer.flush(30) == 0
    pipeline = {
        "name": name,
        "topics": [topic],
        "starting_offsets": "earliest",
        "schema": {"id": "long", "k": "string"},
        "route": {"field": "k", "table": f"r30_{unique}.k_{{value}}"},
        "trigger": "500ms",
        "max_offsets_per_trigger": 1_000,
    }
    config = _write_config(make_config, tmp_path / "frazil.yaml", [pipeline])

    text = subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config), "--until-caught-up"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
        env={**_env(), "COLUMNS": "200"},  # a line is a line (wrapping: the tmux test)
    )  # fmt: skip
    assert text.returncode == 0, text.stderr[-3000:]
    batches = [line for line in text.stderr.splitlines() if " → " in line]
    assert 3 <= len(batches) <= 6, text.stderr
    # A line per batch, rows to how many tables: no line per table.
    assert all(" rows → 30 tables in " in line for line in batches), batches
    assert sum(int(line.split(": ")[1].split()[0].replace(",", "")) for line in batches) == 3_000
    # Beyond the batch lines: the start line (and perhaps a warning or two).
    assert len(text.stderr.splitlines()) <= len(batches) + 4, text.stderr
    summary = text.stdout.splitlines()
    assert len(summary) <= 30, text.stdout
    assert "3,000 in 30 table(s)" in text.stdout
    assert "and 25 more (2,500 rows; all in -o json)" in text.stdout
    assert "GROUP BY" not in text.stdout and "LIMIT 10" in text.stdout

    # More records, and -o json: every table is listed.
    for n in range(3_000, 3_300):
        producer.produce(topic, json.dumps({"id": n, "k": f"t{n % 30:02d}"}).encode())
    assert producer.flush(30) == 0
    shown = subprocess.run(
        [sys.executable, "-m", "frazil.cli.main", "run", "-c", str(config), "--until-caught-up",
         "-o", "json"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False,
        env=_env(),
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    (report,) = json.loads(shown.stdout)
    assert len(report["tables"]) == 30
    assert sum(report["tables"].values()) == 3_300
    assert " → " not in shown.stderr


def _env() -> dict[str, str]:
    return {**os.environ}
