"""Routes and per-table settings in the config: parsing, exact errors, merged table settings."""

from __future__ import annotations

from typing import Any

import pytest

from frazil.config import PipelineConfig, parse_config
from frazil.config.routing import (
    DynamicRoute,
    StaticRoute,
    TopicRoute,
    is_regex_key,
    template_parts,
    template_pattern,
)
from frazil.config.sorting import SortField, parse_sort_field
from frazil.errors import ConfigError
from frazil.route.rules import sanitize_text, topic_table

_KINDS = (
    "route needs 'field' and 'tables' (static), 'field' and a 'table' template with {value} "
    "(dynamic), or 'topic' and 'table' (by topic)"
)
_TABLE_XOR_ROUTE = (
    "set exactly one of 'table' (every record to one table) or 'route' (records to tables "
    "by field or topic)"
)


def _pipeline(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "events",
        "topics": ["events"],
        "schema": {"id": "string", "event_type": "string", "amount": "long"},
    }
    base.update(overrides)
    return base


def _parse(**overrides: Any) -> PipelineConfig:
    return parse_config({"pipelines": [_pipeline(**overrides)]}).pipelines[0]


def _problems(**overrides: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config({"pipelines": [_pipeline(**overrides)]})
    return info.value.problems


def _route_problems(route: object) -> list[tuple[str, str]]:
    return _problems(route=route)


# --- static routes -------------------------------------------------------------------------


def test_static_route_from_yaml_like_keys() -> None:
    # YAML reads `1:` as an int and `false:` as a bool; Spark casts the field to "1"/"false".
    pipeline = _parse(
        route={
            "field": "event_type",
            "tables": {
                1: "db.ones",
                False: ["db.falses", "db.all"],
                "debit": "db.debits",
                "/cred.*/": ["db.credits", "db.all"],
            },
            "default": "skip",
        }
    )
    route = pipeline.route
    assert isinstance(route, StaticRoute)
    assert list(route.tables) == ["1", "false", "debit", "/cred.*/"]
    assert route.default == "skip"
    assert route.targets("1") == ["db.ones"]
    assert route.targets("false") == ["db.falses", "db.all"]
    assert route.table_names() == ["db.ones", "db.falses", "db.all", "db.debits", "db.credits"]
    assert pipeline.route is not None
    assert pipeline.table is None
    assert pipeline.static_tables() == route.table_names()
    assert pipeline.describe_target() == (
        "db.ones, db.falses, db.all, db.debits, db.credits by event_type"
    )


def test_static_route_true_key_and_default_table() -> None:
    route = StaticRoute.model_validate(
        {"field": "flags.kind", "tables": {True: "db.yes"}, "default": "db.other"}
    )
    assert route.tables == {"true": "db.yes"}
    assert route.default == "db.other"
    # The default table is one of the route's tables, once.
    assert route.table_names() == ["db.yes", "db.other"]
    same = StaticRoute.model_validate({"field": "kind", "tables": {"a": "db.x"}, "default": "db.x"})
    assert same.table_names() == ["db.x"]


def test_static_route_default_is_fail() -> None:
    route = StaticRoute.model_validate({"field": "kind", "tables": {"a": "db.a"}})
    assert route.default == "fail"
    assert route.table_names() == ["db.a"]


def test_static_route_empty_tables() -> None:
    assert _route_problems({"field": "event_type", "tables": {}}) == [
        ("pipelines[0].route.tables", "must map at least one value to a table")
    ]


def test_static_route_invalid_regex_key() -> None:
    assert _route_problems({"field": "event_type", "tables": {"/a[/": "db.a"}}) == [
        (
            "pipelines[0].route.tables",
            "'/a[/': invalid regular expression: unterminated character set at position 1",
        )
    ]


def test_static_route_list_target() -> None:
    pipeline = _parse(route={"field": "event_type", "tables": {"a": ["db.x", "db.y"]}})
    assert isinstance(pipeline.route, StaticRoute)
    assert pipeline.route.targets("a") == ["db.x", "db.y"]
    assert pipeline.static_tables() == ["db.x", "db.y"]


def test_static_route_empty_list_target() -> None:
    assert _route_problems({"field": "event_type", "tables": {"a": []}}) == [
        ("pipelines[0].route.tables", "'a': lists no table")
    ]


def test_static_route_bad_table_in_list() -> None:
    assert _route_problems({"field": "event_type", "tables": {"a": ["db.x", "nodot"]}}) == [
        ("pipelines[0].route.tables", "'a': 'nodot' must be namespace.table, e.g. db.nodot")
    ]


def test_route_field_must_be_a_path() -> None:
    assert _route_problems({"field": "event type", "tables": {"a": "db.a"}}) == [
        (
            "pipelines[0].route.field",
            "field 'event type' must be a column name, a dotted path (a.b) or a path into a "
            "variant column (payload:user.id)",
        )
    ]


def test_unknown_route_key_is_reported_without_the_kind_tag() -> None:
    assert _route_problems({"field": "event_type", "tables": {"a": "db.a"}, "tabels": 1}) == [
        ("pipelines[0].route.tabels", "unknown key (did you mean 'tables'?)")
    ]


def test_is_regex_key() -> None:
    assert is_regex_key("/a.*/")
    assert is_regex_key("//")
    assert not is_regex_key("/")
    assert not is_regex_key("a.*")
    assert not is_regex_key("/a")
    assert not is_regex_key("a/")


# --- defaults ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "route",
    [
        {"field": "event_type", "tables": {"a": "db.a"}, "default": "dlq"},
        {"field": "event_type", "table": "db.e_{value}", "default": "dlq"},
        {"topic": "events", "table": "db.e", "default": "dlq"},
    ],
)
def test_default_dlq_needs_a_dead_letter_queue(route: dict[str, Any]) -> None:
    assert _route_problems(route) == [
        (
            "pipelines[0]",
            "route default 'dlq' needs a dead-letter queue: set errors.tolerance: all with "
            "errors.dlq_topic or errors.dlq_table",
        )
    ]
    accepted = _parse(route=route, errors={"tolerance": "all", "dlq_table": "db.dead"})
    assert accepted.route is not None and accepted.route.default == "dlq"


@pytest.mark.parametrize("default", ["drop", "FAIL", "db", "db.bad-name"])
def test_default_must_be_fail_skip_or_table(default: str) -> None:
    route = {"field": "event_type", "tables": {"a": "db.a"}, "default": default}
    assert _route_problems(route) == [
        (
            "pipelines[0].route.default",
            f"{default!r} must be fail, skip, dlq or a table name (namespace.table, e.g. db.other)",
        )
    ]


@pytest.mark.parametrize("default", ["fail", "skip", "db.other", "cat.db.other"])
def test_default_accepted(default: str) -> None:
    route = StaticRoute.model_validate(
        {"field": "event_type", "tables": {"a": "db.a"}, "default": default}
    )
    assert route.default == default


# --- dynamic routes ------------------------------------------------------------------------


def test_dynamic_route() -> None:
    pipeline = _parse(route={"field": "event_type", "table": "db.events_{value}"})
    route = pipeline.route
    assert isinstance(route, DynamicRoute)
    assert route.default == "fail"
    assert route.table_names() == []
    assert pipeline.static_tables() == []
    assert pipeline.describe_target() == "db.events_{value} by event_type"


def test_dynamic_route_default_table() -> None:
    pipeline = _parse(
        route={"field": "meta.kind", "table": "db.events_{value}", "default": "db.unrouted"}
    )
    assert isinstance(pipeline.route, DynamicRoute)
    assert pipeline.route.field == "meta.kind"
    assert pipeline.static_tables() == ["db.unrouted"]


def test_dynamic_template_needs_value() -> None:
    assert _route_problems({"field": "event_type", "table": "db.events"}) == [
        (
            "pipelines[0].route.table",
            "'db.events' must contain {value}, which the field's value replaces (for one "
            "table, use the pipeline's 'table' instead of a route)",
        )
    ]


def test_dynamic_template_unknown_placeholder() -> None:
    assert _route_problems({"field": "event_type", "table": "db.e_{value}_{topic}"}) == [
        (
            "pipelines[0].route.table",
            "'db.e_{value}_{topic}': unknown placeholder {topic} (this route knows {value})",
        )
    ]


def test_dynamic_template_must_make_a_table_name() -> None:
    problems = _route_problems({"field": "event_type", "table": "events_{value}"})
    assert problems == [
        (
            "pipelines[0].route.table",
            "'events_{value}' must be namespace.table once its placeholders are filled, "
            "e.g. db.events_{value}",
        )
    ]


def test_dynamic_template_unbalanced_brace_names_the_template() -> None:
    assert _route_problems({"field": "event_type", "table": "db.events_{value}}"}) == [
        ("pipelines[0].route.table", "'db.events_{value}}': unbalanced braces")
    ]


# --- topic routes --------------------------------------------------------------------------


def test_topic_route_with_groups() -> None:
    pipeline = _parse(
        topics=None,
        topic_pattern=r"events\..*",
        route={"topic": r"events\.(\w+)\.(\d{8})", "table": "db.{1}_{2}", "default": "skip"},
    )
    route = pipeline.route
    assert isinstance(route, TopicRoute)
    assert route.dynamic
    assert route.table_names() == []
    assert pipeline.describe_target() == "db.{1}_{2} by topic"


def test_topic_route_fixed_table() -> None:
    pipeline = _parse(route={"topic": "events", "table": "db.events", "default": "db.rest"})
    route = pipeline.route
    assert isinstance(route, TopicRoute)
    assert not route.dynamic
    assert route.table_names() == ["db.events", "db.rest"]
    assert pipeline.static_tables() == ["db.events", "db.rest"]
    assert pipeline.describe_target() == "db.events by topic"


def test_topic_route_topic_placeholder() -> None:
    route = TopicRoute.model_validate({"topic": "events.*", "table": "raw.t_{topic}"})
    assert route.dynamic
    assert route.default == "fail"


def test_topic_template_unknown_group() -> None:
    assert _route_problems({"topic": r"events\.(\w+)", "table": "db.t_{2}"}) == [
        (
            "pipelines[0].route.table",
            "'db.t_{2}': unknown placeholder {2} (this route knows {1}, {topic})",
        )
    ]


def test_topic_template_without_groups() -> None:
    assert _route_problems({"topic": "events", "table": "db.t_{1}"}) == [
        (
            "pipelines[0].route.table",
            "'db.t_{1}': unknown placeholder {1} (this route knows {topic})",
        )
    ]


def test_topic_route_invalid_regex() -> None:
    # The key path keeps `topic` although the route's tag is `topic` too.
    assert _route_problems({"topic": "events\\.(", "table": "db.t"}) == [
        (
            "pipelines[0].route.topic",
            "invalid regular expression 'events\\\\.(': missing ), unterminated subpattern "
            "at position 8",
        )
    ]


# --- which kind, table XOR route ------------------------------------------------------------


@pytest.mark.parametrize("route", [{"field": "event_type"}, {}, "db.x", ["db.x"]])
def test_route_kind_cannot_be_told(route: object) -> None:
    assert _route_problems(route) == [("pipelines[0].route", _KINDS)]


def test_route_kind_from_keys() -> None:
    assert isinstance(_parse(route={"topic": "t", "table": "db.t"}).route, TopicRoute)
    assert isinstance(_parse(route={"field": "f", "tables": {"a": "db.a"}}).route, StaticRoute)
    assert isinstance(_parse(route={"field": "f", "table": "db.t_{value}"}).route, DynamicRoute)


def test_table_and_route_are_exclusive() -> None:
    both = _problems(table="db.events", route={"field": "event_type", "table": "db.e_{value}"})
    assert both == [("pipelines[0]", _TABLE_XOR_ROUTE)]
    assert _problems() == [("pipelines[0]", _TABLE_XOR_ROUTE)]


def test_single_table_pipeline() -> None:
    pipeline = _parse(table="db.events")
    assert pipeline.route is None
    assert pipeline.static_tables() == ["db.events"]
    assert pipeline.describe_target() == "db.events"


# --- template helpers ------------------------------------------------------------------------


def test_template_parts() -> None:
    assert template_parts("db.events_{value}") == [("db.events_", "value"), ("", None)]
    assert template_parts("{1}.t_{2}_x") == [("", "1"), (".t_", "2"), ("_x", None)]
    assert template_parts("db.plain") == [("db.plain", None)]


def test_template_pattern() -> None:
    pattern = template_pattern("db.events_{value}")
    assert pattern.fullmatch("db.events_order_created")
    assert pattern.fullmatch("db.events_1")
    assert not pattern.fullmatch("db.other")
    assert not pattern.fullmatch("db.events_")
    assert not pattern.fullmatch("db.events_Order")
    assert not pattern.fullmatch("dbXevents_a")  # the literal '.' is escaped
    two = template_pattern("{1}.t_{2}")
    assert two.fullmatch("eu.t_2024")
    assert not two.fullmatch("eu.t_")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("order_created", "order_created"),
        ("Order-Created", "order_created"),
        ("a -- b", "a_b"),
        ("Payment.Refund v2", "payment_refund_v2"),
        ("été", "_t_"),
        ("42", "42"),
    ],
)
def test_sanitize_text(value: str, expected: str) -> None:
    assert sanitize_text(value) == expected


def test_sanitized_values_fit_the_template() -> None:
    pattern = template_pattern("db.events_{value}")
    assert pattern.fullmatch("db.events_" + sanitize_text("Order Created!"))


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("dbserver1.inventory.Orders", "inv.orders_dbserver1_inventory_orders"),
        ("dbserver1.inventory.order-lines", "inv.order_lines_dbserver1_inventory_order_lines"),
        ("elsewhere.orders", None),
    ],
)
def test_topic_table_names_the_table_as_the_run_does(topic: str, expected: str | None) -> None:
    route = TopicRoute(topic=r"dbserver1\.inventory\.([\w-]+)", table="inv.{1}_{topic}")
    assert topic_table(route, topic) == expected


def test_topic_table_names_none_for_an_empty_placeholder() -> None:
    route = TopicRoute(topic=r"db\.([a-z]+)(?:\.(v\d))?", table="x.{1}_{2}")
    assert topic_table(route, "db.orders.v2") == "x.orders_v2"
    assert topic_table(route, "db.orders") is None  # 'x.orders_': the run marks its records


# --- per-table settings ----------------------------------------------------------------------


def _routed_with_overrides() -> PipelineConfig:
    return _parse(
        route={"field": "event_type", "tables": {"a": "db.a", "b": "db.b"}},
        partition_by=["days(created_at)"],
        schema={"id": "string", "event_type": "string", "created_at": "timestamp"},
        sort_by=["created_at desc"],
        identifier_fields=["id"],
        table_properties={"write.format.default": "parquet", "commit.retry.num-retries": "5"},
        schema_evolution="freeze",
        aliases={"amount": "amount_usd"},
        tables={
            "db.b": {
                "partition_by": ["bucket(8, id)"],
                "sort_by": [],
                "identifier_fields": ["id", "event_type"],
                "table_properties": {"commit.retry.num-retries": "10", "x": "y"},
                "aliases": {"note": "comment"},
            }
        },
    )


def test_settings_without_override_are_the_pipelines() -> None:
    settings = _routed_with_overrides().settings_for("db.a")
    assert settings.name == "db.a"
    assert settings.partition_by == ["days(created_at)"]
    assert settings.sort_by == ["created_at desc"]
    assert settings.identifier_fields == ["id"]
    assert settings.table_properties == {
        "write.format.default": "parquet",
        "commit.retry.num-retries": "5",
    }
    assert settings.schema_evolution == "freeze"
    assert settings.aliases == {"amount": "amount_usd"}


def test_settings_with_override_merge_properties_and_replace_lists() -> None:
    settings = _routed_with_overrides().settings_for("db.b")
    assert settings.name == "db.b"
    assert settings.partition_by == ["bucket(8, id)"]
    assert settings.sort_by == []  # an empty list is an override, not "unset"
    assert settings.identifier_fields == ["id", "event_type"]
    assert settings.table_properties == {
        "write.format.default": "parquet",
        "commit.retry.num-retries": "10",
        "x": "y",
    }
    assert settings.schema_evolution == "freeze"  # inherited
    assert settings.aliases == {"note": "comment"}  # replaced, not merged
    assert [f.to_spark_sql() for f in settings.partition_fields()] == ["bucket(8, id)"]


def test_settings_override_evolution_policy() -> None:
    pipeline = _parse(
        table="db.events",
        tables={"db.events": {"schema_evolution": "freeze"}},
    )
    assert pipeline.defaults.schema_evolution == "evolve"
    assert pipeline.settings_for("db.events").schema_evolution == "freeze"
    assert pipeline.settings_for("db.other").schema_evolution == "evolve"


def test_settings_lists_are_copies() -> None:
    pipeline = _routed_with_overrides()
    settings = pipeline.settings_for("db.a")
    settings.sort_by.append("id")
    settings.table_properties["k"] = "v"
    assert pipeline.defaults.sort_by == ["created_at desc"]
    assert "k" not in pipeline.defaults.table_properties


def test_defaults_of_table_settings() -> None:
    settings = _parse(table="db.events").settings_for("db.events")
    assert settings.partition_by == []
    assert settings.sort_by == []
    assert settings.identifier_fields == []
    assert settings.table_properties == {}
    assert settings.schema_evolution == "evolve"
    assert settings.aliases == {}


def test_tables_keys_must_be_table_names() -> None:
    assert _problems(table="db.events", tables={"events": {}}) == [
        ("pipelines[0].tables", "'events' must be namespace.table, e.g. db.events")
    ]


def test_table_settings_errors_have_their_key_paths() -> None:
    problems = _problems(
        table="db.events",
        tables={
            "db.events": {
                "sort_by": ["id up"],
                "identifier_fields": ["payload.id"],
                "schema_evolution": "sometimes",
                "partiton_by": [],
            }
        },
    )
    assert problems == [
        (
            "pipelines[0].tables.db.events.sort_by[0]",
            "'id up' must be 'column [asc|desc] [nulls first|last]', e.g. 'created_at desc'",
        ),
        (
            "pipelines[0].tables.db.events.identifier_fields[0]",
            "'payload.id' must be a top-level column name",
        ),
        ("pipelines[0].tables.db.events.schema_evolution", "Input should be 'evolve' or 'freeze'"),
        ("pipelines[0].tables.db.events.partiton_by", "unknown key (did you mean 'partition_by'?)"),
    ]


def test_schema_evolution_policy_values() -> None:
    assert _problems(table="db.events", schema_evolution="yes") == [
        ("pipelines[0].schema_evolution", "Input should be 'evolve' or 'freeze'")
    ]


def test_identifier_fields_must_be_top_level() -> None:
    assert _problems(table="db.events", identifier_fields=["id", "payload.id", "a b"]) == [
        ("pipelines[0].identifier_fields[1]", "'payload.id' must be a top-level column name"),
        ("pipelines[0].identifier_fields[2]", "'a b' must be a top-level column name"),
    ]


# --- sort_by ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("created_at", SortField("created_at", descending=False, nulls_first=True)),
        ("created_at asc", SortField("created_at", descending=False, nulls_first=True)),
        ("created_at desc", SortField("created_at", descending=True, nulls_first=False)),
        ("id asc nulls last", SortField("id", descending=False, nulls_first=False)),
        ("id desc nulls first", SortField("id", descending=True, nulls_first=True)),
        ("id nulls last", SortField("id", descending=False, nulls_first=False)),
        ("payload.ts DESC NULLS FIRST", SortField("payload.ts", descending=True, nulls_first=True)),
        ("  id   desc  ", SortField("id", descending=True, nulls_first=False)),
    ],
)
def test_parse_sort_field(text: str, expected: SortField) -> None:
    assert parse_sort_field(text) == expected


@pytest.mark.parametrize(
    "text", ["", "id sideways", "id desc asc", "id nulls", "id nulls middle", "1id", "a..b"]
)
def test_parse_sort_field_errors(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_sort_field(text)
    assert str(info.value) == (
        f"{text!r} must be 'column [asc|desc] [nulls first|last]', e.g. 'created_at desc'"
    )


def test_sort_by_in_config() -> None:
    pipeline = _parse(table="db.events", sort_by=["amount desc", "id"])
    assert pipeline.settings_for("db.events").sort_fields() == [
        SortField("amount", descending=True, nulls_first=False),
        SortField("id", descending=False, nulls_first=True),
    ]
    assert _problems(table="db.events", sort_by=["id", "amount downwards"]) == [
        (
            "pipelines[0].sort_by[1]",
            "'amount downwards' must be 'column [asc|desc] [nulls first|last]', "
            "e.g. 'created_at desc'",
        )
    ]


def test_wrong_target_type_has_one_key_path() -> None:
    problems = _route_problems({"field": "event_type", "tables": {"a": 5}})
    assert {key for key, _ in problems} == {"pipelines[0].route.tables.a"}


@pytest.mark.parametrize(
    ("route", "dead"),
    [
        ({"field": "kind", "table": "db.e_{value}"}, "db.e_dead"),
        ({"field": "kind", "table": "{value}.events"}, "dlq.events"),
        ({"topic": "(.*)", "table": "db.{1}"}, "db.dead"),
    ],
)
def test_a_dead_letter_table_the_route_can_name_is_refused_by_the_config(
    route: dict[str, Any], dead: str
) -> None:
    # Found by the config (so by `frazil validate`, without a broker), not at run time.
    (problem,) = _problems(route=route, errors={"tolerance": "all", "dlq_table": dead})
    assert problem == (
        "pipelines[0]",
        f"errors.dlq_table {dead!r} is a name route.table {route['table']!r} can produce for "
        "the records' tables; give the dead-letter queue a table the route cannot name",
    )
    assert _parse(route=route, errors={"tolerance": "all", "dlq_table": "other.dead_letters"})


def test_a_dead_letter_table_another_pipeline_writes_to_is_refused() -> None:
    first = _pipeline(
        name="a", table="db.a", errors={"tolerance": "all", "dlq_table": "db.events_b"}
    )
    second = _pipeline(name="b", route={"field": "kind", "table": "db.events_{value}"})
    with pytest.raises(ConfigError) as info:
        parse_config({"kafka": {"group_id": "g-{pipeline}"}, "pipelines": [first, second]})
    assert info.value.problems == [
        (
            "(top level)",
            "pipeline 'a': errors.dlq_table 'db.events_b' is a table pipeline 'b' writes its "
            "records to; give the dead-letter queue a table of its own",
        )
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "sensors.readings-v2",
            "'sensors.readings-v2': '-' not allowed in a table name (letters, digits and _), "
            "e.g. sensors.readings_v2",
        ),
        (
            "fleet.dlq$",
            "'fleet.dlq$': '$' not allowed in a table name (letters, digits and _), e.g. fleet.dlq",
        ),
        ("db..x", "'db..x' has an empty part: namespace.table, e.g. db.payments"),
        ("db.1x", "'db.1x': '1x' starts with a digit (a name starts with a letter or _)"),
        (
            "db.2024-payments",
            "'db.2024-payments': '-' not allowed in a table name (letters, digits and _), "
            "e.g. db._2024_payments",
        ),
    ],
)
def test_a_bad_table_name_says_what_is_wrong_with_it(name: str, message: str) -> None:
    assert _problems(table=name) == [("pipelines[0].table", message)]


def test_a_route_template_names_the_characters_it_cannot_take() -> None:
    problems = _route_problems({"field": "kind", "table": "fleet.ev-{value}"})
    assert problems == [
        (
            "pipelines[0].route.table",
            "'fleet.ev-{value}' must be namespace.table once its placeholders are filled: "
            "'-' not allowed (letters, digits and _), e.g. db.events_{value}",
        )
    ]
