"""Values written into the Java ``.properties`` files the local services read."""

from __future__ import annotations


def escape_property(value: str) -> str:
    """Escape a value for a Java ``.properties`` file, which Kafka reads as ISO-8859-1."""
    escapes = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
    out: list[str] = []
    for char in value:
        if char in escapes:
            out.append(escapes[char])
        elif " " <= char <= "~":
            out.append(char)
        else:
            # Anything else as \uXXXX UTF-16 code units, so the file is plain ASCII.
            units = char.encode("utf-16-be")
            out += [f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)]
    if value.startswith(" "):
        out[0] = "\\ "  # Java drops unescaped leading whitespace of a value
    return "".join(out)
