"""The driver's class-data archive is used when present; without one, Spark starts as it
would and frazil says once how to build one."""

from __future__ import annotations

from pathlib import Path

import pytest

from frazil.jvm import cds, fetch


def test_options_name_the_archive_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "spark-driver-x.jsa"
    monkeypatch.setattr(cds, "archive_path", lambda: archive)
    monkeypatch.setattr(cds, "_told", True)
    assert cds.java_options() == ""
    archive.write_bytes(b"")
    options = cds.java_options()
    assert f"-XX:SharedArchiveFile={archive}" in options
    # A stale archive must never stop or clutter a start: sharing is best effort, logs off.
    assert "-Xshare:auto" in options and "-Xlog:cds=off" in options
    monkeypatch.setenv(cds.CDS_ENV, "0")
    assert cds.java_options() == ""


def test_each_pyspark_installation_has_an_archive_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The JVM checks the classpath's paths: two checkouts sharing the jar cache need two.
    monkeypatch.setattr(cds, "_digest", lambda: "d")
    # The installation's key is fetch's (the unsigned jar copies use it too).
    monkeypatch.setattr(fetch, "pyspark_jars_dir", lambda: tmp_path / "a" / "jars")
    first = cds.archive_path()
    monkeypatch.setattr(fetch, "pyspark_jars_dir", lambda: tmp_path / "b" / "jars")
    second = cds.archive_path()
    assert first != second
    assert first.name.startswith("spark-driver-") and first.name.endswith("-d.jsa")


def test_a_start_without_an_archive_says_once_that_setup_builds_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(cds, "archive_path", lambda: tmp_path / "missing.jsa")
    monkeypatch.setattr(cds, "_told", False)
    with caplog.at_level("WARNING", logger=cds.__name__):
        assert cds.java_options() == ""
        assert cds.java_options() == ""
    told = [r.getMessage() for r in caplog.records if r.name == cds.__name__]
    assert len(told) == 1 and "`frazil setup` builds one" in told[0]
    # Turned off on purpose: nothing to say.
    caplog.clear()
    monkeypatch.setattr(cds, "_told", False)
    monkeypatch.setenv(cds.CDS_ENV, "0")
    assert cds.java_options() == ""
    assert not [r for r in caplog.records if r.name == cds.__name__]
