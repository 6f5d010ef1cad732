"""JVM options in Spark's extraJavaOptions strings."""

from __future__ import annotations

import shlex
from pathlib import Path

from frazil.jvm.options import java_option


def test_a_plain_value_is_written_as_it_is() -> None:
    assert java_option("-Dfrazil.log.file=", Path("/a/b/spark.log")) == (
        "-Dfrazil.log.file=/a/b/spark.log"
    )


def test_a_value_with_spaces_quotes_or_backslashes_stays_one_option() -> None:
    for value in ("/Users/Jo Smith/My Projects/spark.log", 'a "b" c', "C:\\x y\\z", "it's"):
        option = java_option("-Dx=", value)
        # Spark's launcher splits as a POSIX shell does for these: quotes and backslashes.
        assert shlex.split(f"-Xss4m {option} -Dy=1") == ["-Xss4m", f"-Dx={value}", "-Dy=1"]
