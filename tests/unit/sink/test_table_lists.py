"""Runs of tables held in a row by Java lists (:func:`frazil.sink.iceberg._rows`)."""

from __future__ import annotations

from typing import Any

from frazil.sink.iceberg import _rows


class _Held:
    def __init__(self, held_in: tuple[Any, int] | None) -> None:
        self.held_in = held_in


def test_runs_follow_each_list_in_a_row() -> None:
    a, b = object(), object()
    tables: list[Any] = [
        _Held((a, 0)),
        _Held((a, 1)),
        _Held((a, 2)),
        _Held((a, 5)),  # a gap in the list: a new run
        _Held(None),
        _Held((b, 0)),
        _Held((b, 1)),
        _Held((a, 6)),  # another list between: a new run
    ]
    assert list(_rows(tables)) == [
        (0, 3, a, 0),
        (3, 1, a, 5),
        (4, 1, None, 0),
        (5, 2, b, 0),
        (7, 1, a, 6),
    ]


def test_no_tables_no_runs() -> None:
    assert list(_rows([])) == []
