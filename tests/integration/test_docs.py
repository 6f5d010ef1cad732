"""The docs' commands, run as written: README's two commands and docs/first-hour.md.

docs/first-hour.md is a walk from the quickstart to one's own topic. Its ```bash blocks run
here in order, each as one ``bash -euo pipefail`` script in a fresh folder, against the
session's broker (``kafka_bootstrap``, handed to the page's commands through
``FRAZIL_BOOTSTRAP_SERVERS``, which the page's config and producer read). An HTML comment
just before a block changes what is expected of it:

* ``<!-- docs-test: skip -->``: not run (the quickstart installs; the local broker's own
  commands would look at the developer's broker);
* ``<!-- docs-test: exit N -->``: must exit with status N (the deliberate bad input).

The page's topic ``orders`` is renamed to a unique one, so a second run on one broker starts
empty; everything else lives in the test's folder.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FIRST_HOUR = ROOT / "docs" / "first-hour.md"

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(skip|exit\s+(\d+))\s*-->")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced ``bash`` block of a page, and what the page says it must do."""

    line: int
    script: str
    skip: bool
    exit_code: int
    #: The page's output block after it (before the next command block), if any.
    output: str | None = None


def bash_blocks(page: Path) -> list[Block]:
    """The page's ```bash blocks in order, with the ``docs-test`` comment before each."""
    blocks: list[Block] = []
    lines = page.read_text().splitlines()
    directive: re.Match[str] | None = None
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                # A directive applies to the next block only if nothing but blank lines
                # comes between them.
                directive = _DIRECTIVE.search(lines[i])
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if fence.group(1) == "bash":
            blocks.append(
                Block(
                    line=i + 1,
                    script="\n".join(lines[i + 1 : end]) + "\n",
                    skip=directive is not None and directive.group(1) == "skip",
                    exit_code=int(directive.group(2))
                    if directive is not None and directive.group(2)
                    else 0,
                )
            )
        elif fence.group(1) == "text" and blocks and blocks[-1].output is None:
            blocks[-1] = dataclasses.replace(blocks[-1], output="\n".join(lines[i + 1 : end]))
        directive = None
        i = end + 1
    return blocks


#: A line of a report: a label, two spaces or more, a value (``records written  5 in 1 …``).
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9 _-]*[A-Za-z0-9])\s{2,}(\S.*?)\s*$")
#: Labels whose value does not depend on timing: compared as well as the label.
_STABLE = {"table", "rows in table", "rows in tables", "kafka offsets", "start", "tables"}


def report_shape(text: str) -> list[tuple[str, str | None]]:
    """The fields of a command's report in order: each label, with its value where the value
    does not depend on timing (rows and records, not batches, seconds or instants)."""
    shape: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        found = _FIELD.match(line)
        if found is None:
            continue
        label, value = found.groups()
        if label in ("records written", "rows written"):
            shape.append((label, value.split(" in ")[0]))
        else:
            shape.append((label, value if label in _STABLE else None))
    return shape


def test_the_page_marks_its_blocks_as_the_test_reads_them() -> None:
    blocks = bash_blocks(FIRST_HOUR)
    skipped = [b for b in blocks if b.skip]
    failing = [b for b in blocks if b.exit_code != 0]
    # The quickstart, the local broker's status and its stop are not run here.
    assert [b.script.splitlines()[0] for b in skipped] == [
        "./scripts/quickstart",
        "source .venv/bin/activate",
        "frazil local down --state-dir frazil-quickstart/.frazil",
    ]
    # The typo'd config and the run that meets the bad record.
    assert len(failing) == 2 and all(b.exit_code == 1 for b in failing)
    # Every output block is labelled, so it can be found and refreshed.
    text = FIRST_HOUR.read_text()
    assert text.count("```text") == text.count("<!-- output: ")


def test_a_report_shape_keeps_labels_and_the_counts_that_do_not_depend_on_timing() -> None:
    report = """✓ orders
table            db.orders
records written  5 in 2 batch(es)
snapshots        3
valid through    2026-11-26T02:32:43.738Z
┃ customer_country ┃ orders ┃"""
    assert report_shape(report) == [
        ("table", "db.orders"),
        ("records written", "5"),
        ("snapshots", None),
        ("valid through", None),
    ]
    blocks = bash_blocks(FIRST_HOUR)
    assert sum(1 for b in blocks if b.output is not None) >= 10


def test_the_readme_commands_exist_and_are_executable() -> None:
    readme = (ROOT / "README.md").read_text()
    for command in ("./scripts/quickstart", "./scripts/test"):
        assert command in readme
        path = ROOT / command
        assert path.is_file(), path
        assert os.access(path, os.X_OK), f"{path} is not executable"
        assert path.read_text().startswith("#!"), f"{path} has no shebang"
    assert "docs/first-hour.md" in readme


@pytest.mark.slow
def test_the_first_hour_page_runs_as_written(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = f"orders_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        # The venv's frazil and python, as after `source .venv/bin/activate`.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "FRAZIL_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "COLUMNS": "100",
    }
    env.pop("FRAZIL_STATE_DIR", None)
    outputs: list[str] = []
    for block in bash_blocks(FIRST_HOUR):
        if block.skip:
            continue
        script = re.sub(r"\borders\b", topic, block.script)
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        output = done.stdout + done.stderr
        assert done.returncode == block.exit_code, (
            f"docs/first-hour.md:{block.line} exited {done.returncode}, "
            f"expected {block.exit_code}:\n{script}\n{output}"
        )
        assert "Traceback" not in output, f"docs/first-hour.md:{block.line}:\n{output}"
        outputs.append(output)
        if block.output is not None:
            # The page shows what runs: the same report fields, the same counts.
            shown = re.sub(rf"\b{re.escape(topic)}\b", "orders", output)
            assert report_shape(shown) == report_shape(block.output), (
                f"docs/first-hour.md:{block.line}: the output shown is not what runs:\n{shown}"
            )

    (
        produce,
        _config,
        validate,
        typo,
        plan,
        run,
        by_country,
        produce_bad,
        run_bad,
        run_dlq,
        dlq_show,
        orders,
        status,
    ) = outputs
    assert "sent" in produce and "sent" in produce_bad
    assert "is valid" in validate
    # Both mistakes in one run, each at its key path.
    assert "pipelines[0].topic" in typo and "pipelines[0].partition_by[0]" in typo, typo
    for column in ("customer_name", "customer_country", "ordered_at"):
        assert column in plan, plan
    assert f"db.{topic}" in run, run
    assert "29.50" in by_country and "122.10" in by_country, by_country
    # The bad record stops the run, named by its place; with the queue it goes there.
    assert topic in run_bad and "offset 6" in run_bad, run_bad
    assert "`errors.tolerance: all` with a dead-letter queue" in run_bad, run_bad
    assert "decode" in run_dlq, run_dlq
    assert "decode" in dlq_show and "not a JSON" in dlq_show, dlq_show
    for order_id in (1, 2, 3, 4, 5, 6, 8):
        assert re.search(rf"^\W*{order_id}\b", orders, re.MULTILINE), orders
    assert not re.search(r"^\W*7\b", orders, re.MULTILINE), orders
    assert topic in status, status
