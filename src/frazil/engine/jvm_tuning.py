"""How frazil tunes the Spark JVMs it starts, by where they run: the collector, the heap, and
the JIT (its thresholds and compiler directives) of a local driver that runs the tasks, of a
session that only resolves plans, and of a driver and executors of the local stack sharing a
few cores. :func:`frazil.engine.session.spark_conf` puts these options before the user's own
``extraJavaOptions``, which come last and win.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path

from frazil.jvm.options import java_option

#: An analysis session's JIT: the client compiler only.
ANALYSIS_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)
#: JIT thresholds for a local driver, 4-5x HotSpot's defaults. Spark runs tens of thousands of
#: methods once or a few times (start-up, planning): with the defaults the JIT compiles them
#: all and takes a whole core for the first ~25 s of a run, next to the two task threads.
#: Higher thresholds leave run-once code interpreted and still compile the per-record loop
#: (measured: ~12% less CPU and ~10% less time on 2M records, docs/benchmarks.md).
JIT_OPTIONS = (
    "-XX:Tier3InvocationThreshold=1000",
    "-XX:Tier3MinInvocationThreshold=500",
    "-XX:Tier3CompileThreshold=5000",
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=5000",
    "-XX:Tier4CompileThreshold=30000",
)

#: Code a local driver runs at start-up and once per batch, never per record, that C2 is not
#: to compile (HotSpot's compiler directives; C1 still does, without profiling): the SQL
#: parser, Janino, the bytecode spinning of lambdas and method handles, jar and class
#: loading, Hadoop's XML configuration, py4j. C2 compiled for 2.3 s of a ~4 s start and 1.9 s
#: of a 2.6 s first batch, beside the tasks on two cores, much of it such code (ASM's frames,
#: ANTLR, jar entries); with these directives 1.0 s and 1.4 s (compilation logs). 2M records
#: in 3 paired rounds: 14.7 s and 21.2 CPU seconds against 15.9 s and 24.1 (medians,
#: docs/benchmarks.md). Catalyst's planning (trees, analysis, optimizer, plans, rules) and
#: Spark's closure cleaner, run for every batch, came later: C2 took ~0.2 CPU-s less of a 2M
#: run's steady state, the whole run 0.95-0.97x the CPU in three A/B runs. A user's own
#: ``-XX:CompilerDirectivesFile`` comes later and wins.
JIT_DIRECTIVES = "jit_directives.json"
#: ``FRAZIL_JIT_DIRECTIVES=0``: C2 compiles whatever gets hot, as HotSpot decides.
JIT_DIRECTIVES_ENV = "FRAZIL_JIT_DIRECTIVES"


#: The JIT of a driver whose executors run on this machine (a master on the loopback address:
#: the local stack), on two cores or fewer: C1 only. That driver runs no task, only plans and
#: commits, next to the executors and the stack's servers on the same cores, and its C2
#: compiler mostly compiled the start-up's class loading, lambda spinning and
#: deserialization: 12-17 of the driver's 20-30 CPU seconds on 1-3M records. With C1 alone on
#: 3M records the run took 0.81x the time (0.61x -> 0.76x local[2]'s events/s) and the warm
#: batches kept their pace. The executors keep C2 (below): with C1 alone their warm batches
#: took 1.35x as long (docs/benchmarks.md, "The cluster's JIT"). The user's extraJavaOptions
#: come after and win (``-XX:TieredStopAtLevel=4`` restores C2).
STACK_DRIVER_JIT_OPTIONS = (
    "-XX:TieredStopAtLevel=1",
    # C1 alone would also shrink the code cache to 48 MB, unsegmented: a long-running driver
    # could fill it and have its compiler turned off. Tiered compilation's size is kept.
    "-XX:ReservedCodeCacheSize=240m",
)

#: The JIT of the executors on this machine (the local stack's): C2 for methods called tens of
#: thousands of times, not thousands (HotSpot's Tier4 thresholds are 5,000/600/15,000), as a
#: local driver's. Each executor loads ~17,000 classes and deserializes its tasks, and with the
#: defaults C2 compiled that start-up code in both JVMs (15-18 of their ~30 CPU seconds on 1M
#: records) while their first batches ran. Thresholds three to four times these
#: (60,000/20,000/90,000) left the per-record path longer in C1's profiling tier: over 8 paired
#: rounds on 1M records these kept 0.90x local[2]'s events/s after the first commit against
#: 0.80x (ahead in 7 of 8 rounds), and 0.74x against 0.70x end to end, within the rounds'
#: spread (docs/benchmarks.md, 2026-11-27; measured on 1M only). C1's thresholds stay HotSpot's:
#: raising them too, as a local driver's are, was slower (2026-11-26, 3M: 0.69x against 0.76x).
STACK_EXECUTOR_JIT_OPTIONS = (
    "-XX:Tier4InvocationThreshold=20000",
    "-XX:Tier4MinInvocationThreshold=5000",
    "-XX:Tier4CompileThreshold=30000",
)

#: A collector chosen in a JVM's options (``-XX:+UseG1GC``, ...).
GC_FLAG = re.compile(r"-XX:\+Use\w*GC\b")


def is_local(master: str) -> bool:
    """Whether ``master`` runs executors inside the driver JVM (``local``, ``local[N]``...)."""
    return master == "local" or master.startswith("local[")


def gc_option(master: str) -> str:
    """The driver JVM's garbage collector: a throughput collector, not the default G1.

    A micro-batch lasts seconds, so pauses of tens of milliseconds do not matter while every
    CPU-second does. G1's concurrent work and write barriers made a 2M-record run ~15% slower
    on a 2-core machine (docs/benchmarks.md); the serial collector runs the same batches in as
    little CPU and the smallest footprint when the executors share the driver's few cores, the
    parallel collector when there are more cores or the driver only plans (a cluster).
    """
    if is_local(master) and (os.cpu_count() or 1) <= 2:
        return "-XX:+UseSerialGC"
    return "-XX:+UseParallelGC"


def initial_heap(driver_memory: str) -> str:
    """The local driver's heap at its full size from the start.

    The JVM starts with 1/64 of the machine's memory and the serial collector grows the heap
    only when a full collection leaves too little free: the young generation stayed a third
    of ~375 MB, so a 500k-record batch ran ~20 young collections and a full one every ~1.5 s,
    all stopping the tasks. At full size, a 2M-record run took 0.92x the CPU per record and
    1.14x the events/s (docs/benchmarks.md). A user's own ``-Xms`` comes later and wins.
    """
    return f"-Xms{driver_memory}"


def shares_few_cores(master: str) -> bool:
    """Whether a cluster's driver and executors share this machine's few cores: a master on
    the loopback address (the local stack) on a machine of two cores or fewer, where the
    stack's JIT settings were measured."""
    return on_loopback(master) and (os.cpu_count() or 1) <= 2


def on_loopback(master: str) -> bool:
    """Whether a ``spark://`` master is on this machine's loopback address."""
    from urllib.parse import urlsplit

    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{h}").hostname for h in master[len("spark://") :].split(",")]
    return all(h in ("127.0.0.1", "localhost", "::1") for h in hosts)


def chooses_collector(java_options: str) -> bool:
    """Whether these options choose a collector: the JVM refuses two, so the user's replaces
    frazil's."""
    return bool(GC_FLAG.search(java_options))


def driver_jit_options(master: str, user_options: str, *, analysis: bool) -> str:
    """The driver JVM's JIT options ("" for HotSpot's own): C1 alone for an analysis session;
    a local driver's thresholds and its compiler directives; C1 alone for a driver of the
    local stack on few cores.

    Args:
        master: The session's master.
        user_options: The user's ``spark.driver.extraJavaOptions``.
        analysis: For a session that only resolves plans and samples topics.
    """
    if analysis:
        # Seconds of resolving: C1's quick code at once beats C2's better code later
        # (0.5 s of the session's 2.5 s start-up, measured).
        return " ".join(ANALYSIS_JIT_OPTIONS)
    if is_local(master):
        options = " ".join(JIT_OPTIONS)
        directives = Path(str(resources.files("frazil.engine").joinpath(JIT_DIRECTIVES)))
        if (
            os.environ.get(JIT_DIRECTIVES_ENV, "1") != "0"
            # A JVM given a directives file it cannot read does not start; without tiered
            # compilation there is no C1 for what the directives keep from C2.
            and directives.is_file()
            and "-XX:-TieredCompilation" not in user_options
        ):
            # The JVM says "N compiler directives added" on its own output: on stderr (the
            # JVM's log), not stdout, where `frazil sql -o json` writes its rows.
            options += (
                " -XX:+DisplayVMOutputToStderr -XX:+UnlockDiagnosticVMOptions"
                f" {java_option('-XX:CompilerDirectivesFile=', directives)}"
            )
        return options
    if shares_few_cores(master):
        return " ".join(STACK_DRIVER_JIT_OPTIONS)
    return ""


def executor_jit_options(master: str) -> tuple[str, ...]:
    """The JIT options of executors on this machine (the local stack's): Tier4 thresholds
    raised on few cores, HotSpot's own otherwise."""
    return STACK_EXECUTOR_JIT_OPTIONS if shares_few_cores(master) else ()
