"""Kafka source options and pipeline selection, without a broker."""

from __future__ import annotations

import json

import pytest

from frazil.config import FrazilConfig, parse_config
from frazil.engine.runner import select_pipelines
from frazil.errors import ConfigError
from frazil.source.clients import admin_config
from frazil.source.offsets import records_between
from frazil.source.options import (
    FETCH_RECEIVE_BUFFER_BYTES,
    MAX_FETCH_BYTES,
    fetch_options,
    isolation_level,
    source_options,
    split_options,
)


def _config() -> FrazilConfig:
    return parse_config(
        {
            "kafka": {
                "bootstrap_servers": "k1:9092,k2:9092",
                "properties": {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
            },
            "pipelines": [
                {
                    "name": "a",
                    "topics": ["t1", "t2"],
                    "table": "db.a",
                    "max_offsets_per_trigger": 10,
                },
                {
                    "name": "b",
                    "topic_pattern": "p\\.\\d+",
                    "table": "db.b",
                    "min_partitions": 8,
                    "starting_offsets": "latest",
                    "kafka_metadata": ["headers"],
                },
            ],
        }
    )


def test_options_pass_client_settings_through() -> None:
    config = _config()
    options = source_options(config, config.pipelines[0])
    assert options["kafka.bootstrap.servers"] == "k1:9092,k2:9092"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "PLAIN"
    assert options["subscribe"] == "t1,t2"
    assert options["startingOffsets"] == "earliest"
    assert options["maxOffsetsPerTrigger"] == "10"
    assert options["failOnDataLoss"] == "true"
    assert options["includeHeaders"] == "false"
    # A task reading up to the log end does not wait 500 ms for the broker's parked fetch.
    assert options["kafka.fetch.max.wait.ms"] == "50"
    tuned = _with_properties({"fetch.max.wait.ms": "200"})
    assert source_options(tuned, tuned.pipelines[0])["kafka.fetch.max.wait.ms"] == "200"
    # Fewer polls per task: Spark's reader asks for the offset range after each one.
    assert options["kafka.max.poll.records"] == "20000"
    fewer = _with_properties({"max.poll.records": "500"})
    assert source_options(fewer, fewer.pipelines[0])["kafka.max.poll.records"] == "500"


@pytest.mark.parametrize(
    ("cap", "partitions", "poll"),
    [(50_000, 20, "2500"), (1_000_000, 4, "20000"), (10, 4, "500"), (30_001, 3, "10001"),
     (None, 20, "20000"), (50_000, None, "20000")],
)  # fmt: skip
def test_a_poll_is_no_larger_than_a_batchs_share_of_a_partition(
    cap: int | None, partitions: int | None, poll: str
) -> None:
    """Spark keeps each partition's last poll, decompressed, for the next batch: no more
    than ``max_offsets_per_trigger``'s share of a partition, never below Kafka's 500. The
    early first batch's cap does not change it: both queries of a run poll alike."""
    config = _config()
    pipeline = config.pipelines[0].model_copy(update={"max_offsets_per_trigger": cap})
    for first in (None, 20_000):
        options = source_options(config, pipeline, max_offsets=first, partitions=partitions)
        assert options["kafka.max.poll.records"] == poll, (cap, partitions, first)


def test_sampling_reads_poll_kafkas_own_size() -> None:
    """A sample takes a few records a partition: its polls would otherwise stay in the
    driver's fetched-data pool, unread, for 5 minutes."""
    from frazil.engine.shape import batch_options

    config = _config()
    assert batch_options(config, config.pipelines[1])["kafka.max.poll.records"] == "500"
    mine = _with_properties({"max.poll.records": "2000"})
    assert batch_options(mine, mine.pipelines[0])["kafka.max.poll.records"] == "2000"


def test_pattern_pipeline_and_resume_offsets() -> None:
    config = _config()
    pipeline = config.pipelines[1]
    options = source_options(config, pipeline, {"p.1": {0: 5, 1: -2}})
    assert options["subscribePattern"] == "p\\.\\d+"
    assert "subscribe" not in options
    assert json.loads(options["startingOffsets"]) == {"p.1": {"0": 5, "1": -2}}
    assert options["minPartitions"] == "8"
    assert options["includeHeaders"] == "true"
    assert source_options(config, pipeline)["startingOffsets"] == "latest"


def test_hot_partitions_are_split_to_keep_every_core_busy() -> None:
    config = _config()
    limited = source_options(config, config.pipelines[0], parallelism=2)
    # At least one task per core; no task holds more than a core's share of a full batch.
    assert limited["minPartitions"] == "2"
    assert limited["maxRecordsPerPartition"] == "5"
    odd = parse_config(
        {
            "pipelines": [
                {"name": "a", "topics": ["t"], "table": "db.a", "max_offsets_per_trigger": 7}
            ]
        }
    )
    assert split_options(odd.pipelines[0], 3) == {
        "minPartitions": "3",
        "maxRecordsPerPartition": "3",
    }
    unlimited = parse_config({"pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}]})
    assert split_options(unlimited.pipelines[0], 4) == {"minPartitions": "4"}


def test_min_partitions_set_by_the_user_replaces_the_automatic_split() -> None:
    config = _config()
    options = source_options(config, config.pipelines[1], parallelism=2)
    assert options["minPartitions"] == "8"
    assert "maxRecordsPerPartition" not in options
    # Without a parallelism (schema inference, batch reads) nothing is split.
    assert "minPartitions" not in source_options(config, config.pipelines[0])


def test_select_pipelines() -> None:
    config = _config()
    assert [p.name for p in select_pipelines(config, None)] == ["a", "b"]
    assert [p.name for p in select_pipelines(config, ["b"])] == ["b"]
    with pytest.raises(ConfigError, match="--pipeline zz: no such pipeline"):
        select_pipelines(config, ["zz"])


def _with_properties(properties: dict[str, str]) -> FrazilConfig:
    return parse_config(
        {
            "kafka": {"properties": properties},
            "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}],
        }
    )


def test_admin_client_takes_settings_librdkafka_understands() -> None:
    properties = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    conf, refused = admin_config(_with_properties(properties))
    assert refused == []
    assert {k: conf[k] for k in properties} == properties


def test_admin_client_goes_without_settings_librdkafka_cannot_use() -> None:
    # A JKS trust store (Java's default type) means nothing to librdkafka.
    properties = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
        "required;",
        "sasl.login.callback.handler.class": "com.example.Handler",
    }
    conf, refused = admin_config(_with_properties(properties))
    assert refused == list(properties)
    assert not set(properties) & set(conf)


def test_admin_client_logs_in_with_the_java_jaas_credentials() -> None:
    properties = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
        'required username="u" password="p";',
    }
    conf, refused = admin_config(_with_properties(properties))
    assert refused == []
    assert conf["sasl.username"] == "u" and conf["sasl.password"] == "p"
    assert "sasl.jaas.config" not in conf


def test_only_committed_records_are_read_unless_kafka_properties_say_otherwise() -> None:
    config = _config()
    assert source_options(config, config.pipelines[0])["kafka.isolation.level"] == (
        "read_committed"
    )
    assert isolation_level(config) == "read_committed"
    everything = parse_config(
        {
            "kafka": {"properties": {"isolation.level": "read_uncommitted"}},
            "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}],
        }
    )
    options = source_options(everything, everything.pipelines[0])
    assert options["kafka.isolation.level"] == "read_uncommitted"
    assert isolation_level(everything) == "read_uncommitted"


def test_admin_calls_are_short_and_retried_so_a_dead_leader_stalls_little() -> None:
    config = _with_properties({})
    options = source_options(config, config.pipelines[0])
    assert options["kafka.default.api.timeout.ms"] == "10000"
    assert options["kafka.request.timeout.ms"] == "10000"
    assert options["fetchOffset.numRetries"] == "18"
    # Either timeout in kafka.properties: both left to the user (the admin client refuses
    # an API timeout below the request timeout).
    tuned = _with_properties({"request.timeout.ms": "30000"})
    options = source_options(tuned, tuned.pipelines[0])
    assert options["kafka.request.timeout.ms"] == "30000"
    assert "kafka.default.api.timeout.ms" not in options


def test_the_first_batch_of_an_early_first_commit_has_its_own_cap() -> None:
    unlimited = parse_config({"pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}]})
    pipeline = unlimited.pipelines[0]
    assert pipeline.first_batch_max_offsets == 20_000
    first = source_options(unlimited, pipeline, parallelism=4, max_offsets=20_000)
    assert first["maxOffsetsPerTrigger"] == "20000"
    assert first["maxRecordsPerPartition"] == "5000"  # split by the first batch's cap
    after = source_options(unlimited, pipeline, parallelism=4)
    assert "maxOffsetsPerTrigger" not in after and "maxRecordsPerPartition" not in after
    config = _config()
    limited = source_options(config, config.pipelines[0], parallelism=2, max_offsets=4)
    assert (limited["maxOffsetsPerTrigger"], limited["maxRecordsPerPartition"]) == ("4", "2")


def test_records_between_a_start_and_the_latest_offsets() -> None:
    earliest = {"t": {0: 10, 1: 0, 2: 5}}
    latest = {"t": {0: 110, 1: 50, 2: 5}}
    # From the earliest (no start, or -2), from an offset, from the latest (-1): 100 + 50.
    assert records_between({}, earliest, latest) == 150
    assert records_between({"t": {0: -2, 1: 20}}, earliest, latest) == 100 + 30
    assert records_between({"t": {0: -1, 1: 50}}, earliest, latest) == 0
    # An offset below the earliest (removed by retention) counts from the earliest.
    assert records_between({"t": {0: 3}}, earliest, latest) == 100 + 50


def test_an_unknown_host_is_told_apart_from_a_closed_port() -> None:
    import socket

    from frazil.source.clients import unreachable

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, not listening: refused
        assert unreachable(f"127.0.0.1:{port}") == (
            f"127.0.0.1:{port} refused the connection (nothing listens on that port)"
        )
    assert "host 'no-such-broker.invalid' does not resolve" in str(
        unreachable("no-such-broker.invalid:9092")
    )
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert unreachable(f"127.0.0.1:{listening.getsockname()[1]}") is None


def test_fetches_grow_with_few_partitions_and_keep_kafkas_size_with_many() -> None:
    # 4 partitions on 2 cores: up to 6 consumers share the 64 MiB budget, capped at 8 MiB.
    assert fetch_options(4, 2) == {
        "kafka.max.partition.fetch.bytes": str(MAX_FETCH_BYTES),
        "kafka.receive.buffer.bytes": str(FETCH_RECEIVE_BUFFER_BYTES),
    }
    # 30 partitions and 2 cores: 64 MiB over 32 consumers.
    assert fetch_options(30, 2)["kafka.max.partition.fetch.bytes"] == str(2 << 20)
    # Many partitions: Kafka's own 1 MiB, nothing set.
    assert fetch_options(62, 2) == {}
    assert fetch_options(500, 8) == {}
    # No partition found yet (a pattern matching nothing): sized as for one.
    assert fetch_options(0, 2)["kafka.max.partition.fetch.bytes"] == str(MAX_FETCH_BYTES)
    # Pipelines of one config share the budget: 4 of them, 6 consumers each.
    assert fetch_options(4, 2, 4)["kafka.max.partition.fetch.bytes"] == str((16 << 20) // 6)
    assert fetch_options(4, 2, 11) == {}


def test_source_options_size_fetches_to_the_partitions_unless_the_user_sets_them() -> None:
    config = _config()
    assert "kafka.max.partition.fetch.bytes" not in source_options(config, config.pipelines[0])
    # Two pipelines in the config: 32 MiB for each, over 4 partitions and 2 cores.
    options = source_options(config, config.pipelines[0], parallelism=2, partitions=4)
    assert options["kafka.max.partition.fetch.bytes"] == str((32 << 20) // 6)
    own = parse_config(
        {
            "kafka": {
                "bootstrap_servers": "k:9092",
                "properties": {"max.partition.fetch.bytes": "2097152"},
            },
            "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}],
        }
    )
    options = source_options(own, own.pipelines[0], parallelism=2, partitions=4)
    assert options["kafka.max.partition.fetch.bytes"] == "2097152"
