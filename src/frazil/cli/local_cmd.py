"""``frazil local up|down|status``: the local Kafka broker and, on demand, the schema registry
and the production-shaped stack (object store, REST catalog, Spark cluster)."""

# isort: skip_file
# The commands' modules are imported for their registrations, in the order of `--help`.

from __future__ import annotations

from frazil.cli import local_up_cmd  # noqa: F401
from frazil.cli import local_down_cmd  # noqa: F401
from frazil.cli import local_status_cmd  # noqa: F401
from frazil.cli.local_app import local_app

__all__ = ["local_app"]
