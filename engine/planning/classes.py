"""Pod classes: pending pods that no constraint of the problem can tell apart share one class.

The solver's size grows with classes × nodes, so class identity must come only from what some constraint
can see: namespace, requests, priority, host ports, owner kind, volumes, the pod's own rules, and the labels that
some selector of the problem reads. Labels nothing reads (`pod-template-hash`,
`statefulset.kubernetes.io/pod-name`, `batch.kubernetes.io/job-completion-index`…), names and annotations
do not split classes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..model.cluster import Cluster, Pod
from ..model.ir import Constraint, PlacementRules
from ..model.podspec import pod_constraints, with_default_spreading
from ..model.queue_order import entered, pod_order
from ..model.rejections import Rejections

if TYPE_CHECKING:
    from ..kinds.base import ScorePart

MAX_WEIGHT = 1 << 60

PolicyRules = PlacementRules  # a pending pod's policy constraints (the compile stage's hook)
LabelKeys = Callable[[list[tuple[Constraint, ...]]], frozenset[str] | None]  # pod labels the problem reads
PodFields = Callable[[Pod], tuple]  # what the kinds read of a pod beyond its rules and labels

Level = tuple[bool, bool, int]  # tier 1's lexicographic level: served by a min, pending (not pinned), priority


@dataclass(slots=True)
class ClassInfo:
    """One pod class as the rest of the pipeline sees it (the solver only sees its index)."""

    pods: list[Pod]
    constraints: tuple[Constraint, ...]
    rejected: Rejections  # nodes no pod of the class can use, and why
    borrowing: bool = False  # its pods would go beyond their tenant's min (engine.quotas.tenants): served after the rest
    score_parts: tuple[ScorePart, ...] = ()  # its soft terms' points on each candidate, as compile scored them

    @property
    def sample(self) -> Pod:
        return self.pods[0]

    @property
    def priority(self) -> int:
        return self.sample.priority

    @property
    def requests(self) -> dict[str, int]:
        return self.sample.requests

    @property
    def level(self) -> Level:
        """What tier 1 weighs first: pods a min serves (or no quota holds) before borrowing ones; pending pods before
        the running pods the batch model of preemption may evict (`Pod.running_on`: placing a preemptor outweighs
        keeping any of them, upstream's candidate order); then priority."""
        return (not self.borrowing, self.sample.running_on is None, self.priority)


def class_key(pod: Pod, constraints: tuple[Constraint, ...], visible: frozenset[str] | None,
              borrowing: frozenset[str], fields: PodFields) -> tuple:
    """What tells a pod's class: its namespace, the labels some selector reads, its priority (the objective's
    tier), its owner kind (policies may select by it), its rules, whether it borrows, and what the kinds read of it
    (`fields`: `kinds.fields_in`, each kind declaring the pod fields its verdicts read)."""
    labels = pod.labels.items() if visible is None else ((k, v) for k, v in pod.labels.items() if k in visible)
    return (pod.namespace, tuple(sorted(labels)), pod.priority, pod.owner[0] if pod.owner else None, constraints,
            pod.key in borrowing, fields(pod))


def group_pods(cluster: Cluster, policy: PolicyRules | None, label_keys: LabelKeys, fields: PodFields,
               borrowing: frozenset[str] = frozenset()) -> list[tuple[list[Pod], tuple]]:
    """(pods, constraints) per class, pods of a class in queue order (engine.model.queue_order).
    `label_keys` says which pod labels some selector of the problem reads (None: any may be); `fields` what else
    of a pod the kinds read; pods that would borrow beyond their tenant's min (`borrowing`) are classes of their own."""
    rules = [with_default_spreading(pod, pod_constraints(pod) + (policy(pod) if policy else ()))
             for pod in cluster.pending]
    visible = label_keys(list(set(rules)))
    groups: dict[tuple, tuple[list[Pod], tuple[Constraint, ...]]] = {}
    for pod, constraints in zip(cluster.pending, rules):
        key = class_key(pod, constraints, visible, borrowing, fields)
        groups.setdefault(key, ([], constraints))[0].append(pod)
    out = list(groups.values())
    times = entered(cluster.pending, cluster.gangs)
    for pods, _ in out:
        pods.sort(key=lambda p: pod_order(p, times))
    return out


def priority_weights(classes: list[ClassInfo], notes: list[str],
                     more: dict[Level, int] | None = None) -> dict[Level, int]:
    """Lexicographic weights by level (`ClassInfo.level`): one pod a min serves outweighs every borrowing pod,
    and among those one pod of a higher priority outweighs every pod of all lower ones. `more`: pods counted at a
    level besides the classes' (a Keep row's shortfall, engine.solve.problem.Keep)."""
    per_level: dict[Level, int] = defaultdict(int)
    for info in classes:
        per_level[info.level] += len(info.pods)
    for level, count in (more or {}).items():
        per_level[level] += count
    weights: dict[Level, int] = {}
    below = 0
    for level in sorted(per_level):
        weights[level] = below + 1
        below += weights[level] * per_level[level]
    if below > MAX_WEIGHT:
        notes.append("too many priority levels for exact lexicographic weights; priorities weighted by rank")
        weights = {level: i + 1 for i, level in enumerate(sorted(per_level))}
    return weights


def queue_positions(classes: list[ClassInfo], cluster: Cluster) -> list[tuple[int, ...]]:
    """Each pod's place in the active queue, per class: its unit's place in line (engine.model.queue_order: a gang's
    pods come up together, when the gang entered the line), then within a gang oldest first."""
    times = entered(cluster.pending, cluster.gangs)
    order = []
    for a, info in enumerate(classes):
        for k, pod in enumerate(info.pods):
            order.append((*pod_order(pod, times), a, k))
    out: list[list[int]] = [[0] * len(info.pods) for info in classes]
    for position, entry in enumerate(sorted(order)):
        out[entry[-2]][entry[-1]] = position
    return [tuple(q) for q in out]
