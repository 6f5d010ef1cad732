"""frazil's JVM JSON decoder against Spark's ``from_json``, value by value, on the session's Spark.

The same values (every type, good and bad, and a malformed corpus) go through both decoders
(``json_decoder: frazil`` and ``json_decoder: spark``): a value both read gives the same row;
a value Spark marks is marked by frazil too, with the same reason where Spark's names the
problem; the few values frazil marks and Spark reads are listed, with why.
"""

from __future__ import annotations

import base64
import json
import math
import random
from typing import Any

import pytest

from frazil.decode.json import NEW_FIELDS, JsonDecoder, frazil_reads
from frazil.decode.json_infer import schema_from_fields

pytestmark = pytest.mark.integration

SCHEMA = {
    "s": "string",
    "l": "long",
    "i": "int",
    "sh": "smallint",
    "by": "tinyint",
    "d": "double",
    "f": "float",
    "b": "boolean",
    "dec": "decimal(10,2)",
    "ts": "timestamp",
    "ntz": "timestamp_ntz",
    "dt": "date",
    "bin": "binary",
    "st": "struct<a:string,n:bigint>",
    "arr": "array<bigint>",
    "arrs": "array<struct<x:int>>",
    "m": "map<string,double>",
}

_WIRE = b"\x00\x00\x00\x00\x07"

#: Values both decoders read, into the same row.
GOOD: list[bytes] = [
    b'{"s": "x", "l": 1, "i": -2, "sh": 3, "by": 4, "d": 1.5, "f": 2.25, "b": true,'
    b' "dec": 12.34, "ts": "2026-01-01T00:00:00Z", "ntz": "2026-01-01T01:02:03",'
    b' "dt": "2026-02-28", "bin": "' + base64.b64encode(b"hello") + b'",'
    b' "st": {"a": "y", "n": 5}, "arr": [1, null, 3], "arrs": [{"x": 1}, {"x": null}],'
    b' "m": {"k": 1.5, "z": null}}',
    b"{}",
    b'{"s": null, "l": null, "st": null, "arr": null, "m": null}',
    b'  {"s": "spaces around"}  \n',
    _WIRE + b'{"s": "wire format", "l": 7}',
    b'{"unknown": {"deep": [1, {"x": 2}]}, "s": "ignored field"}',
    b'{"l": 1, "l": 2}',
    b"{'s': 'single quotes'}",
    b'{"s": "\\u00e9\\n\\"q\\"", "l": -9223372036854775808}',
    b'{"s": 12}',
    b'{"s": true}',
    b'{"s": {"a": [1, 2]}}',
    b'{"s": [1, "two"]}',
    b'{"d": "NaN", "f": "Infinity"}',
    b'{"d": "-INF", "f": "+INF"}',
    b'{"d": NaN, "f": -Infinity}',
    b'{"d": 3, "f": 1e3}',
    b'{"dec": 1.005}',
    b'{"dec": "1,234.5"}',
    b'{"dec": -0.001}',
    b'{"ts": "2026-01-01 10:20:30.123456+02:00"}',
    b'{"ts": "2026-01-01T10:20"}',
    b'{"ts": "2026-07-01T10:20:30"}',
    b'{"ts": "2026-01-01T00:00:00.1234567Z"}',
    b'{"ts": "2026-01-01T00:00:00+0530"}',
    b'{"ts": "2026-01-01T00:00:00-08:00"}',
    b'{"ts": "2026-01-01"}',
    b'{"ts": "2026-01-01T00:00:00 UTC"}',
    b'{"ts": "1969-12-31T23:59:59.5Z"}',
    b'{"ts": 1767225600}',
    b'{"ts": -1}',
    b'{"dt": "2026-1-2"}',
    b'{"dt": "2026-01-01T10:00:00"}',
    b'{"dt": "2024-02-29"}',
    b'{"ntz": "2026-01-01 01:02:03.5"}',
    b'{"arr": []}',
    b'{"m": {}}',
    b'{"st": {"a": "x", "extra": 1}}',
]

#: Values both decoders mark: (value, the reason both give, or None where Spark's reasons are
#: worked out differently and only frazil's is asserted to be there).
NOT_OBJECT = "not a JSON object (malformed JSON, an array, a string, a number or null)"
BAD: list[tuple[bytes, str | None]] = [
    (b"", "empty value"),
    (b"   ", "empty value"),
    (_WIRE, "empty value"),
    (b"null", NOT_OBJECT),
    (b"[1, 2]", NOT_OBJECT),
    (b'[{"s": "x"}]', NOT_OBJECT),
    (b"42", NOT_OBJECT),
    (b'"text"', NOT_OBJECT),
    (b"true", NOT_OBJECT),
    (b'{"s": ', NOT_OBJECT),
    (b'{"s": "x"', NOT_OBJECT),
    (b'{"s" "x"}', NOT_OBJECT),
    (b"{s: 1}", NOT_OBJECT),
    (b"\xff\xfe\x00garbage", NOT_OBJECT),
    (b'{"unknown": ' + b"[" * 2000 + b"]" * 2000 + b"}", NOT_OBJECT),
    (b'{"l": ' + b"9" * 2000 + b"}", NOT_OBJECT),
    (b'{"l": "lots"}', "field 'l' has a value of type string, the schema's type is bigint"),
    (
        b'{"l": 99999999999999999999}',
        "field 'l' has a value of type decimal(20,0), the schema's type is bigint",
    ),
    (b'{"l": 1.5}', "field 'l' has a value of type decimal(2,1), the schema's type is bigint"),
    (b'{"l": ""}', "field 'l' has a value of type string, the schema's type is bigint"),
    (b'{"i": 3000000000}', "field 'i' has a value of type bigint, the schema's type is int"),
    (b'{"by": 300}', "field 'by' has a value of type bigint, the schema's type is tinyint"),
    (b'{"b": "true"}', "field 'b' has a value of type string, the schema's type is boolean"),
    (b'{"b": 1}', "field 'b' has a value of type bigint, the schema's type is boolean"),
    (b'{"d": "lots"}', "field 'd' has a value of type string, the schema's type is double"),
    (b'{"d": true}', "field 'd' has a value of type boolean, the schema's type is double"),
    (
        b'{"dec": 123456789012}',
        "field 'dec' has a value of type bigint, the schema's type is decimal(10,2)",
    ),
    (b'{"ts": "not a time"}', "field 'ts' does not parse as timestamp: 'not a time'"),
    (b'{"ts": "yesterday-ish"}', "field 'ts' does not parse as timestamp: 'yesterday-ish'"),
    # Quoted as one line: quotes, backslashes and line breaks escaped, cut at 60 characters.
    (
        json.dumps({"ts": "it's \\ late\nnow"}).encode(),
        "field 'ts' does not parse as timestamp: 'it\\'s \\\\ late\\nnow'",
    ),
    (
        b'{"ts": "' + b"x" * 70 + b'"}',
        "field 'ts' does not parse as timestamp: '" + "x" * 60 + "'…",
    ),
    (b'{"dec": "12,x"}', "field 'dec' does not parse as decimal(10,2): '12,x'"),
    (b'{"bin": "@@"}', "field 'bin' does not parse as binary: '@@'"),
    (b'{"ts": true}', "field 'ts' has a value of type boolean, the schema's type is timestamp"),
    (b'{"ts": 1.5}', "field 'ts' has a value of type decimal(2,1), the schema's type is timestamp"),
    (b'{"dt": "2026-13-01"}', "field 'dt' does not parse as date: '2026-13-01'"),
    (b'{"dt": 20260101}', "field 'dt' has a value of type bigint, the schema's type is date"),
    (b'{"bin": 5}', "field 'bin' has a value of type bigint, the schema's type is binary"),
    (
        b'{"st": "x"}',
        "field 'st' has a value of type string, the schema's type is struct<a:string,n:bigint>",
    ),
    (b'{"st": {"n": "x"}}', "field 'st.n' has a value of type string, the schema's type is bigint"),
    (b'{"arr": 5}', "field 'arr' has a value of type bigint, the schema's type is array<bigint>"),
    (b'{"arr": [1, "a"]}', None),
    (b'{"arrs": [{"x": "a"}]}', None),
    (b'{"m": {"k": "v"}}', None),
    (b'{"m": [1]}', "field 'm' has a value of type array, the schema's type is map<string,double>"),
    (b'{"l": NaN}', None),
]

#: Values Spark's path reads and frazil marks (better: these are not what the producer meant):
#: invalid UTF-8 inside a string (Spark replaces it with U+FFFD), data after the object
#: (Spark reads the first object and drops the rest), base64 that does not decode.
FRAZIL_STRICTER: list[bytes] = [
    b'{"s": "\xff\xfe"}',
    b'{"s": "x"} trailing',
    b'{"s": "x"}{"s": "y"}',
    b'{"s": "x"}' + b"\xef\xbb\xbf",  # a byte-order mark after the object: trailing data
]

#: A UTF-8 byte-order mark before the object, as some Windows producers write one. Spark's
#: ``from_json`` (the reference) marks such a value: its char-based parser reads the mark as a
#: character before the object. Jackson's byte parser would skip it, so frazil's decoder looks
#: for it and marks the value too, naming the mark.
BOM = b"\xef\xbb\xbf"
BOM_VALUES: list[bytes] = [
    BOM + b'{"s": "x", "l": 1}',
    BOM + b' {"s": "x"}',
    b" " + BOM + b'{"s": "x"}',
    _WIRE + BOM + b'{"s": "wire format"}',
    BOM,
    BOM + b"[1]",
]
BOM_REASON = "not a JSON object (it starts with a byte-order mark, U+FEFF)"


def _decode(
    spark: Any, engine: str, values: list[bytes], rows: bool = True, **options: Any
) -> list[Any]:
    """(row, error) of each value; ``rows=False`` for the errors alone (rows None)."""
    schema = schema_from_fields(SCHEMA)
    decoder = JsonDecoder(schema, engine=engine, **options)  # type: ignore[arg-type]
    # One task reads them all, in order: what the decoder learns from a record (the order of
    # its fields) meets every value after it.
    raw = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, value binary")
    raw = raw.coalesce(1)
    decoded = decoder.decode(raw["value"])
    value = decoded.value if rows else decoded.error["reason"]
    out = raw.select("i", value.alias("v"), decoded.error.alias("e")).orderBy("i").collect()
    return [(r["v"] if rows else None, r["e"]) for r in out]


def _plain(value: Any) -> Any:
    """A row as plain data, NaN made comparable."""
    if value is None:
        return None
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return value


def test_the_schema_is_read_by_the_frazil_decoder(spark: Any) -> None:
    assert frazil_reads(schema_from_fields(SCHEMA))


def test_both_decoders_read_good_values_into_the_same_rows(spark: Any) -> None:
    frazil = _decode(spark, "frazil", GOOD)
    sparks = _decode(spark, "spark", GOOD)
    for value, (f_row, f_err), (s_row, s_err) in zip(GOOD, frazil, sparks, strict=True):
        assert s_err is None, (value, s_err)
        assert f_err is None, (value, f_err)
        assert _plain(f_row) == _plain(s_row), value


def test_both_decoders_mark_bad_values_with_a_reason(spark: Any) -> None:
    values = [v for v, _ in BAD]
    frazil = _decode(spark, "frazil", values)
    # Only Spark's errors: its row of an empty value is a struct of nulls, not compared.
    sparks = _decode(spark, "spark", values, rows=False)
    for (value, reason), (f_row, f_err), (_, s_err) in zip(BAD, frazil, sparks, strict=True):
        assert s_err is not None, value
        assert f_err is not None and f_err["stage"] == "decode", value
        assert f_err["reason"], value
        assert f_row is None, value
        if reason is not None:
            assert (f_err["reason"], s_err["reason"]) == (reason, reason), value
        # The detail quotes the value's text, as Spark's path does.
        assert f_err["detail"] == s_err["detail"] or reason is None, value


def test_both_decoders_mark_a_byte_order_mark_before_the_object(spark: Any) -> None:
    frazil = _decode(spark, "frazil", BOM_VALUES)
    sparks = _decode(spark, "spark", BOM_VALUES, rows=False)
    assert [r for r, _ in frazil] == [None] * len(BOM_VALUES)
    assert [e["reason"] for _, e in sparks] == [NOT_OBJECT] * len(BOM_VALUES)
    # A mark after leading spaces is malformed JSON to both; elsewhere frazil names the mark.
    assert [e["reason"] for _, e in frazil] == [BOM_REASON, BOM_REASON, NOT_OBJECT] + [
        BOM_REASON
    ] * 3
    # The detail quotes the value's text, the mark included, as Spark's path does.
    assert [e["detail"] for _, e in frazil] == [e["detail"] for _, e in sparks]


def test_frazil_names_the_field_inside_arrays_and_maps(spark: Any) -> None:
    values = [b'{"arr": [1, "a"]}', b'{"arrs": [{"x": 1}, {"x": "a"}]}', b'{"m": {"k": "v"}}']
    reasons = [e["reason"] for _, e in _decode(spark, "frazil", values)]
    assert reasons == [
        "field 'arr[1]' has a value of type string, the schema's type is bigint",
        "field 'arrs[1].x' has a value of type string, the schema's type is int",
        "field 'm['k']' has a value of type string, the schema's type is double",
    ]


#: Numbers frazil keeps as they were written where Spark's path reads them through a double:
#: (value, frazil's string column, Spark's).
NUMBERS_AS_TEXT: list[tuple[bytes, str, str]] = [
    (b'{"s": 1e400}', "1e400", '"Infinity"'),
    (b'{"s": 1.50}', "1.50", "1.5"),
    (b'{"s": 1.0E+2}', "1.0E+2", "100.0"),
    (b'{"s": 0.1000000000000000055511151231257827}', "0.1000000000000000055511151231257827", "0.1"),
    (b'{"s": {"a": [1e400, 2.50]}}', '{"a":[1e400,2.50]}', '{"a":["Infinity",2.5]}'),
]
#: Finite numbers beyond a float's or a double's range, which Spark's path reads as infinity.
OUT_OF_RANGE: list[tuple[bytes, str]] = [
    (b'{"f": 1e39}', "field 'f' holds the number '1e39', beyond the range of float"),
    (b'{"d": -1e400}', "field 'd' holds the number '-1e400', beyond the range of double"),
    (b'{"m": {"k": 2E308}}', "field 'm['k']' holds the number '2E308', beyond the range of double"),
]


def test_frazil_keeps_numbers_in_string_columns_as_written(spark: Any) -> None:
    values = [v for v, _, _ in NUMBERS_AS_TEXT]
    frazil = _decode(spark, "frazil", values)
    sparks = _decode(spark, "spark", values)
    assert [(r["s"], e) for r, e in frazil] == [(text, None) for _, text, _ in NUMBERS_AS_TEXT]
    assert [(r["s"], e) for r, e in sparks] == [(text, None) for _, _, text in NUMBERS_AS_TEXT]


def test_frazil_marks_numbers_beyond_a_floats_range(spark: Any) -> None:
    frazil = _decode(spark, "frazil", [v for v, _ in OUT_OF_RANGE])
    assert [(r, e["reason"]) for r, e in frazil] == [(None, why) for _, why in OUT_OF_RANGE]
    sparks = _decode(spark, "spark", [v for v, _ in OUT_OF_RANGE])
    assert [e for _, e in sparks] == [None] * len(OUT_OF_RANGE)


def test_an_integer_longer_than_a_decimal_holds_is_called_one(spark: Any) -> None:
    [(row, error)] = _decode(spark, "frazil", [b'{"dec": ' + b"9" * 39 + b"}"])
    assert row is None
    assert error["reason"] == (
        "field 'dec' has a value of type decimal(39,0), the schema's type is decimal(10,2)"
    )


def test_frazil_marks_what_spark_reads_wrongly(spark: Any) -> None:
    frazil = _decode(spark, "frazil", FRAZIL_STRICTER)
    sparks = _decode(spark, "spark", FRAZIL_STRICTER)
    assert [e["reason"] if e else None for _, e in frazil] == [NOT_OBJECT] * 4
    assert [e for _, e in sparks] == [None] * 4


def _lone(field: str, escape: str) -> str:
    return (
        f"field '{field}' holds a lone surrogate '\\{escape}' (half of a UTF-16 pair), "
        "not a character"
    )


#: Strings with half a UTF-16 surrogate pair escaped alone: no Unicode text holds one, and
#: written as UTF-8 it would turn into '?'. frazil marks the record, naming the field and the
#: escape; a pair, and a character written out, read as the character.
LONE_SURROGATES: list[tuple[bytes, tuple[str, str]]] = [
    (b'{"s": "\\ud83d alone"}', ("s", "ud83d")),
    (b'{"s": "end \\ud83d"}', ("s", "ud83d")),
    (b'{"s": "\\ude00 low first"}', ("s", "ude00")),
    (b'{"s": "\\ude00\\ud83d"}', ("s", "ude00")),
    (b'{"st": {"a": "x\\udbff"}}', ("st.a", "udbff")),
]
#: Jackson itself refuses a lone surrogate in a name: malformed JSON.
LONE_SURROGATE_NAMES = [b'{"m": {"k\\ud800": 1.5}}', b'{"m": {"\\udc00": 1}}', b'{"\\ud83d": 1}']
#: Surrogates frazil reads: (value, the string column's text).
SURROGATES_KEPT: list[tuple[bytes, str]] = [
    (b'{"s": "\\ud83d\\ude00 pair"}', "\U0001f600 pair"),
    (b'{"s": "' + "\U0001f600 written".encode() + b'"}', "\U0001f600 written"),
    (b'{"s": "\\\\ud83d escaped backslash"}', "\\ud83d escaped backslash"),
    # A JSON value read into a string column is kept as JSON text: the escape stays an escape.
    (b'{"s": ["\\ud83d"]}', '["\\uD83D"]'),
    (b'{"s": {"a": "x\\udfff"}}', '{"a":"x\\uDFFF"}'),
]


def test_frazil_marks_a_lone_surrogate_escape(spark: Any) -> None:
    frazil = _decode(spark, "frazil", [v for v, _ in LONE_SURROGATES])
    assert [(r, e["reason"] if e else None) for r, e in frazil] == [
        (None, _lone(*where)) for _, where in LONE_SURROGATES
    ]
    # Spark's path reads the half as '?', a character the producer never sent.
    sparks = _decode(spark, "spark", [v for v, _ in LONE_SURROGATES[:2]])
    assert [(r["s"], e) for r, e in sparks] == [("? alone", None), ("end ?", None)]
    names = _decode(spark, "frazil", LONE_SURROGATE_NAMES)
    assert [(r, e["reason"]) for r, e in names] == [(None, NOT_OBJECT)] * len(names)
    pairs = _decode(spark, "frazil", [v for v, _ in SURROGATES_KEPT])
    assert [(r["s"], e) for r, e in pairs] == [(text, None) for _, text in SURROGATES_KEPT]


def test_unknown_fields_are_marked_with_the_rows_kept_under_evolution(spark: Any) -> None:
    values = [
        b'{"s": "a", "new": 1}',
        b'{"st": {"a": "x", "new": 1}}',
        b'{"arrs": [{"x": 1, "new": 2}]}',
        b'{"s": "known"}',
    ]
    named = [f"{NEW_FIELDS}: 'new'", f"{NEW_FIELDS}: 'st.new'", f"{NEW_FIELDS}: 'arrs[0].new'"]
    for engine, reasons in (("frazil", named), ("spark", [NEW_FIELDS] * 3)):
        out = _decode(spark, engine, values, evolving=True)
        assert [e["reason"] if e else None for _, e in out] == [*reasons, None], engine
        assert [r["s"] for r, _ in out] == ["a", None, None, "known"], engine


def test_frazil_names_the_first_unknown_field_at_any_depth(spark: Any) -> None:
    values = [
        b'{"arrs": [{"x": 1}, {"x": 2, "y": {"z": 1}}], "s": "a"}',
        b'{"m": {"k": 1.5}, "st": {"a": "x", "n": 1, "deep": [1]}, "top": 0}',
        b'{"st": {"a": "x", "o\'q": 1}}',
    ]
    out = _decode(spark, "frazil", values, evolving=True)
    assert [e["reason"] for _, e in out] == [
        f"{NEW_FIELDS}: 'arrs[1].y'",
        f"{NEW_FIELDS}: 'st.deep' and more",
        f"{NEW_FIELDS}: 'st.o\\'q'",
    ]


def test_a_field_with_an_empty_name_is_named_so_and_not_learnable(spark: Any) -> None:
    """Spark's inference leaves out a field named "": the reason says why it stays unknown
    (not "fields not in the schema yet", which the run would try to learn from)."""
    from frazil.engine.bad_records import learnable

    values = [
        b'{"s": "a", "": 1}',
        b'{"st": {"a": "x", "": {"b": 2}}}',
        b'{"arrs": [{"x": 1}, {"": []}]}',
        b'{"new": 1, "": 2}',
    ]
    out = _decode(spark, "frazil", values, evolving=True)
    tail = (
        ", which no column can take: rename it where the records are produced, or land "
        "each value whole with variant: <column>"
    )
    reasons = [e["reason"] for _, e in out]
    assert reasons == [
        f'a field with an empty name ("") at the top level{tail}',
        f"a field with an empty name (\"\") in 'st'{tail}",
        f"a field with an empty name (\"\") in 'arrs[1]'{tail}",
        f"{NEW_FIELDS}: 'new' and more",
    ]
    rows = spark.createDataFrame([(r,) for r in reasons], "r string")
    from pyspark.sql import functions as F

    marks = rows.select(learnable(F.struct(rows["r"].alias("reason"))).alias("l")).collect()
    assert [m["l"] for m in marks] == [False, False, False, True]


def test_timestamp_format_is_spark_s(spark: Any) -> None:
    values = [b'{"ts": "01/02/2026 03:04"}', b'{"ts": "2026-01-02T03:04:00Z"}']
    frazil = _decode(spark, "frazil", values, timestamp_format="MM/dd/yyyy HH:mm")
    sparks = _decode(spark, "spark", values, timestamp_format="MM/dd/yyyy HH:mm")
    assert frazil[0][0]["ts"] == sparks[0][0]["ts"] is not None
    assert frazil[1][1] is not None and sparks[1][1] is not None


def _shuffled_records(seed: int, count: int) -> list[bytes]:
    """Records whose fields come in runs of one order, then another: some fields left out,
    some met twice, unknown ones among them, nested objects shuffled too, and text that is
    not ASCII (accents, an emoji as a surrogate pair, escapes)."""
    rnd = random.Random(seed)
    texts = ["plain", "café", "naïve 🚀", 'tab\tquote"', "", "東京"]

    def text() -> str:  # as a producer writes it, escaped or not
        return json.dumps(rnd.choice(texts), ensure_ascii=rnd.random() < 0.5)

    order = list(SCHEMA)
    out: list[bytes] = []
    for n in range(count):
        if n % 25 == 0:  # a new run: the producer's order changes
            rnd.shuffle(order)
        fields = [f for f in order if rnd.random() < 0.8]
        parts: list[str] = []
        for f in fields:
            if f == "s":
                value = text()
            elif f == "l":
                value = str(rnd.randint(-(2**63), 2**63 - 1))
            elif f == "st":
                inner = [f'"a": {text()}', f'"n": {rnd.randint(0, 9)}', '"zz": [1]']
                rnd.shuffle(inner)
                value = "{" + ", ".join(inner[: rnd.randint(0, 3)]) + "}"
            elif f == "arrs":
                value = '[{"x": 1}, {"y": 2, "x": 3}]'
            elif f == "ts":
                value = '"2026-03-04T05:06:07Z"'
            elif f == "d":
                value = "2.5"
            else:
                continue
            parts.append(f'"{f}": {value}')
            if rnd.random() < 0.1:
                parts.append(f'"{f}": null')  # met twice: the last one wins
            if rnd.random() < 0.1:
                parts.append('"other": {"s": "not the schema\'s"}')
        out.append(("{" + ", ".join(parts) + "}").encode())
    return out


def test_fields_in_any_order_read_as_spark_reads_them(spark: Any) -> None:
    values = _shuffled_records(7, 400)
    frazil = _decode(spark, "frazil", values)
    sparks = _decode(spark, "spark", values)
    for value, (f_row, f_err), (s_row, s_err) in zip(values, frazil, sparks, strict=True):
        assert (f_err, s_err) == (None, None), value
        assert _plain(f_row) == _plain(s_row), value
    assert {_plain(r)["s"] for r, _ in frazil} >= {"café", "naïve 🚀", 'tab\tquote"', "東京"}
