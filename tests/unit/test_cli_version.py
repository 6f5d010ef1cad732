"""``frazil --version``: frazil's version and the versions of the parts it runs."""

from __future__ import annotations

from typer.testing import CliRunner

from frazil import __version__
from frazil.cli.main import app
from frazil.jvm.pins import ICEBERG_VERSION, SPARK_VERSION


def test_version_names_frazil_spark_and_iceberg() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    expected = f"frazil {__version__} (Spark {SPARK_VERSION}, Iceberg {ICEBERG_VERSION}"
    assert result.output.strip().startswith(expected)
