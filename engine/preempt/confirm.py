"""One confirming re-plan: the preemptors planned by the ordinary compile → solve path on the cluster without the
chosen victims (the first plan's placements fixed, so the room freed goes to the preemptors), then the victims no placed
preemptor needs given back (a victim is needed when some kind would reject a placed preemptor that may evict it with
the victim back: on its node, or anywhere when the preemptor's verdict reads beyond its node; under quotas, anywhere,
when its return would take a quota row over), and any preemptor the givebacks leave without room taken out again. No
further compile or solve: what a strategy chose is settled by checks on views, not by trials.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from ..model.cluster import Pod
from ..model.queue_order import queue_order
from ..model.rejections import Rejection
from ..model.view import View
from ..planning.plan import Plan, make_plan
from .reclaim import Account
from .session import (
    Chosen,
    Ledger,
    PreemptionSettings,
    Session,
    Unit,
    Unserved,
    left,
    nothing,
    victim_reason,
)

STRANDED = "preemption's victims, settled, leave it no room after all; it is tried again in the next cycle"


def settle(session: Session, preemptors: list[Pod], chosen: Chosen, settings: PreemptionSettings,
           unserved: Unserved) -> tuple[Plan, Ledger]:
    """The strategy's victims settled (see the module's doc): its own plan of the preemptors when it made one (the
    batch model's), else one re-plan of them without its victims; then the victims no placed preemptor needs (and,
    under quotas, those whose eviction would leave their tenant below its min) given back, and the preemptors that
    leaves without room taken out, until nothing changes (checks on views only); the ledger's view is then the
    outcome's (victims gone, preemptors placed where the plan puts them), its `needed_by` who needs each victim.
    When the deadline stops the re-plan, nothing is evicted and the preemptors served are told they are tried next
    cycle."""
    assert chosen.ledger is not None
    ledger = chosen.ledger
    plan = chosen.plan if chosen.plan is not None else solve_without(session, preemptors, ledger, settings)
    if plan is None:
        unserved.not_reached([[p for p in preemptors if not unserved.why.get(p.key)]])
        return nothing(preemptors), replace(ledger, evicted={})
    by_key = {p.key: p for p in preemptors}
    while True:
        ledger = replace(ledger, needed_by={}, why=dict(ledger.why))
        kept = needed(session, plan, ledger, by_key) - overreach(session, plan, ledger, by_key)
        settled = len(kept) == len(ledger.evicted)  # then who needs each victim is known for the plan kept
        ledger = replace(ledger, evicted={k: c for k, c in ledger.evicted.items() if k in kept})
        stranded = _stranded(session, plan, ledger, by_key)
        if not stranded:
            if not settled and ledger.evicted:  # asked again with the victims given back gone for good
                ledger = replace(ledger, needed_by={})
                needed(session, plan, ledger, by_key)
            return plan, replace(ledger, view=_outcome(session, plan, ledger, by_key)[1])
        plan = _unplaced(plan, stranded)


def _outcome(session: Session, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> tuple[list[Pod], View]:
    """The placed preemptors bound where `plan` puts them, and the stage's view with them there and the ledger's
    victims gone."""
    placed = [replace(preemptors[key], node_name=node) for key, node in plan.assignments.items()]
    return placed, session.view.moved(added=placed, removed=[c.pod for c in ledger.evicted.values()])


def _stranded(session: Session, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> set[str]:
    """The placed preemptors some kind rejects where the plan puts them once only the ledger's victims are gone (a
    victim given back, which the plan had counted on) and, on its node, only those it may evict (`_held`), with
    their gangs."""
    placed, view = _outcome(session, plan, ledger, preemptors)
    evicted_on: dict[str, list[Pod]] = defaultdict(list)
    for c in ledger.evicted.values():
        evicted_on[c.node].append(c.pod)
    out = {p.key for p in placed if p.key in session.specs
           and session.filter(p, p.node_name or "", view.moved(added=_held(session, evicted_on, p), removed=[p])) is not None}
    if session.reclaim is not None:  # the quota rows: a victim given back takes back its room in them
        out |= _over_quota(session, ledger, [p for p in placed if p.key not in out], list(preemptors.values()))
    gangs = {preemptors[k].gang for k in out} - {None}
    return out | {p.key for p in placed if p.gang in gangs}


def _held(session: Session, evicted_on: dict[str, list[Pod]], pod: Pod) -> list[Pod]:
    """The victims on `pod`'s node (`evicted_on`: the ledger's, by node) it may not evict itself (another
    preemptor's): their room is not its to take, as upstream's terminating victims hold theirs until they are gone
    (the pod is placed once they are, next cycle)."""
    return [v for v in evicted_on.get(pod.node_name or "", ()) if not session.may_evict(pod, v)]


def _over_quota(session: Session, ledger: Ledger, placed: list[Pod], preemptors: list[Pod]) -> set[str]:
    """The placed preemptors the quota rows no longer hold with only the ledger's victims gone: counted in queue order,
    those that would take a max or the tenants' total of mins over (`Reclaim.short`), then those whose borrowing
    the idle mins no longer lend (`Reclaim.overborrowing`)."""
    rc = session.reclaim
    assert rc is not None
    before = session.after_victims(ledger)
    assert before is not None
    account, out = before.copy(), set()
    for pod in queue_order(placed, rc.gangs, preemptors):
        if rc.short(account, pod):
            out.add(pod.key)
        else:
            rc.add(account, pod, 1)
    return out | rc.overborrowing(before, preemptors, [p for p in placed if p.key not in out])


def _unplaced(plan: Plan, keys: set[str]) -> Plan:
    """`plan` with the preemptors `keys` left out again, told why."""
    return replace(plan, assignments={k: n for k, n in plan.assignments.items() if k not in keys},
                   unschedulable={**plan.unschedulable, **{k: [STRANDED] for k in keys}})


def solve_without(session: Session, preemptors: list[Pod], ledger: Ledger, settings: PreemptionSettings) -> Plan | None:
    """The preemptors planned on the stage's cluster without the ledger's victims (a view of its index), in half the
    time the stage's deadline leaves; None when it stops the re-plan: not started once it has passed, or its compile cut
    short."""
    if not ledger.evicted:
        return nothing(preemptors)
    if settings.deadline.passed():
        return None
    gone = frozenset(ledger.evicted)
    cluster = replace(session.cluster, bound=[b for b in session.cluster.bound if b.key not in gone],
                      pending=list(preemptors))
    view = session.view.moved(removed=[c.pod for c in ledger.evicted.values()]).settled()
    plan = make_plan(cluster, settings.policy, time_limit=left(settings.deadline) / 2, workers=settings.workers,
                     seed=settings.seed, view=view, moment=session.moment)
    return None if plan.details.compiled is None or plan.details.compiled.problem.unchecked else plan



def needed(session: Session, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> set[str]:
    """Victims a placed preemptor may evict and needs: those whose return some kind would reject it for (`_needing_preemptor`;
    the ledger records which preemptor and why); under quotas, anywhere, those whose return would take a quota row
    over. A PodGroup-mode group is needed whole if one of its members is, else given back whole."""
    placed, everyone = _outcome(session, plan, ledger, preemptors)
    reaching = {p.key for p in placed if p.key in session.specs and _reaches(session, p, everyone.moved(removed=[p]))}
    account = session.after_victims(ledger, placed)
    needed: set[str] = set()
    returned = _Returned(everyone)
    for unit in session.units_of(sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))):
        blocked = _needing_preemptor(session, unit, returned, placed, reaching)
        if blocked is not None:
            for m in unit:
                ledger.needed_by[m.key], ledger.why[m.key] = blocked[0], victim_reason(blocked[1])
        if blocked is not None or _quota_needed(session, account, unit, placed):
            needed.update(m.key for m in unit)
            continue
        returned.give_back(unit)  # every preemptor beside it still passes
        session.count(account, [c.pod for c in unit])
    return needed


class _Returned:
    """The view `needed` asks with: every victim gone and the preemptors placed (`everyone`), with the victims given
    back so far back on their nodes (folded into it every FOLD_EVERY of them, so that a view with one more unit back
    costs that unit and the few given back since, not every pod given back). A view of the stage's table, as the
    kinds' shared state needs (`Batch.on`)."""

    FOLD_EVERY = 64

    def __init__(self, everyone: View):
        self.view = everyone
        self.back: list[Pod] = []

    def give_back(self, unit: Unit) -> None:
        self.back.extend(c.pod for c in unit)
        if len(self.back) >= self.FOLD_EVERY:
            self.view, self.back = self.view.moved(added=self.back), []

    def with_back(self, unit: Unit) -> View:
        """The unit back as well: on its members' nodes, as before they were chosen."""
        return self.view.moved(added=[*self.back, *(c.pod for c in unit)])



def _reaches(session: Session, p: Pod, view: View) -> bool:
    """Whether the kinds' verdict on the placed preemptor `p` reads beyond its node (a victim elsewhere can matter to
    those alone), asked where it passes every kind (`view`: every victim gone, the others placed), so that no kind's
    answer is cut short by an earlier one's rejection."""
    with view.reads() as reaching:
        passes = session.filter(p, p.node_name or "", view) is None
    return reaching[0] or not passes



def _needing_preemptor(session: Session, unit: Unit, returned: _Returned, placed: list[Pod],
                       reaching: set[str]) -> tuple[str, Rejection | None] | None:
    """Some placed preemptor that may evict the unit is rejected by some kind with the unit back (`gone`: the victims
    still leaving; each preemptor asked about with the others bound where they go, without itself): one on a
    member's node, or one anywhere whose verdict reads beyond its node (a domain's counts, a claim's users), since the
    re-plan may have put it on another node of the domain its victim emptied: (that preemptor, the kind's rejection),
    or None. A preemptor whose rules were never compiled (its group cut short) counts as needing it (no rejection
    to tell)."""
    here = {c.node for c in unit}
    view: View | None = None  # made for the first preemptor asked about
    for p in placed:
        node = p.node_name or ""
        if (node not in here and p.key not in reaching) or not all(session.may_evict(p, c.pod) for c in unit):
            continue
        if p.key not in session.specs:
            if node in here:
                return p.key, None
            continue
        view = view or returned.with_back(unit)
        rejection = session.filter(p, node, view.moved(removed=[p]))
        if rejection is not None:
            return p.key, rejection
    return None



def _quota_needed(session: Session, account: Account | None, unit: Unit, placed: list[Pod]) -> bool:
    """Under quotas: some placed preemptor may evict the unit, and its return would take a quota row over."""
    if session.reclaim is None or account is None:
        return False
    return (any(all(session.may_evict(p, c.pod) for c in unit) for p in placed)
            and session.reclaim.overflows(account, [c.pod for c in unit]))



def overreach(session: Session, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> set[str]:
    """Under quotas: victims to give back, highest priority first, so that no tenant that used more than its min
    when the stage began is left below it (in a resource it used beyond it) once `plan`'s preemptors are placed."""
    rc = session.reclaim
    account = session.after_victims(ledger, [preemptors[k] for k in plan.assignments])
    if rc is None or account is None:
        return set()
    back: set[str] = set()
    for unit in session.units_of(sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))):
        tenant = rc.tenant(unit[0].pod)
        if tenant is None or tenant not in rc.over:
            continue
        low = dict(rc.quotas[tenant].min)
        if all(account.held[tenant][r] >= low.get(r, 0) for r in rc.over[tenant]):
            continue
        back.update(c.key for c in unit)
        session.count(account, [c.pod for c in unit])
    return back
