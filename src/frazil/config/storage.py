"""The object store the tables and the state folder live on: ``storage:`` and its credentials.

The file says *where* the store is (``endpoint``, ``path_style``, ``region``); the credentials
come from the environment only, as every AWS tool reads them (:data:`CREDENTIAL_VARIABLES`),
never from the file, and are never printed: they are remembered as secrets
(:func:`remember_credentials`), so any message that quotes one masks it.

With no ``storage:`` section, S3 locations go to AWS itself with the AWS SDK's defaults
(region and credentials from the environment, ``~/.aws`` or the instance's role).

Pure Python (no Spark import): ``validate`` uses it without a JVM.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from frazil.config.base import Frozen

#: The environment variables frazil (and Spark's executors, through it) take credentials from.
ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
SESSION_TOKEN = "AWS_SESSION_TOKEN"
REGION = "AWS_REGION"
CREDENTIAL_VARIABLES = (ACCESS_KEY_ID, SECRET_ACCESS_KEY, SESSION_TOKEN)

#: Schemes of locations on an S3-compatible store (Iceberg's S3FileIO takes all three; Hadoop's
#: S3A is registered for each, see :mod:`frazil.config.storage_clients`).
S3_SCHEMES = ("s3", "s3a", "s3n")

_ENDPOINT = re.compile(r"^https?://[^/\s?#]+/?$")


class StorageConfig(Frozen):
    """Where an S3-compatible object store is (s3proxy, MinIO, Ceph, a cloud's S3 endpoint).

    Credentials are never keys of this section: see the module's docstring.
    """

    #: The store's address, ``http(s)://host[:port]``; None for AWS S3 itself.
    endpoint: str | None = None
    #: Address buckets as ``<endpoint>/<bucket>/<key>`` (most self-hosted stores) instead of
    #: ``<bucket>.<host>``.
    path_style: bool = False
    #: The region requests are signed for; None: ``AWS_REGION`` or the SDK's default.
    region: Annotated[str, Field(min_length=1)] | None = None

    @field_validator("endpoint")
    @classmethod
    def _check_endpoint(cls, value: str | None) -> str | None:
        if value is not None and not _ENDPOINT.match(value):
            raise ValueError(
                f"{value!r} is not an object store address: write http://host:port or "
                "https://host (no path), e.g. http://127.0.0.1:9000"
            )
        return value.rstrip("/") if value else value

    def address(self) -> str:
        """The endpoint as messages name it (``AWS S3`` when there is none)."""
        return self.endpoint or "AWS S3"

    def host_port(self) -> tuple[str, int] | None:
        """The endpoint's host and port (80/443 by scheme); None for AWS S3 itself."""
        if self.endpoint is None:
            return None
        parts = urlsplit(self.endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.hostname or "", port


def is_s3(location: str) -> bool:
    """Whether a location is on an S3-compatible store (``s3://``, ``s3a://``, ``s3n://``)."""
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() in S3_SCHEMES


@dataclass(frozen=True)
class Credentials:
    """Credentials taken from the environment; repr never shows the secret parts."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:
        return "Credentials(***)"


def credentials(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials in the environment, or None when neither key is set.

    Raises:
        ValueError: Only one of ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` is set
            (the message names the variables, never their values).
    """
    env = os.environ if environ is None else environ
    key, secret = env.get(ACCESS_KEY_ID) or None, env.get(SECRET_ACCESS_KEY) or None
    if key is None and secret is None:
        return None
    if key is None or secret is None:
        missing = ACCESS_KEY_ID if key is None else SECRET_ACCESS_KEY
        present = SECRET_ACCESS_KEY if key is None else ACCESS_KEY_ID
        raise ValueError(f"{present} is set but {missing} is not: set both, or neither")
    return Credentials(key, secret, env.get(SESSION_TOKEN) or None)


def remember_credentials(environ: Mapping[str, str] | None = None) -> None:
    """Note the environment's secret key and session token as secrets, so no message of this
    process shows them. The access key id is an identifier, not a secret (AWS prints it in
    its own errors), and frazil never prints it either; masking it would also mask every
    word equal to it (the local stack's key is ``frazil``)."""
    from frazil.config import secrets

    env = os.environ if environ is None else environ
    secrets.remember_values(
        env[name] for name in (SECRET_ACCESS_KEY, SESSION_TOKEN) if env.get(name)
    )


def credential_key_reason(key: str) -> str:
    """Why a credential written in the ``storage:`` section is refused (its value unsaid)."""
    return (
        f"credentials are never read from the config file: remove storage.{key} and set "
        f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} (and {SESSION_TOKEN} for temporary ones) "
        "in the environment"
    )


#: Words in the object store's answer that mean the credentials were refused (S3's error
#: codes; S3A's AccessDeniedException for a 403; PyArrow's names of the AWS SDK's errors).
_REFUSED = (
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "403",
    "Forbidden",
    "ACCESS_DENIED",
    "INVALID_ACCESS_KEY_ID",
    "SIGNATURE_DOES_NOT_MATCH",
)


def refused_credentials(text: str, location: str, address: str) -> str | None:
    """The message for an object store's error that says it refused the credentials (the
    text of S3A's or S3FileIO's Java exception chain, or of PyArrow's ``OSError``), naming the
    variables and never their values; None for any other error.

    Args:
        text: The error's text.
        location: What was read (``s3://bucket/...``).
        address: The store, as messages name it (``storage.address()``).
    """
    if not any(word in text for word in _REFUSED):
        return None
    code = next((w for w in _REFUSED[:2] if w in text), "access denied")
    if credentials() is None:
        # Not the environment's: an instance's role, a profile, or a catalog's vended ones.
        hint = (
            f"{ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} are not set, so the AWS SDK's default "
            "chain or the catalog's vended credentials were used"
        )
    else:
        hint = f"check {ACCESS_KEY_ID} and {SECRET_ACCESS_KEY} in the environment"
    return f"the object store at {address} refused the credentials for {location} ({code}): {hint}"
