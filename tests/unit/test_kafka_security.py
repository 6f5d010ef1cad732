"""Java Kafka client settings in librdkafka's terms, the local broker's CA and secured
listeners' files, and the authentication-failure message: without a broker."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from frazil.config.secrets import redact_mapping, secret_values
from frazil.local import secure, tls
from frazil.source.clients import authentication_failure, librdkafka_properties

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="p\\"w\\\\d";'
)


def test_sasl_ssl_with_a_pem_trust_store() -> None:
    found = librdkafka_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": SCRAM_JAAS,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/ca.pem",
        }
    )
    assert found == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 'p"w\\d',
        "ssl.ca.location": "/ca.pem",
    }


def test_mtls_key_stores() -> None:
    pem = librdkafka_properties(
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/client.pem",
            "ssl.key.password": "k",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert pem == {
        "security.protocol": "SSL",
        "ssl.certificate.location": "/client.pem",
        "ssl.key.location": "/client.pem",
        "ssl.key.password": "k",
        "ssl.endpoint.identification.algorithm": "none",
    }
    p12 = librdkafka_properties(
        {
            "ssl.keystore.type": "pkcs12",
            "ssl.keystore.location": "/c.p12",
            "ssl.keystore.password": "k",
        }
    )
    assert p12 == {"ssl.keystore.location": "/c.p12", "ssl.keystore.password": "k"}
    inline = librdkafka_properties(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "KEY",
            "ssl.keystore.certificate.chain": "CERT",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "CA",
        }
    )
    assert inline == {"ssl.key.pem": "KEY", "ssl.certificate.pem": "CERT", "ssl.ca.pem": "CA"}


def test_settings_librdkafka_cannot_use_are_left_for_it_to_refuse() -> None:
    jks = {"ssl.truststore.location": "/t.jks", "ssl.truststore.password": "x"}
    assert librdkafka_properties(jks) == jks
    oauth = {"sasl.jaas.config": "o.a.k.OAuthBearerLoginModule required;"}
    assert librdkafka_properties(oauth) == oauth


def test_the_authentication_failure_names_where_and_who_not_the_password() -> None:
    conf = {
        "bootstrap.servers": "h:9094",
        "security.protocol": "sasl_ssl",
        "sasl.username": "alice",
        "sasl.password": "sekrit-pw",
    }
    message = authentication_failure(conf, "SASL authentication error: invalid credentials")
    assert message.startswith(
        "Kafka at h:9094 (kafka.bootstrap_servers) refused frazil as user 'alice' over "
        "SASL_SSL: authentication failed"
    )
    assert "sekrit-pw" not in message


def test_client_properties_read_the_credentials_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = tls.TlsFiles(tmp_path)
    monkeypatch.setenv(secure.ENV_USER, "frazil")
    monkeypatch.setenv(secure.ENV_PASSWORD, "env-password-1")
    monkeypatch.setenv(secure.ENV_KEY_PASSWORD, "env-key-password-2")
    from frazil.config.loader import load_config

    for mtls in (False, True):
        path = tmp_path / f"frazil-{mtls}.yaml"
        path.write_text(
            json.dumps(
                {
                    "kafka": {
                        "bootstrap_servers": "127.0.0.1:9094",
                        "properties": secure.client_properties(files, mtls),
                    },
                    "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}],
                }
            )
        )
        config = load_config(path)
        found = secret_values(config)
        wanted = "env-key-password-2" if mtls else "env-password-1"
        assert wanted in found
        shown = json.dumps(redact_mapping(config.model_dump(mode="json", by_alias=True)))
        assert "env-password-1" not in shown and "env-key-password-2" not in shown
        lib = librdkafka_properties(config.kafka.properties)
        if mtls:
            assert lib["ssl.keystore.password"] == "env-key-password-2"
        else:
            assert (lib["sasl.username"], lib["sasl.password"]) == ("frazil", "env-password-1")


def test_secured_listeners_files_are_private_and_kept(tmp_path: Path) -> None:
    listeners = secure.SecureListeners(tmp_path / "kafka", "127.0.0.1", 19094, 19095)
    credentials = listeners.prepare()
    assert credentials.user == secure.SCRAM_USER
    assert credentials.password not in repr(credentials)
    for path in [*listeners.tls.all(), listeners.credentials_file, listeners.env_file]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(listeners.folder.stat().st_mode) == 0o700
    env = listeners.env_file.read_text()
    assert f"export {secure.ENV_PASSWORD}={credentials.password}" in env
    before = listeners.tls.client.read_bytes()
    assert listeners.prepare() == credentials
    assert listeners.tls.client.read_bytes() == before

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import pkcs12

    store = pkcs12.load_pkcs12(
        listeners.tls.broker.read_bytes(), credentials.broker_key_password.encode()
    )
    assert store.cert is not None
    names = store.cert.certificate.extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    ).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(a) for a in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    ca = x509.load_pem_x509_certificate(listeners.tls.ca.read_bytes())
    assert store.cert.certificate.issuer == ca.subject
    client = pkcs12.load_pkcs12(
        listeners.tls.client.read_bytes(), credentials.client_key_password.encode()
    )
    assert (
        client.cert is not None
        and tls.CLIENT_CN in client.cert.certificate.subject.rfc4514_string()
    )

    lines = listeners.server_properties(credentials)
    assert "listener.name.mtls.ssl.client.auth=required" in lines
    assert "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512" in lines
    hint = secure.settings_hint(listeners)
    assert all(secret not in hint for secret in credentials.secrets())
    assert secure.ENV_PASSWORD in hint and str(listeners.env_file) in hint


def test_secure_ports_must_differ_from_the_others(tmp_path: Path) -> None:
    from frazil.local.broker import LocalBroker

    with pytest.raises(ValueError, match="must differ"):
        LocalBroker(tmp_path, port=19092, controller_port=19093, secure_ports=(19092, 19095))
