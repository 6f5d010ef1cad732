"""The ``stack`` fixture: the local production-shaped stack, shared by one test session.

Usage (the fixture is registered in ``tests/integration/conftest.py``)::

    @pytest.mark.slow
    def test_something(stack: SessionStack) -> None:
        catalog = load_catalog("rest", **stack.pyiceberg_properties())  # starts s3 + REST
        master = stack.spark_master                                     # starts the cluster

Each service starts the first time a test asks for it (an address attribute or
:meth:`SessionStack.require`), on free ports, in one temp state dir, and runs until the
session ends; later tests reuse it. So a session that only needs the object store never pays
for the Spark cluster. Tests share the services: use unique bucket prefixes, namespaces and
table names (the ``unique`` fixture), as with the session broker.

Credentials are never put into ``os.environ`` by the fixture: a test that runs frazil or
Spark against the stack sets them itself, e.g.
``for k, v in stack.aws_environment().items(): monkeypatch.setenv(k, v)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frazil.local import stack as local_stack
from frazil.local.stack import StackAddresses, StackPorts
from tests.conftest import free_ports

# Generous: the first use may fetch jars, and Spark starts slowly next to other JVMs.
_TIMEOUT_S = 240


class SessionStack:
    """The session's stack: addresses start their service on first use.

    Attributes:
        state_dir: The stack's state folder (``s3/``, ``rest-catalog/``, ``spark/``).
        ports: The ports the services use (free when the session started).
        access_key: The object store's access key (``AWS_ACCESS_KEY_ID``).
        secret_key: The object store's secret key (``AWS_SECRET_ACCESS_KEY``).
        region: The region to sign for (``AWS_REGION``).
        bucket: The bucket that exists from the start (``frazil``).
        warehouse: The REST catalog's warehouse (``s3://frazil/warehouse``).
    """

    def __init__(self, state_dir: Path) -> None:
        s3, rest, master, master_ui, w1, w2 = free_ports(6)
        self.state_dir = state_dir
        self.ports = StackPorts(
            s3=s3,
            rest_catalog=rest,
            spark_master=master,
            spark_master_ui=master_ui,
            spark_worker_uis=(w1, w2),
        )
        self._started: set[str] = set()
        self._addresses = StackAddresses()
        self.access_key = self._addresses.access_key
        self.secret_key = self._addresses.secret_key
        self.region = self._addresses.region
        self.bucket = self._addresses.bucket
        self.warehouse = self._addresses.warehouse

    def require(self, *services: str) -> StackAddresses:
        """Start these services (``"s3"``, ``"rest-catalog"``, ``"spark-cluster"``) if not yet.

        Returns:
            The addresses of every service started so far.
        """
        names, _ = local_stack.resolve_services(services)
        missing = [n for n in names if n not in self._started]
        if missing:
            found = local_stack.up(self.state_dir, missing, self.ports, timeout=_TIMEOUT_S)
            self._merge(found)
            self._started.update(local_stack.resolve_services(missing)[0])
        return self._addresses

    @property
    def s3_endpoint(self) -> str:
        """The object store's endpoint, ``http://127.0.0.1:<port>`` (starts it)."""
        value = self.require(local_stack.S3).s3_endpoint
        assert value is not None
        return value

    @property
    def rest_uri(self) -> str:
        """The REST catalog's URI (starts it, and the object store)."""
        value = self.require(local_stack.REST_CATALOG).rest_uri
        assert value is not None
        return value

    @property
    def spark_master(self) -> str:
        """The Spark master URL, ``spark://127.0.0.1:<port>`` (starts the cluster)."""
        value = self.require(local_stack.SPARK_CLUSTER).spark_master
        assert value is not None
        return value

    @property
    def spark_master_ui(self) -> str:
        """The Spark master's web UI; its JSON is at ``<ui>/json/`` (starts the cluster)."""
        value = self.require(local_stack.SPARK_CLUSTER).spark_master_ui
        assert value is not None
        return value

    def aws_environment(self) -> dict[str, str]:
        """``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and ``AWS_REGION`` for the store."""
        return self._addresses.aws_environment()

    def pyiceberg_properties(self) -> dict[str, str]:
        """``load_catalog("name", **props)`` properties of the REST catalog (starts it)."""
        return self.require(local_stack.REST_CATALOG).pyiceberg_properties()

    def config(self, *services: str) -> dict[str, Any]:
        """frazil config keys (``spark``, ``catalog``, ``storage``) for these services.

        Starts them; with no argument, the keys of the services started so far.
        """
        return self.require(*services).config()

    def restart(self) -> None:
        """Stop every started service and start them again on the same ports (data kept)."""
        local_stack.down(self.state_dir)
        started, self._started = sorted(self._started), set()
        self._addresses = StackAddresses()
        self.require(*started)

    def stop(self) -> None:
        """Stop every service (at the end of the session)."""
        local_stack.down(self.state_dir)
        self._started.clear()

    def _merge(self, found: StackAddresses) -> None:
        updates = {
            f.name: getattr(found, f.name)
            for f in dataclasses.fields(found)
            if getattr(found, f.name) is not None
        }
        self._addresses = dataclasses.replace(self._addresses, **updates)


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionStack]:
    """The session's local stack (object store, REST catalog, Spark cluster), started lazily.

    See :class:`SessionStack` and this module's docstring.
    """
    session_stack = SessionStack(tmp_path_factory.mktemp("frazil-stack"))
    try:
        yield session_stack
    finally:
        session_stack.stop()
