"""Which local services `frazil local down --only` stops, in which order, and which it refuses;
where `frazil local up` finds the services already running (no servers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from frazil.cli.app import app
from frazil.cli.local_down_cmd import _only
from frazil.local import services, stack
from frazil.local.object_store import ObjectStoreStatus
from frazil.local.rest_catalog import RestCatalogStatus
from frazil.local.spark_cluster import SparkClusterStatus

runner = CliRunner()


def test_only_takes_repeats_and_commas_and_kafka() -> None:
    assert _only(["rest-catalog, s3", "kafka", "s3"]) == ["rest-catalog", "s3", "kafka"]
    with pytest.raises(typer.BadParameter) as bad:
        _only(["s3,minio"])
    assert "unknown service 'minio': choose from kafka, schema-registry, s3, rest-catalog, " in (
        bad.value.message
    )
    # An empty value must not read as "no --only", which stops everything.
    with pytest.raises(typer.BadParameter, match="name at least one service"):
        _only([" , "])


def test_a_service_stops_before_what_it_needs() -> None:
    assert services.stop_order(["s3", "kafka", "rest-catalog", "s3"]) == [
        "kafka",
        "rest-catalog",
        "s3",
    ]
    assert set(services.STOP_ORDER) == set(services.SERVICES)
    for user, needs in services.REQUIRES.items():
        for need in needs:
            assert services.STOP_ORDER.index(user) < services.STOP_ORDER.index(need)
            assert services.SERVICES.index(user) > services.SERVICES.index(need)
    with pytest.raises(ValueError, match="unknown service 'hdfs'"):
        services.stop_order(["hdfs"])


def test_the_object_store_is_not_stopped_under_a_running_catalog() -> None:
    running = ["kafka", "s3", "rest-catalog"]
    assert services.dependents("s3") == ["rest-catalog"]
    assert services.left_without(["s3"], running) == {"s3": ["rest-catalog"]}
    assert services.left_without(["s3", "kafka"], running) == {"s3": ["rest-catalog"]}
    # Named together, or with the catalog not running: nothing is left without its store.
    assert services.left_without(["s3", "rest-catalog"], running) == {}
    assert services.left_without(["s3"], ["kafka", "s3"]) == {}
    assert services.left_without(["rest-catalog", "kafka", "spark-cluster"], running) == {}


def test_the_refusal_says_what_to_do() -> None:
    message = services.refusal({"s3": ["rest-catalog"]}, ["s3", "kafka"])
    assert message == (
        "s3 is not stopped: the running rest-catalog needs it. Stop them together with "
        "--only s3,kafka,rest-catalog, or stop rest-catalog first. Nothing was stopped."
    )


def test_down_only_of_services_not_running_says_so(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["local", "down", "--state-dir", str(tmp_path), "--only", "spark-cluster,kafka"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["kafka not running", "spark-cluster not running"]
    assert result.stdout == ""


def test_down_only_names_the_choices_of_an_unknown_service(tmp_path: Path) -> None:
    result = runner.invoke(app, ["local", "down", "--state-dir", str(tmp_path), "--only", "s4"])
    assert result.exit_code == 2
    # The message in one line, out of rich's box.
    text = " ".join(re.sub("[│╭╮╰╯─]", " ", result.stderr).split())
    assert (
        "Invalid value for --only: unknown service 's4': choose from kafka, schema-registry, "
        "s3, rest-catalog, spark-cluster"
    ) in text


def test_stack_down_stops_only_known_services(tmp_path: Path) -> None:
    assert stack.down(tmp_path, services=["s3"]) == []
    with pytest.raises(ValueError, match="unknown service 'kafka'"):
        stack.down(tmp_path, services=["kafka"])


def _status(
    *,
    s3: str | None = None,
    rest: str | None = None,
    rest_store: str | None = None,
    master: tuple[str, str] | None = None,
    workers: tuple[str | None, ...] = (None, None),
) -> stack.StackStatus:
    """A stack status with these services running at these addresses (the rest stopped)."""
    log = Path("/x.log")
    worker_list: list[dict[str, Any]] = [
        {"ui": ui or f"http://127.0.0.1:{8091 + n}", "pid": 100 + n if ui else None}
        for n, ui in enumerate(workers)
    ]
    return stack.StackStatus(
        s3=ObjectStoreStatus(
            s3 is not None, s3 or "http://127.0.0.1:9000", 1 if s3 else None, log, 0, log
        ),
        rest_catalog=RestCatalogStatus(
            rest is not None,
            rest or "http://127.0.0.1:8181",
            2 if rest else None,
            "s3://frazil/warehouse",
            rest_store,
            log,
            log,
        ),
        spark_cluster=SparkClusterStatus(
            master is not None,
            master[0] if master else "spark://127.0.0.1:7077",
            master[1] if master else "http://127.0.0.1:8090",
            3 if master else None,
            tuple(worker_list),
            log,
        ),
    )


def test_up_keeps_running_services_on_their_ports() -> None:
    asked = stack.StackPorts()
    assert stack.running_ports(_status(), asked) == asked
    status = _status(
        s3="http://127.0.0.1:19000",
        rest="http://127.0.0.1:18181",
        rest_store="http://127.0.0.1:19000",
        master=("spark://127.0.0.1:17077", "http://127.0.0.1:18090"),
        workers=("http://127.0.0.1:18091", None),
    )
    assert status.running() == {
        "s3": "http://127.0.0.1:19000",
        "rest-catalog": "http://127.0.0.1:18181",
        "spark-cluster": "spark://127.0.0.1:17077",
    }
    assert stack.running_ports(status, asked) == stack.StackPorts(
        s3=19000,
        rest_catalog=18181,
        spark_master=17077,
        spark_master_ui=18090,
        spark_worker_uis=(18091, 8092),
    )
    # Ports given on the command line stay as given (up then says where the service runs).
    fixed = stack.running_ports(status, asked, fixed=["s3", "spark-cluster"])
    assert (fixed.s3, fixed.rest_catalog, fixed.spark_master) == (9000, 18181, 7077)
    assert fixed.spark_worker_uis == (8091, 8092)


def test_a_stopped_store_comes_back_where_the_running_catalog_expects_it() -> None:
    status = _status(rest="http://127.0.0.1:18181", rest_store="http://127.0.0.1:19000")
    assert stack.running_ports(status, stack.StackPorts()).s3 == 19000
    assert stack.running_ports(status, stack.StackPorts(), fixed=["s3"]).s3 == 9000
