"""Generated bad configs (hypothesis): the loader never crashes, and every problem it lists
names a key of the config as written (or the key it misses), with a reason.

Each example starts from a valid config with many features and mutates it at random places:
a value replaced by a random one (another type, an odd string, a deep structure), a key
removed, an unknown key added, a list emptied or grown. ``validate`` runs the same loader
with the same checks.
"""

from __future__ import annotations

import ast
import copy
import os
import re
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from frazil.config.loader import parse_config
from frazil.config.models import FrazilConfig
from frazil.errors import ConfigError
from frazil.transform.check import config_problems

#: A valid config touching most of the model: several pipelines, formats, routing, writes,
#: transforms, errors, maintenance, a catalog and Kafka properties.
BASE = """\
catalog: {warehouse: ./lake}
kafka:
  bootstrap_servers: 127.0.0.1:9092
  properties: {security.protocol: PLAINTEXT}
pipelines:
  - name: payments
    topics: [payments]
    starting_offsets: earliest
    format: json
    schema: {id: string, type: string, created_at: timestamp, payer: string, amount: long}
    table: db.payments
    partition_by: ["days(created_at)"]
    trigger: 1s
    max_offsets_per_trigger: 1000
    errors: {tolerance: all, dlq_table: db.dead}
    transforms:
      - rename: {payer: buyer}
      - filter: "amount > 0"
  - name: orders
    topics: [orders]
    format: json
    schema: {id: long, amount: double, customer: string}
    table: db.orders
    write: {mode: upsert, key: [id]}
  - name: routed
    topic_pattern: 'events\\..*'
    format: json
    schema: {id: long, kind: string}
    route: {field: kind, tables: {a: db.a, b: db.b}}
"""


def _base() -> dict[str, Any]:
    loaded = yaml.safe_load(BASE)
    assert isinstance(loaded, dict)
    return loaded


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in the tree (mappings' keys and lists' indexes)."""
    found = [at]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*at, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*at, i))
    return found


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.sampled_from(["", " ", "${NOT_SET}", "${X:-1}", "1s", "-1", "db.", ".", "a.b.c.d", "é"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """The base config with one to four random changes."""
    data = _base()
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        paths = [p for p in _paths(data) if p]
        if not paths:  # every key removed: nothing left to change
            break
        path = draw(st.sampled_from(paths))
        parent: Any = data
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        action = draw(st.sampled_from(["replace", "remove", "add", "replace"]))
        if action == "replace":
            parent[last] = draw(_VALUES)
        elif action == "remove":
            del parent[last]
        elif isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=12))] = draw(_VALUES)
        else:
            parent.append(draw(_VALUES))
    return data


def _names(data: Any) -> set[str]:
    """Every mapping key anywhere in the tree, as text."""
    found: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            found.add(str(key))
            found |= _names(value)
    elif isinstance(data, list):
        for value in data:
            found |= _names(value)
    return found


#: Keys a problem may name although the config lacks them: the model's own fields.
_MODEL_KEYS = set(FrazilConfig.model_fields)


def _root(key: str) -> str:
    quoted = re.match(r"'((?:[^'\\]|\\.)*)'", key)
    if quoted:  # a key that would read as part of the path is quoted
        return str(ast.literal_eval(quoted.group(0)))
    return re.split(r"[.\[]", key, maxsplit=1)[0]


@settings(
    max_examples=int(os.environ.get("FRAZIL_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated())
# Found by this test: the loader resolved paths in `pipelines: true` as if it were a list.
@example({**_base(), "pipelines": True})
# Found by this test: keys that read as more than one step of the path ("." and "0.").
@example({**_base(), ".": None})
@example({**_base(), "0.": None})
# Found by this test: a key with "[" past its start read as a key and an index ("0[").
@example({**_base(), "0[": None})
def test_the_loader_never_crashes_and_names_the_key(data: dict[str, Any]) -> None:
    written = copy.deepcopy(data)
    try:
        parse_config(data, base_dir=Path("/tmp"), source="frazil.yaml", checks=config_problems)
    except ConfigError as exc:
        text = str(exc)
        assert text.startswith("frazil.yaml"), text
        problems = exc.problems
        for key, reason in problems:
            assert reason.strip(), (key, text)
            root = _root(key)
            # The key is the config's own (as written, or one the model lacks) or a
            # pipeline's, never an internal name or an empty one.
            assert root in _names(written) | _MODEL_KEYS, (key, text)
        if not problems:
            assert "top level" in text or "problem" in text, text
