"""Choosing a table of the config by name (no Spark)."""

from __future__ import annotations

import pytest

from frazil.config import parse_config
from frazil.errors import MaintenanceError
from frazil.maintenance.passes import TableRef, not_created, pick


def test_a_table_the_config_names_but_nobody_created_yet_is_told_apart() -> None:
    config = parse_config(
        {
            "pipelines": [
                {
                    "name": "orders",
                    "topics": ["o"],
                    "table": "db.orders",
                    "errors": {"tolerance": "all", "dlq_table": "db.orders_dlq"},
                },
                {
                    "name": "events",
                    "topics": ["e"],
                    "route": {"field": "kind", "tables": {"a": "db.ev_a", "b": "db.ev_b"}},
                },
            ]
        }
    )
    [orders] = config.pipelines[:1]
    found = {"db.orders": TableRef("db.orders", orders)}
    assert pick(found, "db.orders", config) == [found["db.orders"]]
    for table, pipeline in (("db.ev_b", "events"), ("db.orders_dlq", "orders")):
        with pytest.raises(MaintenanceError) as raised:
            pick(found, table, config)
        assert str(raised.value) == (
            f"table {table!r} does not exist yet: pipeline {pipeline!r} creates it with its "
            "first records for it"
        )
    with pytest.raises(MaintenanceError, match=r"'db.nope' is not a table the config's pipelines "
                       r"write \(tables: db.orders\)"):  # fmt: skip
        pick(found, "db.nope", config)


def test_the_tables_the_config_names_that_do_not_exist_each_with_its_pipeline() -> None:
    config = parse_config(
        {
            "pipelines": [
                {
                    "name": "orders",
                    "topics": ["o"],
                    "table": "db.orders",
                    "errors": {"tolerance": "all", "dlq_table": "db.dead"},
                },
                {
                    "name": "events",
                    "topics": ["e"],
                    "route": {"field": "kind", "tables": {"a": "db.ev_a", "b": "db.orders"},
                              "default": "db.ev_other"},
                    "errors": {"tolerance": "all", "dlq_table": "db.dead"},
                },
                {"name": "dyn", "topics": ["d"], "route": {"field": "k", "table": "db.d_{value}"}},
            ]
        }
    )  # fmt: skip
    assert not_created(config, {"db.ev_a"}) == [
        ("db.dead", "orders"),  # the first pipeline that names it
        ("db.ev_other", "events"),
        ("db.orders", "orders"),
    ]
    assert not_created(config, {"db.dead", "db.ev_other", "db.orders", "db.ev_a"}) == []
