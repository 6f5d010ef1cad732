"""Unsigned copies of signed jars (:mod:`frazil.jvm.unsigned`), on jars made here."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from frazil.jvm.unsigned import is_unsigned_copy, main_section, unsigned_copy

MANIFEST = (
    b"Manifest-Version: 1.0\r\nCreated-By: Maven\r\n\r\n"
    b"Name: org/x/A.class\r\nSHA-256-Digest: abc=\r\n\r\n"
)


def _signed_jar(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as jar:
        jar.writestr("META-INF/MANIFEST.MF", MANIFEST)
        jar.writestr("META-INF/DUMMY.SF", b"Signature-Version: 1.0\r\n")
        jar.writestr("META-INF/DUMMY.DSA", b"\x30\x82")
        jar.writestr("META-INF/maven/org.x/x/pom.properties", b"version=1")
        jar.writestr("org/x/A.class", b"\xca\xfe\xba\xbe" + b"\x00" * 100)
    return path


def test_the_copy_drops_the_signature_and_keeps_every_class(tmp_path: Path) -> None:
    source = _signed_jar(tmp_path / "x-1.0.jar")
    copy = unsigned_copy(source, tmp_path / "copies")
    assert copy == tmp_path / "copies" / "x-1.0.jar"
    with zipfile.ZipFile(copy) as jar:
        names = jar.namelist()
        assert names == [
            "META-INF/MANIFEST.MF",
            "META-INF/maven/org.x/x/pom.properties",
            "org/x/A.class",
        ]
        assert jar.read("org/x/A.class") == b"\xca\xfe\xba\xbe" + b"\x00" * 100
        assert jar.read("META-INF/MANIFEST.MF") == b"Manifest-Version: 1.0\nCreated-By: Maven\n\n"
        assert jar.getinfo("org/x/A.class").compress_type == zipfile.ZIP_DEFLATED
    # The copy carries the source's time: the class-data archive checks it.
    assert copy.stat().st_mtime_ns == source.stat().st_mtime_ns


def test_the_copy_is_reused_until_its_source_changes(tmp_path: Path) -> None:
    source = _signed_jar(tmp_path / "x-1.0.jar")
    copy = unsigned_copy(source, tmp_path / "copies")
    inode = copy.stat().st_ino
    assert unsigned_copy(source, tmp_path / "copies").stat().st_ino == inode
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 10**9))
    again = unsigned_copy(source, tmp_path / "copies")
    assert again.stat().st_ino != inode
    assert again.stat().st_mtime_ns == source.stat().st_mtime_ns


def test_main_section_and_where_copies_live() -> None:
    assert main_section(b"A: 1\n") == b"A: 1\n\n"
    assert main_section(MANIFEST) == b"Manifest-Version: 1.0\nCreated-By: Maven\n\n"
    assert is_unsigned_copy(Path("/c/frazil/jars/unsigned/21c71191/janino-3.1.9.jar"))
    assert not is_unsigned_copy(Path("/c/frazil/jars/spark-f9b50ffc7ced/janino-3.1.9.jar"))


def test_no_copy_when_the_cache_cannot_take_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from frazil.jvm import unsigned

    source = _signed_jar(tmp_path / "janino-3.1.9.jar")
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the folder would go")
    monkeypatch.setattr(unsigned, "signed_jars", lambda: [source])
    monkeypatch.setattr(unsigned, "unsigned_dir", lambda: blocked / "copies")
    # Spark then runs with pyspark's signed jars, as before.
    assert unsigned.unsigned_jars() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocked", "janino-3.1.9.jar"]


def test_a_failed_copy_leaves_nothing_behind(tmp_path: Path) -> None:
    broken = tmp_path / "janino-3.1.9.jar"
    broken.write_bytes(b"not a zip")
    with pytest.raises(zipfile.BadZipFile):
        unsigned_copy(broken, tmp_path / "copies")
    assert list((tmp_path / "copies").iterdir()) == []
