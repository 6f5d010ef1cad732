"""The ``route:`` of a pipeline: which table(s) each record goes to.

Three kinds, told apart by their keys::

    route: {field: type, tables: {debit: db.debits, credit: [db.credits, db.all_credit]},
            default: skip}                                       # static
    route: {field: event_type, table: "db.events_{value}"}       # dynamic
    route: {topic: 'events\\.(\\d{8})', table: db.events}         # by topic

``field`` is a column, a dotted path into structs (``customer.country``), or a path into a
variant column (``payload:customer.country``, read as text; see
:mod:`frazil.config.variant_paths`). ``default`` says what happens to a record that matches
no table (a null value, and a variant path a record does not have, match none): ``fail``
(the default: the record is marked, so nothing is lost), ``skip`` (counted and not written),
``dlq`` or a table name.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Tag, field_validator

from frazil.config.base import check_regex
from frazil.config.variant_paths import is_variant_path, parse_variant_path

#: ``namespace.table`` (one or more namespace levels).
TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")

#: What happens to a record that matches no table.
DEFAULT_ACTIONS = ("fail", "skip", "dlq")


_NAME_PART = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def table_name_problem(value: str) -> str | None:
    """What keeps ``value`` from being a table name (``namespace.table``: parts of letters,
    digits and ``_``, not starting with a digit), or None if nothing does."""
    if TABLE_NAME.match(value):
        return None
    parts = value.split(".")
    if len(parts) < 2:
        return f"{value!r} must be namespace.table, e.g. db.{_name_hint(value)}"
    for part in parts:
        if not part:
            return f"{value!r} has an empty part: namespace.table, e.g. db.payments"
        if _NAME_PART.match(part):
            continue
        quoted = _disallowed(part, "_")
        if quoted:
            return (
                f"{value!r}: {quoted} not allowed in a table name (letters, digits and _), "
                f"e.g. {'.'.join(_name_hint(p) for p in parts)}"
            )
        return f"{value!r}: {part!r} starts with a digit (a name starts with a letter or _)"
    return f"{value!r} must be namespace.table, e.g. db.payments"


def _disallowed(text: str, allowed: str) -> str:
    """The characters of ``text`` other than ASCII letters, digits and ``allowed``, quoted,
    each once ("" if none)."""
    bad = sorted({c for c in text if not (c.isascii() and (c.isalnum() or c in allowed))})
    return ", ".join(repr(c) for c in bad)


def _name_hint(part: str) -> str:
    """``part`` with each run of other characters than letters, digits and _ as one _, and
    a _ before a leading digit."""
    hint = re.sub(r"[^A-Za-z0-9_]+", "_", part).strip("_") or "t"
    return f"_{hint}" if hint[0].isdigit() else hint


def check_table_name(value: str) -> str:
    """``value`` if it is ``namespace.table``; ValueError otherwise."""
    problem = table_name_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def _check_default(value: str) -> str:
    if value in DEFAULT_ACTIONS:
        return value
    if not TABLE_NAME.match(value):
        raise ValueError(
            f"{value!r} must be fail, skip, dlq or a table name (namespace.table, e.g. db.other)"
        )
    return value


def _check_path(value: str) -> str:
    if is_variant_path(value):
        parse_variant_path(value)
        return value
    if not _PATH.match(value):
        raise ValueError(
            f"field {value!r} must be a column name, a dotted path (a.b) or a path into a "
            "variant column (payload:user.id)"
        )
    return value


def is_regex_key(key: str) -> bool:
    """Whether a static route's key is a regular expression (written ``/.../``)."""
    return len(key) >= 2 and key.startswith("/") and key.endswith("/")


def template_pattern(template: str) -> re.Pattern[str]:
    """The names a table template can produce (placeholders: identifier characters)."""
    regex = "".join(
        re.escape(literal) + ("" if name is None else "[a-z0-9_]+")
        for literal, name in template_parts(template)
    )
    return re.compile(regex)


def template_parts(template: str) -> list[tuple[str, str | None]]:
    """A table template split into ``(literal, placeholder)`` pairs, in order.

    ``db.events_{value}`` → ``[("db.events_", "value"), ("", None)]``.
    """
    parts: list[tuple[str, str | None]] = []
    last = 0
    for match in _PLACEHOLDER.finditer(template):
        parts.append((template[last : match.start()], match.group(1)))
        last = match.end()
    parts.append((template[last:], None))
    return parts


def _check_template(template: str, allowed: set[str], what: str) -> str:
    names = [name for _, name in template_parts(template) if name is not None]
    for name in names:
        if name not in allowed:
            raise ValueError(
                f"{template!r}: unknown placeholder {{{name}}} (this route knows "
                f"{', '.join('{' + a + '}' for a in sorted(allowed))})"
            )
    rest = _PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise ValueError(f"{template!r}: unbalanced braces")
    # Placeholders become identifier characters: check the name with a stand-in.
    if not TABLE_NAME.match(_PLACEHOLDER.sub("x", template)):
        quoted = _disallowed(rest, "_.")
        why = f": {quoted} not allowed (letters, digits and _)" if quoted else ""
        raise ValueError(
            f"{template!r} must be namespace.table once its placeholders are filled{why}, "
            "e.g. db.events_{" + what + "}"
        )
    return template


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _stringify_keys(value: Any) -> Any:
    # YAML reads `1:` and `true:` as a number and a boolean; the route compares the field's
    # value as Spark casts it to a string ("1", "true").
    if isinstance(value, dict):
        return {(str(k).lower() if isinstance(k, bool) else str(k)): v for k, v in value.items()}
    return value


class StaticRoute(_Frozen):
    """Records go to the table(s) listed for the value of ``field``.

    Keys are values as text; a key written ``/regex/`` matches values the whole regular
    expression matches. Exact values are tried first, then regexes in the order written; the
    first match wins. A value may name several tables: the record goes to each.
    """

    field: str
    tables: dict[str, str | list[str]]
    default: str = "fail"

    @field_validator("field")
    @classmethod
    def _field(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("tables", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> Any:
        return _stringify_keys(value)

    @field_validator("tables")
    @classmethod
    def _tables(cls, value: dict[str, str | list[str]]) -> dict[str, str | list[str]]:
        if not value:
            raise ValueError("must map at least one value to a table")
        for key, target in value.items():
            names = [target] if isinstance(target, str) else target
            if not names:
                raise ValueError(f"{key!r}: lists no table")
            for name in names:
                try:
                    check_table_name(name)
                except ValueError as exc:
                    raise ValueError(f"{key!r}: {exc}") from None
            if is_regex_key(key):
                try:
                    re.compile(key[1:-1])
                except re.error as exc:
                    raise ValueError(f"{key!r}: invalid regular expression: {exc}") from None
        return value

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _check_default(value)

    def targets(self, key: str) -> list[str]:
        """The tables listed for one key."""
        target = self.tables[key]
        # A table listed twice would get each record twice.
        return [target] if isinstance(target, str) else list(dict.fromkeys(target))

    def table_names(self) -> list[str]:
        """Every table the route can produce, in config order."""
        names = [n for key in self.tables for n in self.targets(key)]
        if self.default not in DEFAULT_ACTIONS:
            names.append(self.default)
        return list(dict.fromkeys(names))


class DynamicRoute(_Frozen):
    """The value of ``field`` names the table: ``table`` is a template with ``{value}``.

    The value is made an identifier (lower case; runs of other characters than letters,
    digits and ``_`` become one ``_``). A null or empty value goes to ``default``.
    """

    field: str
    table: str
    default: str = "fail"

    @field_validator("field")
    @classmethod
    def _field(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        if "{value}" not in value:
            raise ValueError(
                f"{value!r} must contain {{value}}, which the field's value replaces "
                "(for one table, use the pipeline's 'table' instead of a route)"
            )
        return _check_template(value, {"value"}, "value")

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _check_default(value)

    def table_names(self) -> list[str]:
        """The fixed tables the route can produce (its default, if a table)."""
        return [self.default] if self.default not in DEFAULT_ACTIONS else []


class TopicRoute(_Frozen):
    """The topic's name picks the table: records of topics the regular expression matches
    (as a whole) go to ``table``, which may use ``{topic}`` and the groups ``{1}``, ``{2}``…

    Records of other topics go to ``default``.
    """

    topic: str
    table: str
    default: str = "fail"

    @field_validator("topic")
    @classmethod
    def _topic(cls, value: str) -> str:
        return check_regex(value)

    @field_validator("table")
    @classmethod
    def _table(cls, value: str, info: Any) -> str:
        pattern = info.data.get("topic")
        groups = re.compile(pattern).groups if isinstance(pattern, str) else 9
        allowed = {"topic", *(str(i) for i in range(1, groups + 1))}
        return _check_template(value, allowed, "topic")

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _check_default(value)

    @property
    def dynamic(self) -> bool:
        """Whether the table name depends on the topic."""
        return "{" in self.table

    def table_names(self) -> list[str]:
        """The fixed tables the route can produce."""
        names = [] if self.dynamic else [self.table]
        if self.default not in DEFAULT_ACTIONS:
            names.append(self.default)
        return list(dict.fromkeys(names))


def _route_kind(value: Any) -> str | None:
    if isinstance(value, StaticRoute):
        return "static"
    if isinstance(value, DynamicRoute):
        return "dynamic"
    if isinstance(value, TopicRoute):
        return "topic"
    if not isinstance(value, dict):
        return None
    if "topic" in value:
        return "topic"
    if "tables" in value:
        return "static"
    if "table" in value:
        return "dynamic"
    return None


#: One of the three routes, told apart by their keys (``topic``; ``tables``; ``table``).
RouteConfig = Annotated[
    Annotated[StaticRoute, Tag("static")]
    | Annotated[DynamicRoute, Tag("dynamic")]
    | Annotated[TopicRoute, Tag("topic")],
    Discriminator(
        _route_kind,
        custom_error_type="route_kind",
        custom_error_message="route needs 'field' and 'tables' (static), 'field' and a "
        "'table' template with {value} (dynamic), or 'topic' and 'table' (by topic)",
    ),
]

#: A table's schema evolution policy.
EvolutionPolicy = Literal["evolve", "freeze"]
