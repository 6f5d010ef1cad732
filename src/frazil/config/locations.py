"""Where a config points: whether a location (the warehouse, the state folder, a path) is a URI,
on another file system than the local one, or a local path.

Kept apart from the models: the loader resolves relative paths with it before any model sees
them, and the catalog's config, the engine, the run fence and ``frazil status`` use it too.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

# A scheme of two or more characters, then ':/': s3a://b/x, file:///x and file:/x are URIs,
# a relative path such as lake/x (or a Windows drive, C:/x) is not.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")


def is_uri(location: str) -> bool:
    """Whether a location is a URI (``s3a://b/x``, ``file:///x``) rather than a local path."""
    return bool(_URI.match(location))


def is_remote(location: str) -> bool:
    """Whether a location is a URI on another file system than the local one (not ``file:``)."""
    match = _URI.match(location)
    return match is not None and match.group(1).lower() != "file"


def local_path(location: str) -> str:
    """The local path of a ``file:`` URI; any other location unchanged."""
    if is_uri(location) and not is_remote(location):
        return unquote(urlsplit(location).path)
    return location
