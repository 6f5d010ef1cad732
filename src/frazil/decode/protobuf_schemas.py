"""Protobuf schemas as descriptor sets: ``.proto`` sources compiled with protoc (from
grpcio-tools), descriptor set files, and Schema Registry schemas with their references
(``.proto`` text or base64 ``FileDescriptorProto``, well-known types from the protobuf
package); and the message names they define."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frazil.decode.schema_registry import RegisteredSchema, SchemaRegistry
from frazil.errors import ConfigError


@dataclass(frozen=True)
class Descriptors:
    """A compiled schema: a serialized ``FileDescriptorSet`` and the name of its own file."""

    data: bytes
    root: str


def _protoc_include() -> Path:
    import grpc_tools

    return Path(grpc_tools.__file__).parent / "_proto"


def compile_proto(files: dict[str, str], root: str) -> Descriptors:
    """Compile ``.proto`` sources (import name → text) with protoc into a descriptor set.

    Raises:
        ValueError: protoc refused the sources; the message is protoc's.
    """
    with tempfile.TemporaryDirectory(prefix="frazil-protoc-") as work:
        base = Path(work)
        for name, text in files.items():
            path = base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        out = base / "set.desc"
        proc = subprocess.run(
            [sys.executable, "-m", "grpc_tools.protoc", f"-I{base}", f"-I{_protoc_include()}",
             "--include_imports", f"--descriptor_set_out={out}", str(base / root)],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().replace(f"{base}/", "").splitlines()
            # protoc's logging library prints a start-up notice first.
            raise ValueError("\n".join(ln for ln in lines if "absl::InitializeLog" not in ln))
        return Descriptors(out.read_bytes(), root)


def load_file(path: Path, message: str | None, key: str, message_key: str) -> Descriptors:
    """A ``schema_file``: a ``.proto`` (compiled, its folder on the import path) or a set.

    Raises:
        ConfigError: The file cannot be read or compiled (naming ``key``), or a descriptor
            set defines no ``message`` (naming ``message_key``, listing its messages).
    """
    from google.protobuf import descriptor_pb2

    try:
        if not path.is_file():
            raise FileNotFoundError("no such file")
        if path.suffix == ".proto":
            folder = path.parent
            sources = {
                p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*.proto")
            }
            return compile_proto(sources, path.relative_to(folder).as_posix())
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{key}: protoc cannot compile {path}: {exc}") from None
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except Exception:  # protobuf's DecodeError
        files.Clear()
    if not files.file:
        raise ConfigError(f"{key}: {path} is neither a .proto file nor a descriptor set")
    for file in files.file:
        if message is not None and message in message_names(file):
            return Descriptors(data, file.name)
    names = [n for f in files.file for n in message_names(f)]
    raise ConfigError(
        f"{message_key}: no message {message!r} in {path.name} (messages: {', '.join(names)})"
    )


def message_names(file: Any) -> list[str]:
    """The full names of a ``FileDescriptorProto``'s messages, nested ones too (no map entries)."""
    prefix = f"{file.package}." if file.package else ""
    names: list[str] = []

    def collect(message: Any, scope: str) -> None:
        if message.options.map_entry:
            return
        name = f"{scope}{message.name}"
        names.append(name)
        for nested in message.nested_type:
            collect(nested, f"{name}.")

    for message in file.message_type:
        collect(message, prefix)
    return names


def compile_registered(registry: SchemaRegistry, schema: RegisteredSchema) -> Descriptors:
    """A registry schema as a descriptor set: ``.proto`` text, or a serialized descriptor.

    Confluent's registry answers with ``.proto`` text; others (Apicurio) return what the
    producer registered, which confluent-kafka's serializers send as a base64
    ``FileDescriptorProto``. Both work, as do references in either form.
    """
    from google.protobuf import descriptor_pb2

    references = registry.referenced(schema)
    serialized = _serialized(schema.text)
    if serialized is None:
        root = f"frazil_schema_{schema.schema_id}.proto"
        files = {**references, root: schema.text}
        # Well-known types come with protoc; a registry may list them as references too.
        files = {
            n: t for n, t in files.items() if not n.startswith("google/protobuf/") or n == root
        }
        return compile_proto(files, root)
    protos = {serialized.name: serialized}
    pending = list(serialized.dependency)
    while pending:
        name = pending.pop()
        if name in protos:
            continue
        text = references.get(name)
        dependency = _serialized(text) if text is not None else _well_known(name)
        if dependency is None:
            raise ValueError(f"schema id {schema.schema_id} imports {name}, which is not usable")
        protos[name] = dependency
        pending.extend(dependency.dependency)
    files = descriptor_pb2.FileDescriptorSet(file=list(protos.values()))
    return Descriptors(files.SerializeToString(), serialized.name)


def _serialized(text: str) -> Any:
    """The ``FileDescriptorProto`` a base64 schema string holds, or None for ``.proto`` text."""
    import base64
    import binascii

    from google.protobuf import descriptor_pb2

    if "syntax" in text or "message " in text or "edition" in text:
        return None
    try:
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, Exception):  # protobuf raises its own DecodeError
        return None
    return proto if proto.name else None


def _well_known(name: str) -> Any:
    """A ``google/protobuf/*.proto`` file from the protobuf package's own descriptors."""
    import importlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    if not name.startswith("google/protobuf/"):
        return None
    module = name.removeprefix("google/protobuf/").removesuffix(".proto") + "_pb2"
    try:
        importlib.import_module(f"google.protobuf.{module}")
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(proto)
    return proto


def only_message(compiled: Descriptors, key: str) -> str:
    """The full name of the schema's one top-level message.

    Raises:
        ConfigError: The schema defines several: the config must name the records' one.
    """
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(compiled.data)
    root = next(f for f in files.file if f.name == compiled.root)
    prefix = f"{root.package}." if root.package else ""
    names = [f"{prefix}{m.name}" for m in root.message_type]
    if len(names) == 1:
        return names[0]
    raise ConfigError(
        f"{key}: the registry schema defines {len(names)} top-level messages "
        f"({', '.join(names)}); set {key.rsplit('.', 1)[-1]} to the records' message"
    )


def same_message(compiled: Descriptors, message: str) -> str | None:
    """The full name of the schema's own message named as ``message`` without its package."""
    from google.protobuf import descriptor_pb2

    files = descriptor_pb2.FileDescriptorSet()
    files.ParseFromString(compiled.data)
    root = next(f for f in files.file if f.name == compiled.root)
    short = message.rsplit(".", 1)[-1]
    found = [n for n in message_names(root) if n == message or n.rsplit(".", 1)[-1] == short]
    return message if message in found else (found[0] if len(found) == 1 else None)
