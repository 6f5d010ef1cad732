"""Reading the config file: YAML, ``${VAR}`` substitution, path resolution, exact errors."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from frazil.config.known_keys import known_keys
from frazil.config.locations import is_uri
from frazil.config.models import FrazilConfig
from frazil.config.secrets import is_secret_key as is_secret_key
from frazil.config.secrets import redact_mapping, redact_text, remember, secret_values_in
from frazil.config.storage import credential_key_reason, credentials, remember_credentials
from frazil.config.suggest import did_you_mean, quoted_choices
from frazil.config.transforms import TRANSFORMS
from frazil.errors import ConfigError

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


_ROUTE_TAGS = ("static", "dynamic", "topic")
# Pydantic names the member of a union it tried (tables.a.str, tables.a.list[str]).
_UNION_MEMBER = re.compile(r"^(str|int|float|bool|list\[.*\]|dict\[.*\])$")


def _key_path(parts: tuple[str | int, ...]) -> str:
    path = ""
    previous: str | int | None = None
    for part in parts:
        # A transform's tag repeats its one key (transforms[1].cast.cast): say it once.
        if part == previous and isinstance(part, str):
            continue
        # A route's tag names its kind, not a key (route.static.tables): leave it out.
        if previous == "route" and part in _ROUTE_TAGS:
            previous = None
            continue
        if isinstance(part, str) and _UNION_MEMBER.match(part):
            continue
        previous = part
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            # A key that would read as more than one step of the path (".", "a.b" at the top,
            # "[0]", "0[", "", " x") is quoted; a table's dotted name inside a section is not.
            ambiguous = not part or part[0] == "." or "[" in part or (not path and "." in part)
            text = repr(part) if ambiguous or part != part.strip() else part
            path += f".{text}" if path else text
    return path or "(top level)"


def _substitute(node: Any, path: tuple[str | int, ...], problems: list[tuple[str, str]]) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in every string of the parsed tree."""
    if isinstance(node, dict):
        return {key: _substitute(value, (*path, str(key)), problems) for key, value in node.items()}
    if isinstance(node, list):
        return [_substitute(value, (*path, index), problems) for index, value in enumerate(node)]
    if isinstance(node, str):

        def replace(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            value = os.environ.get(name)
            if value is None:
                if default is not None:
                    return default
                problems.append((_key_path(path), f"environment variable {name} is not set"))
                return ""
            return value

        return _ENV_REF.sub(replace, node)
    return node


def _describe(error: dict[str, Any]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        loc = tuple(error["loc"])
        if loc[:1] == ("storage",) and len(loc) == 2 and is_secret_key(str(loc[-1])):
            return credential_key_reason(str(loc[-1]))
        return "unknown key" + did_you_mean(loc[-1], known_keys(FrazilConfig, loc[:-1]) or [])
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    unknown = _unknown_transform(error)
    if unknown is not None:
        # The name first: "flaten" is what the user wrote and looks for in the message.
        return f"unknown transform {unknown!r}{did_you_mean(unknown, TRANSFORMS)}; {message}"
    return message + _hint(error)


def _unknown_transform(error: dict[str, Any]) -> str | None:
    """The one unknown name of a ``transforms:`` entry (``flaten``), if it has exactly one."""
    given = error.get("input")
    if error["type"] != "unknown_transform" or not isinstance(given, dict):
        return None
    names = [name for name in given if isinstance(name, str) and name not in TRANSFORMS]
    return names[0] if len(names) == 1 else None


#: Keys whose value is a duration (``5s``, ``10m``, ``3d``): a bare number gets its unit.
_DURATION_KEYS = frozenset(
    {"trigger", "valid_through_slack", "timeout", "older_than", "every", "interval", "budget",
     "merge_backoff", "retain_last_age", "max_age"}
)  # fmt: skip


def _hint(error: dict[str, Any]) -> str:
    """A "did you mean" for a value written almost as one frazil knows (``jsn``, ``flaten``);
    the form a value of the wrong type takes (a duration's unit, a list's brackets)."""
    kind, given = error["type"], error.get("input")
    loc = tuple(error.get("loc", ()))
    if kind == "literal_error":
        return did_you_mean(given, quoted_choices(str(error.get("ctx", {}).get("expected", ""))))
    if (
        kind == "string_type"
        and isinstance(given, int | float)
        and not isinstance(given, bool)
        and loc
        and loc[-1] in _DURATION_KEYS
    ):
        return f"; a duration takes its unit: {given}s (ms, s, m, h or d)"
    if kind == "list_type" and isinstance(given, str):
        return f"; write [{given}]"
    return ""


_PIPELINE = re.compile(r"^pipelines\[(\d+)\]")


def _pipeline_of(key: str) -> int | None:
    found = _PIPELINE.match(key)
    return int(found.group(1)) if found else None


def _merged(problems: list[tuple[str, str]], more: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """``more`` put among ``problems``: each pipeline's after that pipeline's own."""
    merged = list(problems)
    for key, reason in more:
        index = _pipeline_of(key)
        at = len(merged)
        if index is not None:
            later = (n for n, (k, _) in enumerate(merged) if (_pipeline_of(k) or -1) > index)
            at = next(later, at)
        merged.insert(at, (key, reason))
    return merged


def _resolve_paths(data: dict[str, Any], base: Path) -> None:
    """Make local relative paths absolute against the config file's folder; URIs stay as is."""

    def resolve(value: Any) -> Any:
        if isinstance(value, str) and value and not is_uri(value):
            return str((base / value).resolve())
        return value

    if data.get("catalog") is None:
        # An empty ``catalog:`` section parses as None: it means all defaults.
        data["catalog"] = {}
    catalog = data["catalog"]
    if isinstance(catalog, dict):
        catalog["warehouse"] = resolve(catalog.get("warehouse", "./lake"))
    data["state_dir"] = resolve(data.get("state_dir", "./.frazil"))
    pipelines = data.get("pipelines")
    # Any other type is the model's to report ("pipelines: Input should be a valid list").
    for pipeline in pipelines if isinstance(pipelines, list) else []:
        if not isinstance(pipeline, dict):
            continue
        for key in ("checkpoint", "schema_file", "key_schema_file"):
            if pipeline.get(key):
                pipeline[key] = resolve(pipeline[key])


#: Checks beyond the models' own, run by :func:`parse_config` on the parsed tree and the
#: config (None when the models refused it): ``(key path, reason)`` per problem.
Checks = Callable[[dict[str, Any], FrazilConfig | None], list[tuple[str, str]]]


def parse_config(
    data: Any,
    *,
    base_dir: Path | None = None,
    source: str = "config",
    checks: Checks | None = None,
) -> FrazilConfig:
    """Validate an already-parsed config tree.

    Args:
        data: The parsed YAML (a mapping).
        base_dir: Folder that relative paths are resolved against; the working folder if None.
        source: Name of the file, for messages.
        checks: More checks, whose problems are reported with the models' (the commands pass
            :func:`frazil.transform.check.config_problems`: transforms and the columns keys
            name, against declared schemas), so one run lists every problem.

    Raises:
        ConfigError: With one ``(key path, reason)`` per problem, all of them at once.
    """
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys to values")
    problems: list[tuple[str, str]] = []
    data = _substitute(data, (), problems)
    _resolve_paths(data, base_dir or Path.cwd())
    config: FrazilConfig | None = None
    try:
        config = FrazilConfig.model_validate(data)
    except ValidationError as exc:
        found: dict[str, list[str]] = {}
        # A key whose environment variable is not set was left empty: that is its value's
        # problem (an unknown key is still one of its own).
        unset = {key for key, _ in problems}
        for error in exc.errors():
            key = _key_path(tuple(error["loc"]))
            if key not in unset or error["type"] == "extra_forbidden":
                found.setdefault(key, []).append(_describe(dict(error)))
        # A union's members each report (a string or a list): one line per key.
        problems.extend((key, " or ".join(reasons)) for key, reasons in found.items())
    if checks is not None:
        problems = _merged(problems, checks(data, config))
    if config is not None:
        problems += _environment_problems(config)
    if problems or config is None:
        # Reasons may quote values (a warehouse URI, a JAAS line): never with their secrets.
        secrets = secret_values_in(data)
        problems = [(key, redact_text(reason, secrets)) for key, reason in problems]
        lines = "\n".join(f"  {key}: {reason}" for key, reason in problems)
        count = len(problems)
        raise ConfigError(
            f"{source}: {count} problem{'s' if count != 1 else ''}\n{lines}", problems
        )
    return config


def _environment_problems(config: FrazilConfig) -> list[tuple[str, str]]:
    """What the environment lacks for this config: half a pair of S3 credentials."""
    if config.storage is None and not config.s3_locations():
        return []
    try:
        credentials()
    except ValueError as exc:
        return [("storage", f"the environment's credentials: {exc}")]
    return []


def load_config(path: str | Path, *, checks: Checks | None = None) -> FrazilConfig:
    """Load and validate a config file.

    Args:
        path: The file.
        checks: More checks, reported with the models' problems (see :func:`parse_config`).

    Raises:
        ConfigError: The file is missing, is not YAML, or does not validate.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{file}: not valid YAML{where}: {problem}") from None
    config = parse_config(data, base_dir=file.resolve().parent, source=str(file), checks=checks)
    remember(config)
    # The object store's credentials come from the environment: masked like the file's secrets.
    remember_credentials()
    return config


def redacted(config: FrazilConfig) -> dict[str, Any]:
    """The config as plain data that is safe to print.

    Values of secret keys become ``***``, and credentials inside other values (URI passwords,
    ``password=`` parameters) are masked; see :mod:`frazil.config.secrets`.
    """
    return redact_mapping(config.model_dump(mode="json", by_alias=True))
