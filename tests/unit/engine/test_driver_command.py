"""The driver JVM's command as Spark's launcher builds it, kept between runs."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from frazil.engine import driver_command
from frazil.engine.driver_command import DriverCommand

# Stands in for Spark's launcher JVM: a line of its own output, the NUL line, then the
# command it would print (here: "java", the driver's Java options, then SparkSubmit and its
# arguments, the settings in another order, as Spark's launcher has them), each argument
# NUL-ended; every run is counted.
FAKE_JAVA = r"""#!/bin/sh
echo run >> "$COUNT"
printf 'a message of the launcher\n\0\n'
printf '%s\0' /opt/java/bin/java -cp '/spark/jars/*'
for arg in "$@"; do
  case "$arg" in
    spark.driver.extraJavaOptions=*) printf '%s\0' ${arg#spark.driver.extraJavaOptions=} ;;
  esac
done
while [ "$1" != org.apache.spark.launcher.Main ]; do shift; done
shift
printf '%s\0' "$1"
shift
settings=""
while [ "$1" = --conf ]; do settings="$2
$settings"; shift 2; done
printf '%s' "$settings" | while IFS= read -r value; do printf '%s\0' --conf "$value"; done
printf '%s\0' "$@"
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Spark home with the launcher's inputs, a fake java and its own cache folder."""
    spark = tmp_path / "spark"
    (spark / "bin").mkdir(parents=True)
    (spark / "jars").mkdir()
    (spark / "jars" / "spark-launcher_2.13-4.1.1.jar").write_bytes(b"")
    (spark / "bin" / "load-spark-env.sh").write_text("export SPARK_SCALA_VERSION=2.13\n")
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(FAKE_JAVA)
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    for key in list(os.environ):
        if key.startswith(("SPARK_", "PYSPARK_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    monkeypatch.setenv("COUNT", str(tmp_path / "count"))
    monkeypatch.setenv("FRAZIL_CACHE_DIR", str(tmp_path / "cache"))
    return spark


def _runs(home: Path) -> int:
    count = home.parent / "count"
    return len(count.read_text().splitlines()) if count.exists() else 0


def _settings(token: str, memory: str = "1g") -> dict[str, str]:
    return {
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": f"-Dfrazil.run={token} -Xss4m",
    }


def test_the_launchers_command_without_its_messages(home: Path) -> None:
    command = DriverCommand(home, _settings("t1"), per_run=("t1",))

    assert command.argv() == [
        "/opt/java/bin/java",
        "-cp",
        "/spark/jars/*",
        "-Dfrazil.run=t1",
        "-Xss4m",
        "org.apache.spark.deploy.SparkSubmit",
        "--conf",
        "spark.driver.memory=1g",
        "--conf",
        "spark.driver.extraJavaOptions=-Dfrazil.run=t1 -Xss4m",
        "pyspark-shell",
    ]


def test_runs_with_another_token_share_the_kept_command(home: Path) -> None:
    first = DriverCommand(home, _settings("t1"), per_run=("t1",))
    first.argv()
    second = DriverCommand(home, _settings("t2"), per_run=("t2",))

    assert second.key == first.key
    assert "-Dfrazil.run=t2" in second.argv()
    assert _runs(home) == 1
    kept_file = next((driver_command.cache_dir() / "driver-command").glob("*.json"))
    kept = json.loads(kept_file.read_text())
    assert "-Dfrazil.run=@frazil-per-run-0@" in kept["java"]


def test_another_setting_or_environment_builds_it_again(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    DriverCommand(home, _settings("t1"), per_run=("t1",)).argv()
    DriverCommand(home, _settings("t1", memory="2g"), per_run=("t1",)).argv()
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/more/jars")
    DriverCommand(home, _settings("t1"), per_run=("t1",)).argv()
    monkeypatch.delenv("SPARK_DIST_CLASSPATH")
    (home / "conf").mkdir()
    (home / "conf" / "spark-defaults.conf").write_text("spark.driver.cores 2\n")
    DriverCommand(home, _settings("t1"), per_run=("t1",)).argv()

    assert _runs(home) == 4


def test_a_forgotten_command_is_built_again(home: Path) -> None:
    command = DriverCommand(home, _settings("t1"), per_run=("t1",))
    command.argv()
    command.forget()
    command.argv()

    assert _runs(home) == 2


def test_only_the_newest_commands_are_kept(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_command, "KEPT", 3)
    for memory in ("1g", "2g", "3g", "4g", "5g"):
        DriverCommand(home, _settings("t", memory=memory), per_run=("t",)).argv()

    assert len(list((driver_command.cache_dir() / "driver-command").glob("*.json"))) == 3


def test_a_launcher_that_prints_no_command_is_an_error(home: Path) -> None:
    java = home.parent / "jdk" / "bin" / "java"
    java.write_text("#!/bin/sh\necho 'Error: no such class'\n")

    with pytest.raises(ValueError, match="no such class"):
        DriverCommand(home, _settings("t1")).argv()


def test_left_to_sparks_scripts_where_they_could_change_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert DriverCommand.usable(home)
    monkeypatch.setenv("FRAZIL_DRIVER_COMMAND", "0")
    assert not DriverCommand.usable(home)
    monkeypatch.delenv("FRAZIL_DRIVER_COMMAND")
    monkeypatch.setenv("SPARK_TESTING", "1")
    assert not DriverCommand.usable(home)
    monkeypatch.delenv("SPARK_TESTING")
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--jars x.jar pyspark-shell")
    assert not DriverCommand.usable(home)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (home / "conf").mkdir()
    (home / "conf" / "spark-env.sh").write_text("export SPARK_WORKER_CORES=1\n")
    assert not DriverCommand.usable(home)


def test_the_environment_spark_class_hands_the_jvm(home: Path) -> None:
    env = DriverCommand(home, {}).environment

    assert env["SPARK_HOME"] == str(home)
    assert env["SPARK_SCALA_VERSION"] == "2.13"
    assert env["SPARK_ENV_LOADED"] == "1"
    assert env["SPARK_CONF_DIR"] == str(home / "conf")
    assert env["PYTHONHASHSEED"] == "0"


def test_the_settings_after_sparksubmit_are_not_kept(home: Path) -> None:
    settings = {**_settings("t1"), "spark.sql.catalog.lake.credential": "client:secret"}
    command = DriverCommand(home, settings, per_run=("t1",))

    argv = command.argv()

    assert argv[-3:] == [
        "--conf",
        "spark.sql.catalog.lake.credential=client:secret",
        "pyspark-shell",
    ]
    kept = next((driver_command.cache_dir() / "driver-command").glob("*.json"))
    assert "secret" not in kept.read_text()
    assert kept.stat().st_mode & 0o077 == 0
    assert DriverCommand(home, settings, per_run=("t1",)).argv() == argv
    assert _runs(home) == 1


def test_a_launcher_that_changes_the_settings_leaves_nothing_kept(home: Path) -> None:
    java = home.parent / "jdk" / "bin" / "java"
    java.write_text(
        "#!/bin/sh\necho run >> \"$COUNT\"\nprintf '\\0\\n'\n"
        "printf '%s\\0' /opt/java/bin/java org.apache.spark.deploy.SparkSubmit "
        "--conf spark.driver.memory=2g pyspark-shell\n"
    )
    command = DriverCommand(home, _settings("t1"), per_run=("t1",))

    assert command.argv()[-2:] == ["spark.driver.memory=2g", "pyspark-shell"]
    assert not (driver_command.cache_dir() / "driver-command").exists()


def test_settings_the_launcher_does_not_read_share_the_kept_command(home: Path) -> None:
    first = {**_settings("t1"), "spark.app.name": "orders", "spark.sql.catalog.lake.uri": "a"}
    second = {**_settings("t2"), "spark.app.name": "clicks", "spark.sql.catalog.lake.uri": "b"}

    DriverCommand(home, first, per_run=("t1",)).argv()
    argv = DriverCommand(home, second, per_run=("t2",)).argv()

    assert _runs(home) == 1
    assert argv[argv.index("org.apache.spark.deploy.SparkSubmit") :] == [
        "org.apache.spark.deploy.SparkSubmit",
        "--conf",
        "spark.driver.memory=1g",
        "--conf",
        "spark.driver.extraJavaOptions=-Dfrazil.run=t2 -Xss4m",
        "--conf",
        "spark.app.name=clicks",
        "--conf",
        "spark.sql.catalog.lake.uri=b",
        "pyspark-shell",
    ]
    master = DriverCommand(home, {**second, "spark.master": "spark://10.0.0.1:7077"})
    master.argv()
    assert _runs(home) == 2


def test_a_launcher_of_another_spark_gets_every_setting(home: Path) -> None:
    (home / "jars" / "spark-launcher_2.13-4.1.1.jar").rename(
        home / "jars" / "spark-launcher_2.13-4.2.0.jar"
    )
    DriverCommand(home, {**_settings("t1"), "spark.app.name": "orders"}, per_run=("t1",)).argv()
    DriverCommand(home, {**_settings("t2"), "spark.app.name": "clicks"}, per_run=("t2",)).argv()

    # It might read a setting the 4.1 launchers do not: each set of settings is its own.
    assert _runs(home) == 2
