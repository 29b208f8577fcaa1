"""What preemption hands back: the first plan with the preemptors placed, each victim listed under the placed
preemptor that needs it gone (upstream's nominated node and victims), the reasons of those left out, and the stage's
stats (which strategy chose the victims, and why)."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import replace

from ..model.cluster import Pod
from ..model.rejections import joined
from ..planning.plan import Eviction, NodeUsage, Plan, Preemption, PreemptionStats
from .session import Candidate, Ledger, Session, Unserved


def merge(plan: Plan, replan: Plan, preemptions: dict[str, Preemption], unserved: Unserved, started: float,
          strategy: str | None = None, note: str | None = None) -> Plan:
    """The first plan plus what preemption placed (`preemptions`: each victim listed under the preemptor it makes
    room for); `strategy` and `note`: which strategy chose and what became of the others, for the stats."""
    assignments = {**plan.assignments, **replan.assignments}
    unschedulable = {k: v for k, v in plan.unschedulable.items() if k not in replan.assignments}
    for key in unschedulable:
        said = unserved.why.get(key) or (replan.unschedulable.get(key) and ["preemption did not help: "
                                                                         + joined(replan.unschedulable[key])])
        if said:
            unschedulable[key] = unschedulable[key] + list(said)
    victims = [v for p in preemptions.values() for v in p.victims]
    preemption = PreemptionStats(len(replan.assignments), len(victims), sum(1 for v in victims if v.over_budget),
                                 round(time.perf_counter() - started - (plan.stats.seconds or 0.0), 3), strategy,
                                 note or None)
    stats = replace(plan.stats, placed=len(assignments), unschedulable=len(unschedulable), preemption=preemption,
                    seconds=round(time.perf_counter() - started, 3))
    details = replace(plan.details, gangs={**plan.details.gangs, **replan.details.gangs},
                      errors=plan.details.errors - set(assignments), reserved={})
    return replace(plan, assignments=assignments, unschedulable=unschedulable, stats=stats, preemptions=preemptions,
                   usage_of=lambda: _usage(plan, replan), details=details)



def attribute(replan: Plan, ledger: Ledger, session: Session, preemptors: dict[str, Pod]) -> dict[str, Preemption]:
    """Each victim goes under the placed preemptor that needs it gone (`Ledger.needed_by`), else the highest-priority
    preemptor placed on its node that may evict it; the members of a
    PodGroup-mode group on nodes without one go under the preemptor of its first member that has one; a victim
    evicted for quota room alone (reclaim) under the highest-priority placed preemptor that may evict it."""
    out = {k: Preemption(n, preemptors[k].priority) for k, n in replan.assignments.items()}
    on_node: dict[str, list[Pod]] = defaultdict(list)
    for key, node in replan.assignments.items():
        on_node[node].append(preemptors[key])
    placed = [preemptors[k] for k in replan.assignments]
    budget_left = {b.key: b.allowed for b in session.cluster.budgets}
    owners: dict[str, str] = {}
    evicted = sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))
    for c in evicted:
        if c.unit is not None and (owner := _owner(session, c, on_node.get(c.node, []))) is not None:
            owners.setdefault(c.unit, owner)
    for c in evicted:
        owner = ledger.needed_by.get(c.key) if ledger.needed_by.get(c.key) in replan.assignments else None
        owner = owner or _owner(session, c, on_node.get(c.node, []))
        if owner is None and c.unit is not None:
            owner = owners.get(c.unit)
        owner = owner or _owner(session, c, placed) or _owner(session, c, on_node.get(c.node, []), anyone=True)
        if owner is None and c.unit is not None:  # a member no placed preemptor outranks: its group goes whole anyway
            owner = _owner(session, c, placed, anyone=True)
        if owner is None:
            continue
        session.draw(budget_left, c.pod)
        covering = session.budgets_of(c.pod)
        over = tuple(k for k in covering if budget_left[k] < 0)
        within = tuple(k for k in covering if budget_left[k] >= 0)
        quota = _reclaimed(session, preemptors[owner], c, out[owner])
        why = ledger.why.get(c.key) or ("evicted with its PodGroup" if c.unit is not None else None)
        out[owner].victims.append(Eviction(c.key, c.node, c.pod.priority, over, within, c.unit, quota, why))
    _name_reclaim(session, out)
    return out



def _name_reclaim(session: Session, out: dict[str, Preemption]) -> None:
    """Every placed reclaiming preemptor of a tenant the plan reclaimed for names that tenant's quota (the victims
    are listed under one of them, but they make room for all)."""
    if session.reclaim is None:
        return
    reclaimed = {p.reclaim for p in out.values() if p.reclaim is not None}
    for key, p in out.items():
        stance = session.reclaim.stances[key]
        if stance.reclaiming and (source := session.reclaim.source(stance.tenant)) in reclaimed:
            p.reclaim = source



def _owner(session: Session, c: Candidate, pods: list[Pod], anyone: bool = False) -> str | None:
    """The highest-priority pod of `pods` that may evict `c` (`anyone`: the highest of all)."""
    able = [p for p in pods if anyone or session.may_evict(p, c.pod)]
    return max(able, key=lambda p: (p.priority, p.key)).key if able else None



def _reclaimed(session: Session, preemptor: Pod, c: Candidate, preemption: Preemption) -> str | None:
    """When `c` is reclaimed from another tenant's borrowed room: the victim's quota (and the preemptor's is named
    on `preemption`)."""
    rc = session.reclaim
    if rc is None or not rc.reclaims(stance := rc.stances[preemptor.key], c.pod):
        return None
    preemption.reclaim = rc.source(stance.tenant)
    return rc.source(rc.tenant(c.pod))



def _usage(plan: Plan, replan: Plan) -> list[NodeUsage]:
    """Per node after both plans: made when first read, as the plans' own (the loop's cycle never reads it)."""
    if not replan.usage:
        return plan.usage
    placed = {u.node: u.placed for u in plan.usage}
    return [NodeUsage(u.node, u.pods, u.requested, u.allocatable, u.placed + placed.get(u.node, 0), u.counted)
            for u in replan.usage]

