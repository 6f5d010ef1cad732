"""The driver's session: made without Spark ML's session extension, with everything else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import in_one_process, payments_pipeline
from tests.integration.test_cli_errors import write_config

pytestmark = pytest.mark.integration

PROVIDERS = "META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider"


def test_sparks_ml_functions_are_not_registered_and_icebergs_extensions_are(spark: Any) -> None:
    jvm = spark.sparkContext._jvm
    registry = getattr(jvm, "org.apache.spark.sql.catalyst.analysis.FunctionRegistry$")
    internal = getattr(registry, "MODULE$")
    name = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier("vector_to_array")
    assert not internal.internal().functionExists(name)
    # spark.sql.extensions are not looked up as providers: Iceberg's SQL still parses.
    parser = spark._jsparkSession.sessionState().sqlParser().getClass().getName()
    assert "Iceberg" in parser


def test_only_service_files_naming_left_out_providers_are_hidden(
    spark: Any, tmp_path: Path
) -> None:
    jvm = spark.sparkContext._jvm
    listings = {
        "ml": "# Spark ML\norg.apache.spark.sql.ml.InternalFunctionRegistration\n",
        "mine": "com.example.Extensions  # a user's\n",
        "both": "org.apache.spark.sql.ml.InternalFunctionRegistration\ncom.example.More\n",
    }
    urls = jvm.java.util.ArrayList()
    for folder, listing in listings.items():
        service = tmp_path / folder / PROVIDERS
        service.parent.mkdir(parents=True)
        service.write_text(listing)
        urls.add(jvm.java.io.File(str(tmp_path / folder) + "/").toURI().toURL())
    array = spark.sparkContext._gateway.new_array(jvm.java.net.URL, len(listings))
    for index in range(len(listings)):
        array[index] = urls.get(index)
    loader = jvm.java.net.URLClassLoader(array, None)
    hiding = getattr(jvm, "dev.frazil.spark.SessionStart$WithoutProviders")(loader)

    found = jvm.java.util.Collections.list(hiding.getResources(PROVIDERS))
    kept = sorted(Path(found.get(i).getPath()).parts[-4] for i in range(found.size()))

    assert kept == ["both", "mine"]
    # Other resources are the parent's, untouched.
    other = jvm.java.util.Collections.list(hiding.getResources("META-INF/services"))
    assert other.size() == 3


def test_a_state_folder_with_spaces_starts_the_driver_either_way(
    lake_dir: Path, kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    state = tmp_path / "My Projects" / "state"
    config = write_config(
        tmp_path / "c.yaml",
        lake_dir,
        kafka_bootstrap,
        [payments_pipeline(f"s_{unique}", f"s-{unique}", f"db.s_{unique}")],
        state_dir=str(state),
    )
    # Through Spark's scripts (which split the JVM's options at spaces) and with the kept
    # command: the log file's path reaches the JVM whole.
    for env in ({"FRAZIL_DRIVER_COMMAND": "0"}, {}):
        (done,) = in_one_process(
            ["-o", "json", "sql", "-c", str(config), "SELECT 41 + 1 AS answer"], env=env
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert '"answer": 42' in done.stdout.replace('"answer":42', '"answer": 42')
        assert (state / "logs" / "spark.log").is_file()
