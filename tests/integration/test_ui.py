"""The status page in a real headless browser (Debian's Chromium): it loads, lists each
pipeline, and its plots hold one data point per commit the table's history records."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from frazil.engine.runner import run
from frazil.observe.web import Dashboard
from tests.integration.helpers import payments_pipeline, produce_payments

pytestmark = pytest.mark.integration

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def browse(url: str, *extra: str) -> str:
    """The page's DOM after its scripts ran, as the browser serialises it."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--virtual-time-budget=15000", *extra, url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return done.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (scripts/setup installs it)")
def test_the_page_lists_pipelines_and_plots_every_commit(
    spark: Any, make_config: Any, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    topic, table, name = f"ui-{unique}", f"db.ui_{unique}", f"ui_{unique}"
    produce_payments(kafka_bootstrap, topic, 2_000, seed=51)
    config = make_config([payments_pipeline(name, topic, table, max_offsets_per_trigger=400)])
    run(config, until_caught_up=True, spark=spark)
    summaries = [
        dict(r[0]) for r in spark.sql(f"SELECT summary FROM lake.{table}.snapshots").collect()
    ]
    commits = [s for s in summaries if s.get("frazil.pipeline") == name]
    with_valid = [s for s in commits if s.get("frazil.valid-through-ms")]
    dashboard = Dashboard(config)
    port = dashboard.start("127.0.0.1", 0)
    try:
        dom = browse(f"http://127.0.0.1:{port}/", "--dump-dom")
        shot = tmp_path / "ui.png"
        browse(f"http://127.0.0.1:{port}/", f"--screenshot={shot}", "--window-size=1280,900")
    finally:
        dashboard.stop()
    assert 'data-loaded="true"' in dom, dom[-2000:]
    assert f'<tr data-pipeline="{name}">' in dom
    assert re.search(rf'<section class="pipeline" data-pipeline="{name}">', dom)

    def points(chart: str) -> int:
        match = re.search(rf'data-chart="{chart}-{name}".*?</svg>', dom, re.S)
        assert match, chart
        return len(re.findall(rf'<circle[^>]*data-series="{re.escape(table)}"', match.group(0)))

    # One point per commit of the pipeline (records/s: every commit after the first).
    assert points("files") == len(commits) >= 3
    assert points("freshness") == len(with_valid) >= 2
    assert points("rps") == len(commits) - 1
    assert shot.exists() and shot.stat().st_size > 10_000
    keep = os.environ.get("FRAZIL_UI_SCREENSHOT")
    if keep:  # docs/ui.png is made this way
        shutil.copyfile(shot, keep)

    # Kafka away: the row says the lag is unknown and the section says why, never a 0.
    kafka = config.kafka.model_copy(update={"bootstrap_servers": "127.0.0.1:1"})
    away = Dashboard(config.model_copy(update={"kafka": kafka}))
    port = away.start("127.0.0.1", 0)
    try:
        dom = browse(f"http://127.0.0.1:{port}/", "--dump-dom")
    finally:
        away.stop()
    row = re.search(rf'<tr data-pipeline="{name}">(.*?)</tr>', dom, re.S)
    assert row, dom[-2000:]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
    assert cells[2:4] == ["unknown", "unknown"], cells
    # The cause: a timeout, or the connection refused, whichever librdkafka reports first.
    assert "lag unknown: Kafka does not answer at 127.0.0.1:1" in dom, dom[dom.find("<main") :][
        :3000
    ]
