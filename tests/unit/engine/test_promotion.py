"""Which config changes a running pipeline takes in (promoted columns) and which wait for a
restart, and the config file followed for them."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.config.loader import load_config, parse_config
from frazil.config.pipeline import PipelineConfig
from frazil.engine.promotion import ConfigWatch, NotLive, promoted

_BASE: dict[str, Any] = {
    "name": "orders",
    "topics": ["orders"],
    "table": "db.orders",
    "schema": {"id": "bigint"},
    "variant": "rest",
    "transforms": [{"derive": {"day": "date(_kafka_timestamp)"}}],
    "kafka_metadata": ["timestamp"],
}


def _pipeline(**changes: Any) -> PipelineConfig:
    data = {**_BASE, **changes}
    given = {k: v for k, v in data.items() if v is not None}
    return parse_config({"pipelines": [given]}).pipelines[0]


def test_nothing_changed_promotes_nothing() -> None:
    assert promoted(_pipeline(), _pipeline()) == ()


def test_declared_fields_added_next_to_the_variant_are_promoted() -> None:
    new = _pipeline(schema={"id": "bigint", "country": "string", "total": "decimal(10,2)"})
    assert promoted(_pipeline(), new) == ("country", "total")


def test_derive_steps_appended_are_promoted() -> None:
    steps = [
        *_BASE["transforms"],
        {"derive": {"city": "try_variant_get(rest, '$.geo.city', 'string')"}},
        {"derive": {"zip": "rest:geo.zip::string"}},
    ]
    new = _pipeline(schema={"id": "bigint", "country": "string"}, transforms=steps)
    assert promoted(_pipeline(), new) == ("country", "city", "zip")


@pytest.mark.parametrize(
    ("changes", "keys"),
    [
        ({"schema": {"id": "string"}}, ["schema"]),  # a type changed
        ({"schema": {"other": "bigint"}}, ["schema"]),  # a field removed
        ({"transforms": []}, ["transforms"]),
        ({"transforms": [{"derive": {"day": "1"}}]}, ["transforms"]),
        ({"transforms": [*_BASE["transforms"], {"filter": "true"}]}, ["transforms"]),
        ({"partition_by": ["day"]}, ["partition_by"]),
        ({"variant": "other"}, ["variant"]),
        ({"trigger": "5s", "table": "db.other"}, ["table", "trigger"]),
        (
            {"schema": {"id": "bigint", "more": "int"}, "schema_evolution": "freeze"},
            ["schema_evolution"],
        ),
    ],
)
def test_other_changes_wait_for_a_restart(changes: dict[str, Any], keys: list[str]) -> None:
    with pytest.raises(NotLive) as info:
        promoted(_pipeline(), _pipeline(**changes))
    assert [k.split(" ")[0] for k in info.value.keys] == keys


def test_a_schema_without_a_variant_column_is_not_promoted_live() -> None:
    typed = _pipeline(variant=None)
    with pytest.raises(NotLive) as info:
        promoted(typed, _pipeline(variant=None, schema={"id": "bigint", "b": "int"}))
    assert info.value.keys == ["schema"]


def _write(path: Path, pipeline: dict[str, Any], tick: int) -> None:
    path.write_text(yaml.safe_dump({"pipelines": [pipeline]}))
    # A stamp of its own even within the file system's time resolution.
    os.utime(path, ns=(tick * 10**9, tick * 10**9))


def test_the_config_file_is_followed_once_per_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "frazil.yaml"
    _write(path, _BASE, 1)
    watch = ConfigWatch(path, load_config(path).pipelines[0], load_config)
    assert watch.poll() is None  # unchanged

    _write(path, {**_BASE, "schema": {"id": "bigint", "country": "string"}}, 2)
    promotion = watch.poll()
    assert promotion is not None and promotion.columns == ("country",)
    watch.accept(promotion)
    assert watch.poll() is None  # once per change

    with caplog.at_level(logging.WARNING, logger="frazil.engine.batch"):
        _write(path, {**_BASE, "schema": {"id": "bigint", "country": "string"}, "trigger": "9s"}, 3)
        assert watch.poll() is None
        path.write_text("pipelines: [")
        os.utime(path, ns=(4 * 10**9, 4 * 10**9))
        assert watch.poll() is None
    messages = [r.getMessage() for r in caplog.records]
    assert "changed trigger, which applies when frazil run starts again" in messages[0]
    assert "changed but does not load" in messages[1] and "not valid YAML" in messages[1]
