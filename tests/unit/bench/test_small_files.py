"""The small-files benchmark's pure parts: the variants' arguments and the medians per file.
No JVM."""

from __future__ import annotations

import pytest
from bench.small_files import VARIANTS, _variant_arg, summarize


def _round(
    variant: str, round_no: int, files: int, open_ms: float, write_ms: float, close_ms: float
) -> dict[str, object]:
    return {
        "variant": variant,
        "round": round_no,
        "files": files,
        "rows": 380_000,
        "open_ms": open_ms,
        "write_ms": write_ms,
        "close_ms": close_ms,
        "bytes": 1_000,
    }


def test_variant_arg_lists_writer_properties() -> None:
    assert _variant_arg("frazil") == "frazil=parquet.enable.dictionary:false"
    assert _variant_arg("one") == "one="
    # The harness writes a variant named one… to one file: only those.
    assert [n for n in VARIANTS if n.startswith("one")] == ["one", "one_nodict", "one_dict256k"]


def test_summarize_takes_medians_after_warm_up_and_per_file_costs() -> None:
    runs = [
        # Warm-up round 0: slow, not counted.
        _round("one", 0, 1, 10.0, 900.0, 90.0),
        _round("frazil", 0, 200, 100.0, 900.0, 1000.0),
        *(_round("one", r, 1, 1.0, 380.0, 19.0) for r in (1, 2, 3)),
        _round("frazil", 1, 200, 60.0, 120.0, 420.0),
        _round("frazil", 2, 200, 60.0, 140.0, 400.0),
        _round("frazil", 3, 200, 60.0, 100.0, 440.0),
    ]
    summary = summarize(runs, warm_up=1)
    assert set(summary) == {"one", "frazil"}
    assert summary["one"]["round_ms"] == 400.0
    frazil = summary["frazil"]
    assert frazil["round_ms"] == 600.0
    assert frazil["open_ms_per_file"] == pytest.approx(0.3)
    assert frazil["write_ms_per_file"] == pytest.approx(0.6)
    assert frazil["close_ms_per_file"] == pytest.approx(2.1)
    # 200 ms more than one file, over the 199 files more.
    assert frazil["extra_ms_per_file"] == pytest.approx(200.0 / 199)
    assert frazil["round_ratio_to_one"] == pytest.approx(1.5)
    assert frazil["round_ratio_to_frazil"] == 1.0
    assert summary["one"]["round_ratio_to_frazil"] == pytest.approx(400.0 / 600.0)
    assert "extra_ms_per_file" not in summary["one"]
