"""The constraint kinds, one module each behind one protocol (`base.Kind`), in one list.

`KINDS` is in kube-scheduler's filter order: a node's rejection is the first kind's that rejects it. Compile
runs every kind's filter, score and emit; explanations ask the kind that raises a starting-plan check; the
loop's requeue reads each kind's cluster events. Adding a kind (devices, quotas) is adding a module
and a line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..ir import Constraint
from ..model import Cluster, Pod
from ..rejections import Rejection, Rejections
from ..solve.problem import Check
from ..view import View
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
from .base import Action, ClusterEvent, Guard, Kind, ModelChange, ReadsPods, Resource, ScorePart, Spot, Waiting

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
READ_PODS: tuple[Kind, ...] = tuple(k for k in KINDS if isinstance(k, ReadsPods))  # kinds pods moving can sway
FIELD_READERS: tuple[Kind, ...] = tuple(k for k in KINDS if type(k).class_fields is not Kind.class_fields)
# (the kinds whose verdicts read pod fields: the others' say nothing, and a batch would ask each once per pod)
BY_CHECK: dict[Check, Kind] = {check: kind for kind in KINDS for check in kind.checks}


def visible_label_keys(rule_sets: list[tuple[Constraint, ...]], view: View) -> frozenset[str] | None:
    """Every pod label some selector of this problem reads (None when some selector cannot say)."""
    keys: set[str] = set()
    for kind in KINDS:
        for read in kind.label_keys(rule_sets, view):
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


def fields_in(cluster: Cluster, view: View) -> Callable[[Pod], tuple]:
    """What every kind reads of a pod in this cluster beyond its rules and labels (Kind.class_fields_in): part of
    its class's key."""
    readers = tuple(kind.class_fields_in(cluster, view) for kind in FIELD_READERS)
    return lambda pod: tuple(read(pod) for read in readers)



def filter_node(spec: ClassSpec, batch: Batch, i: int, only: tuple[Kind, ...] = READ_PODS) -> Rejection | None:
    """Every kind's Filter on node i of the batch's view (upstream's preemption re-running the filters on a node with
    the victims removed): the first rejection in filter order, None when the pod passes them all. `only`: the kinds
    to ask (by default those whose verdict the pods can sway: the others passed when the candidates were found)."""
    out = Rejections.about(len(batch.view.nodes), i)
    for kind in only:
        kind.filter(spec, batch, out)
        if (rejection := out.get(i)) is not None:
            return rejection
    return None


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
    "READ_PODS",
    "Action",
    "ClusterEvent",
    "Guard",
    "Kind",
    "ModelChange",
    "ReadsPods",
    "Resource",
    "ScorePart",
    "Spot",
    "Waiting",
    "fields_in",
    "filter_node",
    "helped_by",
    "score_parts",
    "visible_label_keys",
]
