"""Plot a soak's samples (tests/integration/test_soak.py with ``FRAZIL_SOAK_REPORT``) as one
SVG: resident memory, heap after GC, threads and open files over time, one line per process
life (each life ends with a kill -9).

    .venv/bin/python -m bench.soak_plot bench/results/soak.json docs/soak.svg
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.svg import Series, document, panel, top_of

METRICS = (
    ("rss_mb", "resident memory, MB (Python + JVM)"),
    ("heap_mb", "JVM heap after a full GC, MB"),
    ("threads", "threads (Python + JVM)"),
    ("open_files", "open files (Python + JVM)"),
)


def plot(report: dict[str, Any]) -> str:
    """The SVG text for one soak report."""
    lives = report["lives"]
    start = min((s["at"] for life in lives for s in life), default=0.0)
    t_end = max((s["at"] - start for life in lives for s in life), default=1.0) or 1.0
    panels = []
    for i, (key, title) in enumerate(METRICS):
        series = [
            Series([(s["at"] - start, s[key]) for s in life if s[key] == s[key]], mark_end=True)
            for life in lives
        ]
        panels.append(panel(top_of(i), title, series, t_end, x_label=f"{t_end / 60:.0f} min"))
    caption = (
        f"soak: {report['seconds'] / 60:.0f} min at {report['rate']} records/s, inline "
        f"maintenance, kill -9 every {report['kill_every'] / 60:.0f} min (red), "
        f"{report['records']:,} records exact"
    )
    return document(panels, caption)


def main(argv: list[str]) -> None:
    source, target = Path(argv[0]), Path(argv[1])
    target.write_text(plot(json.loads(source.read_text())))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
