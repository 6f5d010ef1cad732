"""The installed ``frazil`` command imports only the module of the command it runs: the map
from command to module must name every command where it is registered."""

from __future__ import annotations

import subprocess
import sys

from frazil.cli.entry import COMMANDS


def test_every_registered_command_maps_to_the_module_that_registers_it() -> None:
    import frazil.cli.main  # noqa: F401  (registers every command)
    from frazil.cli.app import app

    registered = {
        (c.name or c.callback.__name__): c.callback.__module__
        for c in app.registered_commands
        if c.callback is not None
    }
    assert {name: f"frazil.cli.{COMMANDS[name]}" for name in registered} == registered
    groups = {
        g.name: g.typer_instance.registered_commands[0].callback for g in app.registered_groups
    }
    assert set(COMMANDS) == set(registered) | set(groups)
    for name, first in groups.items():
        # A group's commands may live in modules of their own, which its module imports.
        assert first is not None and name is not None
        assert first.__module__.startswith(f"frazil.cli.{COMMANDS[name].removesuffix('_cmd')}")


def test_one_command_imports_its_module_only() -> None:
    code = (
        "import sys; from frazil.cli.entry import register; register(['--verbose', 'status']);"
        "print(sorted(m for m in sys.modules if m.endswith('_cmd')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "['frazil.cli.status_cmd']"
