"""What a dead-letter replay keeps where maintenance cannot reach it: its claim on the
pipeline, its progress, and the snapshot it reads.

All three live in the dead-letter table's metadata, outside its snapshot history, because
snapshot expiry removes history (summaries included) but never a table property or a tag:

* ``frazil.replay.<pipeline>`` (property): the claim, ``{"id", "host", "pid", "at"}``. One
  replay of a pipeline at a time: a replay takes the claim only if it is absent or stale,
  renews it every :data:`HEARTBEAT_S`, and drops it when it ends however it ends (a Python
  exception included). A claim is stale when its replay is provably gone (this host, and its
  process is dead, or it is this process and no replay of it holds that id) or when it was
  not renewed for :data:`STALE_S` (a replay killed on another machine).
* ``frazil.replay-state.<pipeline>`` (property): the open replay, ``{"id", "steps"}``. A
  step (each table's append, the send-back of what failed again) is noted as begun, with the
  table's snapshot before it, and as done once committed. A replay interrupted between the
  two tells from the table's history since that snapshot whether the commit happened.
* ``frazil-replay-<pipeline>`` (tag): the dead-letter snapshot the open replay reads, kept
  from expiry until the replay closes.

Every change is a compare-and-set on the table's metadata (:func:`update_metadata`): the
catalog accepts a commit only on top of the metadata it was computed from, so a claim is
never taken twice, and only the claim's holder changes the state.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from frazil.errors import PipelineError, StaleMarker
from frazil.jvm.classes import java_class
from frazil.procs import pid_alive
from frazil.progress import markers, table_markers
from frazil.sink.iceberg import IcebergTable

log = logging.getLogger(__name__)

#: Property prefixes (``<prefix><pipeline>``) and the tag prefix.
CLAIM = "frazil.replay."
STATE = "frazil.replay-state."
TAG = "frazil-replay-"

#: How often a replay renews its claim, and after how long without renewal a claim is stale.
HEARTBEAT_S = 20.0
STALE_S = 120.0

#: Compare-and-set attempts: each loses only to another commit to the dead-letter table (a
#: live run's dead letters), which a busy pipeline makes every trigger.
CAS_ATTEMPTS = 20

# Claim ids held by replays of this process (a claim naming this process but none of these
# was left by a replay of it that is gone).
_HELD: set[str] = set()
_HELD_LOCK = threading.Lock()


def update_metadata(table: IcebergTable, change: Callable[[Any], Any | None], what: str) -> bool:
    """Commit ``change(metadata)`` (a ``TableMetadata.Builder``, or None: nothing to do) on
    top of exactly the metadata it was computed from; computed again after a concurrent
    commit. ``change`` may raise to refuse.

    Returns:
        Whether something was committed.

    Raises:
        PipelineError: It lost to concurrent commits :data:`CAS_ATTEMPTS` times.
    """
    ops = table.java.operations()
    delay = 0.05
    for _ in range(CAS_ATTEMPTS):
        base = ops.refresh()
        builder = change(base)
        if builder is None:
            return False
        try:
            ops.commit(base, builder.build())
        except Exception as exc:  # py4j wraps the JVM's exception
            if "CommitFailedException" not in str(exc):
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            continue
        table.refresh()
        return True
    raise PipelineError(
        f"{table.name}: could not {what}: {CAS_ATTEMPTS} attempts lost to concurrent commits; "
        "run `frazil dlq replay` again"
    )


def _builder(table: IcebergTable, base: Any) -> Any:
    jvm = table.spark.sparkContext._jvm
    assert jvm is not None
    return java_class(jvm, "org.apache.iceberg.TableMetadata").buildFrom(base)


@dataclass(frozen=True)
class Claim:
    """Who holds a pipeline's replay, and when it last said so."""

    id: str
    host: str
    pid: int
    at: int

    def stale(self, now_ms: int) -> bool:
        """Whether its replay is gone (see the module's docstring)."""
        if self.host == socket.gethostname():
            if self.pid == os.getpid():
                with _HELD_LOCK:
                    return self.id not in _HELD
            if not pid_alive(self.pid):
                return True
        return now_ms - self.at > STALE_S * 1000

    def describe(self) -> str:
        """For messages: where it runs and when it was last renewed."""
        age = max(0, int(time.time() * 1000) - self.at) // 1000
        return f"replay {self.id} (host {self.host}, pid {self.pid}, renewed {age}s ago)"


def _claim_of(value: str | None) -> Claim | None:
    if value is None:
        return None
    try:
        raw = json.loads(value)
        return Claim(str(raw["id"]), str(raw["host"]), int(raw["pid"]), int(raw["at"]))
    except (ValueError, KeyError, TypeError):
        # Unreadable: nobody can prove it alive, so it is taken over as stale.
        return Claim("?", "?", -1, 0)


@dataclass
class ReplayState:
    """An open replay: its name and its steps (``{"before": snapshot | None, "done": bool}``).

    ``legacy``: opened by an older frazil, with markers in the snapshot history only.
    """

    id: str
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    legacy: bool = False

    def to_json(self) -> str:
        """The property's value."""
        return json.dumps({"id": self.id, "steps": self.steps, "legacy": self.legacy})

    @staticmethod
    def from_json(value: str) -> ReplayState:
        """Read back a property's value."""
        raw = json.loads(value)
        return ReplayState(str(raw["id"]), dict(raw.get("steps", {})), bool(raw.get("legacy")))


class ReplayClaim:
    """One replay's hold on a pipeline's replays, and its progress (the claim's holder alone
    changes the progress: each change is conditional on the claim).

    Args:
        dead: The dead-letter table.
        pipeline: The pipeline replayed.
    """

    def __init__(self, dead: IcebergTable, pipeline: str) -> None:
        self.dead = dead
        self.pipeline = pipeline
        self.claim = Claim(uuid.uuid4().hex[:12], socket.gethostname(), os.getpid(), 0)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self.lost: str | None = None

    @property
    def _key(self) -> str:
        return CLAIM + self.pipeline

    @property
    def tag(self) -> str:
        """The tag keeping the open replay's snapshot."""
        return TAG + self.pipeline

    def _value(self) -> str:
        now = int(time.time() * 1000)
        return json.dumps({**self.claim.__dict__, "at": now})

    def acquire(self) -> None:
        """Take the claim, or refuse.

        Raises:
            PipelineError: Another replay of the pipeline holds it.
        """
        with _HELD_LOCK:
            _HELD.add(self.claim.id)

        def take(base: Any) -> Any:
            held = _claim_of(base.properties().get(self._key))
            if held is not None and held.id != self.claim.id:
                if not held.stale(int(time.time() * 1000)):
                    raise PipelineError(
                        f"pipeline {self.pipeline!r}: another `frazil dlq replay` of it is "
                        f"running ({held.describe()}, table property {self._key} of "
                        f"{self.dead.name}); wait for it to end. A replay that was killed "
                        f"frees it {STALE_S:.0f}s after its last renewal"
                    )
                log.info(
                    "%s: taking over the replay claim of %s: that replay is gone (an open "
                    "replay it left is finished now)",
                    self.pipeline,
                    held.describe(),
                )
            return _builder(self.dead, base).setProperties({self._key: self._value()})

        try:
            update_metadata(self.dead, take, f"claim the replay of {self.pipeline!r}")
        except BaseException:
            self._forget()
            raise
        self._beat = threading.Thread(
            target=self._heartbeat, name=f"frazil-replay-{self.pipeline}", daemon=True
        )
        self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self.renew()
            except PipelineError as exc:
                self.lost = str(exc)
                return
            except Exception as exc:  # a catalog hiccup: the next beat tries again
                log.info("%s: renewing the replay claim failed: %s", self.pipeline, exc)

    def _owned(self, base: Any) -> None:
        held = _claim_of(base.properties().get(self._key))
        if held is None or held.id != self.claim.id:
            raise PipelineError(
                f"pipeline {self.pipeline!r}: this replay ({self.claim.id}) lost its claim "
                f"(table property {self._key} of {self.dead.name} now: "
                f"{held.describe() if held else 'none'}), since it was not renewed for "
                f"{STALE_S:.0f}s; it stops here, and the replay now holding the pipeline "
                "finishes its work"
            )

    def renew(self) -> None:
        """Renew the claim (a check that it is still held, right now).

        Raises:
            PipelineError: Another replay took it over.
        """
        if self.lost is not None:
            raise PipelineError(self.lost)

        def renew(base: Any) -> Any:
            self._owned(base)
            return _builder(self.dead, base).setProperties({self._key: self._value()})

        update_metadata(self.dead, renew, "renew the replay claim")

    def release(self) -> None:
        """Stop renewing and drop the claim if still held (an open replay stays open)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()

        def drop(base: Any) -> Any:
            held = _claim_of(base.properties().get(self._key))
            if held is None or held.id != self.claim.id:
                return None
            return _builder(self.dead, base).removeProperties({self._key})

        try:
            update_metadata(self.dead, drop, "release the replay claim")
        except Exception as exc:  # must not hide why the replay ended; it goes stale anyway
            log.warning(
                "%s: could not release the replay claim (table property %s of %s): %s; the "
                "next replay takes it over once stale",
                self.pipeline,
                self._key,
                self.dead.name,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
        finally:
            self._forget()

    def _forget(self) -> None:
        with _HELD_LOCK:
            _HELD.discard(self.claim.id)

    # The open replay's state.

    def state(self) -> ReplayState | None:
        """The open replay, if any."""
        self.dead.refresh()
        value = self.dead.java.properties().get(STATE + self.pipeline)
        return None if value is None else ReplayState.from_json(str(value))

    def save(self, state: ReplayState, snapshot: int | None = None) -> None:
        """Record ``state`` (with ``snapshot``: opening it, the tag set on that snapshot).

        Raises:
            PipelineError: The claim is not held anymore.
        """
        jvm = self.dead.spark.sparkContext._jvm
        assert jvm is not None

        def write(base: Any) -> Any:
            self._owned(base)
            builder = _builder(self.dead, base).setProperties(
                {STATE + self.pipeline: state.to_json(), self._key: self._value()}
            )
            if snapshot is not None and base.snapshot(snapshot) is not None:
                if base.ref(self.tag) is not None:
                    builder = builder.removeRef(self.tag)
                ref = java_class(jvm, "org.apache.iceberg.SnapshotRef").tagBuilder(snapshot).build()
                builder = builder.setRef(self.tag, ref)
            return builder

        update_metadata(self.dead, write, f"record the progress of the replay of {self.pipeline!r}")

    def close(self, state: ReplayState) -> None:
        """Remove the finished replay's state and tag.

        Raises:
            PipelineError: The claim is not held anymore.
        """

        def clear(base: Any) -> Any:
            self._owned(base)
            builder = _builder(self.dead, base).removeProperties({STATE + self.pipeline})
            if base.ref(self.tag) is not None:
                builder = builder.removeRef(self.tag)
            return builder

        update_metadata(self.dead, clear, f"close the replay {state.id} of {self.pipeline!r}")


class ReplayProgress:
    """The open replay's steps: which commits are done, noted in the dead-letter table's
    properties around each commit."""

    def __init__(self, claim: ReplayClaim, state: ReplayState) -> None:
        self.claim = claim
        self.state = state

    @property
    def id(self) -> str:
        """The replay's name (each commit's marker value)."""
        return self.state.id

    def done(self, step: str, table: IcebergTable, key: str) -> bool:
        """Whether the step's commit (``key`` = the replay's name in its summary) is made.

        Raises:
            PipelineError: The step began, and the table's history since was expired before
                it could be told whether its commit happened.
        """
        entry = self.state.steps.get(step)
        if entry is None and not self.state.legacy:
            return False
        if entry is not None and entry.get("done"):
            return True
        before = None if entry is None else entry.get("before")
        found = appended(table, key, self.id, before)
        if found is None:
            raise PipelineError(
                f"{table.name}: the dead-letter replay {self.id} was interrupted around its "
                f"commit to this table, and the table's snapshots since (from {before}) were "
                f"expired: whether the commit was made cannot be told. Look for rows of "
                f"snapshots whose summary has {key} = {self.id}; remove them if any, then "
                f"remove table property {STATE}{self.claim.pipeline} of {self.claim.dead.name} "
                "and replay again"
            )
        if found:
            self.finish(step)
        return found

    def begin(self, step: str, table: IcebergTable) -> None:
        """Note the step as begun, with the table's snapshot before its commit."""
        table.refresh()
        self.state.steps[step] = {"before": table.current_snapshot_id(), "done": False}
        self.claim.save(self.state)

    def commit(
        self, step: str, table: IcebergTable, key: str, append: Callable[[dict[str, str]], None]
    ) -> None:
        """Make the step's commit, fenced by the table: ``append(summary)`` commits with the
        replay's name under ``key`` and a marker of the pipeline's replays
        (:func:`fence_marker`) planned after the table's newest one. A replay paused here
        while another took the claim over and made this step's commit is refused by the
        catalog when it resumes (:class:`~frazil.errors.StaleMarker`), and so is the other if
        this one committed first: that one then finds the commit made and goes on.
        """
        # The fence first, then a last look: a commit of the step made by another replay
        # after this look moves the fence, and this commit is refused.
        fence = fence_marker(table, self.claim.pipeline)
        if self.done(step, table, key):
            return
        self.begin(step, table)
        try:
            append({key: self.id, **fence.to_summary()})
        except StaleMarker:
            if not self.done(step, table, key):
                raise
            return
        self.finish(step)

    def finish(self, step: str) -> None:
        """Note the step's commit as made."""
        entry = self.state.steps.setdefault(step, {"before": None})
        entry["done"] = True
        self.claim.save(self.state)


#: The marker name of a pipeline's dead-letter replays (``<pipeline>`` + this), in the tables
#: they append to: it fences their commits, and names no pipeline's progress.
REPLAY_MARKER = "/dlq-replay"


def fence_marker(table: IcebergTable, pipeline: str) -> markers.Marker:
    """A marker of ``pipeline``'s replays, planned after the table's newest one: the catalog
    refuses it once another replay committed in between (``MarkedOperations``)."""
    name = pipeline + REPLAY_MARKER
    newest = table_markers.find_marker(table, name).marker
    return markers.Marker(
        pipeline=name,
        offsets={},
        after=newest.commit_id if newest is not None else markers.NO_MARKER,
    )


def appended(table: IcebergTable, key: str, value: str, before: int | None) -> bool | None:
    """Whether a commit with ``key`` = ``value`` in its summary is among the table's
    snapshots since ``before`` (None: since the table's first); None when that history was
    expired in part, so that it cannot be told."""
    table.refresh()
    java = table.java
    snapshot = java.currentSnapshot()
    while snapshot is not None:
        if snapshot.summary().get(key) == value:
            return True
        if before is not None and int(snapshot.snapshotId()) == before:
            return False
        parent = snapshot.parentId()
        if parent is None:
            return False if before is None else None
        snapshot = java.snapshot(parent)
    return False if before is None and java.currentSnapshot() is None else None
