"""A config switched to a cluster, an object store or a REST catalog that does not answer:
`frazil run`, `plan` and `status` stop at once with one line naming the service, its address
and the key, before Spark starts; nothing is written. Closed ports stand in for the services,
so no stack is needed; a small HTTP server stands in for a REST catalog that refuses the
credentials in ``catalog.properties``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from frazil.generate.producer import ensure_topic
from tests.conftest import free_ports
from tests.integration.helpers import payments_pipeline
from tests.integration.test_cli_errors import frazil, short_error

pytestmark = pytest.mark.integration

#: Well beyond the 5 s each check may take, far below Spark's and the SDK's retries.
BOUND_S = 60


def _config(tmp_path: Path, bootstrap: str, topic: str, ports: dict[str, int]) -> Path:
    data: dict[str, Any] = {
        "spark": {"master": f"spark://127.0.0.1:{ports['spark']}"},
        "catalog": {
            "type": "rest",
            "uri": f"http://127.0.0.1:{ports['catalog']}",
            "warehouse": "s3://frazil/warehouse",
        },
        "storage": {"endpoint": f"http://127.0.0.1:{ports['storage']}", "path_style": True},
        "kafka": {"bootstrap_servers": bootstrap},
        "state_dir": str(tmp_path / "state"),
        "pipelines": [payments_pipeline("p", topic, "db.p")],
    }
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def listening() -> Any:
    """A port that accepts connections (a service that is there)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield sock.getsockname()[1]


@pytest.mark.parametrize(
    ("down", "what", "key", "scheme", "service"),
    [
        ("storage", "object store", "storage.endpoint", "http", "s3"),
        ("catalog", "REST catalog", "catalog.uri", "http", "rest-catalog"),
        ("spark", "Spark master", "spark.master", "spark", "spark-cluster"),
    ],
)
def test_run_names_the_service_that_does_not_answer(
    tmp_path: Path,
    kafka_bootstrap: str,
    unique: str,
    listening: int,
    down: str,
    what: str,
    key: str,
    scheme: str,
    service: str,
) -> None:
    topic = f"cluster-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    (closed,) = free_ports(1)
    ports = {
        name: closed if name == down else listening for name in ("storage", "catalog", "spark")
    }
    config = _config(tmp_path, kafka_bootstrap, topic, ports)

    stderr = short_error(frazil("run", "-c", str(config), "--until-caught-up", timeout=BOUND_S))

    assert " ".join(stderr.split()) == (
        f"error: the {what} at {scheme}://127.0.0.1:{closed} ({key}) cannot be reached: "
        f"connection refused; is it running? (`frazil local up --with {service}` starts one "
        "on this machine)"
    )
    # Nothing written: no checkpoint, no run record beyond the fence's own folder.
    assert not (tmp_path / "state" / "checkpoints").exists()


def test_plan_and_status_name_the_catalog_that_does_not_answer(
    tmp_path: Path, kafka_bootstrap: str, unique: str, listening: int
) -> None:
    topic = f"cluster-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    (closed,) = free_ports(1)
    ports = {"storage": listening, "catalog": closed, "spark": listening}
    config = _config(tmp_path, kafka_bootstrap, topic, ports)
    expected = (
        f"error: the REST catalog at http://127.0.0.1:{closed} (catalog.uri) cannot be "
        "reached: connection refused; is it running? (`frazil local up --with rest-catalog` "
        "starts one on this machine)"
    )
    for command in ("plan", "status"):
        stderr = short_error(frazil(command, "-c", str(config), timeout=BOUND_S))
        assert " ".join(stderr.split()) == expected, command


class _RefusingCatalog(BaseHTTPRequestHandler):
    """A REST catalog that takes no credentials: Iceberg's error for every call, and the
    OAuth2 error of RFC 6749 for a token request."""

    def _refuse(self) -> None:
        if self.path.endswith("/oauth/tokens"):
            reason = "client authentication failed"
            answer, code = {"error": "invalid_client", "error_description": reason}, 401
        else:
            error = {"message": "the token is not valid", "type": "NotAuthorizedException"}
            answer, code = {"error": {**error, "code": 401}}, 401
        body = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def refusing_catalog() -> Iterator[str]:
    """The URI of a REST catalog that refuses every credential."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusingCatalog)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("token", "tok-{}", "UnauthorizedError: NotAuthorizedException: the token is not valid"),
        ("credential", "client:{}", "OAuthError: invalid_client: client authentication failed"),
    ],
)
def test_status_the_page_and_run_name_the_catalog_that_refuses_the_credentials(
    tmp_path: Path,
    refusing_catalog: str,
    kafka_bootstrap: str,
    unique: str,
    key: str,
    value: str,
    reason: str,
) -> None:
    """The local stack's REST catalog takes no credentials; a hosted one (Polaris, Nessie
    with authentication) does, in catalog.properties: one line names the catalog and the key,
    never the value."""
    secret = value.format("secret-" + unique)
    topic = f"refused-{unique}"
    ensure_topic(kafka_bootstrap, topic, partitions=1)
    data = {
        "catalog": {
            "type": "rest",
            "uri": refusing_catalog,
            "warehouse": "s3://frazil/warehouse",
            "properties": {key: secret},
        },
        # A broker that answers: run checks Kafka before the catalog.
        "kafka": {"bootstrap_servers": kafka_bootstrap},
        "pipelines": [payments_pipeline("p", topic, "db.p")],
    }
    config = tmp_path / "cluster.yaml"
    config.write_text(yaml.safe_dump(data))
    # The page and run open the catalog as status does (once: each command is a process
    # start); run before Spark starts, which would meet the refusal at its first query.
    commands = [("status",)]
    if key == "token":
        commands += [("ui", "--port", "0"), ("run",)]
    for command in commands:
        done = frazil(*command, "-c", str(config), timeout=BOUND_S)
        assert done.returncode == 1, done.stdout + done.stderr
        assert secret not in done.stdout + done.stderr
        assert " ".join(short_error(done).split()) == (
            f"error: the REST catalog at {refusing_catalog} (catalog.uri) refused the "
            f"credentials ({reason}): check catalog.properties.{key}"
        ), command
