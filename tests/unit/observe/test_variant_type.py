"""PyIceberg 0.12 reads the metadata of a table with a ``variant`` column through frazil's
catalog for reads without Spark (``frazil status``, ``frazil tables``, ``optimize --dry-run``)."""

from __future__ import annotations

import json
from pathlib import Path

from frazil.config import parse_config
from frazil.observe.catalog import pyiceberg_catalog


def test_a_table_with_a_variant_column_loads(tmp_path: Path) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField

    config = parse_config(
        {
            "catalog": {"warehouse": str(tmp_path / "warehouse")},
            "state_dir": str(tmp_path / "state"),
            "pipelines": [{"name": "p", "topics": ["t"], "table": "db.docs", "variant": "doc"}],
        },
        base_dir=tmp_path,
    )
    uri = config.catalog.resolved_uri()
    Path(uri[len("jdbc:sqlite:") :]).parent.mkdir(parents=True, exist_ok=True)
    Path(uri[len("jdbc:sqlite:") :]).touch()
    catalog = pyiceberg_catalog(config)
    catalog.create_namespace("db")
    made = catalog.create_table("db.plain", Schema(NestedField(1, "n", LongType())))
    # The metadata a Spark writer leaves for a variant table: format version 3, a variant
    # column and one inside a struct.
    metadata = json.loads(Path(made.metadata_location.removeprefix("file://")).read_text())
    metadata["format-version"] = 3
    metadata["next-row-id"] = 0
    metadata["last-column-id"] = 4
    metadata["schemas"][0]["fields"] += [
        {"id": 2, "name": "doc", "required": False, "type": "variant"},
        {"id": 3, "name": "s", "required": False,
         "type": {"type": "struct", "fields": [
             {"id": 4, "name": "v", "required": False, "type": "variant"}]}},
    ]  # fmt: skip
    path = tmp_path / "v3.metadata.json"
    path.write_text(json.dumps(metadata))
    catalog.register_table("db.docs", f"file://{path}")

    loaded = pyiceberg_catalog(config).load_table("db.docs")

    assert loaded.metadata.format_version == 3
    schema = loaded.schema()
    assert [str(f.field_type) for f in schema.fields] == [
        "long",
        "variant",
        "struct<4: v: optional variant>",
    ]
    # Written back as it was read.
    assert json.loads(schema.model_dump_json())["fields"][1]["type"] == "variant"


def test_other_unknown_types_are_still_refused() -> None:
    import pytest
    from pyiceberg.schema import Schema

    from frazil.observe.variant_type import read_variant_columns

    read_variant_columns()
    with pytest.raises(ValueError, match="Unsupported field type: 'nope'"):
        Schema.model_validate(
            {"type": "struct", "schema-id": 0,
             "fields": [{"id": 1, "name": "a", "required": False, "type": "nope"}]}
        )  # fmt: skip
