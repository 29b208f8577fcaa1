"""Protection from preemption: a policy's `protect from preemption` keeps running pods from ever being victims, and
`at most N evictions [per namespace] per cycle` caps how many of the pods it covers one cycle may evict (read by
batch preemption, engine.preempt, through the guard phase); a PodDisruptionBudget's disruptions allowed are rows of
the batch model of preemption (`emit`: a Keep row per budget over the running pods it may evict, engine.preempt.model);
in that model a preemptor goes only on the nodes where it may preempt (`filter`: `Pod.preempts_on`, upstream's
candidate nodes: those where it passes every filter with only the pods it may evict gone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..model.cluster import Cluster, Moment, Pod
from ..model.ir import EvictionCap, PreemptionRules, Protected, Source
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..solve.problem import Keep
from .base import Action, ClassFields, ClusterEvent, Emit, EvictionGuard, Filter, Guard, Requeue, Resource

if TYPE_CHECKING:
    from ..model.view import View
    from .context import Batch, ClassSpec, ProblemBuilder

ELSEWHERE = "node(s) where it may not preempt: a pod it may not evict is in the way"


def protected_reason(pods: list[str], source: str) -> str:
    """Why preemption found no node when protected pods are in the way (the first of them named)."""
    more = f" and {len(pods) - 1} more" if len(pods) > 1 else ""
    return f"preemption may not evict protected pods ({pods[0]}{more}: {source})"


def cap_reason(source: Source) -> str:
    return f"preemption would go over an eviction cap ({source})"


def cap_key(cap: EvictionCap, pod: Pod) -> tuple[Source, str]:
    """Which count an eviction of `pod` adds to: the cap's, per namespace if it says so."""
    return cap.source, pod.namespace if cap.per_namespace else ""


class Protection(EvictionGuard, ClassFields, Filter, Emit, Requeue):
    name, code = "Protection", Code.POLICY
    # a pod it may not evict leaving, or a new node, can open a node where the preemptor may preempt
    events = (ClusterEvent(Resource.POD, Action.DELETE), ClusterEvent(Resource.NODE, Action.ADD))

    def guard(self, pod: Pod, rules: PreemptionRules | None) -> Guard:
        found = rules(pod) if rules else ()
        shield = next((r for r in found if isinstance(r, Protected)), None)
        caps = tuple(r for r in found if isinstance(r, EvictionCap))
        return Guard(shield.source if shield else None, caps)

    def class_fields(self, pod: Pod) -> tuple:
        return (pod.preempts_on,) if pod.preempts_on is not None else ()

    def class_fields_in(self, cluster: Cluster, moment: Moment, view: View) -> Callable[[Pod], tuple]:
        """Running pods the batch model may evict split by the budgets covering them (their rows count them)."""
        if not cluster.budgets or not any(p.running_on for p in cluster.pending):
            return self.class_fields
        budgets, own = cluster.budgets, self.class_fields
        return lambda pod: tuple(b.key for b in budgets if b.covers(pod)) if pod.running_on else own(pod)

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """In the batch model, a preemptor only where it may preempt (`Pod.preempts_on`)."""
        allowed = spec.sample.preempts_on
        if allowed is None:
            return
        where = batch.view.positions()
        mask = np.ones(len(batch.view.nodes), dtype=bool)
        mask[[where[n] for n in allowed if n in where]] = False
        out.add(Rejection(self.name, (ELSEWHERE,), resolvable=False), mask)

    def emit(self, build: ProblemBuilder) -> None:
        """Per disruption budget, the running pods it covers that the batch model may evict kept but for what it
        allows: a Keep row counted just below the lowest preemptor, above every running pod (engine.solve.problem.Keep)."""
        cluster = build.batch.cluster
        if not cluster.budgets:
            return
        classes = build.problem.classes
        for budget in cluster.budgets:
            covered = [a for a, info in enumerate(build.classes) if info.sample.running_on and budget.covers(info.sample)]
            least = sum(classes[a].count for a in covered) - budget.allowed
            if least <= 0:
                continue
            preemptors = [info.level for info in build.classes if not info.sample.running_on]
            if preemptors:
                served, pending, lowest = min(preemptors)
                build.problem.keeps.append(Keep(tuple(covered), least, (served, pending, lowest - 1),
                                                why=f"PodDisruptionBudget {budget.key} allows {budget.allowed}"))


KIND = Protection()
