"""Pure checks on the pinned JVM artifacts (no Maven, no JVM)."""

from __future__ import annotations

import re
from importlib.metadata import version
from pathlib import Path

import pytest

from frazil.errors import ArtifactError
from frazil.jvm import pins
from frazil.jvm.fetch import artifact_dir
from frazil.jvm.pins import ARTIFACT_SETS, Coordinate


def all_coordinates() -> list[Coordinate]:
    return [c for s in ARTIFACT_SETS.values() for c in (*s.dependencies, *s.managed)]


def test_spark_pin_matches_installed_pyspark() -> None:
    assert version("pyspark") == pins.SPARK_VERSION


def test_sets_are_spark_kafka_and_the_local_stack() -> None:
    assert set(ARTIFACT_SETS) == {"spark", "kafka", "s3proxy", "rest-catalog"}
    assert ARTIFACT_SETS["spark"].skip_pyspark_provided
    assert not ARTIFACT_SETS["kafka"].skip_pyspark_provided
    # The jar-with-dependencies is the whole application: its POM's list must not be fetched.
    assert ARTIFACT_SETS["s3proxy"].intransitive


def test_rest_catalog_set_pins_the_test_fixture_jars_and_jetty() -> None:
    rest = ARTIFACT_SETS["rest-catalog"]
    deps = {(c.artifact, c.classifier): c.version for c in rest.dependencies}
    assert deps[("iceberg-open-api", "test-fixtures")] == pins.ICEBERG_VERSION
    assert deps[("iceberg-core", "tests")] == deps[("iceberg-core", None)] == pins.ICEBERG_VERSION
    assert deps[("iceberg-aws-bundle", None)] == pins.ICEBERG_VERSION
    # RESTCatalogServer 1.11 is built against Jetty 12.1 (ee10 servlets).
    assert pins.JETTY_VERSION.startswith("12.1.")
    assert deps[("jetty-ee10-servlet", None)] == pins.JETTY_VERSION


def test_spark_set_pins() -> None:
    deps = {c.artifact: c.version for c in ARTIFACT_SETS["spark"].dependencies}
    assert deps["spark-sql-kafka-0-10_2.13"] == pins.SPARK_VERSION
    assert deps[f"iceberg-spark-runtime-{pins.SPARK_MINOR_VERSION}_2.13"] == pins.ICEBERG_VERSION
    assert re.fullmatch(r"3\.\d+\.\d+\.\d+", deps["sqlite-jdbc"])


def test_kafka_set_pins_broker_and_log_backend() -> None:
    deps = {c.artifact: c.version for c in ARTIFACT_SETS["kafka"].dependencies}
    assert deps["kafka_2.13"] == pins.KAFKA_VERSION
    assert deps["log4j-core"] == deps["log4j-slf4j-impl"] == pins.LOG4J_VERSION


def test_scala_suffix_is_consistent() -> None:
    for c in all_coordinates():
        suffix = re.search(r"_(\d+\.\d+)$", c.artifact)
        if suffix:
            assert suffix.group(1) == pins.SCALA_BINARY_VERSION, c


def test_versions_are_concrete() -> None:
    for c in all_coordinates():
        assert re.fullmatch(r"\d+(\.\d+)+", c.version), c


def test_coordinate_round_trip() -> None:
    text = "org.apache.kafka:kafka_2.13:4.1.1"
    assert str(Coordinate.parse(text)) == text
    assert Coordinate.parse(text).classifier is None
    with pytest.raises(ValueError):
        Coordinate.parse("org.apache.kafka:kafka_2.13")


def test_coordinate_with_classifier() -> None:
    text = "org.gaul:s3proxy:4.1.0:jar-with-dependencies"
    c = Coordinate.parse(text)
    assert (c.artifact, c.version, c.classifier) == ("s3proxy", "4.1.0", "jar-with-dependencies")
    assert str(c) == text
    for bad in ("a:b:c:", "a:b:c:d:e"):
        with pytest.raises(ValueError):
            Coordinate.parse(bad)


def test_pom_names_the_classifier() -> None:
    from frazil.jvm.fetch import _pom

    pom = _pom(ARTIFACT_SETS["rest-catalog"])
    assert "<artifactId>iceberg-open-api</artifactId>" in pom
    assert "<classifier>test-fixtures</classifier>" in pom
    assert "<classifier>tests</classifier>" in pom


def test_fingerprints_are_stable_and_distinct() -> None:
    spark, kafka = ARTIFACT_SETS["spark"], ARTIFACT_SETS["kafka"]
    assert spark.fingerprint() == spark.fingerprint()
    assert spark.fingerprint() != kafka.fingerprint()
    assert re.fullmatch(r"[0-9a-f]{12}", spark.fingerprint())


def test_cache_folder_is_named_after_set_and_fingerprint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FRAZIL_CACHE_DIR", str(tmp_path))
    kafka = ARTIFACT_SETS["kafka"]
    assert artifact_dir("kafka").name == f"kafka-{kafka.fingerprint()}"
    assert artifact_dir("kafka").parent.name == "jars"
    with pytest.raises(ArtifactError, match="unknown JVM artifact set"):
        artifact_dir("nope")


def test_schema_registry_app_pin() -> None:
    app = pins.SCHEMA_REGISTRY_APP
    assert str(app.coordinate) == f"io.apicurio:apicurio-registry-app:{pins.APICURIO_VERSION}"
    # What `mvn dependency:get -Dartifact=...` takes: G:A:V:type:classifier.
    assert str(app) == f"io.apicurio:apicurio-registry-app:{pins.APICURIO_VERSION}:tar.gz:all"
    # 3.0.x: later 3.x releases need Java 21, frazil supports Java 17.
    assert re.fullmatch(r"3\.0\.\d+", pins.APICURIO_VERSION)
    assert app.main_jar == f"apicurio-registry-app-{pins.APICURIO_VERSION}-runner.jar"
    # An application, not a classpath: no artifact set may pull it in.
    assert all(c.artifact != app.coordinate.artifact for c in all_coordinates())


def test_app_cache_folder_is_named_after_artifact_and_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from frazil.jvm.apps import app_dir

    monkeypatch.setenv("FRAZIL_CACHE_DIR", str(tmp_path))
    folder = app_dir(pins.SCHEMA_REGISTRY_APP)
    assert folder == tmp_path / "apps" / f"apicurio-registry-app-{pins.APICURIO_VERSION}"
