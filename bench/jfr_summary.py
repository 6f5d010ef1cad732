"""Where a JFR recording's samples went, by phase of a routed batch (bench.routing --jfr).

Reads the Java and native method samples of a recording (``jfr print --json``) and splits
them by the thread that took them:

* ``write files``: Spark task threads in the one job's second stage (result tasks: the
  shuffled rows read and written to each table's files);
* ``read+shuffle``: Spark task threads elsewhere (the Kafka read, decode, layout and shuffle
  write of the first stage);
* ``commits``: frazil's commit threads and Iceberg's worker pool (manifests);
* ``states``: frazil's threads reading the tables' states;
* ``driver``: everything else (the py4j thread serving the Python driver, Spark's scheduler).

Native samples of threads parked in a socket or poll (idle) are left out. Per phase: its
samples, the methods most often on top of the stack (self) and those most often anywhere on
it (inclusive, counted once per sample).

Usage: .venv/bin/python -m bench.jfr_summary RECORDING.jfr [--top 25] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

#: Top frames of a thread waiting for a socket or a poll: idle, not work.
_IDLE = (
    "sun.nio.ch.",
    "java.net.",
    "sun.nio.fs.LinuxWatchService",
    "java.lang.Object.wait",
    "jdk.internal.misc.Unsafe.park",
    "java.lang.Thread.sleep",
    "io.netty.channel.epoll.Native.epollWait",
    # The py4j gateway's main thread waiting on its parent's stdin.
    "java.io.FileInputStream.readBytes",
)
#: Frames of the one job's file-writing stage (its result tasks: the shuffled rows read and
#: written to each table's files); the first stage's tasks are shuffle map tasks.
_WRITE_STAGE = ("org.apache.spark.scheduler.ResultTask", "dev.frazil.spark.RoutedWrites")
PHASES = ("write files", "read+shuffle", "commits", "states", "driver")


def _frame(frame: dict[str, Any]) -> str:
    method = frame.get("method") or {}
    owner = (method.get("type") or {}).get("name", "?").replace("/", ".")
    return f"{owner}.{method.get('name', '?')}"


def _phase(thread: str, frames: list[str]) -> str:
    if thread.startswith("Executor task launch worker"):
        if any(f.startswith(_WRITE_STAGE) for f in frames):
            return "write files"
        return "read+shuffle"
    if thread.startswith(("frazil-commit", "iceberg-worker-pool")):
        return "commits"
    if thread.startswith("frazil-states"):
        return "states"
    return "driver"


def summarize(path: Path, top: int) -> dict[str, Any]:
    """Samples, self and inclusive method counts per phase of the recording at ``path``."""
    raw = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "256", "--events",
         "jdk.ExecutionSample,jdk.NativeMethodSample",
         str(path)],
        capture_output=True, check=True, text=True,
    ).stdout  # fmt: skip
    events = json.loads(raw)["recording"]["events"]
    samples: Counter[str] = Counter()
    native: Counter[str] = Counter()
    own: dict[str, Counter[str]] = {p: Counter() for p in PHASES}
    anywhere: dict[str, Counter[str]] = {p: Counter() for p in PHASES}
    for event in events:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        frames = [_frame(f) for f in ((values.get("stackTrace") or {}).get("frames") or [])]
        if not frames:
            continue
        is_native = event["type"] == "jdk.NativeMethodSample"
        if is_native and frames[0].startswith(_IDLE):
            continue
        phase = _phase(thread, frames)
        samples[phase] += 1
        if is_native:
            native[phase] += 1
        own[phase][frames[0]] += 1
        for name in set(frames):
            anywhere[phase][name] += 1
    return {
        "recording": str(path),
        "phases": {
            p: {
                "samples": samples[p],
                "native_samples": native[p],
                "self": own[p].most_common(top),
                "inclusive": anywhere[p].most_common(top * 2),
            }
            for p in PHASES
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here")
    args = parser.parse_args()
    out = []
    for path in args.recordings:
        summary = summarize(path, args.top)
        out.append(summary)
        print(f"== {path}")
        for phase, data in summary["phases"].items():
            if not data["samples"]:
                continue
            print(f"-- {phase}: {data['samples']} samples ({data['native_samples']} native)")
            print("   self:")
            for name, count in data["self"]:
                print(f"   {count:6d} {100 * count / data['samples']:5.1f}%  {name}")
            print("   inclusive:")
            for name, count in data["inclusive"]:
                print(f"   {count:6d} {100 * count / data['samples']:5.1f}%  {name}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
