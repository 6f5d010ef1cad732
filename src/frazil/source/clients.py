"""Kafka clients outside Spark (librdkafka through confluent-kafka): their settings from
``kafka.properties``, authentication failures, reachability and partition discovery."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.errors import KafkaError

#: The logger librdkafka's messages go to (the generator's producer, the dead-letter topic's):
#: quiet unless ``--verbose``.
KAFKA_CLIENT_LOGGER = "frazil.kafka.client"

#: Java client settings whose librdkafka setting has another name, same meaning.
_RENAMED = {
    "ssl.truststore.certificates": "ssl.ca.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
}
#: ``username="…"`` / ``password="…"`` options of a JAAS line (Java StreamTokenizer quoting).
_JAAS_OPTION = re.compile(r'([\w.-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')
#: JAAS login modules whose ``username`` and ``password`` are librdkafka's SASL credentials.
_JAAS_USER_PASSWORD_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)


def librdkafka_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """``kafka.properties`` (written for Spark's Java Kafka client) in librdkafka's terms.

    The one place frazil translates between the two clients, so that Spark's source, the JVM
    admin and every confluent-kafka client (consumer groups, lag, the dead-letter topic, status)
    connect with the same settings:

    * ``sasl.jaas.config`` of the PLAIN or SCRAM login module: its ``username`` and
      ``password`` become ``sasl.username`` and ``sasl.password``;
    * ``ssl.truststore.location`` of a PEM trust store (``ssl.truststore.type: PEM``):
      ``ssl.ca.location``; inline ``ssl.truststore.certificates``: ``ssl.ca.pem``;
    * ``ssl.keystore.location`` of a PEM key store (key and certificate chain in one file):
      ``ssl.certificate.location`` and ``ssl.key.location``; of a PKCS12 one: librdkafka's
      own ``ssl.keystore.location``; inline ``ssl.keystore.key`` / ``ssl.keystore.certificate
      .chain``: ``ssl.key.pem`` / ``ssl.certificate.pem``; ``ssl.key.password`` is the same;
    * ``ssl.endpoint.identification.algorithm`` empty (Java's "off"): ``none``.

    Everything else is passed as it is; what librdkafka cannot use (a JKS trust store, an OAuth
    callback handler) it refuses, and :func:`admin_config` goes without.
    """
    props = dict(properties)
    out: dict[str, str] = {}
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        module = jaas.split(None, 1)[0] if jaas.strip() else ""
        options = {k: _jaas_unquote(v) for k, v in _JAAS_OPTION.findall(jaas)}
        if module in _JAAS_USER_PASSWORD_MODULES and {"username", "password"} <= set(options):
            out["sasl.username"] = options["username"]
            out["sasl.password"] = options["password"]
        else:
            out["sasl.jaas.config"] = jaas
    truststore_type = props.get("ssl.truststore.type", "JKS").upper()
    if truststore_type == "PEM" and "ssl.truststore.location" in props:
        out["ssl.ca.location"] = props.pop("ssl.truststore.location")
        props.pop("ssl.truststore.type")
        props.pop("ssl.truststore.password", None)
    elif "ssl.truststore.certificates" in props:
        props.pop("ssl.truststore.type", None)
    keystore_type = props.get("ssl.keystore.type", "JKS").upper()
    if "ssl.keystore.location" in props and keystore_type in ("PEM", "PKCS12"):
        props.pop("ssl.keystore.type")
        if keystore_type == "PEM":
            location = props.pop("ssl.keystore.location")
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
    elif "ssl.keystore.key" in props:
        props.pop("ssl.keystore.type", None)
    if props.get("ssl.endpoint.identification.algorithm") == "":
        props["ssl.endpoint.identification.algorithm"] = "none"
    for key, value in props.items():
        out[_RENAMED.get(key, key)] = value
    return out


def _jaas_unquote(value: str) -> str:
    """The value of a double-quoted JAAS option (backslash escapes undone)."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), value)


def admin_config(config: FrazilConfig) -> tuple[dict[str, str | int | float | bool], list[str]]:
    """Settings for frazil's own (librdkafka) clients, and the keys they had to leave out.

    ``kafka.properties`` are written for Spark's Java Kafka client and translated by
    :func:`librdkafka_properties`; some (a JKS trust store, an OAuth callback handler) still
    mean nothing to librdkafka, which refuses them. If librdkafka refuses the set, the client
    goes without all of them and they are named, so callers can tell an incomplete client from
    an unreachable Kafka.
    """
    from confluent_kafka.admin import AdminClient

    conf: dict[str, str | int | float | bool] = {
        "bootstrap.servers": config.kafka.bootstrap_servers,
        # Connection failures become one clear error, not a stream of client log lines.
        "log_level": 0,
    }
    props = librdkafka_properties(config.kafka.properties)
    try:
        AdminClient({**conf, **props})
    except Exception:  # librdkafka rejects settings it cannot use when the client is created
        # Settings depend on each other (a SASL mechanism needs its credentials), so there is
        # no telling which one to drop: check without any of them.
        return conf, list(config.kafka.properties)
    conf.update(props)
    return conf, []


class AuthenticationWatch:
    """Notes librdkafka's authentication errors, which its calls only report as a timeout.

    A wrong SASL password makes a metadata or offsets request fail with "broker transport
    failure" or time out; the reason only reaches the client's error callback. Add
    :meth:`client_conf` to a client's settings, and after a failed call ask :meth:`message`.
    """

    def __init__(self, conf: Mapping[str, Any]) -> None:
        self.conf = dict(conf)
        self.errors: list[str] = []

    def client_conf(self) -> dict[str, Any]:
        """The settings, with an error callback feeding this watch."""
        return {**self.conf, "error_cb": self._on_error}

    def _on_error(self, error: Any) -> None:
        from confluent_kafka import KafkaError as LibKafkaError

        if error.code() == LibKafkaError._AUTHENTICATION:
            self.errors.append(str(error.str()))

    def message(self, client: Any) -> str | None:
        """The authentication failure the client met, if any (``None`` otherwise).

        Args:
            client: The failed call's client: its pending callbacks are served first.
        """
        with contextlib.suppress(Exception):
            client.poll(0.5)
        if not self.errors:
            return None
        return authentication_failure(self.conf, self.errors[-1])


def authentication_failure(conf: Mapping[str, Any], detail: str) -> str:
    """The message for Kafka refusing frazil's credentials: where, as whom, never the secret.

    Args:
        conf: The librdkafka settings (``bootstrap.servers``, ``sasl.username`` …).
        detail: librdkafka's reason (it names the mechanism, never the password).
    """
    user = conf.get("sasl.username")
    who = f" as user {user!r}" if user else ""
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    return (
        f"Kafka at {conf.get('bootstrap.servers', '?')} (kafka.bootstrap_servers) refused "
        f"frazil{who} over {protocol}: authentication failed; check the credentials in "
        f"kafka.properties and the environment variables they name ({detail})"
    )


def unreachable(bootstrap_servers: str, timeout: float = 2.0) -> str | None:
    """Why no bootstrap server takes a connection, in words (a host that does not resolve is
    told apart from a closed port); None if one does, or the list does not parse."""
    import socket

    reasons: list[str] = []
    for server in bootstrap_servers.split(","):
        host, sep, port = server.strip().rpartition(":")
        if not sep or not port.isdigit():
            return None
        host = host.strip("[]")
        try:
            socket.getaddrinfo(host, int(port), proto=socket.IPPROTO_TCP)
        except (socket.gaierror, UnicodeError):
            reasons.append(f"host {host!r} does not resolve (a typo, or a name this machine's DNS "
                           "does not know)")  # fmt: skip
            continue
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return None
        except ConnectionRefusedError:
            reasons.append(f"{host}:{port} refused the connection (nothing listens on that port)")
        except OSError as exc:
            reasons.append(f"{host}:{port}: {exc.strerror or type(exc).__name__}")
    return "; ".join(reasons) if reasons else None


def list_partitions(
    config: FrazilConfig, pipeline: PipelineConfig, timeout: float = 10.0
) -> dict[str, list[int]]:
    """The partitions of the topics the pipeline subscribes to, as Kafka reports them now.

    Raises:
        KafkaError: Kafka did not answer within ``timeout`` seconds.
    """
    from confluent_kafka.admin import AdminClient

    client_conf, refused = admin_config(config)
    watch = AuthenticationWatch(client_conf)
    client = AdminClient(watch.client_conf())
    try:
        metadata = client.list_topics(timeout=timeout)
    except Exception as exc:  # confluent_kafka raises KafkaException with a cause inside
        refusal = watch.message(client)
        if refusal is not None:
            raise KafkaError(refusal) from None
        left_out = (
            f" (without kafka.properties {', '.join(refused)}, which only Java clients use)"
            if refused
            else ""
        )
        why = unreachable(config.kafka.bootstrap_servers)
        raise KafkaError(
            f"Kafka does not answer at {config.kafka.bootstrap_servers} "
            f"(kafka.bootstrap_servers) within {timeout:g}s{left_out}: "
            + (why if why is not None else str(exc))
        ) from None
    wanted = set(pipeline.topics or [])
    pattern = re.compile(pipeline.topic_pattern) if pipeline.topic_pattern else None

    def matches(name: str) -> bool:
        if pattern is not None:
            return bool(pattern.fullmatch(name))
        return name in wanted

    return {
        str(name): sorted(topic.partitions)
        for name, topic in metadata.topics.items()
        if matches(str(name)) and not str(name).startswith("__")
    }
