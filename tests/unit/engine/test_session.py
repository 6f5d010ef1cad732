"""Spark settings frazil derives from a config, without starting Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from frazil.config import parse_config
from frazil.engine import session
from frazil.engine.jvm_tuning import is_local
from frazil.engine.session import jar_conf, spark_conf

JARS = [Path("/cache/a.jar"), Path("/cache/b.jar")]


def _conf(spark: dict[str, object]) -> dict[str, str]:
    config = parse_config(
        {"spark": spark, "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}]}
    )
    return spark_conf(config, JARS, run_token="tok")


def test_local_mode_puts_jars_on_the_driver_classpath() -> None:
    assert jar_conf("local[2]", JARS) == {
        "spark.driver.extraClassPath": "/cache/a.jar:/cache/b.jar"
    }
    assert jar_conf("local", JARS) == {"spark.driver.extraClassPath": "/cache/a.jar:/cache/b.jar"}
    # The driver runs here whatever the master (its class-data archive maps); a cluster's
    # executors need the jars shipped to them...
    assert jar_conf("spark://h:7077", JARS) == {
        "spark.driver.extraClassPath": "/cache/a.jar:/cache/b.jar",
        "spark.jars": "/cache/a.jar,/cache/b.jar",
    }
    # ... except a cluster on this machine's loopback: its workers run here too.
    assert jar_conf("spark://127.0.0.1:7077", JARS) == {
        "spark.driver.extraClassPath": "/cache/a.jar:/cache/b.jar",
        "spark.executor.extraClassPath": "/cache/a.jar:/cache/b.jar",
    }
    assert is_local("local[*]") and not is_local("localhost") and not is_local("yarn")


def test_unsigned_copies_stay_on_the_drivers_classpath() -> None:
    copy = Path("/cache/jars/unsigned/1234abcd/janino-3.1.9.jar")
    jars = [copy, *JARS]
    remote = jar_conf("spark://h:7077", jars)
    assert remote["spark.driver.extraClassPath"].startswith(f"{copy}:")
    # A remote executor loads pyspark's Janino first anyway: the copy is not shipped.
    assert remote["spark.jars"] == "/cache/a.jar,/cache/b.jar"
    near = jar_conf("spark://127.0.0.1:7077", jars)
    assert near["spark.executor.extraClassPath"].startswith(f"{copy}:")


def test_user_java_options_are_appended_not_replacing_frazils() -> None:
    conf = _conf({"conf": {"spark.driver.extraJavaOptions": "-XX:+UseG1GC -Dx=1"}})
    opts = conf["spark.driver.extraJavaOptions"]
    # The run fence's token and the log settings stay; the user's flags come last and win.
    assert "-Dfrazil.run=tok" in opts
    assert "-Dlog4j2.configurationFile=" in opts
    assert opts.endswith("-XX:+UseG1GC -Dx=1")
    # The JVM refuses two collectors: the user's choice replaces frazil's.
    assert "-XX:+UseSerialGC" not in opts and "-XX:+UseParallelGC" not in opts
    plain = _conf({"conf": {"spark.driver.extraJavaOptions": "-Dx=1"}})
    assert "GC " in plain["spark.driver.extraJavaOptions"]


def test_a_local_driver_starts_with_its_whole_heap() -> None:
    opts = _conf({"driver_memory": "3g"})["spark.driver.extraJavaOptions"]
    assert " -Xms3g" in opts
    mine = _conf({"conf": {"spark.driver.extraJavaOptions": "-Xms256m"}})
    # The user's comes last: the JVM takes it.
    assert mine["spark.driver.extraJavaOptions"].endswith("-Xms256m")
    remote = _conf({"master": "spark://h:7077"})["spark.driver.extraJavaOptions"]
    assert "-Xms" not in remote


def test_user_classpath_is_added_after_frazils_jars() -> None:
    conf = _conf({"conf": {"spark.driver.extraClassPath": "/opt/extra.jar"}})
    assert conf["spark.driver.extraClassPath"] == "/cache/a.jar:/cache/b.jar:/opt/extra.jar"
    assert "spark.jars" not in conf
    remote = _conf({"master": "spark://h:7077"})
    assert remote["spark.jars"] == "/cache/a.jar,/cache/b.jar"
    assert remote["spark.driver.extraClassPath"] == "/cache/a.jar:/cache/b.jar"
    assert "spark.executor.extraClassPath" not in remote
    near = _conf(
        {
            "master": "spark://127.0.0.1:7077",
            "conf": {"spark.executor.extraClassPath": "/opt/extra.jar"},
        }
    )
    assert near["spark.executor.extraClassPath"] == "/cache/a.jar:/cache/b.jar:/opt/extra.jar"
    assert "spark.jars" not in near


def test_executors_on_this_machine_share_the_drivers_archive_and_logging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session, "cds_java_options", lambda: "-XX:SharedArchiveFile=/x.jsa")
    near = _conf(
        {
            "master": "spark://127.0.0.1:7077",
            "conf": {"spark.executor.extraJavaOptions": "-Dx=1"},
        }
    )
    opts = near["spark.executor.extraJavaOptions"]
    assert "-XX:SharedArchiveFile=/x.jsa" in opts
    assert "-Dlog4j2.configurationFile=" in opts
    # The user's options come last and win.
    assert opts.endswith(" -Dx=1")
    # Executors elsewhere load the jars Spark copies to them: nothing of this machine's.
    assert "spark.executor.extraJavaOptions" not in _conf({"master": "spark://h:7077"})


def test_a_driver_sharing_few_cores_with_its_executors_compiles_with_c1_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(session.os, "cpu_count", lambda: 2)
    # The local stack (a master on the loopback address): the driver only plans and commits.
    near = _conf({"master": "spark://127.0.0.1:7077"})
    driver = near["spark.driver.extraJavaOptions"]
    assert "-XX:TieredStopAtLevel=1" in driver
    assert "-XX:ReservedCodeCacheSize=240m" in driver
    # The executors run the tasks: C2 kept for what is hot, not for their start-up, and the
    # serial collector on two cores.
    executor = near["spark.executor.extraJavaOptions"]
    assert "TieredStopAtLevel" not in executor
    assert "-XX:Tier4InvocationThreshold=20000" in executor
    assert "-XX:+UseSerialGC" in executor
    # A user's flags come after frazil's: the JVM takes the last, C2 and G1 are back.
    user = _conf(
        {
            "master": "spark://127.0.0.1:7077",
            "conf": {
                "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=4",
                "spark.executor.extraJavaOptions": "-XX:+UseG1GC -XX:TieredStopAtLevel=4",
            },
        }
    )
    executor = user["spark.executor.extraJavaOptions"]
    assert executor.endswith("-XX:+UseG1GC -XX:TieredStopAtLevel=4")
    assert executor.count("GC") == 1
    driver = user["spark.driver.extraJavaOptions"]
    assert driver.index("TieredStopAtLevel=1") < driver.index("TieredStopAtLevel=4")
    # Local mode keeps C2 (the tasks run there) and a remote cluster's JVMs are untouched.
    assert "TieredStopAtLevel" not in _conf({})["spark.driver.extraJavaOptions"]
    remote = _conf({"master": "spark://h:7077"})
    assert "TieredStopAtLevel" not in remote["spark.driver.extraJavaOptions"]
    assert "spark.executor.extraJavaOptions" not in remote


def test_a_stack_on_more_cores_keeps_the_jvms_compilers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session.os, "cpu_count", lambda: 8)
    near = _conf({"master": "spark://127.0.0.1:7077"})
    assert "TieredStopAtLevel" not in near["spark.driver.extraJavaOptions"]
    executor = near["spark.executor.extraJavaOptions"]
    assert "Tier4" not in executor
    assert "-XX:+UseParallelGC" in executor


def test_default_driver_heap_is_sparks_own() -> None:
    assert _conf({})["spark.driver.memory"] == "1g"


def test_local_files_get_their_permissions_without_a_process() -> None:
    # Hadoop runs `chmod` per created file without its native library; frazil's file system
    # (in its jar, on the local JVM's classpath) sets the bits through java.nio instead.
    assert _conf({})["spark.hadoop.fs.file.impl"] == session.LOCAL_FILE_SYSTEM
    # A cluster's executors may not have the jar at that point: Hadoop's own stays.
    assert "spark.hadoop.fs.file.impl" not in _conf({"master": "spark://h:7077"})
    # A user's choice wins.
    own = _conf({"conf": {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}})
    assert own["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.LocalFileSystem"


def test_icebergs_worker_pool_takes_the_commits_of_a_routed_batch_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from frazil.engine.threads import FANOUT_THREADS

    monkeypatch.delenv("ICEBERG_WORKER_NUM_THREADS", raising=False)
    monkeypatch.setattr(session.os, "cpu_count", lambda: 2)
    opts = _conf({})["spark.driver.extraJavaOptions"]
    assert f"-Diceberg.worker.num-threads={session.ICEBERG_WORKER_THREADS}" in opts
    assert session.ICEBERG_WORKER_THREADS >= FANOUT_THREADS
    # Never fewer than Iceberg's own default (a thread per core).
    monkeypatch.setattr(session.os, "cpu_count", lambda: 64)
    assert "-Diceberg.worker.num-threads=64" in _conf({})["spark.driver.extraJavaOptions"]
    # The user's own setting comes later on the command line, and the JVM takes the last.
    user = _conf({"conf": {"spark.driver.extraJavaOptions": "-Diceberg.worker.num-threads=4"}})
    assert user["spark.driver.extraJavaOptions"].endswith("-Diceberg.worker.num-threads=4")
    # Iceberg's environment variable would lose to a system property: frazil sets none then.
    monkeypatch.setenv("ICEBERG_WORKER_NUM_THREADS", "3")
    assert "iceberg.worker.num-threads" not in _conf({})["spark.driver.extraJavaOptions"]


def test_a_local_driver_keeps_c2_off_code_that_never_runs_per_record() -> None:
    import json
    import re

    opts = _conf({})["spark.driver.extraJavaOptions"]
    found = re.search(r"-XX:CompilerDirectivesFile=(\S+)", opts)
    assert found is not None
    assert opts.index("-XX:+UnlockDiagnosticVMOptions") < found.start()
    # "1 compiler directives added" goes to the JVM's log, not to stdout (`sql -o json`).
    assert "-XX:+DisplayVMOutputToStderr" in opts
    directives = json.loads(Path(found.group(1)).read_text())
    assert directives[0]["c2"] == {"Exclude": True}
    # Start-up and per-batch code only: the SQL parser, Janino, class loading...
    assert {"org/antlr/*.*", "org/codehaus/janino/*.*", "java/util/jar/*.*"} <= set(
        directives[0]["match"]
    )
    # ... never the per-record path (decoding, Parquet, Kafka's records).
    assert not any(
        pattern.startswith(("com/fasterxml/jackson/core", "org/apache/parquet", "org/apache/kafka"))
        for pattern in directives[0]["match"]
    )
    # Without tiered compilation there is no C1 to take that code: no directives then.
    untiered = _conf({"conf": {"spark.driver.extraJavaOptions": "-XX:-TieredCompilation"}})
    assert "CompilerDirectivesFile" not in untiered["spark.driver.extraJavaOptions"]
    # A cluster's driver, and a session that only resolves plans, run C1 or the JVM's own.
    assert (
        "CompilerDirectivesFile"
        not in _conf({"master": "spark://h:7077"})["spark.driver.extraJavaOptions"]
    )


def test_paths_with_spaces_reach_the_jvm_whole(tmp_path: Path) -> None:
    import shlex

    state = tmp_path / "My Projects" / "state"
    config = parse_config(
        {
            "state_dir": str(state),
            "pipelines": [{"name": "a", "topics": ["t"], "table": "db.a"}],
        }
    )
    opts = shlex.split(spark_conf(config, JARS, run_token="tok")["spark.driver.extraJavaOptions"])
    assert f"-Dfrazil.log.file={state / 'logs' / 'spark.log'}" in opts


def test_constraint_propagation_is_off_unless_the_user_turns_it_on() -> None:
    # Exponential in the aliases of a batch's projection (a routed Debezium batch of 13
    # columns ran out of heap planning); a user's setting still wins.
    key = "spark.sql.constraintPropagation.enabled"
    assert _conf({})[key] == "false"
    assert _conf({"conf": {key: "true"}})[key] == "true"
