"""Hand-written SVG line charts for the benchmarks' plots: panels stacked on one page, each
with its own y axis from zero. No plotting library: the files stay small, diff well and
render the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

W, H, PAD_L, PAD_B, GAP = 640, 150, 56, 22, 34
BLUE, ORANGE, RED = "#1f77b4", "#ff7f0e", "#c0392b"


@dataclass(frozen=True)
class Series:
    """One line of a panel.

    Attributes:
        points: ``(x, y)`` pairs, x in the panel's units (from 0 to its ``x_end``).
        color: The line's colour.
        dashed: Drawn dashed (a reference rather than a measurement).
        dots: A dot at every point (few points, each a measurement of its own).
        mark_end: A dashed red vertical line where the series ends (e.g. a process killed).
    """

    points: Sequence[tuple[float, float]]
    color: str = BLUE
    dashed: bool = False
    dots: bool = False
    mark_end: bool = False


def panel(
    y0: float,
    title: str,
    lines: Sequence[Series],
    x_end: float,
    *,
    x_label: str,
    x_ticks: Sequence[tuple[float, str]] = (),
    value_format: str = ",.0f",
) -> str:
    """The SVG elements of one panel whose top edge is at ``y0``.

    Args:
        title: The panel's title, above it.
        x_end: The x value at the right edge.
        x_label: Written under the right end of the x axis.
        x_ticks: ``(x, label)`` pairs written under the axis.
        value_format: Format of the y axis's top value (``format`` spec).
    """
    values = [v for line in lines for _, v in line.points]
    top = max(values) * 1.1 if values and max(values) > 0 else 1.0
    x_end = x_end or 1.0

    def x(t: float) -> float:
        return PAD_L + t / x_end * (W - PAD_L - 10)

    def y(v: float) -> float:
        return y0 + H - PAD_B - v / top * (H - PAD_B - 16)

    parts = [
        f'<text x="{PAD_L}" y="{y0 + 12}" font-size="12">{title}</text>',
        f'<line x1="{PAD_L}" y1="{y(0)}" x2="{W - 10}" y2="{y(0)}" stroke="#bbb"/>',
        f'<text x="4" y="{y(top / 1.1) + 4:.0f}" font-size="10">'
        f"{format(top / 1.1, value_format)}</text>",
        f'<text x="4" y="{y(0):.0f}" font-size="10">0</text>',
    ]
    for line in lines:
        if not line.points:
            continue
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in line.points)
        dash = ' stroke-dasharray="5,4"' if line.dashed else ""
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{line.color}" '
            f'stroke-width="1.5"{dash}/>'
        )
        if line.dots:
            parts.extend(
                f'<circle cx="{x(t):.1f}" cy="{y(v):.1f}" r="3" fill="{line.color}"/>'
                for t, v in line.points
            )
        if line.mark_end:
            end = x(line.points[-1][0])
            parts.append(
                f'<line x1="{end:.1f}" y1="{y0 + 16}" x2="{end:.1f}" '
                f'y2="{y(0):.1f}" stroke="{RED}" stroke-dasharray="3,3"/>'
            )
    parts.extend(
        f'<text x="{x(t):.1f}" y="{y(0) + 14:.0f}" font-size="10" text-anchor="middle">'
        f"{label}</text>"
        for t, label in x_ticks
    )
    parts.append(
        f'<text x="{W - 10}" y="{y(0) + 14:.0f}" font-size="10" text-anchor="end">{x_label}</text>'
    )
    return "\n".join(parts)


def document(panels: Sequence[str], caption: str) -> str:
    """A whole SVG file: ``panels`` (each drawn at ``i * (H + GAP)``) and a caption under
    them."""
    height = len(panels) * (H + GAP)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height + 20}" '
        f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n'
        + "\n".join(panels)
        + f'\n<text x="{PAD_L}" y="{height + 12}" font-size="11">{caption}</text>\n</svg>\n'
    )


def top_of(i: int) -> float:
    """The top edge of the ``i``-th panel."""
    return i * (H + GAP)
