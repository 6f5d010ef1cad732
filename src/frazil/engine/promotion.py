"""Columns promoted while a pipeline runs: the config file's new declared fields and new
``derive`` columns, taken in between two batches without a restart.

A path users query often (``variant_get(rest, '$.country', 'string')``) becomes a column of its
own by a config change: a field added to ``schema`` next to ``variant`` (its value then leaves
the variant column for the typed one), or a ``derive`` step appended to ``transforms``
(``country: "try_variant_get(payload, '$.geo.country', 'string')"``). ``frazil run`` checks the
config file before each batch; when only such additions changed, the pipeline's plan is built
again from the new config and the next batch writes the new columns, which the table gains as
other evolution adds them (a schema change of its own before the batch's commit). Rows written
before keep null in them until backfilled (docs/formats.md, "Promote a path to a column").

Any other change (the route, the partitioning, a type, a removed field, ...) waits for a restart:
the run logs which keys changed and goes on with the config it started with.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from frazil.config.models import FrazilConfig
from frazil.config.pipeline import PipelineConfig
from frazil.config.transforms import Derive
from frazil.errors import ConfigError

# The handler's logger: operators follow a pipeline's batches under this one name.
log = logging.getLogger("frazil.engine.batch")

#: The config loaded anew: a path in, a config (or :class:`ConfigError`) out.
Loader = Callable[[Path], FrazilConfig]


@dataclass(frozen=True)
class Promoted:
    """What a config change added that a running pipeline takes in.

    Attributes:
        config: The new config.
        pipeline: The pipeline's new config (one of ``config``'s).
        columns: The columns added (declared fields, then derived ones), in config order.
    """

    config: FrazilConfig
    pipeline: PipelineConfig
    columns: tuple[str, ...]


class NotLive(Exception):
    """A config change a running pipeline cannot take in: it waits for a restart."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__(", ".join(keys))
        self.keys = keys


def promoted(old: PipelineConfig, new: PipelineConfig) -> tuple[str, ...]:
    """The columns ``new`` adds to ``old`` that a running pipeline can take in.

    Declared fields may be added to a ``schema`` that has a ``variant`` column of the rest (the
    types of those declared before unchanged), and ``derive`` steps appended to the
    transforms; nothing else may differ.

    Returns:
        The added columns (empty when nothing changed).

    Raises:
        NotLive: Another key changed (named, as the config writes it).
    """
    before, after = old.model_dump(by_alias=True), new.model_dump(by_alias=True)
    old_fields = dict(old.value.schema_ or {})
    new_fields = dict(new.value.schema_ or {})
    changed: list[str] = []
    added_fields: list[str] = []
    if old_fields != new_fields:
        kept = all(new_fields.get(name) == kind for name, kind in old_fields.items())
        if old.value.variant is None or not old_fields or not kept:
            changed.append("schema")
        else:
            added_fields = [name for name in new_fields if name not in old_fields]
    old_steps, new_steps = old.transforms, new.transforms
    derived: list[str] = []
    if old_steps != new_steps:
        appended = new_steps[len(old_steps) :]
        if new_steps[: len(old_steps)] != old_steps or not all(
            isinstance(step, Derive) for step in appended
        ):
            changed.append("transforms")
        else:
            derived = [n for step in appended if isinstance(step, Derive) for n in step.derive]
    # The dump is flat, keyed as the config writes the pipeline.
    changed += [
        key
        for key in sorted(set(before) | set(after))
        if key not in ("schema", "transforms") and before.get(key) != after.get(key)
    ]
    if not changed and (added_fields or derived) and new.defaults.schema_evolution == "freeze":
        changed.append("schema_evolution (freeze: the table takes no new column)")
    if changed:
        raise NotLive(changed)
    return (*added_fields, *derived)


@dataclass
class ConfigWatch:
    """Watches a running pipeline's config file for promoted columns.

    Attributes:
        path: The config file ``frazil run`` was started with.
        pipeline: The pipeline's config as it runs.
        load: Loads the file anew.
    """

    path: Path
    pipeline: PipelineConfig
    load: Loader
    _stamp: tuple[int, int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._stamp = self._read_stamp()

    def poll(self) -> Promoted | None:
        """What the file now promotes, once per change of the file; None if it did not
        change, promotes nothing, or changed what only a restart applies (logged). The caller
        passes it to :meth:`accept` once the pipeline's plan holds it."""
        stamp = self._read_stamp()
        if stamp is None or stamp == self._stamp:
            return None
        self._stamp = stamp
        name = self.pipeline.name
        try:
            config = self.load(self.path)
        except ConfigError as exc:
            log.warning(
                "%s: %s changed but does not load (%s); the run goes on with the config it "
                "started with",
                name,
                self.path,
                str(exc).replace("\n", ";"),
            )
            return None
        new = next((p for p in config.pipelines if p.name == name), None)
        if new is None:
            log.warning(
                "%s: %s no longer has pipeline %r; it runs on until stopped", name, self.path, name
            )
            return None
        try:
            columns = promoted(self.pipeline, new)
        except NotLive as exc:
            log.warning(
                "%s: %s changed %s, which applies when frazil run starts again; the run goes "
                "on with the config it started with (adding declared fields next to a variant "
                "column, or derive steps at the end, applies at once)",
                name,
                self.path,
                ", ".join(exc.keys),
            )
            return None
        if not columns:
            return None
        return Promoted(config, new, columns)

    def accept(self, promotion: Promoted) -> None:
        """The pipeline runs with ``promotion`` now: later changes are held against it."""
        self.pipeline = promotion.pipeline

    def _read_stamp(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size)
