"""Dead letters larger than the dead-letter topic takes are cut, saying so in a header."""

from frazil.sink.dead_letters.topic import HEADER_PREFIX, _fit


def _headers() -> list[tuple[str, bytes | None]]:
    return [
        ("origin", b"x"),
        (f"{HEADER_PREFIX}topic", b"orders"),
        (f"{HEADER_PREFIX}partition", b"3"),
        (f"{HEADER_PREFIX}offset", b"42"),
    ]


def _size(key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]) -> int:
    return len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers)


def test_a_record_that_fits_is_sent_whole() -> None:
    headers = _headers()
    assert _fit(b"k", b"v" * 1000, headers, 100_000) == (b"k", b"v" * 1000)
    assert headers == _headers()


def test_a_value_too_large_is_cut_with_its_full_length_in_a_header() -> None:
    headers = _headers()
    key, value = _fit(b"k" * 10, b"v" * 300_000, headers, 100_000)
    assert key == b"k" * 10
    assert value is not None and 0 < len(value) < 100_000 and value == b"v" * len(value)
    assert (f"{HEADER_PREFIX}value.truncated", b"300000") in headers
    assert _size(key, value, headers) + 1024 <= 100_000


def test_a_key_too_large_is_cut_too() -> None:
    headers = _headers()
    key, value = _fit(b"k" * 200_000, b"v" * 10, headers, 100_000)
    assert value == b""
    assert key is not None and len(key) < 100_000
    names = [k for k, _ in headers]
    assert f"{HEADER_PREFIX}value.truncated" in names
    assert f"{HEADER_PREFIX}key.truncated" in names
    assert _size(key, value, headers) + 1024 <= 100_000


def test_headers_of_the_records_own_that_leave_no_room_are_dropped() -> None:
    big = [("trace", b"t" * 150_000), ("origin", b"x")]
    headers = [*big, *_headers()[1:]]
    key, value = _fit(b"k", b"v" * 10, headers, 100_000)
    assert (key, value) == (b"k", b"v" * 10)
    assert [k for k, _ in headers if not k.startswith(HEADER_PREFIX)] == []
    assert (f"{HEADER_PREFIX}headers.dropped", str(150_000 + 5 + 6 + 1).encode()) in headers
    assert (f"{HEADER_PREFIX}offset", b"42") in headers
    assert _size(key, value, headers) + 1024 <= 100_000
