"""Preemption decided for the whole batch: fewest victims, budgets respected, gangs whole or not at all.

kube-scheduler's DefaultPreemption picks victims for one pod on one node at a time. Here the pods the
plan left out are taken together, highest priority first, against one ledger of the batch:
1. The planner (`engine.planner.plan_batch`) makes the plan without preemption (`make_plan`), then calls
   `preempt` here.
2. Pods it left out that may preempt (`preemptionPolicy` not `Never`) choose victims node by node as
   upstream does, asking every kind whose verdict pods can sway (`kinds.filter_node` on the ledger's view of the
   trial: upstream's filters after RemovePod/AddPod) whether the pod passes (remove every lower-priority pod, then
   give back all that are not needed, those whose eviction would break a PodDisruptionBudget first, highest
   priority first), and take the node with the fewest budget violations, then the lowest highest victim
   priority, the smallest priority sum, the fewest victims. Victims chosen for one pod free room for the next and
   draw on the same budgets; a gang gets room for all its members or evicts nothing. When those choices break a
   budget, a bounded search over the served pods' nodes looks for victims that serve them all with fewer
   violations (one pod's best node
   can spend a budget another pod's node would have kept).
3. The same compile → solve path re-plans the preemptors on the cluster without the victims, with the
   first plan's placements fixed (freed room goes to preemptors only).
4. Victims that no placed preemptor needs are given back (one on their node, or one whose domain-wide kinds they
   sway: `_blocks`), and 3 repeats;
   then each remaining victim, most important first, is given back if the preemptors still place as well
   without its eviction (while time is left): no pod is evicted that another placement makes unnecessary.
5. When the time left allows, the whole batch again in one model (engine.preempt_model: the running pods the
   preemptors may evict, pinned to their nodes, planned beside them): its victims replace the search's when they
   are better in upstream's order (`_batch`); when the best so far breaks a budget, once more with the pods the
   budgets cannot spare held in place.

The time limit is a wall for the whole stage (`PreemptionSettings.deadline`, on its clock): finding the candidates stops
there, the feasible nodes are compiled per group of preemptors only when that group's turn comes and not after it,
victim selection (each pod's look over its nodes, the fewer-violations search) takes 70% of what is left, and
every re-plan is given only the time left, not started when the last one shows it could not end in time. What the
deadline cuts short is dropped, never kept half done: the preemptors not reached, and all of them when the victims
could not be settled by a complete re-plan (each victim needed by a placed preemptor, no tenant left below its min),
are told they are tried again next cycle, and the plan is the first plan with what preemption completed: never fewer
pods placed than the first plan, never a victim evicted for nothing.

Under tenant quotas (engine.reclaim; docs/quotas.md "Reclaim by preemption") quotas decide who may evict whom,
as CapacityScheduling does: a pod its tenant's min serves *reclaims* what other tenants use beyond their min,
whatever its priority, and takes back only that borrowed room; other pods evict only lower-priority pods on
their side of the quotas. The ledger keeps a quota account beside node room: a pod must pass its quota rows too,
and borrowed pods anywhere join its victims when those rows need them.

Every trial and re-plan reads a view of one table (the first plan's, with its placements bound: `View.moved`),
so the node table (label columns, predicate masks, taint groups) and what kinds work out of the table's pods are
computed once for the whole stage.

Pure, like the rest of the core: the scheduler loop evicts what the plan says.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from . import kinds, preempt_model
from .compile import Compiled, Deadline, PolicyRules, compile_cluster
from .gangs import disruption_unit
from .ir import EvictionCap, PreemptionRules, Source
from .kinds import GUARDS
from .kinds.context import Batch, ClassSpec
from .kinds.protection import cap_key, cap_reason, protected_reason
from .model import NEVER_PREEMPT, Cluster, Pod
from .plan import Eviction, NodeUsage, Plan, Preemption, PreemptionStats, Stats, make_plan
from .reclaim import Account, Reclaim, Stance
from .rejections import Rejection, joined
from .tenants import Usage
from .view import View

LOWEST = -(2**63)
MAX_ROUNDS = 4  # re-plans after giving back unneeded victims; in practice 1-2 suffice
MAX_TRIALS = 40  # victims tried one by one for give-back (each a re-plan of the preemptors alone)
SEARCH_STEPS = 2_000  # nodes of the fewer-violations search tree, at most
SEARCH_WIDTH = 8  # nodes tried per pod in that search, best first
SEARCH_CHECK = 1024  # running pods looked at between two looks at the clock while finding the candidates
PREEMPTION_SHARE = 0.4  # of the time limit, kept for preemption when some pending pod may preempt
# upstream DefaultPreemption's dry run: it stops looking once it has this many candidate nodes (at least 100, or 10%)
MIN_CANDIDATE_NODES, MIN_CANDIDATE_SHARE = 100, 0.1
VICTIMS_SHARE = 0.7  # of the stage's time, for choosing victims; the re-plans that place the preemptors get the rest
OUT_OF_TIME = "preemption ran out of this cycle's time before this pod's turn; it is tried again in the next cycle"


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running pod that a preemptor of higher priority may evict, with what its eviction costs."""

    pod: Pod
    node: str
    caps: tuple[EvictionCap, ...]
    unit: str | None = None  # the PodGroup (disruptionMode: PodGroup) it is evicted with, whole or not at all

    @property
    def key(self) -> str:
        return self.pod.key


Unit = tuple[Candidate, ...]  # what is evicted together: one pod, or every running member of a PodGroup-mode group


@dataclass(slots=True)
class Ledger:
    """The batch's running account: victims chosen (and why), the stage's view with them gone and the preemptors
    served bound where they go (what the kinds are asked about), budgets and caps left."""

    view: View
    evicted: dict[str, Candidate] = field(default_factory=dict)
    budget_left: dict[str, int] = field(default_factory=dict)
    cap_used: dict[tuple[Source, str], int] = field(default_factory=dict)
    violations: int = 0  # evictions so far that broke some budget
    account: Account | None = None  # what the quotas' pods use (None: no quotas)
    why: dict[str, str] = field(default_factory=dict)  # victim key -> what its staying would leave the preemptor
    needed_by: dict[str, str] = field(default_factory=dict)  # victim key -> the placed preemptor that needs it gone
    version: dict[int, int] = field(default_factory=dict)  # node index -> the stage's count at its last move there
    stamp: int = 0  # the stage's count at the ledger's last move: two ledgers with one stamp stand alike

    def copy(self) -> Ledger:
        return Ledger(self.view, dict(self.evicted), dict(self.budget_left), dict(self.cap_used), self.violations,
                      self.account.copy() if self.account is not None else None, dict(self.why), dict(self.needed_by),
                      dict(self.version), self.stamp)

    def moved(self, search: Search, i: int, view: View) -> None:
        """A pod left or reached node i: the ledger's view is `view` from now on."""
        self.view = view
        self.stamp = self.version[i] = search.tick()

    def without(self, pods: list[Pod]) -> View:
        """The ledger's view with `pods` gone too (a trial's)."""
        return self.view.moved(removed=pods) if pods else self.view


@dataclass(frozen=True, slots=True)
class Choice:
    """Victims on one node for one preemptor, and upstream's order of preference among nodes (under quotas, a
    reclaiming pod's own tenant's pods spared before other tenants' borrowed room); among equals, the node left
    with the most free room (for the batch's next preemptors), then the first."""

    node: str
    victims: tuple[Candidate, ...]
    violations: int
    leftover: tuple[int, int] = (0, 0)  # cpu, memory free after the evictions and this pod
    own: int = 0  # victims of a reclaiming preemptor's own tenant
    why: tuple[str, ...] = ()  # per victim: what its staying would leave the preemptor (a kind's reason)

    def rank(self, order: int) -> tuple[int, int, int, int, int, int, int, int]:
        priorities = [v.pod.priority for v in self.victims]
        return (self.violations, self.own, max(priorities, default=LOWEST), sum(priorities), len(priorities),
                -self.leftover[0], -self.leftover[1], order)


@dataclass(frozen=True, slots=True)
class Search:
    """What victim selection reads, fixed for the stage: the cluster with the first plan's placements bound and
    its index, the running pods preemptors may evict by node, and the pods policies protect."""

    cluster: Cluster
    view: View
    by_node: dict[str, list[Candidate]]
    node_order: dict[str, int]
    protected: dict[str, tuple[Pod, Source]]  # pod key -> the pod and the rule protecting it
    units: dict[str, Unit] = field(default_factory=dict)  # PodGroup key -> its running members (candidates)
    reclaim: Reclaim | None = None  # the quota facts (None: no quotas, preemption by priority alone)
    quota_order: tuple[Unit, ...] = ()  # candidate units of tenants, lowest priority first: where quota room comes from
    deadline: Deadline = field(default_factory=Deadline)  # when victim selection stops serving preemptors (the rest wait)
    answers: dict[tuple, Answer] = field(default_factory=dict)  # a node's answer for a class while it stands
    moves_made: list[int] = field(default_factory=lambda: [0])  # moves any ledger made: a node's version is one
    covering_node: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> budgets covering its candidates
    entangled: frozenset[str] = frozenset()  # nodes whose answers depend on more than the node (caps, PodGroup units)
    covering: dict[int, tuple[str, ...]] = field(default_factory=dict)  # pod -> its budgets' keys, once asked
    ordered: dict[int, tuple] = field(default_factory=dict)  # unit -> its part of upstream's order, once asked
    batch: Batch | None = None  # what the kinds read when asked about a trial (the stage's view), set by _search
    specs: dict[str, ClassSpec] = field(default_factory=dict)  # preemptor key -> its class's rules, set by Feasible

    def tick(self) -> int:
        self.moves_made[0] += 1
        return self.moves_made[0]

    def filter(self, pod: Pod | ClassSpec, node: str, view: View) -> Rejection | None:
        """Every kind's verdict on `pod` (or one of its class) on `node` in `view` (engine.kinds.filter_node)."""
        assert self.batch is not None
        spec = pod if isinstance(pod, ClassSpec) else self.specs[pod.key]
        return kinds.filter_node(spec, self.batch.on(view), self.node_order[node], kinds.READ_PODS)

    def unit_of(self, c: Candidate) -> Unit:
        return self.units[c.unit] if c.unit is not None else (c,)

    def budgets_of(self, pod: Pod) -> tuple[str, ...]:
        """The keys of the disruption budgets covering a running pod, looked up once for the stage (by the pod
        object: the same through the stage): a node's candidates are weighed again for every preemptor that looks."""
        key = id(pod)
        if key not in self.covering:
            self.covering[key] = tuple(b.key for b in self.cluster.budgets if b.covers(pod))
        return self.covering[key]

    def node_budgets(self, node: str) -> tuple[str, ...]:
        """The budgets covering some candidate on `node`, once asked."""
        if node not in self.covering_node:
            self.covering_node[node] = tuple(sorted({b for c in self.by_node.get(node, ()) for b in self.budgets_of(c.pod)}))
        return self.covering_node[node]

    def unit_order(self, unit: Unit) -> tuple:
        """What upstream's order reads of a unit whoever preempts (see `_split_by_budget`), once for the stage."""
        key = id(unit[0].pod)
        if key not in self.ordered:
            first = unit[0]
            self.ordered[key] = (-first.pod.priority, first.unit is None, sum(c.pod.requests.get("cpu", 0) for c in unit),
                                 sum(c.pod.requests.get("memory", 0) for c in unit), min(c.pod.created for c in unit),
                                 first.key)
        return self.ordered[key]

    def may_evict(self, pod: Pod, victim: Pod) -> bool:
        """Priority alone without quotas; with them, engine.reclaim's rule for the preemptor's stance."""
        if self.reclaim is None:
            return victim.priority < pod.priority
        return self.reclaim.may_evict(self.reclaim.stances[pod.key], victim)


@dataclass(frozen=True, slots=True)
class Answer:
    """What `_select_on` found for a class on a node, and what it told the hints: kept while it stands. `stamp`: when
    the kinds read beyond the node (a domain's counts, pods added anywhere), the ledger state alone it stands for."""

    choice: Choice | None
    blocked: Rejection | None = None
    capped: Source | None = None
    stamp: int | None = None


@dataclass(slots=True)
class Hints:
    """What victim selection found out about the preemptors it could not serve: the stage's output beside
    the ledger."""

    why: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # preemptor -> why not
    capped: dict[str, Source] = field(default_factory=dict)  # preemptor -> a cap that ruled out some node
    # preemptor -> node -> the kind rejecting it there even with every pod it may evict on that node gone
    blocked: dict[str, dict[str, Rejection]] = field(default_factory=lambda: defaultdict(dict))


@dataclass(frozen=True, slots=True)
class PreemptionSettings:
    """How the stage runs: the policies' placement rules, the solver's, and when it must be done (the deadline's
    clock is the stage's: a test may give its own)."""

    policy: PolicyRules | None
    deadline: Deadline
    workers: int
    seed: int
    batch_model: bool = True  # also choose the victims for the whole batch in one model (engine.preempt_model)


@dataclass(slots=True)
class Wall:
    """The stage's deadline as re-plans meet it: each gets half the time left (a give-back trial must leave room for
    the next), and none starts when less is left than the last one needed besides its solver's search (compile,
    starting plans, explanations: what a shorter limit does not shorten)."""

    settings: PreemptionSettings
    needs: float = 0.0  # seconds the last re-plan took besides CP-SAT's search

    def left(self) -> float:
        return _left(self.settings.deadline)

    def affords(self) -> bool:
        return self.left() > self.needs


def _left(deadline: Deadline) -> float:
    """Seconds before `deadline` on its clock (0 once passed, inf without one)."""
    return float("inf") if deadline.at is None else max(0.0, deadline.at - deadline.clock())


def _within(deadline: Deadline, share: float) -> Deadline:
    """The deadline `share` of the way from now to `deadline`, on the same clock."""
    return deadline if deadline.at is None else Deadline(deadline.clock() + share * _left(deadline), deadline.clock)


def preempt(cluster: Cluster, plan: Plan, rules: PreemptionRules | None, settings: PreemptionSettings, started: float,
            progress: Callable[[str], None] | None = None) -> Plan:
    """Steps 2-4 for the pods `plan` left out that may preempt; the plan unchanged when there are none. Within
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
    hints = Hints()
    search = _stage(cluster, plan, rules, preemptors, settings.deadline)
    if search is None:  # the deadline came before the candidates were known
        _not_reached(hints, [preemptors])
        return _merge(plan, _nothing(preemptors), {}, hints, started)
    feasible = Feasible.of(search, settings.policy, preemptors)
    ledger = choose_victims(search, hints, preemptors, feasible)
    wall = Wall(settings)
    replan, ledger = _replan(search, preemptors, ledger, wall, hints)
    replan, ledger, said = _batch(search, preemptors, feasible, wall, replan, ledger)
    if progress:
        progress(f"preemption: {len(replan.assignments)} more pods placed, {len(ledger.evicted)} running pods evicted"
                 f" (batch model: {said})")
    by_key = {p.key: p for p in preemptors}
    if ledger.evicted:  # who needs each victim, and why, in the plan kept (trials on the way wrote the same notes)
        ledger = replace(ledger, needed_by={}, why=dict(ledger.why))
        _needed(search, replan, ledger, by_key)
    preemptions = _attribute(replan, ledger, search, by_key)
    return _merge(plan, replan, preemptions, hints, started, said)


def _stage(cluster: Cluster, plan: Plan, rules: PreemptionRules | None, preemptors: list[Pod],
           deadline: Deadline) -> Search | None:
    """What the stage reads (`Search`: the cluster with the first plan's placements bound, the candidates), with
    victim selection's deadline (VICTIMS_SHARE of the time left; the rest is the re-plans'); None when the stage's
    deadline passes first."""
    compiled = plan.details.compiled
    if deadline.passed() or compiled is None:
        return None
    placed = tuple(replace(p, node_name=plan.assignments[p.key]) for p in cluster.pending if p.key in plan.assignments)
    fixed = replace(cluster, bound=cluster.bound + list(placed), pending=[], notes=[], skipped={})
    search = _search(fixed, compiled.view.moved(added=placed).settled(), rules, preemptors, set(plan.assignments),
                     Reclaim.of(fixed, preemptors, _start(plan, placed)), deadline)
    return None if search is None else replace(search, deadline=_within(deadline, VICTIMS_SHARE))


def _nothing(preemptors: list[Pod]) -> Plan:
    """The plan of a re-plan with no victims: no preemptor placed."""
    return Plan({}, {p.key: [] for p in preemptors}, Stats())


def _not_reached(hints: Hints, units: list[list[Pod]]) -> None:
    """The stage's deadline came before these pods were served (or before what was chosen for them was settled):
    they are told they are tried again next cycle."""
    for pod in (p for unit in units for p in unit):
        hints.why[pod.key] = [OUT_OF_TIME]


def _start(plan: Plan, placed: tuple[Pod, ...]) -> Usage | None:
    """What the running pods use of the quotas with the first plan's placements: compile's usage (the loop's is
    kept across cycles) plus the placements, not a count over every running pod again (None: no quotas)."""
    before = plan.details.compiled.usage if plan.details.compiled is not None else None
    if before is None:
        return None
    start = before.copy()
    start.add_all(placed)
    return start


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


def _search(fixed: Cluster, view: View, rules: PreemptionRules | None, preemptors: list[Pod],
            placed: set[str], reclaim: Reclaim | None, deadline: Deadline) -> Search | None:
    """Running pods some preemptor may evict (below the highest preemptor priority, without quotas), by node,
    minus those a policy protects (pods the first plan just placed are not running yet and are never victims). A
    PodGroup-mode group is one unit: a protected member protects all of them. None when `deadline` passes first."""
    evictable = _evictable_by(preemptors, reclaim)
    found: list[Candidate] = []
    protected: dict[str, tuple[Pod, Source]] = {}
    guarding = GUARDS  # kinds with a word on victims
    for k, pod in enumerate(fixed.bound):
        if k % SEARCH_CHECK == 0 and deadline.passed():
            return None
        if pod.terminating or pod.key in placed or pod.node_name is None or not evictable(pod):
            continue
        guards = [kind.guard(pod, rules) for kind in guarding]
        shield = next((g.protected for g in guards if g.protected is not None), None)
        if shield is not None:
            protected[pod.key] = (pod, shield)
            continue
        found.append(Candidate(pod, pod.node_name, tuple(c for g in guards for c in g.caps), disruption_unit(pod, fixed)))
    shielded = {disruption_unit(p, fixed) for p, _ in protected.values()} - {None}
    by_node: dict[str, list[Candidate]] = defaultdict(list)
    units: dict[str, list[Candidate]] = defaultdict(list)
    for c in found:
        if c.unit in shielded:
            protected[c.key] = (c.pod, next(s for p, s in protected.values() if disruption_unit(p, fixed) == c.unit))
            continue
        by_node[c.node].append(c)
        if c.unit is not None:
            units[c.unit].append(c)
    order = view.positions()
    entangled = frozenset(n for n, cs in by_node.items() if any(c.caps or c.unit is not None for c in cs))
    search = Search(fixed, view, dict(by_node), order, protected, {k: tuple(v) for k, v in units.items()}, reclaim,
                    batch=Batch.alone_on(fixed, view), entangled=entangled)
    if reclaim is not None:
        search = replace(search, quota_order=_quota_order(search, reclaim))
    return search


def _evictable_by(preemptors: list[Pod], reclaim: Reclaim | None) -> Callable[[Pod], bool]:
    """Whether some preemptor may evict a running pod: one of a lower priority than the highest preemptor's
    without quotas; with them, engine.reclaim's rule for some preemptor's stance (the highest of each kind)."""
    top = max(p.priority for p in preemptors)
    if reclaim is None:
        return lambda pod: pod.priority < top
    stances: dict[tuple[str | None, bool], Stance] = {}
    for s in reclaim.stances.values():
        kind = (s.tenant, s.reclaiming)
        if kind not in stances or stances[kind].priority < s.priority:
            stances[kind] = s
    known: dict[tuple[str | None, int], bool] = {}  # the rule reads only the victim's tenant and priority

    def evictable(pod: Pod) -> bool:
        key = (reclaim.tenant(pod), pod.priority)
        if key not in known:
            known[key] = any(reclaim.may_evict(s, pod) for s in stances.values())
        return known[key]

    return evictable


def _quota_order(search: Search, reclaim: Reclaim) -> tuple[Unit, ...]:
    """The candidates' units that count toward some quota, lowest priority first, then the newest first (as
    upstream orders victims): where the quota rows' room is taken from when a node's own victims are not enough."""
    found = [c for cs in search.by_node.values() for c in cs if reclaim.covering(c.pod)]
    found.sort(key=lambda c: c.pod.created, reverse=True)
    found.sort(key=lambda c: c.pod.priority)
    return tuple(_units_of(search, found))


def _fits(requests: dict[str, int], free: dict[str, int]) -> bool:
    return all(v <= free.get(r, 0) for r, v in requests.items() if v > 0)


def _units(preemptors: list[Pod], largest_first: bool) -> list[list[Pod]]:
    """Gangs as one unit, other pods alone; highest priority first, then (when `largest_first`) the largest
    requests, then oldest."""
    groups: dict[str, list[Pod]] = defaultdict(list)
    for p in preemptors:
        groups[f"gang:{p.gang}" if p.gang else f"pod:{p.key}"].append(p)

    def size(unit: list[Pod]) -> tuple[int, int]:
        return (-sum(p.requests.get("cpu", 0) for p in unit), -sum(p.requests.get("memory", 0) for p in unit))

    return sorted(groups.values(), key=lambda u: (-max(p.priority for p in u), size(u) if largest_first else (0, 0),
                                                  min(p.created for p in u), u[0].key))


def choose_victims(search: Search, hints: Hints, preemptors: list[Pod], feasible: Feasible) -> Ledger:
    """Step 2: victims for each unit in turn, against one ledger; a gang that cannot fit whole evicts nothing.

    Within a priority the largest pods go first (room freed for a big pod is often enough for a small one too,
    and the reverse seldom): fewer victims when everyone can be served. When someone cannot, the order decides
    who, so it is upstream's then: the oldest first. Each pod's best node alone can break a budget that other
    nodes would have kept for the batch: then a bounded search looks for choices that serve the same pods
    with fewer violations. All of it stops at the search's deadline."""
    units = _units(preemptors, largest_first=True)
    ledger, served = _serve(search, hints, units, feasible)
    if len(served) < len(units) and not search.deadline.passed():
        other = Hints()
        second, also = _serve(search, other, _units(preemptors, largest_first=False), feasible)
        if len(also) > len(served):  # the smallest first serve more (the time may have ended either pass)
            ledger, served, hints.why, hints.capped = second, also, other.why, other.capped
    if ledger.violations and not search.deadline.passed():
        ledger = _fewer_violations(search, [p for unit in served for p in unit], feasible, ledger)
    return ledger


def _serve(search: Search, hints: Hints, units: list[list[Pod]], feasible: Feasible) -> tuple[Ledger, list[list[Pod]]]:
    """Victims for each unit in order, until the search's deadline: a unit it cuts short evicts nothing and waits
    with the rest; (the ledger, the units that found room)."""
    ledger = _fresh_ledger(search)
    served: list[list[Pod]] = []
    for k, unit in enumerate(units):
        if search.deadline.passed():
            _not_reached(hints, units[k:])
            break
        trial = ledger.copy()
        if all(_place_one(search, hints, trial, pod, feasible) for pod in unit):
            ledger = trial
            served.append(unit)
            continue
        if search.deadline.passed():  # cut short, not refused
            _not_reached(hints, units[k:])
            break
        if len(unit) > 1:
            for pod in unit:
                hints.why[pod.key].append("preemption cannot make room for the whole gang, so it evicts nothing")
    return ledger, served


def _fresh_ledger(search: Search) -> Ledger:
    account = search.reclaim.start.copy() if search.reclaim is not None else None
    return Ledger(search.view, budget_left={b.key: b.allowed for b in search.cluster.budgets}, account=account)


def _fewer_violations(search: Search, pods: list[Pod], feasible: Feasible, best: Ledger) -> Ledger:
    """Depth-first over each served pod's nodes (fewest violations, then upstream's rank, first), keeping the
    ledger that serves the same pods with the fewest budget violations. On each node two victim sets are tried:
    upstream's, and one that gives back every budget's pods first (what one pod spends of a budget without
    breaking it, the next may need). Exhaustive on small batches; on large
    ones it stops after SEARCH_STEPS nodes of the search tree, or at the search's deadline, with the best found."""
    steps = 0

    def descend(i: int, ledger: Ledger) -> None:
        nonlocal best, steps
        if ledger.violations >= best.violations or steps >= SEARCH_STEPS or search.deadline.passed():
            return
        if i == len(pods):
            best = ledger
            return
        steps += 1
        pod = pods[i]
        choices = []
        for node in feasible.nodes_of(pod) or ():
            if search.deadline.passed():
                return
            for sparing in (False, True):  # upstream's victims, and the victims sparing every budget's pods first
                choice = _victims_on(search, Hints(), ledger, pod, node, sparing)
                if choice is not None and choice not in choices:
                    choices.append(choice)
        choices.sort(key=lambda c: (c.violations, c.rank(search.node_order[c.node])))
        for choice in choices[:SEARCH_WIDTH]:
            trial = ledger.copy()
            _claim(search, trial, pod, choice)
            descend(i + 1, trial)

    descend(0, _fresh_ledger(search))
    return best


@dataclass(slots=True)
class Feasible:
    """Upstream's first step: the nodes each preemptor passes every filter on once all pods it may evict are gone.
    Compiled (on a view of the stage's index) once per group of preemptors that may evict the same pods (`_alike`:
    a priority level, and under quotas a stance, as the quota rows' PreFilter passes once the borrowers' pods are
    gone), when the first of them is served, and only before the search's deadline: a pod whose group, or whose
    class in it, that deadline left unchecked has no answer (None) and waits for the next cycle."""

    search: Search
    policy: PolicyRules | None
    groups: dict[str, list[Pod]]  # preemptor key -> its group
    buckets: list[list[Pod]]  # the candidates by tenant and priority: what the eviction rule tells apart
    nodes: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    left: dict[str, list[tuple[Rejection, int]]] = field(default_factory=dict)  # why the other nodes fail, and on how many

    @classmethod
    def of(cls, search: Search, policy: PolicyRules | None, preemptors: list[Pod]) -> Feasible:
        buckets: dict[tuple[str | None, int], list[Pod]] = defaultdict(list)
        for c in (c for cs in search.by_node.values() for c in cs):
            tenant = search.reclaim.tenant(c.pod) if search.reclaim is not None else None
            buckets[(tenant, c.pod.priority)].append(c.pod)
        groups = {p.key: pods for pods in _alike(search, preemptors) for p in pods}
        return cls(search, policy, groups, list(buckets.values()))

    def nodes_of(self, pod: Pod) -> tuple[str, ...] | None:
        if pod.key not in self.nodes:
            self._compile(self.groups[pod.key])
        return self.nodes[pod.key]

    def _compile(self, pods: list[Pod]) -> None:
        self.nodes.update(dict.fromkeys((p.key for p in pods), None))
        search = self.search
        if search.deadline.passed():
            return
        going = [c for bucket in self.buckets if search.may_evict(pods[0], bucket[0]) for c in bucket]
        gone = frozenset(c.key for c in going)
        cluster = replace(search.cluster, bound=[b for b in search.cluster.bound if b.key not in gone], pending=pods,
                          gangs={})  # the filters alone: the preemptors' gangs have their quorum (_short_of_members)
        compiled = compile_cluster(cluster, self.policy, search.deadline, search.view.moved(removed=going).settled(),
                                   self._usage(going))
        unchecked = set(compiled.problem.unchecked)
        for a, info in enumerate(compiled.classes):
            if a not in unchecked:
                nodes = tuple(compiled.cluster.nodes[i].name for i in info.rejected.passing())
                self.nodes.update(dict.fromkeys((p.key for p in info.pods), nodes))
                spec = ClassSpec(len(search.specs), info.sample, info.constraints)
                search.specs.update(dict.fromkeys((p.key for p in info.pods), spec))
                left = [(r, len(members)) for r, members in info.rejected.groups.items() if len(members)]
                self.left.update(dict.fromkeys((p.key for p in info.pods), left))

    def _usage(self, going: list[Pod]) -> Usage | None:
        """What the running pods use of the quotas once `going` are gone: the stage's start without them (None: no
        quotas), rather than a count over every running pod again."""
        if self.search.reclaim is None:
            return None
        usage = self.search.reclaim.start.copy()
        usage.add_all(going, -1)
        return usage


def _alike(search: Search, preemptors: list[Pod]) -> list[list[Pod]]:
    """Preemptors that may evict the same pods: one priority level (and one stance under quotas), highest first."""
    groups: dict[tuple, list[Pod]] = defaultdict(list)
    for p in sorted(preemptors, key=lambda p: -p.priority):
        stance = search.reclaim.stances[p.key] if search.reclaim is not None else None
        groups[(p.priority, stance)].append(p)
    return list(groups.values())


def _place_one(search: Search, hints: Hints, ledger: Ledger, pod: Pod, feasible: Feasible) -> bool:
    """Pick the best node for `pod` (see `Choice.rank`), record its victims and claim its room. At the search's
    deadline it takes the best node seen so far; False, without a reason, when the deadline came before its
    feasible nodes were known or before any node was a candidate."""
    nodes = feasible.nodes_of(pod)
    if nodes is None:
        return False
    best: Choice | None = None
    if not _quota_reachable(search, ledger, pod):
        nodes = ()  # no eviction it may make gets it within its quota rows: no node is worth a look
    enough, found = max(MIN_CANDIDATE_NODES, int(MIN_CANDIDATE_SHARE * len(nodes))), 0
    for node in nodes:
        if search.deadline.passed():
            break
        choice = _victims_on(search, hints, ledger, pod, node)
        if choice is None:
            continue
        found += 1
        if best is None or choice.rank(search.node_order[node]) < best.rank(search.node_order[best.node]):
            best = choice
        if found >= enough:  # as upstream's dry run: enough candidates seen, the best of them is taken
            break
    if best is None:
        if not hints.why.get(pod.key) and not search.deadline.passed():
            hints.why[pod.key].append(_no_node_reason(search, hints, pod, feasible.left.get(pod.key, [])))
        return False
    _claim(search, ledger, pod, best)
    return True


def _claim(search: Search, ledger: Ledger, pod: Pod, choice: Choice) -> None:
    """Record `choice`: its victims evicted, its violations counted, the pod's room taken on its node (and in
    its quotas)."""
    for victim, why in zip(choice.victims, choice.why):
        _evict(search, ledger, victim)
        ledger.why[victim.key] = why
    ledger.violations += choice.violations
    ledger.moved(search, search.node_order[choice.node], ledger.view.moved(added=[replace(pod, node_name=choice.node)]))
    if search.reclaim is not None and ledger.account is not None:
        search.reclaim.add(ledger.account, pod, 1)


def _no_node_reason(search: Search, hints: Hints, pod: Pod, left: list[tuple[Rejection, int]]) -> str:
    """Why preemption found no node: an eviction cap that ruled out a node the pod could otherwise have had,
    protected pods in the way, or in upstream's words what still rejects it with the pods it may evict gone (`left`:
    the nodes its filters reject with every such pod in the cluster gone; `Hints.blocked`: those rejecting it with
    every such pod on the node gone)."""
    if pod.key in hints.capped:
        return cap_reason(hints.capped[pod.key])
    shielded = sorted(k for k, (p, _) in search.protected.items() if search.may_evict(pod, p))
    if shielded:
        return protected_reason(shielded, str(search.protected[shielded[0]][1]))
    stance = search.reclaim.stances[pod.key] if search.reclaim is not None else None
    if stance is not None and stance.tenant is not None:
        return _quota_reason(search, stance, len(left) < len(search.view.nodes))
    return _no_victims(len(search.view.nodes), [*left, *((r, 1) for r in hints.blocked.get(pod.key, {}).values())])


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


def _quota_reason(search: Search, stance: Stance, nodes: bool) -> str:
    """Why preemption found no node for a pod of a tenant: reclaiming or not, what it may evict was not enough."""
    quota = search.reclaim.source(stance.tenant) if search.reclaim is not None else None
    if stance.reclaiming:
        return (f"reclaim for {quota} cannot make room: what other tenants use beyond their min, and the lower-priority "
                f"pods of its own tenant, are not enough{'' if nodes else ' for its quota rows or on any node'}")
    return (f"preemption cannot make room: with this pod {quota} goes beyond its min, so it may evict only "
            "lower-priority pods of its own tenant, and those are not enough")


def _quota_reachable(search: Search, ledger: Ledger, pod: Pod) -> bool:
    """Under quotas, once per pod before its nodes: whether evicting what it may (each tenant's borrowed room at
    most) gets it within its quota rows."""
    if search.reclaim is None or ledger.account is None:
        return True
    account = ledger.account.copy()
    return _for_quota(search, ledger, pod, [], search.reclaim.borrowed(account), account) is not None


def _victims_on(search: Search, hints: Hints, ledger: Ledger, pod: Pod, node: str, sparing: bool = False) -> Choice | None:
    """`_select_on`'s answer, reused while it stands (`_standing_key`): the pods of a Deployment ask the same nodes the
    same question, and a preemptor served changes one node's answer, not the others'. Whether an answer read beyond
    its node is read off the view (`View.reads`), not declared: such an answer stands only for the same ledger."""
    key = _standing_key(search, ledger, pod, node, sparing)
    answer = search.answers.get(key) if key is not None else None
    if answer is not None and answer.stamp is not None and answer.stamp != ledger.stamp:
        answer = None
    if answer is None:
        mine = Hints()
        with ledger.view.reads() as reached:
            choice = _select_on(search, mine, ledger, pod, node, sparing)
        answer = Answer(choice, mine.blocked.get(pod.key, {}).get(node), mine.capped.get(pod.key),
                        ledger.stamp if reached[0] else None)
        if key is not None:
            search.answers[key] = answer
    if answer.blocked is not None:
        hints.blocked[pod.key][node] = answer.blocked
    if answer.capped is not None:
        hints.capped.setdefault(pod.key, answer.capped)
    return answer.choice


def _standing_key(search: Search, ledger: Ledger, pod: Pod, node: str, sparing: bool) -> tuple | None:
    """What a node's answer for the pod's class depends on, when nothing else can change it: the class, its
    priority, the node's last move, what is left of the budgets covering the pods there, the anti-affinity the pods
    added anywhere carry over domains wider than a node (the one way a pod added elsewhere reaches it). None (asked
    afresh) under quotas (the account is cluster-wide), or on a node with eviction caps or PodGroup-mode members
    (their state lies elsewhere)."""
    if search.reclaim is not None or node in search.entangled:
        return None
    i = search.node_order[node]
    budgets = tuple(ledger.budget_left.get(b) for b in search.node_budgets(node))
    return (search.specs[pod.key].a, pod.priority, node, sparing, ledger.version.get(i, 0), budgets,
            ledger.view.far_terms())


def _select_on(search: Search, hints: Hints, ledger: Ledger, pod: Pod, node: str, sparing: bool = False) -> Choice | None:
    """Upstream's SelectVictimsOnNode against the ledger, asking every kind (`Search.after`): no victim when the pod
    passes them all as things stand; else every pod it may evict here out (None if the kinds still reject it), then
    give back what is not needed (units whose eviction breaks a budget first, then the rest, highest priority first).
    A PodGroup-mode group goes or stays whole: its members on other nodes are victims with it. Under quotas the pod
    must also pass its quota rows, pods elsewhere join the victims when the rows need more than this node's, and
    reclaim takes at most each tenant's borrowed room: if what is left after the give-back takes more, the choice is
    made again from the lowest-priority units that room holds. `sparing`: every budget's pods given back first, as
    if each budget were spent already."""
    if search.filter(pod, node, ledger.view) is None and not _short(search, ledger.account, pod):
        return Choice(node, (), 0, _leftover(search, ledger.view, pod, node))
    found = _select(search, hints, ledger, pod, node, limited=False, sparing=sparing)
    if found is not None and search.reclaim is not None and ledger.account is not None:
        room, stance = search.reclaim.borrowed(ledger.account), search.reclaim.stances[pod.key]
        if not all(search.reclaim.take(room, stance, [c.pod for c in unit]) for unit in _units_of(search, found[0])):
            found = _select(search, hints, ledger, pod, node, limited=True, sparing=sparing)
    if found is None:
        return None
    victims, violations, why = found
    cap = _cap_reached(ledger, victims)
    if cap is not None:
        hints.capped.setdefault(pod.key, cap.source)
        return None
    leftover = _leftover(search, ledger.without([c.pod for c in victims]), pod, node)
    return Choice(node, tuple(victims), violations, leftover, _own(search, pod, victims), tuple(why))


def _select(search: Search, hints: Hints, ledger: Ledger, pod: Pod, node: str, limited: bool,
            sparing: bool = False) -> tuple[list[Candidate], int, list[str]] | None:
    """Victims for `pod` on `node` (see `_victims_on`), with how many break a budget and why each goes; `limited`:
    other tenants' units only as far as their borrowed room goes. None: the kinds reject the pod there even with every
    pod it may evict gone (the first kind's reason is kept for the pod's explanation), or its quota rows cannot pass."""
    room = search.reclaim.borrowed(ledger.account) if search.reclaim and ledger.account else {}
    units = _evictable_on(search, ledger, pod, node, room if limited else None)
    rejection = search.filter(pod, node, ledger.without([c.pod for unit in units for c in unit]))
    if rejection is not None:
        hints.blocked[pod.key][node] = rejection
        return None
    account = _without(search, ledger.account, units)
    extra = _for_quota(search, ledger, pod, units, room, account)
    if extra is None:
        return None
    return _reprieve(search, ledger, pod, node, units + extra, account, sparing)


def _own(search: Search, pod: Pod, victims: list[Candidate]) -> int:
    """How many victims a reclaiming `pod` takes from its own tenant rather than from borrowed room."""
    stance = search.reclaim.stances[pod.key] if search.reclaim is not None else None
    if stance is None or not stance.reclaiming:
        return 0
    return sum(1 for c in victims if search.reclaim is not None and not search.reclaim.reclaims(stance, c.pod))


def _reprieve(search: Search, ledger: Ledger, pod: Pod, node: str, units: list[Unit], account: Account | None,
              sparing: bool = False) -> tuple[list[Candidate], int, list[str]]:
    """Give back each unit the pod does without, in upstream's order: back if every kind still passes the pod on
    `node` with it there and the quota rows on `account` still pass. (victims, how many break a budget, why each
    goes: the reason the kind that needs it gone gives, or its quota row.)"""
    victims: list[Candidate] = []
    why: list[str] = []
    violations = 0
    leaving = {c.key: c.pod for unit in units for c in unit}  # every unit's pods; a unit given back leaves this
    spec = search.specs[pod.key]
    for unit, breaks in _split_by_budget(search, units, {} if sparing else dict(ledger.budget_left), pod):
        back = {c.key for c in unit}
        rejection = search.filter(spec, node, ledger.without([p for k, p in leaving.items() if k not in back]))
        if rejection is None and not _short(search, account, pod, unit):
            for key in back:
                del leaving[key]
            if search.reclaim is not None and account is not None:  # given back: the pod (or the whole group) stays
                for c in unit:
                    search.reclaim.add(account, c.pod, 1)
            continue
        victims.extend(unit)
        violations += breaks
        why.extend([_blocking(rejection)] * len(unit))
    return victims, _violations(search, victims, ledger.budget_left) if sparing else violations, why


def _violations(search: Search, victims: list[Candidate], budget_left: dict[str, int]) -> int:
    """How many of `victims` (drawn in order) take some covering budget below zero."""
    left = dict(budget_left)
    return sum(_draw(search, left, c.pod) for c in victims)


def _draw(search: Search, budgets: dict[str, int], pod: Pod) -> bool:
    """Evicting `pod` draws one from each budget covering it (in `budgets`, in place): whether one goes below zero."""
    covering = search.budgets_of(pod)
    for key in covering:
        budgets[key] = budgets.get(key, 0) - 1
    return any(budgets[key] < 0 for key in covering)


def _blocking(rejection: Rejection | None) -> str:
    """Why a victim goes, in the words of the kind that would reject the preemptor with it there."""
    if rejection is None:
        return "the preemptor's quota needs its room"
    return f"{rejection.plugin}: {joined(rejection.reasons)}"


def _evictable_on(search: Search, ledger: Ledger, pod: Pod, node: str,
                  room: dict[str, dict[str, int]] | None) -> list[Unit]:
    """The units of the pods on `node` that `pod` may evict; with `room`, those of other tenants only as far as
    their borrowed room goes (drawn from it), lowest priority first."""
    mine = [c for c in search.by_node.get(node, []) if c.key not in ledger.evicted and search.may_evict(pod, c.pod)]
    units = _units_of(search, mine)
    if search.reclaim is None or room is None:
        return units
    stance = search.reclaim.stances[pod.key]
    units.sort(key=lambda u: u[0].pod.created, reverse=True)
    units.sort(key=lambda u: u[0].pod.priority)
    return [u for u in units if search.reclaim.take(room, stance, [c.pod for c in u])]


def _for_quota(search: Search, ledger: Ledger, pod: Pod, units: list[Unit], room: dict[str, dict[str, int]],
               account: Account | None) -> list[Unit] | None:
    """Units elsewhere to evict as well when the pod still goes over a quota row without `units` (taken out of
    `account`): other tenants' borrowed room first, then its own tenant's lower-priority pods, each lowest
    priority first, until the rows pass. None: they cannot."""
    rc = search.reclaim
    if rc is None or account is None or not (rows := rc.short(account, pod)):
        return []
    stance = rc.stances[pod.key]
    taken = {c.key for unit in units for c in unit} | set(ledger.evicted)
    extra: list[Unit] = []
    for borrowed in (True, False):
        for unit in search.quota_order:
            pods = [c.pod for c in unit]
            if (rc.reclaims(stance, pods[0]) != borrowed or any(c.key in taken for c in unit)
                    or not all(rc.may_evict(stance, p) for p in pods) or not rc.helps(rows, pods)
                    or not rc.take(room, stance, pods)):
                continue
            extra.append(unit)
            for p in pods:
                rc.add(account, p, -1)
            if not (rows := rc.short(account, pod)):
                return extra
    return None


def _short(search: Search, account: Account | None, pod: Pod, back: Unit = ()) -> list[tuple[str, str]]:
    """The quota rows `pod` goes over on `account` with `back` counted in again (none without quotas)."""
    if search.reclaim is None or account is None:
        return []
    return search.reclaim.short(account, pod, [c.pod for c in back])


def _without(search: Search, account: Account | None, units: list[Unit]) -> Account | None:
    """A copy of `account` with the units' pods taken out."""
    if search.reclaim is None or account is None:
        return None
    out = account.copy()
    for c in (c for unit in units for c in unit):
        search.reclaim.add(out, c.pod, -1)
    return out


def _units_of(search: Search, candidates: list[Candidate]) -> list[Unit]:
    """The units these candidates belong to, each once, in the candidates' order."""
    seen: set[str] = set()
    out: list[Unit] = []
    for c in candidates:
        key = c.unit or c.key
        if key not in seen:
            seen.add(key)
            out.append(search.unit_of(c))
    return out


def _leftover(search: Search, view: View, pod: Pod, node: str) -> tuple[int, int]:
    """Free cpu and memory on `node` in `view`, less the pod's: among equal choices the node left roomier (for the
    batch's next preemptors)."""
    i = search.node_order[node]
    return (view.free(i, "cpu") - pod.requests.get("cpu", 0), view.free(i, "memory") - pod.requests.get("memory", 0))


def _split_by_budget(search: Search, units: list[Unit], budgets: dict[str, int], pod: Pod) -> list[tuple[Unit, int]]:
    """Upstream's filterPodsWithPDBViolation: walking units highest priority first, those whose eviction would
    take some covering budget below zero come first (with how many of their pods do), then the rest; each
    part highest priority first, groups before single pods (upstream holds a group more important), and
    within a priority the smallest first (given back first, so the victims are the large pods: as few as
    possible, and the room they free is more often enough for the next preemptor too). Under quotas the
    preemptor's own tenant's pods are given back before other tenants' borrowed room: reclaim takes that first."""
    stance = search.reclaim.stances[pod.key] if search.reclaim is not None else None

    def order(unit: Unit) -> tuple:
        reclaimed = stance is not None and search.reclaim is not None and search.reclaim.reclaims(stance, unit[0].pod)
        return (reclaimed, *search.unit_order(unit))

    violating: list[tuple[Unit, int]] = []
    keeping: list[tuple[Unit, int]] = []
    for unit in sorted(units, key=order):
        breaks = sum(_draw(search, budgets, c.pod) for c in unit)
        (violating if breaks else keeping).append((unit, breaks))
    return violating + keeping


def _cap_reached(ledger: Ledger, victims: list[Candidate]) -> EvictionCap | None:
    """The first eviction cap these victims would go over, if any."""
    used = dict(ledger.cap_used)
    for c in victims:
        for cap in c.caps:
            key = cap_key(cap, c.pod)
            used[key] = used.get(key, 0) + 1
            if used[key] > cap.most:
                return cap
    return None


def _evict(search: Search, ledger: Ledger, c: Candidate) -> None:
    """Take `c` out: its room freed (on its node and in its quotas), its namespace's cap and its budgets drawn on
    (later choices see both)."""
    ledger.evicted[c.key] = c
    ledger.moved(search, search.node_order[c.node], ledger.view.moved(removed=[c.pod]))
    if search.reclaim is not None and ledger.account is not None:
        search.reclaim.add(ledger.account, c.pod, -1)
    for budget in search.budgets_of(c.pod):
        ledger.budget_left[budget] = ledger.budget_left.get(budget, 0) - 1
    for cap in c.caps:
        key = cap_key(cap, c.pod)
        ledger.cap_used[key] = ledger.cap_used.get(key, 0) + 1


def _replan(search: Search, preemptors: list[Pod], ledger: Ledger, wall: Wall, hints: Hints) -> tuple[Plan, Ledger]:
    """Steps 3-4: plan the preemptors without the victims; give back victims no placed preemptor needs. Under quotas
    the re-plan may give the room of one tenant's victims to another preemptor than the one that chose them: victims
    that leave their tenant below its min are given back (and the preemptors planned again) until none does. When
    the wall stops the re-plans before that is settled, nothing is evicted and nobody placed by preemption: the
    preemptors served are told they are tried next cycle."""
    by_key = {p.key: p for p in preemptors}
    plan = _solve_without(search, preemptors, ledger, wall)
    for _ in range(MAX_ROUNDS):
        if plan is None:
            break
        needed = _needed(search, plan, ledger, by_key) - _overreach(search, plan, ledger, by_key)
        if len(needed) == len(ledger.evicted):
            break
        ledger = replace(ledger, evicted={k: c for k, c in ledger.evicted.items() if k in needed})
        plan = _solve_without(search, preemptors, ledger, wall)
    while plan is not None and (back := _overreach(search, plan, ledger, by_key)):  # each round gives one back
        ledger = replace(ledger, evicted={k: c for k, c in ledger.evicted.items() if k not in back})
        plan = _solve_without(search, preemptors, ledger, wall)
    if plan is None:
        _not_reached(hints, [[p for p in preemptors if not hints.why.get(p.key)]])
        return _nothing(preemptors), replace(ledger, evicted={})
    return _give_back(search, preemptors, ledger, plan, wall)


def _overreach(search: Search, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> set[str]:
    """Under quotas: victims to give back, highest priority first, so that no tenant that used more than its min
    when the stage began is left below it (in a resource it used beyond it) once `plan`'s preemptors are placed."""
    rc = search.reclaim
    account = _final_account(search, ledger, [preemptors[k] for k in plan.assignments])
    if rc is None or account is None:
        return set()
    back: set[str] = set()
    for unit in _units_of(search, sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))):
        tenant = rc.tenant(unit[0].pod)
        if tenant is None or tenant not in rc.over:
            continue
        low = dict(rc.quotas[tenant].min)
        if all(account.held[tenant][r] >= low.get(r, 0) for r in rc.over[tenant]):
            continue
        back.update(c.key for c in unit)
        for c in unit:
            rc.add(account, c.pod, 1)
    return back


def _give_back(search: Search, preemptors: list[Pod], ledger: Ledger, plan: Plan, wall: Wall) -> tuple[Plan, Ledger]:
    """Try each victim back (a PodGroup-mode group whole), most important first, while the wall affords a re-plan:
    kept back if the preemptors place as well without it and every other victim is still needed where it is (the
    re-plan may move a preemptor to a node whose room an eviction elsewhere made: upstream evicts only on the node).

    Only victims the cluster's spare room could absorb are tried (restored, a victim's requests must fit
    somewhere, whoever moves): on a full cluster no re-plan is spent on a victim that cannot come back."""
    priorities = {p.key: p.priority for p in preemptors}
    by_key = {p.key: p for p in preemptors}
    spare = _spare(plan)
    units = _units_of(search, sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key)))
    for unit in units[:MAX_TRIALS]:
        if not wall.affords():
            break
        wanted = _summed(unit)
        if not _fits(wanted, spare):
            continue
        back = {c.key for c in unit}
        trial = replace(ledger, evicted={k: v for k, v in ledger.evicted.items() if k not in back})
        attempt = _solve_without(search, preemptors, trial, wall)
        if (attempt is not None and _placed_by_priority(attempt, priorities) >= _placed_by_priority(plan, priorities)
                and len(_needed(search, attempt, trial, by_key)) == len(trial.evicted)):  # each victim still needed there
            ledger, plan = trial, attempt
            spare = {r: v - wanted.get(r, 0) for r, v in spare.items()}
    return plan, ledger


def _summed(unit: Unit) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for c in unit:
        for r, v in c.pod.requests.items():
            out[r] += v
    return dict(out)


def _spare(plan: Plan) -> dict[str, int]:
    """Free room summed over every node after the plan, per resource."""
    spare: dict[str, int] = defaultdict(int)
    for u in plan.usage:
        for r, cap in u.allocatable.items():
            spare[r] += max(0, cap - u.requested.get(r, 0))
    return dict(spare)


def _placed_by_priority(plan: Plan, priorities: dict[str, int]) -> list[tuple[int, int]]:
    """Placed preemptors per priority level, highest first: compared as a list, a higher priority counts first."""
    levels: dict[int, int] = defaultdict(int)
    for key in plan.assignments:
        levels[priorities[key]] += 1
    every = sorted(set(priorities.values()), reverse=True)
    return [(level, levels.get(level, 0)) for level in every]


def _solve_without(search: Search, preemptors: list[Pod], ledger: Ledger, wall: Wall) -> Plan | None:
    """The preemptors planned on the stage's cluster without the ledger's victims (a view of its index), in half the
    time the wall leaves; None when it stops the re-plan: not started for want of time, or its compile cut short."""
    if not ledger.evicted:
        return _nothing(preemptors)
    if not wall.affords():
        return None
    settings, clock = wall.settings, wall.settings.deadline.clock
    began = clock()
    gone = frozenset(ledger.evicted)
    cluster = replace(search.cluster, bound=[b for b in search.cluster.bound if b.key not in gone],
                      pending=list(preemptors))
    view = search.view.moved(removed=[c.pod for c in ledger.evicted.values()]).settled()
    plan = make_plan(cluster, settings.policy, time_limit=wall.left() / 2, workers=settings.workers,
                     seed=settings.seed, view=view)
    wall.needs = clock() - began - (plan.stats.phases.solve if plan.stats.phases is not None else 0.0)
    return None if plan.details.compiled is None or plan.details.compiled.problem.unchecked else plan


PLAIN, SPARED, WEIGHED = "plain", "spared", "weighed"  # how the batch model treats the pods budgets cover


def _batch(search: Search, preemptors: list[Pod], feasible: Feasible, wall: Wall, replan: Plan,
           ledger: Ledger) -> tuple[Plan, Ledger, str]:
    """Step 2 again, for the whole batch in one model (engine.preempt_model) when it fits the time left; its victims,
    settled by the same re-plans (steps 3-4), replace the search's (`replan`, `ledger`) when they are better in
    upstream's order (`_standing`). The model has no budget rows: when the best so far breaks a budget, it is tried
    again with every pod a budget could not spare held in place (SPARED), then with those pods weighed above every
    pod no budget covers (WEIGHED: the fewest budgets broken for the same preemptors placed, as upstream orders
    candidates). Also what became of the model, for the stats."""
    if not wall.settings.batch_model:
        return replan, ledger, "off"
    priorities = {p.key: p.priority for p in preemptors}
    best, standing, chosen = (replan, ledger), _standing(search, replan, ledger, priorities), ""
    said: list[str] = []
    for budgets in (PLAIN, SPARED, WEIGHED):
        if budgets != PLAIN and (standing[1] == 0 or said[-1].startswith("skipped")):
            break
        found, note, other = _batch_ledger(search, preemptors, feasible, wall, budgets)
        said.append(note)
        if found is None or other is None:
            continue
        needed = _needed(search, other, found, {p.key: p for p in preemptors})
        if len(needed) < len(found.evicted):  # some victim no placed preemptor may evict needs: settled as the search's
            other, found = _replan(search, preemptors, found, wall, Hints())  # own hints: the search's stand
        mine = _standing(search, other, found, priorities)
        if mine < standing:
            best, standing, chosen = (other, found), mine, note
    if not chosen:
        ran = [note for note in said if not note.startswith("skipped")]
        return replan, ledger, f"the search's victims kept ({'; '.join(said)})" if ran else said[0]
    return best[0], best[1], f"its victims chosen ({chosen}): better than the search's in upstream's order"


def _batch_ledger(search: Search, preemptors: list[Pod], feasible: Feasible, wall: Wall,
                  budgets: str) -> tuple[Ledger | None, str, Plan | None]:
    """The victims of the batch model as a ledger (`budgets`: see `_batch`), or
    why there are none: quotas (the model has no reclaim), a preemptor's nodes not known in time, nothing to evict, a
    model too large for the time left (the search alone decides), or its victims over an eviction cap."""
    if search.reclaim is not None or search.cluster.quotas:
        return None, "skipped: tenant quotas, the search alone decides", None
    nodes = [feasible.nodes.get(p.key) for p in preemptors]
    if any(n is None for n in nodes):
        return None, "skipped: not every preemptor's nodes were known in time", None
    running = _optional(search, preemptors, feasible, budgets)
    size = sum(len(n or ()) for n in nodes)
    if not running:
        return None, "skipped: no running pod it may evict on the preemptors' nodes", None
    if not wall.affords() or not preempt_model.fits(len(running), size, wall.left()):
        return None, f"skipped: {len(running)} running pods on {size} preemptor nodes do not fit the time left", None
    settings = wall.settings
    outcome = preempt_model.plan_together(search.cluster, search.view, preemptors, running, settings.policy,
                                          wall.left() / 2, settings.workers, settings.seed)
    if outcome is None:
        return None, "cut short: its compile reached the time limit", None
    ledger = _fresh_ledger(search)
    candidates = {c.key: c for cs in search.by_node.values() for c in cs}
    victims = sorted((candidates[k] for k in outcome.victims), key=lambda c: (-c.pod.priority, c.key))
    cap = _cap_reached(ledger, victims)
    if cap is not None:
        return None, f"its {len(victims)} victims go over the eviction cap of {cap.source}", None
    for c in victims:
        _evict(search, ledger, c)
    ledger.violations = _violations(search, victims, dict(ledger.budget_left))
    spared = {PLAIN: "", SPARED: ", budgets spared", WEIGHED: ", budgets weighed"}[budgets]
    return ledger, f"{len(running)} running pods weighed{spared}, {len(victims)} left out, {outcome.status}", outcome.plan


def _optional(search: Search, preemptors: list[Pod], feasible: Feasible, budgets: str) -> list[preempt_model.Running]:
    """The running pods the model may leave out: on some preemptor's feasible nodes, lower than it (a PodGroup-mode
    group whole with them). A group stays that holds a pod with device claims (the model does not reallocate them) or
    runs on a node its pods overcommit (pinned there, they could not all be placed: the model would count the pods
    it cannot keep as free victims); with SPARED, one that a budget covers when the budget could not spare every
    such pod (no choice of the model's then breaks a budget); with WEIGHED, those pods are weighed just below the
    lowest preemptor that may evict them (`Running.weigh_as`), above every pod no budget covers."""
    chosen: dict[str, Candidate] = {}
    seen: set[tuple[int, str]] = set()
    for p in preemptors:
        for node in feasible.nodes.get(p.key) or ():
            if (p.priority, node) in seen:
                continue
            seen.add((p.priority, node))
            for c in search.by_node.get(node, ()):
                if c.key not in chosen and search.may_evict(p, c.pod):
                    chosen.update((m.key, m) for m in search.unit_of(c))
    full = {n.name for i, n in enumerate(search.view.nodes) if any(search.view.free(i, r) < 0 for r in n.allocatable)}
    held = {c.unit or c.key for c in chosen.values() if c.pod.resource_claims or c.pod.extended or c.node in full}
    unspared = _unspared(search, chosen) if budgets != PLAIN else []
    if budgets == SPARED:
        held |= {c.unit or c.key for c in unspared}
    weighed = {c.key for c in unspared} if budgets == WEIGHED else set()
    above = sorted({p.priority for p in preemptors})
    return [preempt_model.Running(c.pod, c.node, c.unit, _lowest_above(above, c.pod.priority) if c.key in weighed else None)
            for c in chosen.values() if (c.unit or c.key) not in held]


def _unspared(search: Search, chosen: dict[str, Candidate]) -> list[Candidate]:
    """The candidates a disruption budget covers when it could not spare all of those it covers."""
    covered = Counter(b for c in chosen.values() for b in search.budgets_of(c.pod))
    short = {b.key for b in search.cluster.budgets if covered[b.key] > b.allowed}
    return [c for c in chosen.values() if short.intersection(search.budgets_of(c.pod))]


def _lowest_above(priorities: list[int], priority: int) -> int | None:
    """The lowest of the sorted `priorities` above `priority` (None: none is)."""
    return next((p for p in priorities if p > priority), None)


def _standing(search: Search, plan: Plan, ledger: Ledger, priorities: dict[str, int]) -> tuple:
    """Upstream's order of candidates, for the whole batch (lower is better): the preemptors placed by priority,
    then the fewest budget violations, the lowest highest victim priority, the smallest priority sum, the fewest
    victims."""
    victims = sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))
    levels = [c.pod.priority for c in victims]
    budgets = {b.key: b.allowed for b in search.cluster.budgets}
    placed = [-count for _, count in _placed_by_priority(plan, priorities)]
    return placed, _violations(search, victims, budgets), max(levels, default=LOWEST), sum(levels), len(levels)


def _needed(search: Search, plan: Plan, ledger: Ledger, preemptors: dict[str, Pod]) -> set[str]:
    """Victims a placed preemptor may evict and needs: those whose return some kind would reject it for (`_blocks`;
    the ledger records which preemptor and why); under quotas, anywhere, those whose return would take a quota row
    over. A PodGroup-mode group is needed whole if one of its members is, else given back whole."""
    placed = [preemptors[key] for key in plan.assignments]
    served = PlacedPreemptors([replace(preemptors[key], node_name=node) for key, node in plan.assignments.items()])
    gone = dict(ledger.evicted)
    account = _final_account(search, ledger, placed)
    needed: set[str] = set()
    for unit in _units_of(search, sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))):
        back = {k: c for k, c in gone.items() if k not in {m.key for m in unit}}
        blocked = _blocks(search, unit, list(back.values()), served)
        if blocked is not None:
            for m in unit:
                ledger.needed_by[m.key], ledger.why[m.key] = blocked[0], _blocking(blocked[1])
        if blocked is not None or _quota_needed(search, account, unit, placed):
            needed.update(m.key for m in unit)
            continue
        gone = back  # given back: every preemptor beside it still passes
        if search.reclaim is not None and account is not None:
            for c in unit:
                search.reclaim.add(account, c.pod, 1)
    return needed


@dataclass(slots=True)
class PlacedPreemptors:
    """The placed preemptors, bound where the plan puts them, and which of them the kinds asked about read beyond
    their own node (learnt the first time each is asked: a victim elsewhere can matter to those alone)."""

    pods: list[Pod]
    reaching: dict[str, bool] = field(default_factory=dict)


def _blocks(search: Search, unit: Unit, gone: list[Candidate], served: PlacedPreemptors) -> tuple[str, Rejection | None] | None:
    """Some placed preemptor that may evict the unit is rejected by some kind with the unit back (`gone`: the victims
    still leaving; each preemptor asked about with the others bound where they go, without itself): one on a
    member's node, or one anywhere whose verdict reads beyond its node (a domain's counts, a claim's users), since the
    re-plan may have put it on another node of the domain its victim emptied: (that preemptor, the kind's rejection),
    or None. A preemptor whose rules were never compiled (its group cut short) counts as needing it (no rejection
    to tell)."""
    here = {c.node for c in unit}
    view = search.view.moved(added=served.pods, removed=[c.pod for c in gone])
    for p in served.pods:
        node = p.node_name or ""
        if not all(search.may_evict(p, c.pod) for c in unit) or (node not in here and not served.reaching.get(p.key, True)):
            continue
        if p.key not in search.specs:
            if node in here:
                return p.key, None
            continue
        asked = view.moved(removed=[p])
        with asked.reads() as reaching:
            rejection = search.filter(p, node, asked)
        served.reaching[p.key] = reaching[0]
        if rejection is not None:
            return p.key, rejection
    return None


def _quota_needed(search: Search, account: Account | None, unit: Unit, placed: list[Pod]) -> bool:
    """Under quotas: some placed preemptor may evict the unit, and its return would take a quota row over."""
    if search.reclaim is None or account is None:
        return False
    return (any(all(search.may_evict(p, c.pod) for c in unit) for p in placed)
            and search.reclaim.overflows(account, [c.pod for c in unit]))


def _final_account(search: Search, ledger: Ledger, placed: list[Pod]) -> Account | None:
    """What the quotas' pods use after the plan: the stage's start without the victims, with the placed preemptors."""
    if search.reclaim is None:
        return None
    account = search.reclaim.start.copy()
    for c in ledger.evicted.values():
        search.reclaim.add(account, c.pod, -1)
    for pod in placed:
        search.reclaim.add(account, pod, 1)
    return account


def _merge(plan: Plan, replan: Plan, preemptions: dict[str, Preemption], hints: Hints, started: float,
           model: str | None = None) -> Plan:
    """The first plan plus what preemption placed (`preemptions`: each victim listed under the preemptor it makes
    room for); `model`: what became of the batch model (`_batch`), for the stats."""
    assignments = {**plan.assignments, **replan.assignments}
    unschedulable = {k: v for k, v in plan.unschedulable.items() if k not in replan.assignments}
    for key in unschedulable:
        said = hints.why.get(key) or (replan.unschedulable.get(key) and ["preemption did not help: "
                                                                         + joined(replan.unschedulable[key])])
        if said:
            unschedulable[key] = unschedulable[key] + list(said)
    victims = [v for p in preemptions.values() for v in p.victims]
    preemption = PreemptionStats(len(replan.assignments), len(victims), sum(1 for v in victims if v.over_budget),
                                 round(time.perf_counter() - started - (plan.stats.seconds or 0.0), 3), model)
    stats = replace(plan.stats, placed=len(assignments), unschedulable=len(unschedulable), preemption=preemption,
                    seconds=round(time.perf_counter() - started, 3))
    details = replace(plan.details, gangs={**plan.details.gangs, **replan.details.gangs},
                      errors=plan.details.errors - set(assignments), reserved={})
    return replace(plan, assignments=assignments, unschedulable=unschedulable, stats=stats, preemptions=preemptions,
                   usage_of=lambda: _usage(plan, replan), details=details)


def _attribute(replan: Plan, ledger: Ledger, search: Search, preemptors: dict[str, Pod]) -> dict[str, Preemption]:
    """Each victim goes under the placed preemptor that needs it gone (`Ledger.needed_by`), else the highest-priority
    preemptor placed on its node that may evict it; the members of a
    PodGroup-mode group on nodes without one go under the preemptor of its first member that has one; a victim
    evicted for quota room alone (reclaim) under the highest-priority placed preemptor that may evict it."""
    out = {k: Preemption(n, preemptors[k].priority) for k, n in replan.assignments.items()}
    on_node: dict[str, list[Pod]] = defaultdict(list)
    for key, node in replan.assignments.items():
        on_node[node].append(preemptors[key])
    placed = [preemptors[k] for k in replan.assignments]
    budget_left = {b.key: b.allowed for b in search.cluster.budgets}
    owners: dict[str, str] = {}
    evicted = sorted(ledger.evicted.values(), key=lambda c: (-c.pod.priority, c.key))
    for c in evicted:
        if c.unit is not None and (owner := _owner(search, c, on_node.get(c.node, []))) is not None:
            owners.setdefault(c.unit, owner)
    for c in evicted:
        owner = ledger.needed_by.get(c.key) if ledger.needed_by.get(c.key) in replan.assignments else None
        owner = owner or _owner(search, c, on_node.get(c.node, []))
        if owner is None and c.unit is not None:
            owner = owners.get(c.unit)
        owner = owner or _owner(search, c, placed) or _owner(search, c, on_node.get(c.node, []), anyone=True)
        if owner is None and c.unit is not None:  # a member no placed preemptor outranks: its group goes whole anyway
            owner = _owner(search, c, placed, anyone=True)
        if owner is None:
            continue
        covering = search.budgets_of(c.pod)
        for key in covering:
            budget_left[key] -= 1
        over = tuple(k for k in covering if budget_left[k] < 0)
        within = tuple(k for k in covering if budget_left[k] >= 0)
        quota = _reclaimed(search, preemptors[owner], c, out[owner])
        why = ledger.why.get(c.key) or ("evicted with its PodGroup" if c.unit is not None else None)
        out[owner].victims.append(Eviction(c.key, c.node, c.pod.priority, over, within, c.unit, quota, why))
    _name_reclaim(search, out)
    return out


def _name_reclaim(search: Search, out: dict[str, Preemption]) -> None:
    """Every placed reclaiming preemptor of a tenant the plan reclaimed for names that tenant's quota (the victims
    are listed under one of them, but they make room for all)."""
    if search.reclaim is None:
        return
    reclaimed = {p.reclaim for p in out.values() if p.reclaim is not None}
    for key, p in out.items():
        stance = search.reclaim.stances[key]
        if stance.reclaiming and (source := search.reclaim.source(stance.tenant)) in reclaimed:
            p.reclaim = source


def _owner(search: Search, c: Candidate, pods: list[Pod], anyone: bool = False) -> str | None:
    """The highest-priority pod of `pods` that may evict `c` (`anyone`: the highest of all)."""
    able = [p for p in pods if anyone or search.may_evict(p, c.pod)]
    return max(able, key=lambda p: (p.priority, p.key)).key if able else None


def _reclaimed(search: Search, preemptor: Pod, c: Candidate, preemption: Preemption) -> str | None:
    """When `c` is reclaimed from another tenant's borrowed room: the victim's quota (and the preemptor's is named
    on `preemption`)."""
    rc = search.reclaim
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
