"""Throughput: frazil vs a minimal hand-written Structured Streaming job, same run.

1M pre-produced payments on 4 partitions; both jobs read them from the start with an
AvailableNow trigger on local[2] and write an Iceberg table of the same layout
(``PARTITIONED BY days(created_at)``). Rounds alternate baseline/frazil so JIT warm-up and
machine noise hit both; the ratio of medians is the figure.

With ``--security plaintext,sasl_ssl`` (or ``mtls`` too) the broker also serves the
secured listeners of ``frazil local up --secure`` and frazil runs once per listed listener in
every round, reading the same topic: the figure is then each listener's events/s against
PLAINTEXT's, measured in the same run (goal: SASL_SSL costs at most 15%). Results
go to ``bench/results/throughput-security.json`` then.

Usage: .venv/bin/python -m bench.throughput [--records 1000000] [--rounds 2]
           [--security plaintext,sasl_ssl]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.baseline_job import start_baseline
from bench.common import WORK_DIR, free_port, write_result
from frazil.config import parse_config
from frazil.engine.runner import run
from frazil.engine.session import build_spark
from frazil.generate.payments import PAYMENTS_SCHEMA
from frazil.generate.producer import ensure_topic, produce_events
from frazil.local.broker import LocalBroker
from frazil.local.secure import client_properties


def baseline(spark: Any, bootstrap: str, topic: str, table: str, checkpoint: str) -> int:
    """Run the hand-written job until caught up; return the table's row count."""
    start_baseline(spark, bootstrap, topic, table, checkpoint).awaitTermination()
    return int(spark.sql(f"SELECT count(*) FROM {table}").first()[0])


#: Listeners ``--security`` can name; all but plaintext need ``--secure``'s listeners.
SECURITY = ("plaintext", "sasl_ssl", "mtls")


def _securities(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECURITY]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(SECURITY)}, got {text!r}")
    return list(dict.fromkeys(["plaintext", *names]))


def _kafka_section(broker: LocalBroker, security: str) -> dict[str, Any]:
    """The config's ``kafka`` section reading from the given listener, credentials filled in
    (in frazil's own config files they come from the environment as ``${VAR}``)."""
    if security == "plaintext":
        return {"bootstrap_servers": broker.bootstrap}
    assert broker.secure is not None
    credentials = broker.secure.credentials()
    assert credentials is not None
    props = client_properties(broker.secure.tls, mtls=security == "mtls")
    for name, value in credentials.environment().items():
        props = {k: v.replace(f"${{{name}}}", value) for k, v in props.items()}
    bootstrap = (
        broker.secure.mtls_bootstrap if security == "mtls" else broker.secure.sasl_ssl_bootstrap
    )
    return {"bootstrap_servers": bootstrap, "properties": props}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per job")
    parser.add_argument(
        "--security",
        type=_securities,
        default=["plaintext"],
        help="listeners frazil reads from, each in every round: plaintext, sasl_ssl, mtls",
    )
    args = parser.parse_args()
    securities: list[str] = args.security
    secured = securities != ["plaintext"]
    console = Console()
    run_id = uuid.uuid4().hex[:6]
    work = WORK_DIR / f"throughput-{run_id}"
    broker = LocalBroker(
        WORK_DIR / f"throughput-{run_id}" / "state",
        port=free_port(),
        controller_port=free_port(),
        secure_ports=(free_port(), free_port()) if secured else None,
    )
    broker.up(timeout=180)
    try:
        topic = f"bench-payments-{run_id}"
        ensure_topic(broker.bootstrap, topic, partitions=4)
        started = time.monotonic()
        produce_events(broker.bootstrap, topic, args.records, seed=1)
        produce_seconds = time.monotonic() - started
        console.print(f"produced {args.records:,} events in {produce_seconds:.1f}s")

        def config_for(name: str, security: str = "plaintext") -> Any:
            return parse_config(
                {
                    "catalog": {"warehouse": str(work / "lake")},
                    "kafka": _kafka_section(broker, security),
                    "state_dir": str(work / "state"),
                    "spark": {"master": "local[2]", "driver_memory": "4g"},
                    "pipelines": [
                        {
                            "name": name,
                            "topics": [topic],
                            "table": f"bench.{name}",
                            "schema": dict(PAYMENTS_SCHEMA),
                            "partition_by": ["days(created_at)"],
                        }
                    ],
                }
            )

        spark = build_spark(config_for("warmup"))
        rows: list[dict[str, Any]] = []
        # Round 0 warms the JVM up (JIT, class loading) for both jobs and is not counted.
        for round_no in range(args.rounds + 1):
            name = f"baseline_{round_no}"
            t0 = time.monotonic()
            count = baseline(
                spark, broker.bootstrap, topic, f"lake.bench.{name}", str(work / "ckpt" / name)
            )
            seconds = time.monotonic() - t0
            rows.append(
                {"job": "baseline", "round": round_no, "records": count, "seconds": seconds}
            )
            console.print(f"baseline round {round_no}: {count:,} in {seconds:.1f}s")

            for security in securities:
                job = "frazil" if security == "plaintext" else f"frazil {security}"
                name = f"frazil_{security}_{round_no}"
                t0 = time.monotonic()
                reports = run(config_for(name, security), until_caught_up=True, spark=spark)
                seconds = time.monotonic() - t0
                count = reports[0].table_rows
                rows.append({"job": job, "round": round_no, "records": count, "seconds": seconds})
                console.print(f"{job} round {round_no}: {count:,} in {seconds:.1f}s")
        spark.stop()
    finally:
        broker.down()

    def median_rate(job: str) -> float:
        return statistics.median(
            r["records"] / r["seconds"] for r in rows if r["job"] == job and r["round"] > 0
        )

    base, ours = median_rate("baseline"), median_rate("frazil")
    table = Table(title=f"throughput, {args.records:,} events, 4 partitions, local[2]")
    for column in ("job", "round", "records", "seconds", "events/s"):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["job"],
            str(r["round"]) if r["round"] else "0 (warm-up)",
            f"{r['records']:,}",
            f"{r['seconds']:.1f}",
            f"{r['records'] / r['seconds']:,.0f}",
        )
    console.print(table)
    ratio = ours / base
    console.print(f"frazil / baseline (median events/s): [bold]{ratio:.2f}×[/] (goal ≥ 0.95×)")
    by_security = {
        s: median_rate("frazil" if s == "plaintext" else f"frazil {s}") for s in securities
    }
    vs_plaintext = {s: rate / ours for s, rate in by_security.items() if s != "plaintext"}
    for security, share in vs_plaintext.items():
        console.print(
            f"frazil over {security} / over plaintext (median events/s): [bold]{share:.2f}×[/] "
            "(goal ≥ 0.85×: at most 15% slower)"
        )
    extra: dict[str, Any] = {}
    if secured:
        extra = {
            "security_events_per_s": by_security,
            "security_vs_plaintext": vs_plaintext,
            "goal_security_ratio": 0.85,
        }
    path = write_result(
        "throughput-security" if secured else "throughput",
        {
            **extra,
            "records": args.records,
            "partitions": 4,
            "master": "local[2]",
            "produce_seconds": produce_seconds,
            "runs": rows,
            "baseline_events_per_s": base,
            "frazil_events_per_s": ours,
            "ratio": ratio,
            "goal_ratio": 0.95,
        },
    )
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
