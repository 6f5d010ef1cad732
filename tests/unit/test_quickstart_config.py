"""quickstart's config follows its --port and never runs a config that points elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from frazil.cli.quickstart_cmd import _write_config
from frazil.errors import ConfigError


def _bootstrap(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["kafka"]["bootstrap_servers"])


def test_its_own_config_follows_the_port_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "frazil.yaml"
    _write_config(path, 19092, "payments")
    assert _bootstrap(path) == "127.0.0.1:19092"
    # A user's edit elsewhere in the file survives the next --port.
    path.write_text(path.read_text().replace("trigger: 1s", "trigger: 5s"))
    _write_config(path, 29392, "payments")
    assert _bootstrap(path) == "127.0.0.1:29392"
    assert "trigger: 5s" in path.read_text()


def test_a_config_of_ones_own_pointing_elsewhere_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "frazil.yaml"
    path.write_text("kafka:\n  bootstrap_servers: shared-host:9092\npipelines: []\n")
    with pytest.raises(ConfigError, match=r"kafka.bootstrap_servers is shared-host:9092, not"):
        _write_config(path, 19092, "payments")
    assert "shared-host" in path.read_text()
    # Pointing at the broker quickstart starts, it is used as it is.
    path.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:19092\npipelines: []\n")
    _write_config(path, 19092, "payments")
    assert _bootstrap(path) == "127.0.0.1:19092"


def test_a_config_reading_the_bootstrap_variable_is_run_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "frazil.yaml"
    text = "kafka:\n  bootstrap_servers: ${FRAZIL_BOOTSTRAP_SERVERS:-127.0.0.1:9092}\n"
    path.write_text(text)
    _write_config(path, 19092, "payments")
    assert path.read_text() == text
