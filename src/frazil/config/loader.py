"""Reading the config file: YAML, ``${VAR}`` substitution, path resolution, exact errors."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from frazil.config.locations import is_uri
from frazil.config.models import FrazilConfig
from frazil.config.secrets import is_secret_key as is_secret_key
from frazil.config.secrets import redact_mapping, redact_text, remember, secret_values_in
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
            path += f".{part}" if path else str(part)
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
        return "unknown key"
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix) :]
    return message


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
    for pipeline in data.get("pipelines") or []:
        if not isinstance(pipeline, dict):
            continue
        for key in ("checkpoint", "schema_file", "key_schema_file"):
            if pipeline.get(key):
                pipeline[key] = resolve(pipeline[key])


def parse_config(
    data: Any, *, base_dir: Path | None = None, source: str = "config"
) -> FrazilConfig:
    """Validate an already-parsed config tree.

    Args:
        data: The parsed YAML (a mapping).
        base_dir: Folder that relative paths are resolved against; the working folder if None.
        source: Name of the file, for messages.

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
        for error in exc.errors():
            found.setdefault(_key_path(tuple(error["loc"])), []).append(_describe(dict(error)))
        # A union's members each report (a string or a list): one line per key.
        problems.extend((key, " or ".join(reasons)) for key, reasons in found.items())
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


def load_config(path: str | Path) -> FrazilConfig:
    """Load and validate a config file.

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
    config = parse_config(data, base_dir=file.resolve().parent, source=str(file))
    remember(config)
    return config


def redacted(config: FrazilConfig) -> dict[str, Any]:
    """The config as plain data that is safe to print.

    Values of secret keys become ``***``, and credentials inside other values (URI passwords,
    ``password=`` parameters) are masked; see :mod:`frazil.config.secrets`.
    """
    return redact_mapping(config.model_dump(mode="json", by_alias=True))
