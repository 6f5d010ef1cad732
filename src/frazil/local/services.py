"""Every service ``frazil local`` runs, by the name its options use, and what needs what.

``frazil local down --only NAME`` stops single services; this module says in which order and
which of them it must not stop alone. The names:

* ``kafka``: the single broker or the multi-node cluster (:mod:`frazil.local.broker`,
  :mod:`frazil.local.broker_cluster`),
* ``schema-registry``: Apicurio (:mod:`frazil.local.registry`),
* ``s3``, ``rest-catalog``, ``spark-cluster``: the production-shaped stack
  (:mod:`frazil.local.stack`).

The only dependency between them is the REST catalog's on the object store, which holds its
warehouse (:data:`frazil.local.stack.REQUIRES`): Kafka, the registry and Spark stand alone.
"""

from __future__ import annotations

from collections.abc import Iterable

from frazil.local import stack

KAFKA = "kafka"
SCHEMA_REGISTRY = "schema-registry"
#: Every local service, in the order ``frazil local up`` starts them.
SERVICES: tuple[str, ...] = (KAFKA, SCHEMA_REGISTRY, *stack.SERVICES)
#: The order ``frazil local down`` stops them in: each before what it needs.
STOP_ORDER: tuple[str, ...] = (
    KAFKA,
    SCHEMA_REGISTRY,
    stack.SPARK_CLUSTER,
    stack.REST_CATALOG,
    stack.S3,
)
#: What each service needs running (the others need nothing).
REQUIRES: dict[str, tuple[str, ...]] = dict(stack.REQUIRES)


def stop_order(names: Iterable[str]) -> list[str]:
    """``names`` in the order they are stopped (a service before what it needs), once each.

    Raises:
        ValueError: If a name is not a local service.
    """
    wanted = set(names)
    unknown = sorted(wanted - set(SERVICES))
    if unknown:
        raise ValueError(f"unknown service {unknown[0]!r}: choose from {', '.join(SERVICES)}")
    return [name for name in STOP_ORDER if name in wanted]


def dependents(name: str) -> list[str]:
    """The services that need ``name`` running, in start order."""
    return [s for s in SERVICES if name in REQUIRES.get(s, ())]


def left_without(stopping: Iterable[str], running: Iterable[str]) -> dict[str, list[str]]:
    """What stopping only ``stopping`` would pull from under the services that keep running.

    Args:
        stopping: The services to stop.
        running: The services running now.

    Returns:
        Each service of ``stopping`` that a running service outside ``stopping`` needs,
        with those services (in start order); empty when the stop leaves none without what
        it needs.
    """
    stop, up = set(stopping), set(running)
    found: dict[str, list[str]] = {}
    for name in stop_order(stop):
        users = [d for d in dependents(name) if d in up and d not in stop]
        if users:
            found[name] = users
    return found


def refusal(blocked: dict[str, list[str]], asked: Iterable[str]) -> str:
    """The message of a ``down --only`` that would leave a running service without a need.

    Args:
        blocked: :func:`left_without`'s answer (not empty).
        asked: The services the command named, in the order given.

    Returns:
        One sentence per blocked service, then the ``--only`` value that stops them together.
    """
    parts = []
    for name, users in blocked.items():
        verb = "needs" if len(users) == 1 else "need"
        parts.append(f"{name} is not stopped: the running {' and '.join(users)} {verb} it")
    extra = [u for users in blocked.values() for u in users]
    together = ",".join(dict.fromkeys([*asked, *extra]))
    first = " and ".join(dict.fromkeys(extra))
    return (
        "; ".join(parts) + f". Stop them together with --only {together}, or stop {first} first. "
        "Nothing was stopped."
    )
