"""frazil's checkpoint file manager (dev.frazil.hadoop.DirectCheckpointFileManager) on the local
stack's real object store through S3A, and on a local folder: a log entry appears whole when
closed and never when cancelled, an existing entry is not overwritten unless asked, and no
temporary file is left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from frazil.engine.session import DIRECT_CHECKPOINTS
from tests.integration.stack import SessionStack

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ALREADY_EXISTS = "org.apache.hadoop.fs.FileAlreadyExistsException"


def _manager(spark: Any, root: str, settings: dict[str, str]) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    for key, value in settings.items():
        conf.set(key, value)
    path = jvm.org.apache.hadoop.fs.Path(root)
    manager = getattr(jvm, DIRECT_CHECKPOINTS)(path, conf)
    return jvm, manager


def _write(manager: Any, path: Any, text: str, *, overwrite: bool = False) -> Any:
    out = manager.createAtomic(path, overwrite)
    out.write(bytearray(text.encode()))
    return out


def _read(jvm: Any, manager: Any, path: Any) -> str:
    stream = manager.open(path)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def _names(manager: Any, folder: Any) -> list[str]:
    return sorted(str(s.getPath().getName()) for s in manager.list(folder))


def _already_exists(jvm: Any, error: Py4JJavaError) -> bool:
    """Whether Spark's metadata logs take ``error`` for an entry written already: Hadoop's
    ``FileAlreadyExistsException`` or a subclass (Spark's own, from its FileSystem-based
    manager)."""
    wanted = jvm.java.lang.Class.forName(ALREADY_EXISTS)
    return bool(wanted.isInstance(error.java_exception))


def _check(spark: Any, root: str, settings: dict[str, str]) -> None:
    jvm, manager = _manager(spark, root, settings)
    folder = jvm.org.apache.hadoop.fs.Path(f"{root}/offsets")
    entry = jvm.org.apache.hadoop.fs.Path(f"{root}/offsets/0")
    manager.mkdirs(folder)  # as Spark's metadata logs do first

    out = _write(manager, entry, "v1\nfirst")
    out.close()
    assert manager.exists(entry) and _read(jvm, manager, entry) == "v1\nfirst"

    # An entry that exists is refused, by the type Spark's metadata logs look for.
    with pytest.raises(Py4JJavaError) as refused:
        _write(manager, entry, "v1\nsecond").close()
    assert _already_exists(jvm, refused.value)
    assert _read(jvm, manager, entry) == "v1\nfirst"

    # Two writers of one entry: the second to finish is refused and leaves the first's.
    racing = jvm.org.apache.hadoop.fs.Path(f"{root}/offsets/2")
    slow = _write(manager, racing, "v1\nslow")
    _write(manager, racing, "v1\nfast").close()
    with pytest.raises(Py4JJavaError) as lost:
        slow.close()
    assert _already_exists(jvm, lost.value)
    assert _read(jvm, manager, racing) == "v1\nfast"
    manager.delete(racing)

    _write(manager, entry, "v1\nreplaced", overwrite=True).close()
    assert _read(jvm, manager, entry) == "v1\nreplaced"

    cancelled = jvm.org.apache.hadoop.fs.Path(f"{root}/offsets/1")
    out = _write(manager, cancelled, "v1\nnever")
    out.cancel()
    out.close()  # after cancel: nothing more happens
    assert not manager.exists(cancelled)
    # Spark skips hidden names (a refused rename leaves its temporary ".0.<uuid>.tmp").
    assert [n for n in _names(manager, folder) if not n.startswith(".")] == ["0"]


@pytest.mark.parametrize("scheme", ["s3a", "s3"])
def test_on_the_object_store_entries_are_written_in_place(
    spark: Any, stack: SessionStack, unique: str, scheme: str
) -> None:
    """``s3://`` is S3A too (frazil maps it), but has no FileContext binding: Spark's own
    choice for it is the FileSystem-based manager, which this one must keep."""
    stack.require("s3")
    root = f"{scheme}://{stack.bucket}/tests/{unique}/checkpoint"
    _check(
        spark,
        root,
        {
            "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3a.endpoint": stack.s3_endpoint,
            "fs.s3a.endpoint.region": stack.region,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": stack.access_key,
            "fs.s3a.secret.key": stack.secret_key,
            "fs.s3a.aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
        },
    )
    # Nothing else in the store: a write renamed into place leaves its temporary object
    # behind when the rename is refused, as the refused entry's was above.
    import pyarrow.fs as pafs

    store = pafs.S3FileSystem(
        access_key=stack.access_key,
        secret_key=stack.secret_key,
        endpoint_override=stack.s3_endpoint,
        scheme="http",
        region=stack.region,
    )
    found = store.get_file_info(
        pafs.FileSelector(f"{stack.bucket}/tests/{unique}/checkpoint", recursive=True)
    )
    assert sorted(f.path.rsplit("/checkpoint/", 1)[1] for f in found if f.is_file) == ["offsets/0"]


def test_on_a_local_folder_entries_are_renamed_into_place(spark: Any, tmp_path: Path) -> None:
    _check(spark, (tmp_path / "checkpoint").as_uri(), {})
    files = sorted(p.name for p in (tmp_path / "checkpoint").rglob("*") if p.is_file())
    assert [f for f in files if not f.startswith(".")] == ["0"]
    # Spark's own way there: a temporary file while the entry is written, renamed on close.
    jvm, manager = _manager(spark, (tmp_path / "checkpoint").as_uri(), {})
    out = _write(
        manager, jvm.org.apache.hadoop.fs.Path((tmp_path / "checkpoint/offsets/5").as_uri()), "v1"
    )
    assert any(p.name.endswith(".tmp") for p in (tmp_path / "checkpoint/offsets").iterdir())
    out.close()
    assert (tmp_path / "checkpoint/offsets/5").read_text() == "v1"
