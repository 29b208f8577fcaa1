"""The constraint kinds, one module each behind one protocol (`base.Kind`), in one list.

`KINDS` is in kube-scheduler's filter order: a node's rejection is the first kind's that rejects it. Compile
runs every kind's filter, score and emit; explanations ask the kind that raises a starting-plan check; the
loop's requeue reads each kind's cluster events. Adding a kind (devices, quotas) is adding a module
and a line here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from ..index import BoundState
from ..ir import Constraint
from ..model import Cluster, Pod
from ..rejections import Rejection
from ..solve.problem import Check
from . import (
    count_limit,
    dynamic_resources,
    gangs,
    node_affinity,
    node_declared_features,
    pod_affinity,
    ports,
    preferences,
    protection,
    quotas,
    reservations,
    resources,
    spread,
    taints,
    unschedulable,
    volume_binding,
    volume_limits,
    volume_restrictions,
    volume_zone,
)
from .base import Action, ClusterEvent, Guard, Kind, ModelChange, Moves, Resource, ScorePart, Spot, Waiting

if TYPE_CHECKING:
    from ..classes import ClassInfo
    from .context import Batch, ClassSpec

KINDS: tuple[Kind, ...] = (
    unschedulable.KIND,
    taints.KIND,
    node_affinity.KIND,
    ports.KIND,
    resources.KIND,
    reservations.KIND,
    volume_restrictions.KIND,
    volume_limits.KIND,
    volume_binding.KIND,
    volume_zone.KIND,
    dynamic_resources.KIND,
    pod_affinity.KIND,
    spread.KIND,
    node_declared_features.KIND,  # upstream appends it after the default plugins
    count_limit.KIND,
    quotas.KIND,
    gangs.KIND,
    preferences.KIND,
    protection.KIND,
)

BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
MOVED: tuple[Kind, ...] = tuple(k for k in KINDS if type(k).after is not Kind.after)  # kinds running pods can sway
FIELD_READERS: tuple[Kind, ...] = tuple(k for k in KINDS if type(k).class_fields is not Kind.class_fields)
# (the kinds whose verdicts read pod fields: the others' say nothing, and a batch would ask each once per pod)
BY_CHECK: dict[Check, Kind] = {check: kind for kind in KINDS for check in kind.checks}


def visible_label_keys(rule_sets: list[tuple[Constraint, ...]], index: BoundState) -> frozenset[str] | None:
    """Every pod label some selector of this problem reads (None when some selector cannot say)."""
    keys: set[str] = set()
    for kind in KINDS:
        for read in kind.label_keys(rule_sets, index):
            if read is None:
                return None
            keys |= read
    return frozenset(keys)


def score_parts(info: ClassInfo, candidates: np.ndarray, batch: Batch) -> tuple[ScorePart, ...]:
    """Every kind's soft terms for one pod of a class on each candidate, as integers; terms worth nothing on
    every candidate left out. Compile keeps them on the class (`ClassInfo.score_parts`): `explain` says from
    these why a node won."""
    parts = (part for kind in KINDS for part in kind.score(info, candidates, batch))
    out = ((part.label, np.asarray(part.points, dtype=np.int64)) for part in parts)
    return tuple(ScorePart(label, _compact(points)) for label, points in out if points.any())


def _compact(points: np.ndarray) -> np.ndarray:
    """The points in the smallest integer type that holds them, read-only (compile keeps every class's parts)."""
    out = points.astype(np.result_type(np.min_scalar_type(points.min()), np.min_scalar_type(points.max())))
    out.flags.writeable = False
    return out


def fields_in(cluster: Cluster, index: BoundState) -> Callable[[Pod], tuple]:
    """What every kind reads of a pod in this cluster beyond its rules and labels (Kind.class_fields_in): part of
    its class's key."""
    readers = tuple(kind.class_fields_in(cluster, index) for kind in FIELD_READERS)
    return lambda pod: tuple(read(pod) for read in readers)



def after(spec: ClassSpec, batch: Batch, i: int, moves: Moves, only: tuple[Kind, ...] = MOVED) -> Rejection | None:
    """Every kind's Filter on node i once `moves` happened (upstream's preemption re-running the filters with the
    victims removed): the first rejection in filter order, None when the pod passes them all. `only`: the kinds to
    ask (`swayed`), when the others passed before and what changed since cannot sway them."""
    for kind in only:
        if (rejection := kind.after(spec, batch, i, moves)) is not None:
            return rejection
    return None


def swayed(spec: ClassSpec, batch: Batch, pods: Iterable[Pod]) -> tuple[Kind, ...]:
    """The kinds whose verdict for the class one of `pods` leaving or arriving can change, in filter order."""
    pods = list(pods)
    return tuple(kind for kind in MOVED if any(kind.sways(spec, batch, pod) for pod in pods))


def wide(spec: ClassSpec, batch: Batch, moves: Moves) -> bool:
    """Some kind's verdict for the class on a node can change with moves on other nodes (Kind.wide)."""
    return any(kind.wide(spec, batch, moves) for kind in MOVED)


def helped_by(plugins: frozenset[str], waiting: Waiting, change: ModelChange) -> bool:
    """Could this cluster change make a pod that these kinds rejected schedulable? Each kind's events, then its
    hint (upstream's EventsToRegister and QueueingHints). An unknown plugin always may."""
    kinds = [BY_NAME.get(name) for name in plugins]
    return any(kind is None or (any(e.covers(change.resource, change.action) for e in kind.events)
                                and kind.hint(waiting, change)) for kind in kinds)


__all__ = [
    "BY_CHECK",
    "BY_NAME",
    "KINDS",
    "MOVED",
    "Action",
    "ClusterEvent",
    "Guard",
    "Kind",
    "ModelChange",
    "Moves",
    "Resource",
    "ScorePart",
    "Spot",
    "Waiting",
    "after",
    "fields_in",
    "helped_by",
    "score_parts",
    "swayed",
    "visible_label_keys",
    "wide",
]
