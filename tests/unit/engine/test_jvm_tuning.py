"""The Spark JVMs' tuning by where they run: collector, JIT, and what a user's options
replace."""

from __future__ import annotations

import os

import pytest

from frazil.engine import jvm_tuning
from frazil.engine.jvm_tuning import (
    ANALYSIS_JIT_OPTIONS,
    JIT_OPTIONS,
    STACK_DRIVER_JIT_OPTIONS,
    STACK_EXECUTOR_JIT_OPTIONS,
    chooses_collector,
    driver_jit_options,
    executor_jit_options,
    gc_option,
    on_loopback,
)


def test_throughput_collector_by_core_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert gc_option("local[2]") == "-XX:+UseSerialGC"
    assert gc_option("spark://h:7077") == "-XX:+UseParallelGC"
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert gc_option("local[*]") == "-XX:+UseParallelGC"


def test_a_users_collector_replaces_frazils() -> None:
    assert chooses_collector("-Xmx2g -XX:+UseG1GC")
    assert chooses_collector("-XX:+UseZGC -XX:+ZGenerational")
    assert not chooses_collector("-Xmx2g -XX:-UseCompressedOops")
    assert not chooses_collector("")


def test_each_driver_gets_the_jit_measured_for_where_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert driver_jit_options("local[2]", "", analysis=True) == " ".join(ANALYSIS_JIT_OPTIONS)
    local = driver_jit_options("local[2]", "", analysis=False)
    assert local.startswith(" ".join(JIT_OPTIONS))
    assert "-XX:CompilerDirectivesFile=" in local
    # Without tiered compilation there is no C1 for what the directives keep from C2.
    assert "CompilerDirectivesFile" not in driver_jit_options(
        "local[2]", "-XX:-TieredCompilation", analysis=False
    )
    stack = "spark://127.0.0.1:7077"
    assert on_loopback(stack) and not on_loopback("spark://10.0.0.5:7077")
    assert driver_jit_options(stack, "", analysis=False) == " ".join(STACK_DRIVER_JIT_OPTIONS)
    assert executor_jit_options(stack) == STACK_EXECUTOR_JIT_OPTIONS
    assert driver_jit_options("spark://10.0.0.5:7077", "", analysis=False) == ""
    assert executor_jit_options("spark://10.0.0.5:7077") == ()
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert driver_jit_options(stack, "", analysis=False) == ""
    assert executor_jit_options(stack) == ()


def test_directives_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jvm_tuning.JIT_DIRECTIVES_ENV, "0")
    assert driver_jit_options("local[2]", "", analysis=False) == " ".join(JIT_OPTIONS)
