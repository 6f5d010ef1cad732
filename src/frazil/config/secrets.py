"""What counts as a secret, and how it is masked wherever frazil or Spark shows config.

Pure Python (no Spark import): ``validate`` and the CLI use it without a JVM.

A **secret** is:

* the value of a config key (in ``kafka.properties``, ``catalog.properties``, ``spark.conf``
  and anywhere else) that contains, case-insensitively, one of :data:`SECRET_KEY_PATTERNS`:

  - ``password`` / ``passwd``: ``ssl.key.password``, ``ssl.keystore.password``,
    ``ssl.truststore.password``, a JDBC ``password`` …
  - ``secret``: ``s3.secret-access-key``,
    ``sasl.oauthbearer.client.credentials.client.secret`` …
  - ``token``: the REST catalog's ``token``, ``s3.session-token`` …
  - ``credential``: the REST catalog's ``credential`` (``client_id:client_secret``) …
  - ``jaas``: ``sasl.jaas.config`` carries the SASL username and password;
  - ``basic.auth.user.info``: Schema Registry's ``user:password``;
  - ``keystore.key``: ``ssl.keystore.key``, a PEM private key (``ssl.keystore.certificate.chain``
    and ``ssl.truststore.certificates`` are public certificates, not secrets);
  - ``private key`` (``private-key``, ``private_key``, ``privatekey``);
  - ``access key`` (``access-key-id``, ``access.key``, ``accesskey``);

* inside any value, the password of a URI with credentials:
  ``s3a://user:PASSWORD@bucket/x`` becomes ``s3a://user:***@bucket/x``;
* inside any value, a query or JDBC parameter, or a JAAS option, whose name contains one of the
  patterns: ``jdbc:postgresql://h/db?user=u&password=p`` becomes ``…&password=***``,
  ``password="p"`` in a JAAS line becomes ``password="***"``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frazil.config.models import FrazilConfig

#: What a masked secret is replaced with.
MASK = "***"

#: Known secret values shorter than this are not searched for in free text: replacing every
#: "ab" or "1" in a message would shred it without protecting anything worth hiding.
MIN_SECRET_LENGTH = 4

#: Regex fragments, matched case-insensitively anywhere in a key, that make its value a secret.
#: They use only syntax that Python's ``re`` and Java's ``java.util.regex`` read alike, because
#: :func:`spark_redaction_conf` hands the same fragments to Spark.
SECRET_KEY_PATTERNS: tuple[str, ...] = (
    "passw(?:or)?d",
    "secret",
    "token",
    "credential",
    "jaas",
    "basic[._-]?auth[._-]?user[._-]?info",
    "keystore[._-]?key",
    "private[._-]?key",
    "access[._-]?key",
)

_SECRET_KEY = re.compile("|".join(f"(?:{p})" for p in SECRET_KEY_PATTERNS), re.IGNORECASE)

# The password runs up to the *last* '@' of the authority (greedy, then backtracking to the
# lookahead), so an unencoded '@' inside it is still masked whole.
_URI_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#\s:@]*:)[^/?#\s]+(?=@)")
_PARAM = re.compile(r"([?&;]([^=&;?#\s]+)=)([^&;#\s]*)")
_QUOTED_OPTION = re.compile(r"""(([\w.-]+)\s*=\s*")([^"]*)(")""")

#: Mapping keys whose entries are column name -> type (``pipelines[].schema``): a field called
#: ``access_key`` does not make its type a secret.
_COLUMN_MAPPINGS = frozenset({"schema"})

#: Spark 4.1's default ``spark.redaction.regex``; :func:`spark_redaction_conf` only adds to it.
SPARK_DEFAULT_REDACTION_REGEX = "(?i)secret|password|token|access[.]?key"

# Finds a URI with a password, for Spark's key-or-value matching (whole value redacted).
_SPARK_URI_CREDENTIALS = r"[a-z][a-z0-9+.-]*://[^/?#\s:@]*:[^/?#\s]+@"
# Selects only the ``user:password`` part of a URI, for Spark's in-string replacement.
_SPARK_URI_USERINFO = r"(?<=://)[^/?#\s:@]*:[^/?#\s]+(?=@)"


def is_secret_key(key: str) -> bool:
    """Whether a config key holds a secret that must never be printed.

    Args:
        key: A config or property key, e.g. ``sasl.jaas.config`` or ``s3.secret-access-key``.

    Returns:
        True when the key contains one of :data:`SECRET_KEY_PATTERNS` (case-insensitive).
    """
    return bool(_SECRET_KEY.search(key))


def mask_value(value: str) -> str:
    """Mask the secrets embedded in a value whose key is not itself a secret.

    Args:
        value: Any string: a URI, a JDBC URL, a JAAS line, an error message.

    Returns:
        ``value`` with URI passwords, secret-named query/JDBC parameters and secret-named JAAS
        options replaced by ``***``; user names, hosts and paths are kept.
    """
    masked = _URI_PASSWORD.sub(rf"\g<1>{MASK}", value)
    masked = _PARAM.sub(_mask_param, masked)
    return _QUOTED_OPTION.sub(_mask_quoted_option, masked)


def _mask_param(match: re.Match[str]) -> str:
    if match.group(3) and is_secret_key(match.group(2)):
        return f"{match.group(1)}{MASK}"
    return match.group(0)


def _mask_quoted_option(match: re.Match[str]) -> str:
    if match.group(3) and is_secret_key(match.group(2)):
        return f"{match.group(1)}{MASK}{match.group(4)}"
    return match.group(0)


def redact_mapping(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a nested mapping that is safe to print.

    Args:
        mapping: Plain data (mappings, lists, strings, numbers), e.g. a dumped config.

    Returns:
        The same structure; non-empty values of secret keys become ``***`` and every other
        string goes through :func:`mask_value`. A ``schema`` mapping (column name -> type) is
        kept as it is.
    """
    return {key: _redact_entry(str(key), value) for key, value in mapping.items()}


def _redact_entry(key: str, value: Any) -> Any:
    if key in _COLUMN_MAPPINGS and isinstance(value, Mapping):
        return dict(value)
    # An empty secret is shown as empty: "not set" is useful to see and reveals nothing.
    if is_secret_key(key) and value not in (None, "", {}, []):
        return MASK
    return _redact_node(value)


def _redact_node(node: Any) -> Any:
    if isinstance(node, Mapping):
        return redact_mapping(node)
    if isinstance(node, (list, tuple)):
        return [_redact_node(item) for item in node]
    if isinstance(node, str):
        return mask_value(node)
    return node


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """Mask known secret values, and URI credentials, inside free text such as an error.

    Args:
        text: The text to print (an exception message, a log line).
        secrets: Secret values that may occur in it, e.g. from :func:`secret_values`; those
            shorter than :data:`MIN_SECRET_LENGTH` characters are ignored.

    Returns:
        ``text`` with every occurrence of each secret replaced by ``***``, then passed through
        :func:`mask_value`.
    """
    # Longest first, so a secret that contains another one is masked whole.
    for secret in sorted(
        {s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True
    ):
        text = text.replace(secret, MASK)
    return mask_value(text)


def secret_values(config: FrazilConfig) -> list[str]:
    """Every secret value found in a validated config.

    Args:
        config: The loaded config.

    Returns:
        The values of secret keys (``kafka.properties``, ``catalog.properties``, ``spark.conf``
        …) and the passwords, secret parameters and secret JAAS options inside any value
        (``catalog.uri``, ``catalog.warehouse``, ``kafka.bootstrap_servers`` …); unique,
        longest first.
    """
    return secret_values_in(config.model_dump(mode="json", by_alias=True))


def secret_values_in(data: Any) -> list[str]:
    """Every secret value in plain data, e.g. a config tree that did not validate.

    Args:
        data: Mappings, lists and scalars, as parsed from YAML.

    Returns:
        The same values :func:`secret_values` finds; unique, longest first.
    """
    found: set[str] = set()
    _collect(data, found)
    found.discard("")
    return sorted(found, key=lambda value: (-len(value), value))


def _collect(node: Any, found: set[str]) -> None:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in _COLUMN_MAPPINGS and isinstance(value, Mapping):
                continue
            if is_secret_key(str(key)) and isinstance(value, str):
                found.add(value)
            _collect(value, found)
    elif isinstance(node, (list, tuple)):
        for item in node:
            _collect(item, found)
    elif isinstance(node, str):
        found.update(_embedded_secrets(node))


def _embedded_secrets(value: str) -> list[str]:
    """Passwords of URIs, and values of secret-named parameters and JAAS options, in a value."""
    secrets = [m.group(0)[len(m.group(1)) :] for m in _URI_PASSWORD.finditer(value)]
    for pattern in (_PARAM, _QUOTED_OPTION):
        secrets += [m.group(3) for m in pattern.finditer(value) if is_secret_key(m.group(2))]
    return secrets


def spark_redaction_conf() -> dict[str, str]:
    """The Spark settings that make Spark's UI, event logs and plans hide the same secrets.

    Spark applies redaction with ``Utils.redact``: given (key, value) pairs it replaces the
    *value* with ``*********(redacted)`` when the regex is found in the key **or** in the value.

    Returns:
        * ``spark.redaction.regex``: Spark's default (``(?i)secret|password|token|access[.]?key``)
          extended with :data:`SECRET_KEY_PATTERNS` and URIs carrying a password. Spark matches it
          against the keys and values of the Spark, Hadoop, system and metrics properties on
          the UI's Environment page, in the event log and in cluster-manager logs, so
          ``spark.sql.catalog.lake.credential`` or a ``spark.sql.catalog.lake.uri`` with a
          password is hidden whole.
        * ``spark.sql.redaction.options.regex``: Spark's default ``(?i)url`` extended the same
          way. Spark matches it, together with ``spark.redaction.regex``, against the keys and
          values of a data source's options (``kafka.sasl.jaas.config``, a JDBC ``url``) where
          a SQL plan prints them: ``EXPLAIN`` and the UI's SQL / Structured Streaming pages.
        * ``spark.sql.redaction.string.regex`` (unset by default; it falls back to
          ``spark.redaction.string.regex``): every match is replaced inside strings Spark
          builds for plans (explain output, SQL page descriptions, file scan locations, JDBC
          URLs). It selects the ``user:password`` of a URI and secret-named ``name=value``
          query/JDBC parameters, so the rest of the string stays readable.
    """
    keys = "|".join(SECRET_KEY_PATTERNS)
    params = rf"(?<=[?&;])[^=&;?#\s]*(?:{keys})[^=&;?#\s]*=[^&;#\s]*"
    return {
        "spark.redaction.regex": f"(?i){keys}|{_SPARK_URI_CREDENTIALS}",
        "spark.sql.redaction.options.regex": f"(?i)url|{keys}|{_SPARK_URI_CREDENTIALS}",
        "spark.sql.redaction.string.regex": f"(?i){_SPARK_URI_USERINFO}|{params}",
    }


#: Secret values of every config loaded in this process, for :class:`RedactingFilter`.
_KNOWN: set[str] = set()


def remember(config: FrazilConfig) -> None:
    """Note a loaded config's secret values, so logs and errors of this process mask them."""
    _KNOWN.update(secret_values(config))


def remember_values(values: Iterable[str]) -> None:
    """Note secret values that come from elsewhere than the config (the environment's
    credentials), so logs and errors of this process mask them too."""
    _KNOWN.update(value for value in values if value)


def scrub(text: str) -> str:
    """``text`` with every remembered secret value and any URI credentials masked."""
    return mask_value(redact_text(text, _KNOWN))


class RedactingFilter(logging.Filter):
    """A logging filter that masks remembered secrets in every record it passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the record's message once, masked; never drops a record."""
        message = record.getMessage()
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True
