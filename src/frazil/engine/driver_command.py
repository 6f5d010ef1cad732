"""The driver JVM's command line as Spark's launcher builds it, kept between runs.

PySpark starts its JVM through ``bin/spark-submit``: a shell script that runs another
(``spark-class``, which sources ``load-spark-env.sh`` and forks ``ps`` there), which starts
a small JVM (``org.apache.spark.launcher.Main``) only to print the real command, and then
execs it. That costs ~0.3 s of a start whose two cores are busy anyway, and PySpark then
polls for the JVM's connection file in 0.1 s sleeps.

:func:`start_gateway` builds the same command once per set of inputs (the ``--conf``
arguments, the environment the launcher reads, Spark's conf folder, the Java it runs),
keeps it in frazil's cache, and starts the driver JVM with it directly; the gateway then
attaches as PySpark's own would to a JVM started for it. A per-run value (the run fence's
token) is replaced by a placeholder in the kept command, so runs share it.

Anything the launcher's scripts could change that is not among those inputs makes frazil
leave the start to PySpark: a ``spark-env.sh`` (it may export anything), Windows,
``SPARK_TESTING``; so does ``FRAZIL_DRIVER_COMMAND=0``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from frazil.paths import cache_dir

log = logging.getLogger(__name__)

__all__ = ["DriverCommand", "start_gateway"]

#: ``FRAZIL_DRIVER_COMMAND=0``: the driver JVM always starts through Spark's scripts.
DRIVER_COMMAND_ENV = "FRAZIL_DRIVER_COMMAND"
#: Environment variables Spark's launcher and its scripts read (by prefix); the command is
#: built again when any of them changes.
_ENV_PREFIXES = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "JAVA_", "_SPARK")
#: Set per start, never part of the command.
_PER_START = frozenset({"PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"})
#: Commands kept (one per set of inputs); the oldest beyond this are deleted.
KEPT = 32
#: How often the JVM's connection file is looked for.
_POLL_SECONDS = 0.01
_SCALA = re.compile(r"^\s*export\s+SPARK_SCALA_VERSION=(\S+)\s*$", re.MULTILINE)
#: The settings Spark's launcher reads to build the JVM's part of the command (Spark 4.1's
#: ``SparkSubmitCommandBuilder``: client mode or not, Spark Connect's switches) besides the
#: driver's own (``spark.driver.*``). It passes the others on to SparkSubmit as they are, so
#: pipelines whose settings differ only there (a catalog, a name) share one kept command.
_LAUNCHER_READS = frozenset(
    {"spark.master", "spark.submit.deployMode", "spark.remote", "spark.api.mode"}
)
#: The launchers :data:`_LAUNCHER_READS` was read from (their jar's name); another gets
#: every setting, as it could read more.
_LAUNCHER_READ = re.compile(r"spark-launcher_2\.13-4\.1\.\d+\.jar")


class DriverCommand:
    """The driver JVM's command for one set of ``--conf`` settings, built by Spark's
    launcher or read from the cache.

    Args:
        spark_home: PySpark's home (its ``bin`` and ``jars``).
        settings: The ``--conf`` settings, in order.
        per_run: Values that differ per run (e.g. a token on the JVM's command line): kept
            as placeholders, put back in :meth:`argv`.
        environ: The environment to start from (default: this process's).
    """

    def __init__(
        self,
        spark_home: Path,
        settings: dict[str, str],
        per_run: tuple[str, ...] = (),
        environ: dict[str, str] | None = None,
    ) -> None:
        self.spark_home = spark_home
        self._per_run = {f"@frazil-per-run-{i}@": value for i, value in enumerate(per_run)}
        self._settings = {k: self._template(v) for k, v in settings.items()}
        self._environ = dict(os.environ if environ is None else environ)

    @classmethod
    def usable(cls, spark_home: Path, environ: dict[str, str] | None = None) -> bool:
        """Whether the command can be built and run without Spark's scripts (else PySpark
        starts the JVM itself)."""
        env = os.environ if environ is None else environ
        if env.get(DRIVER_COMMAND_ENV, "1") == "0":
            return False
        if sys.platform == "win32" or env.get("SPARK_TESTING") or env.get("SPARK_SQL_TESTING"):
            return False
        if env.get("SPARK_PREPEND_CLASSES") or "PYSPARK_SUBMIT_ARGS" in env:
            return False
        conf_dir = Path(env.get("SPARK_CONF_DIR") or spark_home / "conf")
        return (
            not (conf_dir / "spark-env.sh").exists()
            and (spark_home / "jars").is_dir()
            and _scala_version(spark_home) is not None
            and _java(env) is not None
        )

    def _template(self, value: str) -> str:
        for placeholder, real in self._per_run.items():
            value = value.replace(real, placeholder)
        return value

    @property
    def environment(self) -> dict[str, str]:
        """The environment Spark's scripts would hand the JVM (and the launcher)."""
        env = dict(self._environ)
        env.setdefault("SPARK_HOME", str(self.spark_home))
        env["SPARK_ENV_LOADED"] = "1"
        env.setdefault("SPARK_CONF_DIR", str(self.spark_home / "conf"))
        env["SPARK_SCALA_VERSION"] = _scala_version(self.spark_home) or ""
        env["PYTHONHASHSEED"] = "0"
        return env

    def _launcher_args(self, every: bool = False) -> list[str]:
        """SparkSubmit and its arguments: the settings the launcher reads, or ``every`` one."""
        every = every or not self._launcher_known
        args = ["org.apache.spark.deploy.SparkSubmit"]
        for key, value in self._settings.items():
            if every or key in _LAUNCHER_READS or key.startswith("spark.driver."):
                args += ["--conf", f"{key}={value}"]
        return [*args, "pyspark-shell"]

    @cached_property
    def _launcher_known(self) -> bool:
        """Whether Spark's launcher is one whose settings :data:`_LAUNCHER_READS` names."""
        jars = [p.name for p in (self.spark_home / "jars").glob("spark-launcher*")]
        return len(jars) == 1 and _LAUNCHER_READ.fullmatch(jars[0]) is not None

    @property
    def key(self) -> str:
        """What the command depends on, hashed."""
        env = self.environment
        conf_dir = Path(env["SPARK_CONF_DIR"])
        defaults = conf_dir / "spark-defaults.conf"
        inputs = {
            "args": self._launcher_args(),
            "env": sorted(
                (k, v)
                for k, v in env.items()
                if k.startswith(_ENV_PREFIXES) and k not in _PER_START
            ),
            "java": _java(env),
            "launcher": sorted(str(p) for p in (self.spark_home / "jars").glob("spark-launcher*")),
            "defaults": defaults.read_text() if defaults.is_file() else None,
        }
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:24]

    @property
    def _file(self) -> Path:
        return cache_dir() / "driver-command" / f"{self.key}.json"

    def argv(self) -> list[str]:
        """The JVM's command, from the cache or from Spark's launcher (then kept)."""
        try:
            java = json.loads(self._file.read_text())["java"]
        except (OSError, ValueError, KeyError, TypeError):
            java = self._java_part(self._build())
            if java is None:
                # Not kept: the launcher's command for every setting, as Spark's scripts run.
                return [self._put_back(part) for part in self._build(every=True)]
            self._keep(java)
        return [self._put_back(part) for part in [*java, *self._launcher_args(every=True)]]

    def _java_part(self, command: list[str]) -> list[str] | None:
        """The command before SparkSubmit's class: what is kept. SparkSubmit's arguments (the
        ``--conf`` settings, which may hold credentials) are those passed, in the launcher's
        order; if it changed any, nothing is kept."""
        args = self._launcher_args()
        java = command[: len(command) - len(args)]
        rest = command[len(java) :]
        same = rest[:1] == args[:1] and rest[-1:] == args[-1:]
        return java if same and _settings(rest) == _settings(args) else None

    def forget(self) -> None:
        """Drop the kept command (it did not start a JVM)."""
        self._file.unlink(missing_ok=True)

    def _put_back(self, part: str) -> str:
        for placeholder, real in self._per_run.items():
            part = part.replace(placeholder, real)
        return part

    def _build(self, every: bool = False) -> list[str]:
        """Run Spark's launcher as ``spark-class`` does: it prints the command, NUL-separated;
        given the settings it reads, or ``every`` one."""
        env = self.environment
        java = _java(env)
        assert java is not None
        launcher = [
            java,
            "-Xmx128m",
            *shlex.split(env.get("SPARK_LAUNCHER_OPTS", "")),
            "-cp",
            str(self.spark_home / "jars" / "*"),
            "org.apache.spark.launcher.Main",
            *self._launcher_args(every),
        ]
        out = subprocess.run(launcher, env=env, capture_output=True, check=True).stdout
        # Lines of its own output, then a line holding a NUL, then each argument NUL-ended.
        _, found, command = out.partition(b"\0\n")
        if not found:
            raise ValueError(f"Spark's launcher printed no command: {out[:500]!r}")
        return [part.decode() for part in command.split(b"\0")[:-1]]

    def _keep(self, java: list[str]) -> None:
        folder = self._file.parent
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            kept = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
            for old in kept[: max(0, len(kept) - KEPT + 1)]:
                old.unlink(missing_ok=True)
            temporary = self._file.with_suffix(f".{os.getpid()}.tmp")
            # The JVM's options may hold a password (a key store's): the user's alone.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "w") as out:
                out.write(json.dumps({"java": java}))
            temporary.replace(self._file)
        except OSError as exc:  # a read-only cache: built again next time
            log.debug("could not keep the driver's command: %s", exc)


def start_gateway(command: DriverCommand, stderr: IO[bytes] | None = None) -> Any | None:
    """Start the driver JVM with ``command`` and attach PySpark's gateway to it.

    Returns:
        The gateway (with its ``proc``), or None if the JVM exited before it listened: the
        kept command is dropped and the caller starts the JVM the usual way.
    """
    from pyspark.java_gateway import launch_gateway

    folder = tempfile.mkdtemp()
    info = Path(folder) / "conn"
    env = command.environment
    env["SPARK_CONNECT_MODE"] = "0"
    env["_PYSPARK_DRIVER_CONN_INFO_PATH"] = str(info)
    try:
        proc = subprocess.Popen(
            command.argv(),
            stdin=subprocess.PIPE,  # the JVM exits when this pipe closes
            stderr=stderr,
            env=env,
            # As PySpark's own start: Ctrl-C reaches Python, which stops the JVM.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        while proc.poll() is None and not info.is_file():
            time.sleep(_POLL_SECONDS)
        if not info.is_file():
            command.forget()
            log.debug(
                "the kept driver command exited with %s; starting it as Spark does", proc.returncode
            )
            return None
        # PySpark's format: the port, then the secret's length and its UTF-8 bytes.
        port, length = struct.unpack("!ii", (raw := info.read_bytes())[:8])
        secret = raw[8 : 8 + length].decode()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    # PySpark attaches to a running JVM through these two variables; they leave again at
    # once, so that nothing started later takes this JVM for its own.
    os.environ["PYSPARK_GATEWAY_PORT"] = str(port)
    os.environ["PYSPARK_GATEWAY_SECRET"] = secret
    try:
        gateway = launch_gateway()  # type: ignore[no-untyped-call]
    finally:
        os.environ.pop("PYSPARK_GATEWAY_PORT", None)
        os.environ.pop("PYSPARK_GATEWAY_SECRET", None)
    gateway.proc = proc
    return gateway


def _settings(args: list[str]) -> list[str]:
    """SparkSubmit's ``--conf`` values in ``args``, sorted."""
    return sorted(value for flag, value in itertools.pairwise(args) if flag == "--conf")


def _scala_version(spark_home: Path) -> str | None:
    """The Scala version ``load-spark-env.sh`` exports."""
    try:
        found = _SCALA.search((spark_home / "bin" / "load-spark-env.sh").read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def _java(env: dict[str, str] | os._Environ[str]) -> str | None:
    """The ``java`` Spark's scripts run: ``$JAVA_HOME/bin/java``, else the one on the path."""
    home = env.get("JAVA_HOME")
    if home:
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java", path=env.get("PATH"))
    return os.path.realpath(found) if found else None
