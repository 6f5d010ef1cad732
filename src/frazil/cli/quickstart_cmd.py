"""``frazil quickstart``: the embedded default end to end, for a first look."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import typer

from frazil.cli.app import OUTPUT_OPTION, OutputFormat, app, console, err_console
from frazil.cli.render import print_hint, print_reports

#: The first line of the config quickstart writes: a config that starts with it is quickstart's
#: to rewrite (its broker's address follows --port).
_HEADER = "# Written by `frazil quickstart`."
_CONFIG = """\
# Written by `frazil quickstart`. Relative paths are resolved against this file's folder.
catalog:
  warehouse: ./lake
kafka:
  bootstrap_servers: 127.0.0.1:{port}
state_dir: ./.frazil
pipelines:
  - name: payments
    topics: [{topic}]
    starting_offsets: earliest
    format: json
    schema:
      id: string
      type: string
      created_at: timestamp
      document: string
      payer: string
      amount: long
    table: db.payments
    partition_by: ["days(created_at)"]
    trigger: 1s
"""


@app.command()
def quickstart(
    directory: Path = typer.Option(
        Path("frazil-quickstart"), "--dir", help="Folder for the config, broker data and lake."
    ),
    count: int = typer.Option(100_000, "--count", "-n", help="Sample events to produce."),
    port: int = typer.Option(9092, "--port", help="Port of the local Kafka broker."),
    controller_port: int | None = typer.Option(
        None,
        "--controller-port",
        help="Port of the broker's KRaft controller [default: --port + 1].",
    ),
    output: OutputFormat = OUTPUT_OPTION,
) -> None:
    """Start a local Kafka broker, produce sample payments, ingest them into Iceberg once.

    Leaves the broker running (stop it with `frazil local down --state-dir DIR/.frazil`).
    The config it writes (DIR/frazil.yaml) follows --port on every run; a config of your own
    there must point at the broker it starts.
    """
    from frazil.config.loader import load_config
    from frazil.engine.runner import run as run_pipelines
    from frazil.generate.producer import ensure_topic, produce_events
    from frazil.local.broker import LocalBroker

    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    topic = "payments"
    config_path = directory / "frazil.yaml"
    # Refused before the broker starts; written once it runs (a broker already running on
    # other ports leaves the config as it was).
    _write_config(config_path, port, topic, write=False)
    say = err_console.print
    broker = LocalBroker(
        directory / ".frazil",
        port=port,
        controller_port=port + 1 if controller_port is None else controller_port,
    )
    # Each step says how long it took: a first run spends most of its minutes starting
    # Spark and its JIT, and a step without a figure reads as a hang.
    began = step = time.monotonic()
    say(f"[bold]1/3[/] starting a local Kafka broker (KRaft) in {directory / '.frazil'} …")
    bootstrap = broker.up()
    _write_config(config_path, port, topic)
    say(f"      broker ready at {bootstrap} ({_since(step)})")
    step = time.monotonic()
    say(f"[bold]2/3[/] producing {count:,} sample payment events to topic '{topic}' …")
    ensure_topic(bootstrap, topic, partitions=4)
    produce_events(bootstrap, topic, count, progress=output is OutputFormat.text)
    say(f"      produced ({_since(step)})")
    step = time.monotonic()
    say("[bold]3/3[/] ingesting into Iceberg with Spark (until caught up) …")
    # The broker just started, whatever the shell's environment names: quickstart never reads
    # someone else's topic.
    os.environ["FRAZIL_BOOTSTRAP_SERVERS"] = bootstrap
    config = load_config(config_path)
    reports = run_pipelines(config, until_caught_up=True)
    say(f"      caught up ({_since(step)}; quickstart {_since(began)})")
    if output is OutputFormat.json:
        console.print_json(json.dumps([r.to_json() for r in reports]))
        return
    print_reports(reports, str(config_path))
    # Each command on one line of its own (never wrapped inside the quoted SQL), so that a
    # copy-paste gets it whole.
    console.print()
    state = shlex.quote(str(directory / ".frazil"))
    where = shlex.quote(str(config_path))
    print_hint("config: ", str(config_path))
    print_hint("again:  ", f"frazil run -c {where} --until-caught-up")
    print_hint(
        "query:  ",
        f'frazil sql -c {where} "SELECT type, count(*) FROM db.payments GROUP BY type"',
    )
    print_hint("stop the broker: ", f"frazil local down --state-dir {state}")


def _since(start: float) -> str:
    """Seconds since ``start`` (``time.monotonic()``), as a step's duration is shown."""
    return f"{time.monotonic() - start:.1f} s"


def _write_config(path: Path, port: int, topic: str, *, write: bool = True) -> None:
    """Write quickstart's config, or rewrite the broker address of the one it wrote before
    (another --port); refuse a config of the user's own that points at another broker.
    ``write=False`` only checks.

    Raises:
        ConfigError: ``path`` is not quickstart's and names other bootstrap servers.
    """
    import yaml

    from frazil.errors import ConfigError

    wanted = f"127.0.0.1:{port}"
    if not path.exists():
        if write:
            path.write_text(_CONFIG.format(port=port, topic=topic))
        return
    text = path.read_text()
    try:
        found = str(((yaml.safe_load(text) or {}).get("kafka") or {}).get("bootstrap_servers"))
    except (yaml.YAMLError, AttributeError):
        found = "?"
    # ${FRAZIL_BOOTSTRAP_SERVERS:-…} (as docs/first-hour.md writes it) reads the broker
    # quickstart starts: it sets the variable for its run.
    if found == wanted or found.startswith("${FRAZIL_BOOTSTRAP_SERVERS"):
        return
    if text.startswith(_HEADER):
        if not write:
            return
        lines = [
            f"  bootstrap_servers: {wanted}" if line.startswith("  bootstrap_servers:") else line
            for line in text.splitlines()
        ]
        path.write_text("\n".join(lines) + "\n")
        return
    raise ConfigError(
        f"{path}: kafka.bootstrap_servers is {found}, not the broker quickstart starts at "
        f"{wanted}; quickstart writes only its own config (it begins with {_HEADER!r}): "
        "choose another --dir, or remove the file"
    )
