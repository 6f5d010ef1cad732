"""The exception hierarchy: every error frazil raises on purpose derives from :class:`FrazilError`.

The CLI prints ``FrazilError`` messages without a stack trace (unless ``--verbose``), so each
message must say what went wrong and where (config key, topic/partition/offset, file path).
"""

from __future__ import annotations

import re


class FrazilError(Exception):
    """Root of all errors frazil raises deliberately."""


class ConfigError(FrazilError):
    """The config file is missing, unreadable or invalid.

    Attributes:
        problems: One ``(key_path, reason)`` pair per problem found.
    """

    def __init__(self, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.problems: list[tuple[str, str]] = problems or []


class ArtifactError(FrazilError):
    """A pinned JVM artifact could not be fetched or found in the cache."""


class ServiceError(FrazilError):
    """A local service (the embedded Kafka broker) failed to start, stop or answer."""


class KafkaError(FrazilError):
    """Kafka answered with an error (topic creation, produce, metadata)."""


class PipelineError(FrazilError):
    """A pipeline could not be planned, started or committed."""


class PipelineFailed(PipelineError):
    """A pipeline's batch failed with another library's error (Spark's, the JVM's), the
    exception's cause: the CLI names the pipeline (:attr:`head`), then describes the cause.

    Attributes:
        head: ``pipeline 'x' failed``, without the cause.
    """

    def __init__(self, pipeline: str, cause: BaseException) -> None:
        self.head = f"pipeline {pipeline!r} failed"
        super().__init__(f"{self.head}: {first_line(cause)}")


class TopicRecreated(PipelineError):
    """A topic the running query reads was deleted and created again under the same name: the
    query's offsets are the old topic's. The runner restarts the pipeline from its tables,
    which reads the new topic from its start.

    Attributes:
        topics: ``(topic, old id, new id)`` of each such topic.
    """

    def __init__(self, pipeline: str, topics: list[tuple[str, str, str]]) -> None:
        named = ", ".join(f"{t} (topic id {old} -> {new})" for t, old, new in topics)
        super().__init__(
            f"pipeline {pipeline!r}: topic(s) {named} were deleted and created again while "
            "the pipeline read them; their offsets belong to the old topic"
        )
        self.topics = topics


class CommitError(PipelineError):
    """An Iceberg commit failed or its snapshot summary is inconsistent."""


class StaleMarker(CommitError):
    """The catalog refused a commit: the table's newest marker of the pipeline is no longer the
    one the batch was planned after (another run committed in between, or the table was
    rolled back). Nothing was committed; the batch is planned again."""

    #: The marker offsets the refused commit was planned on, where the committer notes them
    #: (a dead-letter commit planned again tells from them what the other run claims).
    planned_on: dict[str, dict[int, int]] | None = None


class TableRolledBack(CommitError):
    """A table's marker moved backwards while the pipeline ran (a rollback, a snapshot set
    back): the run starts again from the tables' markers."""


class DecodeError(PipelineError):
    """Records could not be decoded; the message names their topic, partition and offset."""


class MaintenanceError(FrazilError):
    """A table-upkeep action (compaction, expiry, …) failed or was misconfigured."""


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first line of text for a message, or its class name if it has none
    (a bare ``TimeoutError`` has no text)."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


#: A double-quoted part of a line: Spark quotes the expressions and types an error is about.
_QUOTED = re.compile(r'"([^"\n]*)"')


def short_quotes(text: str, limit: int = 80) -> str:
    """``text`` with each double-quoted part longer than ``limit`` cut to its start and ``…``.

    Spark's analysis errors quote the expressions and types they name (``Cannot resolve
    "try_variant_get(...)" due to data type mismatch: ... has the type "STRUCT<...>"``); over a
    decoded record these are its whole expression tree and struct type, hundreds of
    characters that push the sentence around them out of a one-line message.

    Args:
        text: A message line.
        limit: The longest quoted part kept whole.

    Returns:
        The line, each long quoted part shortened (still within its quotes).
    """

    def cut(match: re.Match[str]) -> str:
        inner = match[1]
        return match[0] if len(inner) <= limit else f'"{inner[: limit - 1].rstrip()}…"'

    return _QUOTED.sub(cut, text)
