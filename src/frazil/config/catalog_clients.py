"""A REST catalog opened from Python with PyIceberg: the credentials it refuses named by their
config keys, never their values.

``frazil run`` opens it once before Spark starts (Spark would only meet a refused token at
its first query, as a Java stack); ``frazil status`` and ``frazil ui`` read through it.
"""

from __future__ import annotations

from typing import Any

from frazil.config.models import FrazilConfig
from frazil.config.storage_clients import pyiceberg_properties
from frazil.errors import ServiceError, first_line

#: catalog.properties that carry a REST catalog's credentials (Iceberg's OAuth2 and token keys).
CATALOG_CREDENTIALS = ("credential", "token")


def open_rest_catalog(config: FrazilConfig) -> Any:
    """The config's REST catalog, opened with PyIceberg (which asks the server for its config,
    exchanging an OAuth2 credential for a token first when one is given).

    Args:
        config: A config whose ``catalog.type`` is ``rest``.

    Returns:
        PyIceberg's ``RestCatalog``.

    Raises:
        ServiceError: The server refused the credentials, or asks for some and none are given.
    """
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.exceptions import ForbiddenError, OAuthError, UnauthorizedError

    catalog = config.catalog
    # The object store's address and the environment's credentials, for PyIceberg's own reads
    # of the tables' files; the user's catalog.properties win.
    props = {**pyiceberg_properties(config), **catalog.properties}
    try:
        return RestCatalog(catalog.name, uri=catalog.uri or "", **props)
    except (UnauthorizedError, ForbiddenError, OAuthError) as exc:
        raise ServiceError(refused_catalog(config, exc)) from None


def refused_catalog(config: FrazilConfig, exc: BaseException) -> str:
    """The message for a REST catalog that refused to open: the keys that hold the
    credentials, never their values, and the server's reason."""
    given = [k for k in CATALOG_CREDENTIALS if config.catalog.properties.get(k)]
    if given:
        hint = "check " + " and ".join(f"catalog.properties.{k}" for k in given)
    else:
        hint = (
            "it needs some: set catalog.properties.credential (an OAuth2 client id:secret) "
            "or catalog.properties.token"
        )
    kind = "refused the credentials" if given else "asks for credentials"
    return (
        f"the REST catalog at {config.catalog.uri} (catalog.uri) {kind} "
        f"({type(exc).__name__}: {first_line(exc, 200)}): {hint}"
    )
