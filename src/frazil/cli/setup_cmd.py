"""``frazil setup``: fetch the pinned JVM artifacts and compile frazil's JVM code ahead of time."""

from __future__ import annotations

import subprocess

from rich.table import Table

from frazil.cli.app import app, console, err_console
from frazil.jvm.build import frazil_jar
from frazil.jvm.cds import archive_path, build_archive
from frazil.jvm.fetch import (
    artifact_dir,
    ensure_artifacts,
    java_executable,
    rest_catalog_classpath,
)
from frazil.jvm.pins import ARTIFACT_SETS
from frazil.local.rest_launcher import launcher_jar


@app.command("setup")
def setup() -> None:
    """Fetch the pinned JVM jars, compile frazil's own, build Spark's class-data archive (once)."""
    java_executable()
    table = Table("set", "jars", "size", "folder", title="JVM artifacts")
    for name, aset in ARTIFACT_SETS.items():
        with err_console.status(f"Fetching {name}: {aset.description}..."):
            jars = ensure_artifacts(name, quiet=True)
        size = sum(p.stat().st_size for p in jars) / 1024**2
        err_console.print(f"[green]✓[/] {name}: {len(jars)} jars")
        table.add_row(name, str(len(jars)), f"{size:.0f} MiB", str(artifact_dir(name)))
    console.print(table)
    with err_console.status("Compiling frazil's JVM classes (the Protobuf decoder)..."):
        jar = frazil_jar()
    err_console.print(f"[green]✓[/] frazil's JVM classes: {jar}")
    with err_console.status("Compiling the local REST catalog's launcher..."):
        launcher = launcher_jar(rest_catalog_classpath())
    err_console.print(f"[green]✓[/] the local REST catalog's launcher: {launcher}")
    _class_data_archive()


def _class_data_archive() -> None:
    path = archive_path()
    if path.is_file():
        err_console.print(f"[green]✓[/] class-data archive of the Spark driver: {path}")
        return
    with err_console.status("Building a class-data archive of the Spark driver (once)..."):
        try:
            built = build_archive()
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            # Only start-up time depends on it: say so and go on.
            err_console.print(f"[yellow]![/] no class-data archive, Spark starts slower: {exc}")
            return
    err_console.print(f"[green]✓[/] class-data archive of the Spark driver: {built}")
