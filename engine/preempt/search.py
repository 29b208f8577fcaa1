"""The per-node search (upstream's DefaultPreemption, for the whole batch): preemptors served one unit at a time,
highest priority first (the largest first within a priority, then the oldest), each against the one ledger, node by
node: no victim when it passes as things stand, else every pod it may evict there out (the node is no candidate if a
kind still rejects it), then each unit given back in upstream's order (those whose eviction breaks a budget first,
then by priority) while every kind still passes it; nodes compared in upstream's candidate order. When those choices
break a budget, a bounded search over the served pods' nodes looks for victims with fewer violations. The batch
model's fallback when it would not fit the time left; with the session's quota account, the quota reclaim strategy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..kinds.protection import cap_reason, protected_reason
from ..model.cluster import Cluster, Pod
from ..model.queue_order import in_line
from ..model.rejections import Rejection, joined
from ..model.view import View
from .reclaim import Account
from .session import (
    Candidate,
    Choice,
    Chosen,
    FeasibleNodes,
    Ledger,
    NodeVerdict,
    PreemptionSettings,
    Session,
    Unit,
    Unserved,
    victim_reason,
)

SEARCH_STEPS = 2_000  # nodes of the fewer-violations search tree, at most
SEARCH_WIDTH = 8  # nodes tried per pod in that search, best first
# upstream DefaultPreemption's dry run: it stops looking once it has this many candidate nodes (at least 100, or 10%)
MIN_CANDIDATE_NODES, MIN_CANDIDATE_SHARE = 100, 0.1


@dataclass(frozen=True, slots=True)
class NodeSearch:
    """The strategy: victims for each preemptor in turn, node by node (see the module's doc)."""

    name: str = "per-node search"

    def choose(self, session: Session, unserved: Unserved, preemptors: list[Pod], feasible: FeasibleNodes,
               settings: PreemptionSettings) -> Chosen:
        return Chosen(choose_victims(session, unserved, preemptors, feasible))


def explain_left_out(session: Session, unserved: Unserved, left: list[Pod], feasible: FeasibleNodes, ledger: Ledger) -> None:
    """Why preemption left these preemptors out, in upstream's words (no victims on a node, protected pods, a cap,
    a gang that cannot fit whole): each unit asked as this search would ask it, against the confirmed ledger (what
    it finds is discarded: another strategy chose the victims)."""
    for unit in _units(left, largest_first=False, cluster=session.cluster):
        if session.deadline.passed():
            return
        _serve_one(session, unserved, ledger, unit, feasible)


def _units(preemptors: list[Pod], largest_first: bool, cluster: Cluster) -> list[list[Pod]]:
    """Gangs as one unit, other pods alone, in line (engine.model.queue_order); with `largest_first`, within a priority
    the largest requests first."""
    units = [list(u) for u in in_line(preemptors, cluster.gangs, cluster.pending)]

    def size(unit: list[Pod]) -> tuple[int, int]:
        return (-sum(p.requests.get("cpu", 0) for p in unit), -sum(p.requests.get("memory", 0) for p in unit))

    return sorted(units, key=lambda u: (-max(p.priority for p in u), size(u))) if largest_first else units



def choose_victims(session: Session, unserved: Unserved, preemptors: list[Pod], feasible: FeasibleNodes) -> Ledger:
    """Step 2: victims for each unit in turn, against one ledger; a gang that cannot fit whole evicts nothing.

    Within a priority the largest pods go first (room freed for a big pod is often enough for a small one too,
    and the reverse seldom): fewer victims when everyone can be served. When someone cannot, the order decides
    who, so it is upstream's then: the oldest first. Each pod's best node alone can break a budget that other
    nodes would have kept for the batch: then a bounded session looks for choices that serve the same pods
    with fewer violations. All of it stops at the search's deadline."""
    units = _units(preemptors, largest_first=True, cluster=session.cluster)
    ledger, served = _serve(session, unserved, units, feasible)
    if len(served) < len(units) and not session.deadline.passed():
        other = Unserved()
        second, also = _serve(session, other, _units(preemptors, largest_first=False, cluster=session.cluster), feasible)
        if len(also) > len(served):  # the smallest first serve more (the time may have ended either pass)
            ledger, served, unserved.why, unserved.capped = second, also, other.why, other.capped
    if ledger.violations and not session.deadline.passed():
        ledger = _fewer_violations(session, [p for unit in served for p in unit], feasible, ledger)
    return ledger



def _serve(session: Session, unserved: Unserved, units: list[list[Pod]],
           feasible: FeasibleNodes) -> tuple[Ledger, list[list[Pod]]]:
    """Victims for each unit in order, until the search's deadline: a unit it cuts short evicts nothing and waits
    with the rest; (the ledger, the units that found room)."""
    ledger = session.fresh_ledger()
    served: list[list[Pod]] = []
    for k, unit in enumerate(units):
        trial = None if session.deadline.passed() else _serve_one(session, unserved, ledger, unit, feasible)
        if trial is not None:
            ledger = trial
            served.append(unit)
        elif session.deadline.passed():  # cut short, not refused
            unserved.not_reached(units[k:])
            break
    return ledger, served


def _serve_one(session: Session, unserved: Unserved, ledger: Ledger, unit: list[Pod],
               feasible: FeasibleNodes) -> Ledger | None:
    """A copy of `ledger` with room made for every pod of `unit`, or None: a gang that cannot fit whole evicts nothing
    (unless the search's deadline cut it short: then it is not refused)."""
    trial = ledger.copy()
    if all(_place_one(session, unserved, trial, pod, feasible) for pod in unit):
        return trial
    if len(unit) > 1 and not session.deadline.passed():
        for pod in unit:
            unserved.why[pod.key].append("preemption cannot make room for the whole gang, so it evicts nothing")
    return None



def _fewer_violations(session: Session, pods: list[Pod], feasible: FeasibleNodes, best: Ledger) -> Ledger:
    """Depth-first over each served pod's nodes (fewest violations, then upstream's rank, first), keeping the
    ledger that serves the same pods with the fewest budget violations. On each node two victim sets are tried:
    upstream's, and one that gives back every budget's pods first (what one pod spends of a budget without
    breaking it, the next may need). Exhaustive on small batches; on large
    ones it stops after SEARCH_STEPS nodes of the session tree, or at the search's deadline, with the best found."""
    steps = 0

    def descend(i: int, ledger: Ledger) -> None:
        nonlocal best, steps
        if ledger.violations >= best.violations or steps >= SEARCH_STEPS or session.deadline.passed():
            return
        if i == len(pods):
            best = ledger
            return
        steps += 1
        pod = pods[i]
        choices = []
        for node in feasible.nodes_of(pod) or ():
            if session.deadline.passed():
                return
            for sparing in (False, True):  # upstream's victims, and the victims sparing every budget's pods first
                choice = _victims_on(session, Unserved(), ledger, pod, node, sparing)
                if choice is not None and choice not in choices:
                    choices.append(choice)
        choices.sort(key=lambda c: (c.violations, c.rank(session.node_order[c.node])))
        for choice in choices[:SEARCH_WIDTH]:
            trial = ledger.copy()
            trial.claim(session, pod, choice)
            descend(i + 1, trial)

    descend(0, session.fresh_ledger())
    return best



def _place_one(session: Session, unserved: Unserved, ledger: Ledger, pod: Pod, feasible: FeasibleNodes) -> bool:
    """Pick the best node for `pod` (see `Choice.rank`), record its victims and claim its room. At the search's
    deadline it takes the best node seen so far; False, without a reason, when the deadline came before its
    feasible nodes were known or before any node was a candidate."""
    nodes = feasible.nodes_of(pod)
    if nodes is None:
        return False
    if not _quota_reachable(session, ledger, pod):
        nodes = ()  # no eviction it may make gets it within its quota rows: no node is worth a look
    enough = max(MIN_CANDIDATE_NODES, int(MIN_CANDIDATE_SHARE * len(nodes)))
    found: list[Choice] = []
    for node in nodes:  # as upstream's dry run: once enough candidates are seen, the best of them is taken
        if session.deadline.passed() or len(found) >= enough:
            break
        if (choice := _victims_on(session, unserved, ledger, pod, node)) is not None:
            found.append(choice)
    best = min(found, key=lambda c: c.rank(session.node_order[c.node]), default=None)
    if best is None:
        if not unserved.why.get(pod.key) and not session.deadline.passed():
            unserved.why[pod.key].append(no_node_reason(session, unserved, pod, feasible.left.get(pod.key, [])))
        return False
    ledger.claim(session, pod, best)
    return True



def no_node_reason(session: Session, unserved: Unserved, pod: Pod, left: list[tuple[Rejection, int]]) -> str:
    """Why preemption found no node: an eviction cap that ruled out a node the pod could otherwise have had,
    protected pods in the way, or in upstream's words what still rejects it with the pods it may evict gone (`left`:
    the nodes its filters reject with every such pod in the cluster gone; `Unserved.blocked`: those rejecting it with
    every such pod on the node gone)."""
    if pod.key in unserved.capped:
        return cap_reason(unserved.capped[pod.key])
    shielded = sorted(k for k, (p, _) in session.protected.items() if session.may_evict(pod, p))
    if shielded:
        return protected_reason(shielded, str(session.protected[shielded[0]][1]))
    rc = session.reclaim
    if rc is not None and (stance := rc.stances[pod.key]).tenant is not None:
        return _quota_reason(rc.source(stance.tenant), stance.reclaiming, len(left) < len(session.view.nodes))
    return _no_victims(len(session.view.nodes), [*left, *((r, 1) for r in unserved.blocked.get(pod.key, {}).values())])



def _no_victims(nodes: int, still: list[tuple[Rejection, int]]) -> str:
    """Upstream's PostFilter message: per node "No preemption victims found for incoming pod" (evicting every pod it
    may evict leaves a rejection that evictions could clear) or "Preemption is not helpful for scheduling" (one they
    never clear); then what still rejects it, by kind and reason, most nodes first."""
    counts: Counter[tuple[str, str]] = Counter()
    for r, k in still:
        counts[(r.plugin, joined(r.reasons))] += k
    helpless = sum(k for r, k in still if not r.resolvable)
    parts = [f"{nodes - helpless} No preemption victims found for incoming pod" if nodes > helpless else "",
             f"{helpless} Preemption is not helpful for scheduling" if helpless else ""]
    said = ", ".join(f"{k} {reason} ({plugin})" for (plugin, reason), k in sorted(counts.items(), key=lambda x: (-x[1], x[0])))
    return (f"preemption: 0/{nodes} nodes are available: {', '.join(p for p in parts if p)}"
            + (f"; with every pod it may evict gone, {said}" if said else ""))



def _quota_reason(quota: str | None, reclaiming: bool, nodes: bool) -> str:
    """Why preemption found no node for a pod of a tenant (its `quota`): reclaiming or not, what it may evict was not
    enough."""
    if reclaiming:
        return (f"reclaim for {quota} cannot make room: what other tenants use beyond their min, and the lower-priority "
                f"pods of its own tenant, are not enough{'' if nodes else ' for its quota rows or on any node'}")
    return (f"preemption cannot make room: with this pod {quota} goes beyond its min, so it may evict only "
            "lower-priority pods of its own tenant, and those are not enough")



def _quota_reachable(session: Session, ledger: Ledger, pod: Pod) -> bool:
    """Under quotas, once per pod before its nodes: whether evicting what it may (each tenant's borrowed room at
    most) gets it within its quota rows."""
    if session.reclaim is None or ledger.account is None:
        return True
    room = session.reclaim.borrowed(ledger.account)
    return _for_quota(session, ledger, pod, [], room, session.counted(ledger.account)) is not None




def _victims_on(session: Session, unserved: Unserved, ledger: Ledger, pod: Pod, node: str,
                sparing: bool = False) -> Choice | None:
    """`_select_on`'s verdict, reused while it stands (`_verdict_key`): the pods of a Deployment ask the same nodes the
    same question, and a preemptor served changes one node's verdict, not the others'. Whether a verdict read beyond
    its node is read off the view (`View.reads`), not declared: such a verdict stands only for the same ledger."""
    key = _verdict_key(session, ledger, pod, node, sparing)
    verdict = session.verdicts.get(key) if key is not None else None
    if verdict is not None and verdict.stamp is not None and verdict.stamp != ledger.stamp:
        verdict = None
    if verdict is None:
        mine = Unserved()
        with ledger.view.reads() as reached:
            choice = _select_on(session, mine, ledger, pod, node, sparing)
        verdict = NodeVerdict(choice, mine.blocked.get(pod.key, {}).get(node), mine.capped.get(pod.key),
                        ledger.stamp if reached[0] else None)
        if key is not None:
            session.verdicts[key] = verdict
    if verdict.blocked is not None:
        unserved.blocked[pod.key][node] = verdict.blocked
    if verdict.capped is not None:
        unserved.capped.setdefault(pod.key, verdict.capped)
    return verdict.choice



def _verdict_key(session: Session, ledger: Ledger, pod: Pod, node: str, sparing: bool) -> tuple | None:
    """What a node's answer for the pod's class depends on, when nothing else can change it: the class, its
    priority, the node's last move, what is left of the budgets covering the pods there, the anti-affinity the pods
    added anywhere carry over domains wider than a node (the one way a pod added elsewhere reaches it). None (asked
    afresh) under quotas (the account is cluster-wide), or on a node with eviction caps or PodGroup-mode members
    (their state lies elsewhere)."""
    if session.reclaim is not None or node in session.entangled:
        return None
    budgets = tuple(ledger.budget_left.get(b) for b in session.node_budgets(node))
    return (session.specs[pod.key].index, pod.priority, node, sparing, ledger.version.get(node, 0), budgets,
            ledger.view.far_terms())



def _select_on(session: Session, unserved: Unserved, ledger: Ledger, pod: Pod, node: str, sparing: bool = False) -> Choice | None:
    """Upstream's SelectVictimsOnNode against the ledger, asking every kind (`Session.filter`): no victim when the pod
    passes them all as things stand; else every pod it may evict here out (None if the kinds still reject it), then
    give back what is not needed (units whose eviction breaks a budget first, then the rest, highest priority first).
    A PodGroup-mode group goes or stays whole: its members on other nodes are victims with it. Under quotas the pod
    must also pass its quota rows, pods elsewhere join the victims when the rows need more than this node's, and
    reclaim takes at most each tenant's borrowed room: if what is left after the give-back takes more, the choice is
    made again from the lowest-priority units that room holds. `sparing`: every budget's pods given back first, as
    if each budget were spent already."""
    if session.filter(pod, node, ledger.view) is None and not short(session, ledger.account, pod):
        return Choice(node, (), 0, _leftover(session, ledger.view, pod, node))
    found = _select(session, unserved, ledger, pod, node, limited=False, sparing=sparing)
    if found is not None and session.reclaim is not None and ledger.account is not None:
        room, stance = session.reclaim.borrowed(ledger.account), session.reclaim.stances[pod.key]
        if not all(session.reclaim.take(room, stance, [c.pod for c in unit]) for unit in session.units_of(found[0])):
            found = _select(session, unserved, ledger, pod, node, limited=True, sparing=sparing)
    if found is None:
        return None
    victims, violations, why = found
    cap = ledger.cap_reached(victims)
    if cap is not None:
        unserved.capped.setdefault(pod.key, cap.source)
        return None
    leftover = _leftover(session, ledger.without([c.pod for c in victims]), pod, node)
    return Choice(node, tuple(victims), violations, leftover, _own(session, pod, victims), tuple(why))



def _select(session: Session, unserved: Unserved, ledger: Ledger, pod: Pod, node: str, limited: bool,
            sparing: bool = False) -> tuple[list[Candidate], int, list[str]] | None:
    """Victims for `pod` on `node` (see `_victims_on`), with how many break a budget and why each goes; `limited`:
    other tenants' units only as far as their borrowed room goes. None: the kinds reject the pod there even with every
    pod it may evict gone (the first kind's reason is kept for the pod's explanation), or its quota rows cannot pass."""
    room = session.reclaim.borrowed(ledger.account) if session.reclaim and ledger.account else {}
    units = _evictable_on(session, ledger, pod, node, room if limited else None)
    rejection = session.filter(pod, node, ledger.without([c.pod for unit in units for c in unit]))
    if rejection is not None:
        unserved.blocked[pod.key][node] = rejection
        return None
    account = session.counted(ledger.account, [c.pod for unit in units for c in unit])
    extra = _for_quota(session, ledger, pod, units, room, account)
    if extra is None:
        return None
    return _reprieve(session, ledger, pod, node, units + extra, account, sparing)



def _own(session: Session, pod: Pod, victims: list[Candidate]) -> int:
    """How many victims a reclaiming `pod` takes from its own tenant rather than from borrowed room."""
    rc = session.reclaim
    if rc is None or not (stance := rc.stances[pod.key]).reclaiming:
        return 0
    return sum(1 for c in victims if not rc.reclaims(stance, c.pod))



def _reprieve(session: Session, ledger: Ledger, pod: Pod, node: str, units: list[Unit], account: Account | None,
              sparing: bool = False) -> tuple[list[Candidate], int, list[str]]:
    """Give back each unit the pod does without, in upstream's order: back if every kind still passes the pod on
    `node` with it there and the quota rows on `account` still pass. (victims, how many break a budget, why each
    goes: the reason the kind that needs it gone gives, or its quota row.)"""
    victims: list[Candidate] = []
    why: list[str] = []
    broken = 0
    leaving = {c.key: c.pod for unit in units for c in unit}  # every unit's pods; a unit given back leaves this
    for unit, breaks in _split_by_budget(session, units, {} if sparing else dict(ledger.budget_left), pod):
        back = {c.key for c in unit}
        rejection = session.filter(pod, node, ledger.without([p for k, p in leaving.items() if k not in back]))
        if rejection is None and not short(session, account, pod, unit):
            for key in back:
                del leaving[key]
            session.count(account, [c.pod for c in unit])  # given back: the pod (or the whole group) stays
            continue
        victims.extend(unit)
        broken += breaks
        why.extend([victim_reason(rejection)] * len(unit))
    return victims, session.violations(victims, ledger.budget_left) if sparing else broken, why



def _evictable_on(session: Session, ledger: Ledger, pod: Pod, node: str,
                  room: dict[str, dict[str, int]] | None) -> list[Unit]:
    """The units of the pods on `node` that `pod` may evict; with `room`, those of other tenants only as far as
    their borrowed room goes (drawn from it), lowest priority first."""
    mine = [c for c in session.by_node.get(node, []) if c.key not in ledger.evicted and session.may_evict(pod, c.pod)]
    units = session.units_of(mine)
    if session.reclaim is None or room is None:
        return units
    stance = session.reclaim.stances[pod.key]
    units.sort(key=lambda u: u[0].pod.created, reverse=True)
    units.sort(key=lambda u: u[0].pod.priority)
    return [u for u in units if session.reclaim.take(room, stance, [c.pod for c in u])]



def _for_quota(session: Session, ledger: Ledger, pod: Pod, units: list[Unit], room: dict[str, dict[str, int]],
               account: Account | None) -> list[Unit] | None:
    """Units elsewhere to evict as well when the pod still goes over a quota row without `units` (taken out of
    `account`): other tenants' borrowed room first, then its own tenant's lower-priority pods, each lowest
    priority first, until the rows pass. None: they cannot."""
    rc = session.reclaim
    if rc is None or account is None or not (rows := rc.short(account, pod)):
        return []
    stance = rc.stances[pod.key]
    taken = {c.key for unit in units for c in unit} | set(ledger.evicted)
    extra: list[Unit] = []
    for borrowed in (True, False):
        for unit in session.quota_order:
            pods = [c.pod for c in unit]
            if (rc.reclaims(stance, pods[0]) != borrowed or any(c.key in taken for c in unit)
                    or not all(rc.may_evict(stance, p) for p in pods) or not rc.helps(rows, pods)
                    or not rc.take(room, stance, pods)):
                continue
            extra.append(unit)
            session.count(account, pods, -1)
            if not (rows := rc.short(account, pod)):
                return extra
    return None



def short(session: Session, account: Account | None, pod: Pod, back: Unit = ()) -> list[tuple[str, str]]:
    """The quota rows `pod` goes over on `account` with `back` counted in again (none without quotas)."""
    if session.reclaim is None or account is None:
        return []
    return session.reclaim.short(account, pod, [c.pod for c in back])



def _leftover(session: Session, view: View, pod: Pod, node: str) -> tuple[int, int]:
    """Free cpu and memory on `node` in `view`, less the pod's: among equal choices the node left roomier (for the
    batch's next preemptors)."""
    i = session.node_order[node]
    return (view.free(i, "cpu") - pod.requests.get("cpu", 0), view.free(i, "memory") - pod.requests.get("memory", 0))



def _split_by_budget(session: Session, units: list[Unit], budgets: dict[str, int], pod: Pod) -> list[tuple[Unit, int]]:
    """Upstream's filterPodsWithPDBViolation: walking units highest priority first, those whose eviction would
    take some covering budget below zero come first (with how many of their pods do), then the rest; each
    part highest priority first, groups before single pods (upstream holds a group more important), and
    within a priority the smallest first (given back first, so the victims are the large pods: as few as
    possible, and the room they free is more often enough for the next preemptor too). Under quotas the
    preemptor's own tenant's pods are given back before other tenants' borrowed room: reclaim takes that first."""
    stance = session.reclaim.stances[pod.key] if session.reclaim is not None else None

    def order(unit: Unit) -> tuple:
        reclaimed = stance is not None and session.reclaim is not None and session.reclaim.reclaims(stance, unit[0].pod)
        return (reclaimed, *session.unit_order(unit))

    violating: list[tuple[Unit, int]] = []
    keeping: list[tuple[Unit, int]] = []
    for unit in sorted(units, key=order):
        breaks = sum(session.draw(budgets, c.pod) for c in unit)
        (violating if breaks else keeping).append((unit, breaks))
    return violating + keeping

