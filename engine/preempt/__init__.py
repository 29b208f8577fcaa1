"""Preemption decided for the whole batch: fewest victims, budgets respected, gangs whole or not at all.

kube-scheduler's DefaultPreemption picks victims for one pod on one node at a time. Here the pods the plan left out
that may preempt (`preemptionPolicy` not `Never`, not in a gang short of members) are taken together, in one session
(engine.preempt.session: the cluster with the first plan's placements bound, the running pods each may evict, the
nodes each could use once they are gone), by one strategy, then settled by one confirming re-plan:

- the **batch model** (engine.preempt.model, DCM's "same model"): the running pods the preemptors may evict pinned to
  their nodes and planned beside them in one solve, disruption budgets as rows of it; first, when it fits the time
  left;
- the **per-node search** (engine.preempt.search, upstream's SelectVictimsOnNode pod by pod against one ledger): when
  the model declines (too large for the time left, victims over an eviction cap, a preemptor's nodes not known in
  time);
- **quota reclaim**: the per-node search with the session's quota account (engine.preempt.reclaim), when tenants have quotas
  (CapacityScheduling's rule of who may evict whom);
- then **confirm** (engine.preempt.confirm): one re-plan of the preemptors without the victims (none for the model,
  whose solve was one), victims no placed preemptor needs given back, preemptors left without room taken out again.

`stats.preemption.strategy` names the strategy that chose, `note` what became of the others. The time limit is a wall
for the whole stage (`PreemptionSettings.deadline`, on its clock): finding the candidates stops there, each group of
preemptors' feasible nodes are compiled only while it lasts, victim selection takes 70% of what is left, and the
confirming re-plan is not started once the deadline has passed. What the deadline cuts short is
dropped, never kept half done: the preemptors not reached, and all of them when the victims could not be confirmed in
time, are told they are tried again next cycle, and the plan is the first plan: never fewer pods placed than the first
plan, never a victim evicted for nothing. Pure, like the rest of the core: the scheduler loop evicts what the plan says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..model.cluster import NEVER_PREEMPT, Cluster, Pod
from ..model.ir import PreemptionRules
from ..planning.compile import Compiled
from ..planning.plan import Plan
from .confirm import settle
from .model import BatchModel
from .outcome import attribute, merge
from .search import NodeSearch, explain_left_out
from .session import (
    OUT_OF_TIME,
    Chosen,
    FeasibleNodes,
    PreemptionSettings,
    Session,
    Unserved,
    nothing,
    start,
)

PREEMPTION_SHARE = 0.4  # of the time limit, kept for preemption when some pending pod may preempt
BATCH_MODEL, NODE_SEARCH, QUOTA_RECLAIM = BatchModel(), NodeSearch(), NodeSearch("quota reclaim")
STRATEGIES = {s.name: s for s in (BATCH_MODEL, NODE_SEARCH)}  # by the names PreemptionSettings.strategies gives

__all__ = ["OUT_OF_TIME", "PREEMPTION_SHARE", "STRATEGIES", "PreemptionSettings", "lowest_running", "may_preempt_any",
           "preempt", "say_never"]


def preempt(cluster: Cluster, plan: Plan, rules: PreemptionRules | None, settings: PreemptionSettings, started: float,
            progress: Callable[[str], None] | None = None) -> Plan:
    """The stage for the pods `plan` left out that may preempt; the plan unchanged when there are none. Within
    `settings.deadline`: what it cuts short waits for the next cycle (see the module's doc)."""
    compiled = plan.details.compiled
    if compiled is None:
        return plan
    short = _short_of_members(compiled)
    preemptors = [p for p in cluster.pending if p.key in plan.unschedulable and p.preemption_policy != NEVER_PREEMPT
                  and p.gang not in short]
    if not preemptors:
        return plan
    return _preempt(cluster, plan, rules, settings, started, preemptors, progress)


def _short_of_members(compiled: Compiled) -> frozenset[str]:
    """Gangs of the batch with fewer members than their quorum, bound and pending together: no eviction starts them
    (upstream never lets their pods reach PostFilter: Coscheduling's PreFilter, the native gang's PreEnqueue), and
    serving their members one by one only cost a streaming cycle a search over every node per member."""
    return frozenset(g.key for g in compiled.gangs if g.bound + g.pending < g.min_member)


def _preempt(cluster: Cluster, plan: Plan, rules: PreemptionRules | None, settings: PreemptionSettings, started: float,
             preemptors: list[Pod], progress: Callable[[str], None] | None) -> Plan:
    unserved = Unserved()
    session = start(cluster, plan, rules, preemptors, settings.deadline, settings.moment)
    if session is None:  # the deadline came before the candidates were known
        unserved.not_reached([preemptors])
        return merge(plan, nothing(preemptors), {}, unserved, started)
    feasible = FeasibleNodes.of(session, settings.policy, preemptors)
    name, chosen = choose(session, unserved, preemptors, feasible, settings)
    if chosen.ledger is None:  # every strategy declined: nobody preempts
        return merge(plan, nothing(preemptors), {}, unserved, started, name, chosen.note)
    replan, ledger = settle(session, preemptors, chosen, settings, unserved)
    if name == BATCH_MODEL.name:  # the pods it left out told why in upstream's words, as the search tells them
        explain_left_out(session, unserved, [p for p in preemptors if p.key not in replan.assignments], feasible, ledger)
    if progress:
        progress(f"preemption ({name}): {len(replan.assignments)} more pods placed, {len(ledger.evicted)} running pods "
                 "evicted")
    by_key = {p.key: p for p in preemptors}
    return merge(plan, replan, attribute(replan, ledger, session, by_key), unserved, started, name, chosen.note)


def choose(session: Session, unserved: Unserved, preemptors: list[Pod], feasible: FeasibleNodes,
           settings: PreemptionSettings) -> tuple[str, Chosen]:
    """The first strategy of `PreemptionSettings.strategies` that does not decline, by name, and what it chose: the
    batch model when it fits the time left, else the per-node search; under tenant quotas the quota reclaim. What
    became of those before it is said in its note."""
    said: list[str] = []
    for name in settings.strategies:
        strategy = STRATEGIES[name]
        if strategy is NODE_SEARCH and session.reclaim is not None:
            strategy = QUOTA_RECLAIM
        chosen = strategy.choose(session, unserved, preemptors, feasible, settings)
        if chosen.ledger is not None:
            note = "; ".join([*said, chosen.note] if chosen.note else said)
            return strategy.name, replace(chosen, note=note)
        said.append(f"{strategy.name}: {chosen.note}")
    return "none", Chosen(None, "; ".join(said))


def say_never(cluster: Cluster, plan: Plan, lowest: int | None) -> Plan:
    """`plan` with its left-out pods that may not preempt saying so: the reason they wait although they outrank
    running pods (`lowest`: the lowest priority of a running pod, `lowest_running`)."""
    never = [pod.key for pod in cluster.pending
             if (pod.key in plan.unschedulable and pod.preemption_policy == NEVER_PREEMPT and lowest is not None
                 and pod.priority > lowest)]
    if not never:
        return plan
    said = {key: plan.unschedulable[key] + ["it does not evict lower-priority pods (preemptionPolicy: Never)"]
            for key in never}
    return replace(plan, unschedulable={**plan.unschedulable, **said})


def may_preempt_any(cluster: Cluster, lowest: int | None) -> bool:
    """Some pending pod may preempt and some running pod (the lowest of which has priority `lowest`) has a lower
    priority: else skip the whole stage."""
    return lowest is not None and any(p.preemption_policy != NEVER_PREEMPT and p.priority > lowest
                                      for p in cluster.pending)


def lowest_running(cluster: Cluster) -> int | None:
    """The lowest priority of a running pod not already going (None: none runs)."""
    return min((p.priority for p in cluster.bound if not p.terminating), default=None)
