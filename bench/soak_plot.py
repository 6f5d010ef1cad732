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

METRICS = (
    ("rss_mb", "resident memory, MB (Python + JVM)"),
    ("heap_mb", "JVM heap after a full GC, MB"),
    ("threads", "threads (Python + JVM)"),
    ("open_files", "open files (Python + JVM)"),
)
W, H, PAD_L, PAD_B, GAP = 640, 150, 56, 22, 34


def _panel(y0: float, title: str, lives: list[list[tuple[float, float]]], t_end: float) -> str:
    values = [v for life in lives for _, v in life]
    top = max(values) * 1.1 if values else 1.0
    x = lambda t: PAD_L + t / t_end * (W - PAD_L - 10)  # noqa: E731
    y = lambda v: y0 + H - PAD_B - v / top * (H - PAD_B - 16)  # noqa: E731
    parts = [
        f'<text x="{PAD_L}" y="{y0 + 12}" font-size="12">{title}</text>',
        f'<line x1="{PAD_L}" y1="{y(0)}" x2="{W - 10}" y2="{y(0)}" stroke="#bbb"/>',
        f'<text x="4" y="{y(top / 1.1) + 4:.0f}" font-size="10">{top / 1.1:,.0f}</text>',
        f'<text x="4" y="{y(0):.0f}" font-size="10">0</text>',
    ]
    for life in lives:
        if not life:
            continue
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in life)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="#1f77b4" stroke-width="1.5"/>'
        )
        parts.append(
            f'<line x1="{x(life[-1][0]):.1f}" y1="{y0 + 16}" x2="{x(life[-1][0]):.1f}" '
            f'y2="{y(0):.1f}" stroke="#c0392b" stroke-dasharray="3,3"/>'
        )
    parts.append(
        f'<text x="{W - 10}" y="{y(0) + 14:.0f}" font-size="10" text-anchor="end">'
        f"{t_end / 60:.0f} min</text>"
    )
    return "\n".join(parts)


def plot(report: dict[str, Any]) -> str:
    """The SVG text for one soak report."""
    lives = report["lives"]
    start = min((s["at"] for life in lives for s in life), default=0.0)
    t_end = max((s["at"] - start for life in lives for s in life), default=1.0) or 1.0
    panels = []
    for i, (key, title) in enumerate(METRICS):
        series = [[(s["at"] - start, s[key]) for s in life if s[key] == s[key]] for life in lives]
        panels.append(_panel(i * (H + GAP), title, series, t_end))
    height = len(METRICS) * (H + GAP)
    caption = (
        f"soak: {report['seconds'] / 60:.0f} min at {report['rate']} records/s, inline "
        f"maintenance, kill -9 every {report['kill_every'] / 60:.0f} min (red), "
        f"{report['records']:,} records exact"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height + 20}" '
        f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n'
        + "\n".join(panels)
        + f'\n<text x="{PAD_L}" y="{height + 12}" font-size="11">{caption}</text>\n</svg>\n'
    )


def main(argv: list[str]) -> None:
    source, target = Path(argv[0]), Path(argv[1])
    target.write_text(plot(json.loads(source.read_text())))
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
