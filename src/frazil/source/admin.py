"""Kafka metadata through the JVM's own Kafka client, with the settings Spark's source uses.

Resuming from a table, resetting offsets and telling whether a partition is read to its end
all need partition lists and offsets from Kafka. They go through the Java ``Admin`` client
inside the Spark driver JVM, built from exactly the ``kafka.*`` options the Kafka source gets,
so every security setting Spark accepts (JAAS, OAuth, IAM callback handlers, JKS stores)
works here too; librdkafka, which understands none of the Java-only settings, is not involved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import KafkaError
from frazil.jvm.classes import java_class
from frazil.source.offsets import TopicOffsets
from frazil.source.options import isolation_level

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Seconds to wait for one admin request.
_TIMEOUT_S = 30


class JvmKafkaAdmin:
    """A Java Kafka ``Admin`` client in the Spark driver JVM, for one config.

    Args:
        spark: The running session (its JVM has kafka-clients through the Kafka source jar).
        config: The config whose ``kafka`` section Spark's source uses.
    """

    def __init__(self, spark: SparkSession, config: FrazilConfig) -> None:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm = jvm
        self._bootstrap = config.kafka.bootstrap_servers
        props = java_class(jvm, "java.util.Properties")()
        props.put("bootstrap.servers", config.kafka.bootstrap_servers)
        props.put("request.timeout.ms", str(_TIMEOUT_S * 1000))
        props.put("default.api.timeout.ms", str(_TIMEOUT_S * 1000))
        for key, value in config.kafka.properties.items():
            if key != "isolation.level":  # a consumer setting: the offset reads use it below
                props.put(key, value)
        self._admin: Any = java_class(jvm, "org.apache.kafka.clients.admin.Admin").create(props)
        # "latest" is what Spark's source reads up to: the last stable offset with
        # read_committed (an open transaction's records, and all after them, are not yet
        # readable), so a partition is never taken as lagging behind what cannot be read.
        level = java_class(jvm, "org.apache.kafka.common.IsolationLevel").valueOf(
            isolation_level(config).upper()
        )
        self._list_options: Any = java_class(
            jvm, "org.apache.kafka.clients.admin.ListOffsetsOptions"
        )(level)

    def close(self) -> None:
        """Release the client's connections."""
        self._admin.close()

    def _get(self, future: Any, what: str) -> Any:
        unit = java_class(self._jvm, "java.util.concurrent.TimeUnit").SECONDS
        try:
            return future.get(_TIMEOUT_S, unit)
        except Exception as exc:  # py4j wraps the Java ExecutionException / TimeoutException
            raise self._error(exc, what) from None

    def _error(self, exc: Exception, what: str) -> KafkaError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        return KafkaError(
            f"Kafka at {self._bootstrap} (kafka.bootstrap_servers) did not answer {what}: {first}"
        )

    def partitions(self, pipeline: PipelineConfig) -> dict[str, list[int]]:
        """The partitions of the topics the pipeline subscribes to, as Kafka reports them now.

        Topics listed in ``topics`` but missing in Kafka are left out; for ``topic_pattern``
        the pattern is a Java regex matched against the whole name, as Spark matches it.
        """
        return self.describe(pipeline)[0]

    def describe(self, pipeline: PipelineConfig) -> tuple[dict[str, list[int]], dict[str, str]]:
        """The partitions (as :meth:`partitions`) and Kafka topic ids of the topics the
        pipeline subscribes to, from one description."""
        names = [str(n) for n in self._get(self._admin.listTopics().names(), "a topic list")]
        if pipeline.topic_pattern is not None:
            pattern = re.compile(pipeline.topic_pattern)
            wanted = sorted(n for n in names if pattern.fullmatch(n))
        else:
            present = set(names)
            wanted = [t for t in pipeline.topics or [] if t in present]
        partitions: dict[str, list[int]] = {}
        ids: dict[str, str] = {}
        for name, description in self._describe(wanted).items():
            partitions[name] = sorted(int(p.partition()) for p in description.partitions())
            ids[name] = str(description.topicId().toString())
        return partitions, ids

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """Kafka's id (a UUID) of each of ``topics`` that exists now.

        A topic deleted and created again under the same name gets another id.
        """
        names = "\0".join(sorted(set(topics)))
        if not names:
            return {}
        try:
            answer = str(self._lookups().topicIds(self._admin, names, _TIMEOUT_S * 1000))
        except Exception as exc:  # py4j wraps the Java ExecutionException / TimeoutException
            raise self._error(exc, "a description of the topics") from None
        return dict(line.split("\0", 1) for line in answer.split("\n")) if answer else {}

    def _lookups(self) -> Any:
        """``dev.frazil.kafka.AdminLookups``: a batch's questions in one py4j call each."""
        return java_class(self._jvm, "dev.frazil.kafka.AdminLookups")

    def _describe(self, names: list[str]) -> dict[str, Any]:
        """Java ``TopicDescription`` of each topic of ``names`` that exists (others are left
        out: a topic can be deleted between the list and the description)."""
        if not names:
            return {}
        collection = java_class(self._jvm, "java.util.ArrayList")()
        for name in names:
            collection.add(name)
        described = self._admin.describeTopics(collection)
        unit = java_class(self._jvm, "java.util.concurrent.TimeUnit").SECONDS
        try:  # all at once, one answer (the usual case: every topic exists)
            found = described.allTopicNames().get(_TIMEOUT_S, unit)
            return {name: found.get(name) for name in names if found.get(name) is not None}
        except Exception:  # one is missing (or Kafka is away): each one's own answer tells
            pass
        futures = described.topicNameValues()
        result: dict[str, Any] = {}
        for name in names:
            future = futures.get(name)
            if future is None:
                continue
            try:
                result[name] = future.get(_TIMEOUT_S, unit)
            except Exception as exc:  # py4j wraps the Java ExecutionException
                if "UnknownTopicOrPartition" in str(exc):
                    continue  # deleted since the list
                raise self._error(exc, f"a description of topic {name}") from None
        return result

    def latest(self, partitions: TopicOffsets, timeout_s: float = 5.0) -> TopicOffsets:
        """Kafka's latest offsets (as :meth:`offsets` reads them) of the partitions named in
        ``partitions`` (their offsets are ignored), for a run's lag; partitions Kafka does
        not know (markers keep those of deleted topics) are left out.

        Raises:
            KafkaError: Kafka did not answer within ``timeout_s``, or refused.
        """
        jvm = self._jvm
        latest = java_class(jvm, "org.apache.kafka.clients.admin.OffsetSpec").latest()
        request = java_class(jvm, "java.util.HashMap")()
        asked = []
        for topic, parts in partitions.items():
            for partition in parts:
                tp = java_class(jvm, "org.apache.kafka.common.TopicPartition")(topic, partition)
                request.put(tp, latest)
                asked.append((topic, partition, tp))
        if not asked:
            return {}
        answer = self._admin.listOffsets(request, self._list_options)
        unit = java_class(jvm, "java.util.concurrent.TimeUnit").MILLISECONDS
        found: TopicOffsets = {}
        for topic, partition, tp in asked:
            try:
                info = answer.partitionResult(tp).get(int(timeout_s * 1000), unit)
            except Exception as exc:  # py4j wraps the Java ExecutionException
                if "UnknownTopicOrPartition" in str(exc):
                    continue
                raise self._error(exc, "latest offsets") from None
            found.setdefault(topic, {})[partition] = int(info.offset())
        return found

    def commit_group_offsets(self, group: str, offsets: TopicOffsets, timeout_s: float) -> None:
        """Set ``group``'s committed offsets (KIP-396; the group must have no active members).

        Raises:
            KafkaError: Kafka refused them or did not answer within ``timeout_s``: the Java
                exception's class and message (the class names the reason, e.g.
                ``org.apache.kafka.common.errors.CoordinatorLoadInProgressException``).
        """
        jvm = self._jvm
        request = java_class(jvm, "java.util.HashMap")()
        for topic, parts in sorted(offsets.items()):
            for partition, offset in sorted(parts.items()):
                request.put(
                    java_class(jvm, "org.apache.kafka.common.TopicPartition")(topic, partition),
                    java_class(jvm, "org.apache.kafka.clients.consumer.OffsetAndMetadata")(offset),
                )
        if request.isEmpty():
            return
        options = java_class(
            jvm, "org.apache.kafka.clients.admin.AlterConsumerGroupOffsetsOptions"
        )()
        options.timeoutMs(int(timeout_s * 1000))
        result = self._admin.alterConsumerGroupOffsets(group, request, options)
        try:
            result.all().get(
                int(timeout_s), java_class(jvm, "java.util.concurrent.TimeUnit").SECONDS
            )
        except Exception as exc:  # Py4J's first line names the call, not Kafka's reason
            raise KafkaError(java_cause(exc)) from None

    def offsets(self, partitions: dict[str, list[int]], spec: str) -> TopicOffsets:
        """Earliest or latest offsets of the given partitions.

        Args:
            partitions: topic -> partitions.
            spec: ``earliest`` or ``latest``: the next offset to be written, or with
                ``read_committed`` (the default isolation level) the last stable offset,
                below which every transaction has ended.
        """
        asked = "\0\0".join(f"{t}\0{p}" for t, parts in partitions.items() for p in parts)
        if not asked:
            return {}
        try:
            answer = str(
                self._lookups().offsets(
                    self._admin, asked, spec == "latest", self._list_options, _TIMEOUT_S * 1000
                )
            )
        except Exception as exc:  # py4j wraps the Java ExecutionException / TimeoutException
            raise self._error(exc, f"{spec} offsets") from None
        result: TopicOffsets = {}
        for line in answer.split("\n") if answer else []:
            topic, partition, offset = line.rsplit("\0", 2)
            result.setdefault(topic, {})[int(partition)] = int(offset)
        return result


def java_cause(exc: BaseException) -> str:
    """The innermost Java exception line of a Py4J error (``org.apache.kafka.common.errors.
    GroupAuthorizationException: …``), else its first line: Py4J's own first line only names
    the call."""
    lines = [line.strip() for line in str(exc).strip().splitlines()]
    causes = [
        line.removeprefix("Caused by: ").lstrip(": ")
        for line in lines
        if "Exception" in line and not line.startswith("at ")
    ]
    kafka = [line for line in causes if "org.apache.kafka" in line]
    chosen = (kafka or causes or lines or [type(exc).__name__])[-1 if kafka else 0]
    return chosen[:300]
