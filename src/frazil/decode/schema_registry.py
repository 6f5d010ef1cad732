"""A Confluent-compatible Schema Registry client: schemas cached by id, retries with backoff.

Built on confluent-kafka's ``SchemaRegistryClient`` (which caches schemas by id itself).
What frazil adds: an unknown id is a per-record problem (:meth:`SchemaRegistry.by_id` returns
None and the records are marked), while an unreachable registry is not: each request is
retried with exponential backoff, then :class:`RegistryUnavailableError` stops the pipeline
before anything is committed.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from frazil.config.durations import parse_duration
from frazil.config.models import SchemaRegistryConfig
from frazil.errors import PipelineError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The wire format's first byte.
MAGIC_BYTE = 0
#: Magic byte + 4-byte big-endian schema id.
HEADER_BYTES = 5
#: Registry error codes that mean "no such schema/subject/version" (Confluent's API).
_NOT_FOUND_CODES = {40401, 40402, 40403}
#: First wait between attempts; doubled each time, up to :data:`_MAX_BACKOFF_S`.
_FIRST_BACKOFF_S = 0.5
_MAX_BACKOFF_S = 8.0


class RegistryUnavailableError(PipelineError):
    """The schema registry did not answer after every retry; nothing was committed."""


class SubjectNotFoundError(PipelineError):
    """A subject (or its version) the config relies on is not in the registry."""


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as the registry holds it.

    Attributes:
        schema_id: Its global id (what the wire format carries).
        schema_type: ``AVRO``, ``PROTOBUF`` or ``JSON``.
        text: The schema text (Avro JSON, ``.proto`` source, JSON Schema).
        references: ``(name, subject, version)`` of the schemas it imports.
        subject: The subject it was looked up under, if any.
        version: Its version under that subject, if known.
    """

    schema_id: int
    schema_type: str
    text: str
    references: tuple[tuple[str, str, int], ...] = ()
    subject: str | None = None
    version: int | None = None


def header(schema_id: int) -> bytes:
    """The 5-byte wire-format header of ``schema_id``."""
    return struct.pack(">bI", MAGIC_BYTE, schema_id)


@dataclass
class SchemaRegistry:
    """One registry, shared by every decoder of the run."""

    config: SchemaRegistryConfig
    _client: Any = field(default=None, repr=False)
    _by_id: dict[int, RegisteredSchema] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        """The registry's URL, for messages."""
        return self.config.url

    def client(self) -> Any:
        """confluent-kafka's client for this registry (created once)."""
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            conf: dict[str, Any] = {
                "url": self.config.url,
                "timeout": int(parse_duration(self.config.timeout)),
                # frazil retries itself, with a message naming what it waits for.
                "max.retries": 0,
            }
            if self.config.username is not None:
                conf["basic.auth.user.info"] = f"{self.config.username}:{self.config.password}"
            conf.update(self.config.properties)
            self._client = SchemaRegistryClient(conf)
        return self._client

    def check(self, subject: str | None) -> None:
        """One cheap request (the versions of ``subject``, or the list of subjects), retried as
        every request is: an unreachable registry fails a command before Spark starts, with
        the message a pipeline's first request would give. A missing subject is not a
        problem here (the pipeline says what it misses).

        Raises:
            RegistryUnavailableError: The registry did not answer after every retry.
        """
        # Its retries are logged at INFO: the wait is bounded and the error says how many
        # attempts were made; a running pipeline's retries stay warnings.
        if subject is None:
            self._call("its subjects", lambda c: c.get_subjects(), logging.INFO)
        else:
            self._call(f"subject {subject!r}", lambda c: c.get_versions(subject), logging.INFO)

    def by_id(self, schema_id: int) -> RegisteredSchema | None:
        """The schema with this id, or None if the registry has none (a per-record problem).

        Raises:
            RegistryUnavailableError: The registry did not answer after every retry.
        """
        known = self._by_id.get(schema_id)
        if known is not None:
            return known
        found = self._call(f"schema id {schema_id}", lambda c: c.get_schema(schema_id))
        if found is None:
            return None
        schema = _registered(schema_id, found)
        self._by_id[schema_id] = schema
        return schema

    def versions(self, subject: str) -> list[RegisteredSchema]:
        """Every version of ``subject``, oldest first (empty if the subject does not exist).

        Raises:
            RegistryUnavailableError: The registry did not answer after every retry.
        """
        numbers = self._call(f"subject {subject!r}", lambda c: c.get_versions(subject)) or []
        result = []
        for number in sorted(numbers):
            registered = self._get_version(subject, number)
            if registered is None:
                continue
            schema = _registered(
                registered.schema_id, registered.schema, subject, registered.version
            )
            self._by_id.setdefault(schema.schema_id, schema)
            result.append(schema)
        return result

    def latest(self, subject: str) -> RegisteredSchema:
        """The newest version of ``subject``.

        Raises:
            SubjectNotFoundError: The registry has no such subject.
            RegistryUnavailableError: The registry did not answer after every retry.
        """
        registered = self._call(f"subject {subject!r}", lambda c: c.get_latest_version(subject))
        if registered is None:
            raise SubjectNotFoundError(
                f"subject {subject!r} is not in the schema registry at {self.url}: register "
                "the schema first (producers with auto.register.schemas do), or name another "
                "subject with the pipeline's 'subject' key"
            )
        schema = _registered(registered.schema_id, registered.schema, subject, registered.version)
        self._by_id.setdefault(schema.schema_id, schema)
        return schema

    def referenced(self, schema: RegisteredSchema) -> dict[str, str]:
        """Every schema ``schema`` imports, transitively: import name → schema text.

        Raises:
            RegistryUnavailableError: The registry did not answer after every retry.
            SubjectNotFoundError: A reference names a subject version the registry lacks.
        """
        result: dict[str, str] = {}
        pending = list(schema.references)
        while pending:
            name, subject, version = pending.pop()
            if name in result:
                continue
            registered = self._get_version(subject, version)
            if registered is None:
                raise SubjectNotFoundError(
                    f"schema id {schema.schema_id} imports {name!r} from subject {subject!r} "
                    f"version {version}, which the schema registry at {self.url} does not have"
                )
            result[name] = registered.schema.schema_str
            pending.extend(_references(registered.schema))
        return result

    def _get_version(self, subject: str, version: int) -> Any:
        return self._call(
            f"subject {subject!r} version {version}", lambda c: c.get_version(subject, version)
        )

    def _call(
        self, what: str, request: Callable[[Any], T], level: int = logging.WARNING
    ) -> T | None:
        """One request with retries; None when the registry says "not found"."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        attempts = self.config.retries + 1
        wait = _FIRST_BACKOFF_S
        for attempt in range(1, attempts + 1):
            try:
                return request(self.client())
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404 or exc.error_code in _NOT_FOUND_CODES:
                    return None
                if exc.http_status_code is not None and 400 <= exc.http_status_code < 500:
                    raise RegistryUnavailableError(
                        f"schema registry at {self.url} refused the request for {what}: "
                        f"HTTP {exc.http_status_code} {exc.error_message}"
                    ) from None
                problem = f"HTTP {exc.http_status_code} {exc.error_message}"
            except Exception as exc:  # connection refused, timeouts, TLS: all retried
                problem = f"{type(exc).__name__}: {exc}"
            if attempt == attempts:
                raise RegistryUnavailableError(
                    f"schema registry at {self.url} did not answer the request for {what} "
                    f"after {attempts} attempt(s) ({problem}); the pipeline stopped before "
                    "committing, and nothing is lost"
                )
            log.log(
                level,
                "schema registry at %s: %s (attempt %d of %d), retrying in %.1fs",
                self.url,
                problem,
                attempt,
                attempts,
                wait,
            )
            time.sleep(wait)
            wait = min(wait * 2, _MAX_BACKOFF_S)
        raise AssertionError("unreachable")


def _references(schema: Any) -> list[tuple[str, str, int]]:
    return [(r.name, r.subject, int(r.version)) for r in (schema.references or [])]


def _registered(
    schema_id: int, schema: Any, subject: str | None = None, version: int | None = None
) -> RegisteredSchema:
    return RegisteredSchema(
        schema_id=int(schema_id),
        schema_type=(schema.schema_type or "AVRO").upper(),
        text=schema.schema_str,
        references=tuple(_references(schema)),
        subject=subject,
        version=version,
    )
