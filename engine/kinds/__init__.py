"""The constraint kinds, one module each, in one list, and per phase the kinds that take part in it.

`KINDS` is in kube-scheduler's order: a node's rejection is the first filter's that rejects it, and a class's the
first PreFilter's (Coscheduling first: a gang short of members is held before any PreFilter, as upstream's PreEnqueue
holds a native gang's pods). Each phase (`base`: `PreFilter`, `Filter`, `Score`, `Emit`, …) has a tuple here of the
kinds whose class declares it, in that order, found by `isinstance`: compile runs the PreFilters, filters, scores and
emitters; explanations ask the kind that raises a starting-plan check and the class reasons; plan runs Reserve;
preemption asks the eviction guards and the filters that read pods; the loop's requeue reads each kind's cluster
events. Adding a kind (devices, quotas) is adding a module and a line here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import Cluster, Moment, Pod
from ..model.ir import Constraint
from ..model.rejections import Rejection, Rejections
from ..model.view import View
from ..solve.problem import Check
from . import (
    count_limit,
    dynamic_resources,
    fragmentation,
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
from .base import (
    PHASES,
    Action,
    ClassFields,
    ClassLabels,
    ClassReason,
    ClusterEvent,
    Emit,
    EvictionGuard,
    Explain,
    Filter,
    Guard,
    Kind,
    ModelChange,
    PreFilter,
    ReadsPods,
    Requeue,
    ReserveAfterSolve,
    Resource,
    Score,
    ScorePart,
    Spot,
    Waiting,
)
from .gangs import GangSpan as GangSpan  # the plan's report of where started gangs run (engine.planning.plan)
from .gangs import gang_spans as gang_spans

if TYPE_CHECKING:
    from ..planning.classes import ClassInfo
    from .context import Batch, ClassSpec

KINDS: tuple[Kind, ...] = (
    gangs.KIND,  # its PreFilter first: upstream's PreEnqueue holds a native gang short of members before any
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
    preferences.KIND,
    fragmentation.KIND,
    protection.KIND,
)

BY_NAME: dict[str, Kind] = {kind.name: kind for kind in KINDS}
# each phase's kinds, in the order above
CLASS_LABELS: tuple[ClassLabels, ...] = tuple(k for k in KINDS if isinstance(k, ClassLabels))
FIELD_READERS: tuple[ClassFields, ...] = tuple(k for k in KINDS if isinstance(k, ClassFields))
PRE_FILTERS: tuple[PreFilter, ...] = tuple(k for k in KINDS if isinstance(k, PreFilter))
FILTERS: tuple[Filter, ...] = tuple(k for k in KINDS if isinstance(k, Filter))
READ_PODS: tuple[ReadsPods, ...] = tuple(k for k in KINDS if isinstance(k, ReadsPods))  # filters pods moving can sway
SCORES: tuple[Score, ...] = tuple(k for k in KINDS if isinstance(k, Score))
EMITTERS: tuple[Emit, ...] = tuple(k for k in KINDS if isinstance(k, Emit))
BY_CHECK: dict[Check, Explain] = {check: k for k in KINDS if isinstance(k, Explain) for check in k.checks}
CLASS_REASONS: tuple[ClassReason, ...] = tuple(k for k in KINDS if isinstance(k, ClassReason))
REQUEUES: dict[str, Requeue] = {k.name: k for k in KINDS if isinstance(k, Requeue)}
GUARDS: tuple[EvictionGuard, ...] = tuple(k for k in KINDS if isinstance(k, EvictionGuard))
RESERVES: tuple[ReserveAfterSolve, ...] = tuple(k for k in KINDS if isinstance(k, ReserveAfterSolve))


def visible_label_keys(rule_sets: list[tuple[Constraint, ...]], view: View) -> frozenset[str] | None:
    """Every pod label some selector of this problem reads (None when some selector cannot say)."""
    keys: set[str] = set()
    for kind in CLASS_LABELS:
        for read in kind.label_keys(rule_sets, view):
            if read is None:
                return None
            keys |= read
    return frozenset(keys)


def score_parts(info: ClassInfo, candidates: np.ndarray, batch: Batch) -> tuple[ScorePart, ...]:
    """Every kind's soft terms for one pod of a class on each candidate, as integers; terms worth nothing on
    every candidate left out. Compile keeps them on the class (`ClassInfo.score_parts`): `explain` says from
    these why a node won."""
    parts = (part for kind in SCORES for part in kind.score(info, candidates, batch))
    out = ((part, np.asarray(part.points, dtype=np.int64)) for part in parts)
    return tuple(ScorePart(part.label, _compact(points), part.marginal) for part, points in out if points.any())


def _compact(points: np.ndarray) -> np.ndarray:
    """The points in the smallest integer type that holds them, read-only (compile keeps every class's parts)."""
    out = points.astype(np.result_type(np.min_scalar_type(points.min()), np.min_scalar_type(points.max())))
    out.flags.writeable = False
    return out


def fields_in(cluster: Cluster, moment: Moment, view: View) -> Callable[[Pod], tuple]:
    """What every kind reads of a pod in this cluster, planned at `moment`, beyond its rules and labels
    (ClassFields.class_fields_in): part of its class's key (the kinds that read none are not asked: a batch would ask
    each once per pod)."""
    readers = tuple(kind.class_fields_in(cluster, moment, view) for kind in FIELD_READERS)
    return lambda pod: tuple(read(pod) for read in readers)



def filter_node(spec: ClassSpec, batch: Batch, i: int, only: tuple[Filter, ...] = READ_PODS) -> Rejection | None:
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
    hint (upstream's EventsToRegister and QueueingHints). An unknown plugin always may; a kind without events never
    helps."""
    return any(name not in BY_NAME or ((kind := REQUEUES.get(name)) is not None
                                       and any(e.covers(change.resource, change.action) for e in kind.events)
                                       and kind.hint(waiting, change)) for name in plugins)


__all__ = [
    "BY_CHECK",
    "BY_NAME",
    "CLASS_LABELS",
    "CLASS_REASONS",
    "EMITTERS",
    "FIELD_READERS",
    "FILTERS",
    "GUARDS",
    "KINDS",
    "PHASES",
    "PRE_FILTERS",
    "READ_PODS",
    "REQUEUES",
    "RESERVES",
    "SCORES",
    "Action",
    "ClassFields",
    "ClassLabels",
    "ClassReason",
    "ClusterEvent",
    "Emit",
    "EvictionGuard",
    "Explain",
    "Filter",
    "Guard",
    "Kind",
    "ModelChange",
    "PreFilter",
    "ReadsPods",
    "Requeue",
    "ReserveAfterSolve",
    "Resource",
    "Score",
    "ScorePart",
    "Spot",
    "Waiting",
    "fields_in",
    "filter_node",
    "helped_by",
    "score_parts",
    "visible_label_keys",
]
