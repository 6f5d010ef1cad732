"""A private certificate authority for the local broker's TLS listeners (``--secure``).

Every file is readable by its owner only:

* ``ca.pem``: the CA's certificate, PEM: the trust store of every client
  (``ssl.truststore.type: PEM`` for Java clients, ``ssl.ca.location`` for librdkafka);
* ``ca-key.pem``: the CA's private key, PEM (kept with the CA, never needed by clients);
* ``broker.p12``: the broker's key and certificate chain (SAN ``localhost`` and
  ``127.0.0.1``), PKCS#12, encrypted with the broker's key password;
* ``client.p12``: the same for a client certificate (CN ``frazil-client``) that the mTLS
  listener accepts.

Why PKCS#12 for the key stores and not PEM: Kafka's file-based PEM key store insists on an
encrypted PKCS#8 key (``ssl.key.password`` is mandatory for it), and the only encryption
OpenSSL 3 (so Python's ``cryptography``) writes is PBES2, which Kafka's PEM loader cannot
decrypt on Java 17 ("PBES2 SecretKeyFactory not available", checked with Kafka 4.1.1).
PKCS#12 with PBES2 is Java's own default format since Java 12, and librdkafka reads it too
(``ssl.keystore.location``), so one file serves both clients.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.hashes import SHA256

#: How long generated certificates are valid; they are renewed on start when less is left.
VALIDITY = datetime.timedelta(days=825)
_RENEW_BEFORE = datetime.timedelta(days=30)
#: The client certificate's common name; the mTLS listener's principal is ``User:CN=...``.
CLIENT_CN = "frazil-client"


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """Where the CA, broker and client PEM files are.

    Attributes:
        folder: The folder holding them.
        ca: The CA certificate (``ssl.truststore.location`` / ``ssl.ca.location``).
        broker: The broker's PKCS#12 key store.
        client: The client's PKCS#12 key store (mTLS).
    """

    folder: Path

    @property
    def ca(self) -> Path:
        """The CA certificate."""
        return self.folder / "ca.pem"

    @property
    def ca_key(self) -> Path:
        """The CA's private key."""
        return self.folder / "ca-key.pem"

    @property
    def broker(self) -> Path:
        """The broker's key store (key, then certificate chain)."""
        return self.folder / "broker.p12"

    @property
    def client(self) -> Path:
        """The client's key store (key, then certificate chain)."""
        return self.folder / "client.p12"

    def all(self) -> list[Path]:
        """Every file, in the order they are written."""
        return [self.ca_key, self.ca, self.broker, self.client]


def ensure_tls(folder: Path, broker_key_password: str, client_key_password: str) -> TlsFiles:
    """Create the CA and the broker and client certificates, unless valid ones exist.

    Args:
        folder: Where to keep the PEM files (created, owner-only).
        broker_key_password: Protects the broker's key store (``ssl.keystore.password``).
        client_key_password: Protects the client's key store.

    Returns:
        The files' locations.
    """
    files = TlsFiles(folder)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    if all(p.is_file() for p in files.all()) and not _expiring(files.ca):
        return files
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "frazil local CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, _sha256())
    )

    def leaf(cn: str, server: bool, password: str) -> bytes:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if server:
            # Clients verify the host name (Java's default endpoint identification is https).
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, _sha256())
        # PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) and an HMAC-SHA256 MAC.
        return pkcs12.serialize_key_and_certificates(
            cn.encode(),
            key,
            cert,
            [ca_cert],
            serialization.BestAvailableEncryption(password.encode()),
        )

    write_private(
        files.ca_key,
        ca_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    write_private(files.ca, ca_cert.public_bytes(serialization.Encoding.PEM))
    write_private(files.broker, leaf("localhost", True, broker_key_password))
    write_private(files.client, leaf(CLIENT_CN, False, client_key_password))
    return files


def new_password() -> str:
    """A random password (URL-safe characters only, so no quoting trouble anywhere)."""
    return secrets.token_urlsafe(24)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``, readable and writable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        # The mode of open() only applies to new files; tighten an older one too.
        os.fchmod(handle.fileno(), 0o600)
        handle.write(data)


def _expiring(ca: Path) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(ca.read_bytes())
    except (OSError, ValueError):
        return True
    return cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc) < _RENEW_BEFORE


def _sha256() -> SHA256:
    from cryptography.hazmat.primitives.hashes import SHA256

    return SHA256()
