"""The local broker's secured listeners (``frazil local up --secure``).

Two listeners join the broker's PLAINTEXT one, both TLS with certificates from a CA frazil
generates (:mod:`frazil.local.tls`):

* ``SASL_SSL`` (listener name ``SASL_SSL``): SASL mechanism ``SCRAM-SHA-512``. Its user is
  created through Kafka's own admin API (``AlterUserScramCredentials``, KIP-554) once the
  broker runs, over the PLAINTEXT listener, which inter-broker and controller traffic keeps
  using: the broker never logs in over SCRAM itself, so no credential is needed when the
  storage is formatted.
* ``SSL`` with ``ssl.client.auth=required`` (listener name ``MTLS``): mutual TLS, accepting
  any client certificate signed by the same CA (``client.pem``).

Everything lives in ``<state_dir>/kafka/secure/``, readable by its owner only:
``credentials.json`` (the SCRAM user and password, the two key passwords), ``client.env``
(``export`` lines of :data:`ENV_USER`, :data:`ENV_PASSWORD` and :data:`ENV_KEY_PASSWORD`, to
``source``) and the CA's and key stores' files (:mod:`frazil.local.tls`).

Clients read the credentials from those environment variables: :func:`client_properties`
gives ``kafka.properties`` with ``${VAR}`` references, which frazil's config loader fills in.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import time
from pathlib import Path
from typing import Any

from frazil.errors import ServiceError
from frazil.local import tls
from frazil.local.properties import escape_property

#: The SCRAM user ``--secure`` creates.
SCRAM_USER = "frazil"
#: The SASL mechanism of the SASL_SSL listener.
SCRAM_MECHANISM = "SCRAM-SHA-512"
#: Environment variables the client settings read the credentials from.
ENV_USER = "FRAZIL_KAFKA_USER"
ENV_PASSWORD = "FRAZIL_KAFKA_PASSWORD"
ENV_KEY_PASSWORD = "FRAZIL_KAFKA_KEY_PASSWORD"

#: Listener names; Kafka lower-cases them in per-listener config keys.
SASL_SSL_LISTENER = "SASL_SSL"
MTLS_LISTENER = "MTLS"

_SCRAM_ITERATIONS = 8192


@dataclasses.dataclass(frozen=True)
class Credentials:
    """The secrets of a secured local broker; ``repr`` never shows them."""

    user: str
    password: str = dataclasses.field(repr=False)
    broker_key_password: str = dataclasses.field(repr=False)
    client_key_password: str = dataclasses.field(repr=False)

    def environment(self) -> dict[str, str]:
        """The client's environment variables and their values."""
        return {
            ENV_USER: self.user,
            ENV_PASSWORD: self.password,
            ENV_KEY_PASSWORD: self.client_key_password,
        }

    def secrets(self) -> list[str]:
        """Every secret value, e.g. to check that no output shows one."""
        return [self.password, self.broker_key_password, self.client_key_password]


class SecureListeners:
    """The SASL_SSL and mTLS listeners of one local broker.

    Args:
        kafka_dir: The broker's folder; its ``secure`` subfolder holds the files.
        host: The interface the broker listens on.
        sasl_ssl_port: Port of the SASL_SSL (SCRAM-SHA-512) listener.
        mtls_port: Port of the SSL listener that requires a client certificate.
    """

    def __init__(self, kafka_dir: Path, host: str, sasl_ssl_port: int, mtls_port: int) -> None:
        self.folder = kafka_dir / "secure"
        self.host = host
        self.sasl_ssl_port = sasl_ssl_port
        self.mtls_port = mtls_port
        self.credentials_file = self.folder / "credentials.json"
        self.env_file = self.folder / "client.env"
        self.tls = tls.TlsFiles(self.folder)

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """``host:port`` of the SASL_SSL listener."""
        return f"{self.host}:{self.sasl_ssl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        """``host:port`` of the mTLS listener."""
        return f"{self.host}:{self.mtls_port}"

    def ports(self) -> list[int]:
        """Both listeners' ports."""
        return [self.sasl_ssl_port, self.mtls_port]

    def prepare(self) -> Credentials:
        """Create (or keep) the credentials and the certificates; write ``client.env``."""
        self.folder.mkdir(parents=True, exist_ok=True)
        credentials = self.credentials()
        fresh = credentials is None
        if credentials is None:
            credentials = Credentials(
                SCRAM_USER, tls.new_password(), tls.new_password(), tls.new_password()
            )
            tls.write_private(
                self.credentials_file,
                json.dumps(dataclasses.asdict(credentials), indent=2).encode(),
            )
        if fresh:
            # New key passwords: the keys encrypted with older ones are of no use.
            for path in self.tls.all():
                path.unlink(missing_ok=True)
        tls.ensure_tls(
            self.folder, credentials.broker_key_password, credentials.client_key_password
        )
        exports = "".join(
            f"export {name}={shlex.quote(value)}\n"
            for name, value in credentials.environment().items()
        )
        tls.write_private(self.env_file, exports.encode())
        return credentials

    def credentials(self) -> Credentials | None:
        """The stored credentials, or None before :meth:`prepare` first ran."""
        try:
            data = json.loads(self.credentials_file.read_text())
            return Credentials(
                str(data["user"]),
                str(data["password"]),
                str(data["broker_key_password"]),
                str(data["client_key_password"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def listeners(self) -> list[tuple[str, str, str]]:
        """``(name, address, security protocol)`` of each listener."""
        return [
            (SASL_SSL_LISTENER, self.sasl_ssl_bootstrap, "SASL_SSL"),
            (MTLS_LISTENER, self.mtls_bootstrap, "SSL"),
        ]

    def server_properties(self, credentials: Credentials) -> list[str]:
        """``server.properties`` lines of the two listeners (``key=value``, escaped)."""
        sasl = SASL_SSL_LISTENER.lower()
        mtls = MTLS_LISTENER.lower()
        mechanism = SCRAM_MECHANISM.lower()
        settings = {
            # One key store and trust store for both TLS listeners.
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.tls.broker),
            "ssl.keystore.password": credentials.broker_key_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca),
            f"listener.name.{mtls}.ssl.client.auth": "required",
            f"listener.name.{sasl}.sasl.enabled.mechanisms": SCRAM_MECHANISM,
            # The server side of SCRAM checks against the credentials stored in the metadata
            # log (created with the admin API), so the module needs no options.
            f"listener.name.{sasl}.{mechanism}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
        }
        return [f"{key}={escape_property(value)}" for key, value in settings.items()]

    def create_user(
        self, plaintext_bootstrap: str, credentials: Credentials, timeout: float
    ) -> None:
        """Create (or update) the SCRAM user with Kafka's admin API, then check it logs in.

        Raises:
            ServiceError: If the broker refuses the user, or a SASL_SSL client cannot log in
                with it before ``timeout`` seconds.
        """
        from confluent_kafka.admin import (  # type: ignore[attr-defined]
            AdminClient,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = AdminClient({"bootstrap.servers": plaintext_bootstrap, "log_level": 0})
        upsert = UserScramCredentialUpsertion(
            credentials.user,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, _SCRAM_ITERATIONS),
            credentials.password.encode(),
        )
        futures = admin.alter_user_scram_credentials([upsert])
        try:
            for future in futures.values():
                future.result(timeout)
        except Exception as exc:  # KafkaException from librdkafka
            raise ServiceError(
                f"the local Kafka broker refused the SCRAM user {credentials.user!r}: {exc}"
            ) from None
        self._check_login(credentials, time.monotonic() + timeout)

    def _check_login(self, credentials: Credentials, deadline: float) -> None:
        """Wait until a SASL_SSL client with the credentials gets metadata."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        conf: dict[str, Any] = {
            "bootstrap.servers": self.sasl_ssl_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": credentials.user,
            "sasl.password": credentials.password,
            "ssl.ca.location": str(self.tls.ca),
            "log_level": 0,
        }
        last = ""
        while time.monotonic() < deadline:
            admin = AdminClient(conf)
            try:
                if admin.list_topics(timeout=2).brokers:
                    return
            except KafkaException as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ServiceError(
            f"a SASL_SSL client could not log in at {self.sasl_ssl_bootstrap} as "
            f"{credentials.user!r} in time{': ' + last if last else ''}"
        )


def client_properties(tls_files: tls.TlsFiles, mtls: bool = False) -> dict[str, str]:
    """``kafka.properties`` (Java client names) for the SASL_SSL or the mTLS listener.

    The credentials are ``${VAR}`` references to :data:`ENV_USER`, :data:`ENV_PASSWORD` and
    :data:`ENV_KEY_PASSWORD`, which frazil's config loader fills in from the environment.
    """
    props = {
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls_files.ca),
    }
    if mtls:
        return {
            "security.protocol": "SSL",
            **props,
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(tls_files.client),
            "ssl.keystore.password": f"${{{ENV_KEY_PASSWORD}}}",
        }
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": SCRAM_MECHANISM,
        "sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="${{{ENV_USER}}}" password="${{{ENV_PASSWORD}}}";'
        ),
        **props,
    }


def settings_hint(listeners: SecureListeners) -> str:
    """What ``frazil local up --secure`` prints on stderr: the config for each listener and
    how to get the credentials into the environment (never the secrets themselves)."""
    lines = [f"secured listeners (TLS from the CA in {listeners.tls.ca}):"]
    for title, bootstrap, mtls in (
        (f"SASL_SSL, {SCRAM_MECHANISM}", listeners.sasl_ssl_bootstrap, False),
        ("mTLS (client certificate)", listeners.mtls_bootstrap, True),
    ):
        lines.append(f"  {title}:")
        lines.append("    kafka:")
        lines.append(f"      bootstrap_servers: {bootstrap}")
        lines.append("      properties:")
        for key, value in client_properties(listeners.tls, mtls).items():
            lines.append(f"        {key}: {_yaml_quote(value)}")
    names = ", ".join((ENV_USER, ENV_PASSWORD, ENV_KEY_PASSWORD))
    lines.append(f"the credentials ({names}) are in {listeners.env_file}; load them with:")
    lines.append(f"  source {shlex.quote(str(listeners.env_file))}")
    return "\n".join(lines)


def _yaml_quote(value: str) -> str:
    if any(c in value for c in ':#"{}[]') or value != value.strip():
        return "'" + value.replace("'", "''") + "'"
    return value
