"""One preemption stage's state, shared by every strategy: the session (the cluster with the first plan's placements
bound and its view, the running pods preemptors may evict by node, their disruption units, the pods policies protect,
the quota facts), the ledger a strategy keeps its victims in, the nodes each preemptor could use once every pod it may
evict is gone (upstream's first step), and how the stage runs (its settings and deadline).

A ledger's view is the session's with its victims gone and the preemptors it served bound where they go: what every
kind whose verdict pods can sway is asked about (`Session.filter`, engine.kinds.filter_node), as upstream's
SelectVictimsOnNode asks its filters on a node copy after RemovePod/AddPod.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from itertools import count

from .. import kinds
from ..kinds import GUARDS
from ..kinds.context import Batch, ClassSpec
from ..kinds.protection import cap_key
from ..model.cluster import Cluster, Moment, Pod
from ..model.gangs import disruption_unit
from ..model.ir import EvictionCap, PreemptionRules, Source
from ..model.rejections import Rejection, joined
from ..model.view import View
from ..planning.compile import Deadline, PolicyRules, compile_cluster
from ..planning.plan import Plan, Stats
from ..quotas.tenants import Usage
from .reclaim import Account, Reclaim

LOWEST = -(2**63)
SEARCH_CHECK = 1024  # running pods looked at between two looks at the clock while finding the candidates
VICTIMS_SHARE = 0.7  # of the stage's time, for choosing victims; the confirming re-plan gets the rest
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


@dataclass(frozen=True, slots=True)
class Chosen:
    """What a strategy chose: its victims (a ledger; None when it declined or was cut short), the plan of the
    preemptors without them when it made one (the batch model's), and what became of it, in words for the stats."""

    ledger: Ledger | None
    note: str = ""
    plan: Plan | None = None


@dataclass(slots=True)
class Ledger:
    """The batch's running account: victims chosen (and why), the stage's view with them gone and the preemptors
    served bound where they go (what the kinds are asked about), budgets and caps left."""

    view: View
    evicted: dict[str, Candidate] = field(default_factory=dict)
    budget_left: dict[str, int] = field(default_factory=dict)
    cap_used: Counter[tuple[Source, str]] = field(default_factory=Counter)
    violations: int = 0  # evictions so far that broke some budget
    account: Account | None = None  # what the quotas' pods use (None: no quotas)
    why: dict[str, str] = field(default_factory=dict)  # victim key -> what its staying would leave the preemptor
    needed_by: dict[str, str] = field(default_factory=dict)  # victim key -> the placed preemptor that needs it gone
    version: dict[str, int] = field(default_factory=dict)  # node -> the stage's count at its last move there
    stamp: int = 0  # the stage's count at the ledger's last move: two ledgers with one stamp stand alike

    def copy(self) -> Ledger:
        return Ledger(self.view, dict(self.evicted), dict(self.budget_left), Counter(self.cap_used), self.violations,
                      self.account.copy() if self.account is not None else None, dict(self.why), dict(self.needed_by),
                      dict(self.version), self.stamp)

    def moved(self, session: Session, node: str, view: View) -> None:
        """A pod left or reached `node`: the ledger's view is `view` from now on."""
        self.view = view
        self.stamp = self.version[node] = next(session.moves)

    def claim(self, session: Session, pod: Pod, choice: Choice) -> None:
        """Record `choice`: its victims evicted, its violations counted, the pod's room taken on its node (and in
        its quotas)."""
        for victim, why in zip(choice.victims, choice.why):
            self.evict(session, victim)
            self.why[victim.key] = why
        self.violations += choice.violations
        self.moved(session, choice.node, self.view.moved(added=[replace(pod, node_name=choice.node)]))
        session.count(self.account, [pod])

    def evict(self, session: Session, c: Candidate) -> None:
        """Take `c` out: its room freed (on its node and in its quotas), its namespace's cap and its budgets drawn on
        (later choices see both)."""
        self.evicted[c.key] = c
        self.moved(session, c.node, self.view.moved(removed=[c.pod]))
        session.count(self.account, [c.pod], -1)
        for budget in session.budgets_of(c.pod):
            self.budget_left[budget] = self.budget_left.get(budget, 0) - 1
        self.cap_used.update(cap_key(cap, c.pod) for cap in c.caps)

    def cap_reached(self, victims: list[Candidate]) -> EvictionCap | None:
        """The first eviction cap these victims would go over, if any."""
        used = Counter(self.cap_used)
        for c in victims:
            for cap in c.caps:
                used[key := cap_key(cap, c.pod)] += 1
                if used[key] > cap.most:
                    return cap
        return None

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
class Session:
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
    verdicts: dict[tuple, NodeVerdict] = field(default_factory=dict)  # a node's answer for a class while it stands
    moves: Iterator[int] = field(default_factory=lambda: count(1))  # numbers the moves any ledger makes (versions)
    covering_node: dict[str, tuple[str, ...]] = field(default_factory=dict)  # node -> budgets covering its candidates
    entangled: frozenset[str] = frozenset()  # nodes whose verdicts depend on more than the node (caps, PodGroup units)
    covering: dict[int, tuple[str, ...]] = field(default_factory=dict)  # pod -> its budgets' keys, once asked
    batch: Batch | None = None  # what the kinds read when asked about a trial (the stage's view), set by _candidates
    specs: dict[str, ClassSpec] = field(default_factory=dict)  # preemptor key -> its class's rules, set by FeasibleNodes
    moment: Moment = Moment()  # the plan's now and the reservations the stage's plans and filters keep beside

    def filter(self, pod: Pod, node: str, view: View) -> Rejection | None:
        """Every kind's verdict on `pod` (its class's rules) on `node` in `view` (engine.kinds.filter_node)."""
        assert self.batch is not None
        return kinds.filter_node(self.specs[pod.key], self.batch.on(view), self.node_order[node], kinds.READ_PODS)

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

    @staticmethod
    def unit_order(unit: Unit) -> tuple:
        """What upstream's order reads of a unit whoever preempts (see `_split_by_budget`)."""
        first = unit[0]
        return (-first.pod.priority, first.unit is None, sum(c.pod.requests.get("cpu", 0) for c in unit),
                sum(c.pod.requests.get("memory", 0) for c in unit), min(c.pod.created for c in unit), first.key)

    def may_evict(self, pod: Pod, victim: Pod) -> bool:
        """Priority alone without quotas; with them, engine.preempt.reclaim's rule for the preemptor's stance."""
        if self.reclaim is None:
            return victim.priority < pod.priority
        return self.reclaim.may_evict(self.reclaim.stances[pod.key], victim)

    def units_of(self, candidates: list[Candidate]) -> list[Unit]:
        """The units these candidates belong to, each once, in the candidates' order."""
        seen: set[str] = set()
        out: list[Unit] = []
        for c in candidates:
            key = c.unit or c.key
            if key not in seen:
                seen.add(key)
                out.append(self.unit_of(c))
        return out

    def fresh_ledger(self) -> Ledger:
        return Ledger(self.view, budget_left={b.key: b.allowed for b in self.cluster.budgets},
                      account=self.counted(self.reclaim.start if self.reclaim is not None else None))

    def count(self, account: Account | None, pods: Iterable[Pod], sign: int = 1) -> None:
        """`pods` counted into `account` (sign -1: out of it), in place; nothing without quotas."""
        if self.reclaim is not None and account is not None:
            for pod in pods:
                self.reclaim.add(account, pod, sign)

    def counted(self, account: Account | None, out: Iterable[Pod] = (), back: Iterable[Pod] = ()) -> Account | None:
        """A copy of `account` with `out` counted out of the quotas and `back` counted in (None: no quotas)."""
        copy = account.copy() if self.reclaim is not None and account is not None else None
        self.count(copy, out, -1)
        self.count(copy, back)
        return copy

    def after_victims(self, ledger: Ledger, placed: Iterable[Pod] = ()) -> Account | None:
        """What the quotas' pods use with the ledger's victims gone and `placed` bound: the stage's start so changed."""
        start = self.reclaim.start if self.reclaim is not None else None
        return self.counted(start, [c.pod for c in ledger.evicted.values()], placed)

    def violations(self, victims: list[Candidate], budget_left: dict[str, int]) -> int:
        """How many of `victims` (drawn in order) take some covering budget below zero."""
        left = dict(budget_left)
        return sum(self.draw(left, c.pod) for c in victims)

    def draw(self, budgets: dict[str, int], pod: Pod) -> bool:
        """Evicting `pod` draws one from each budget covering it (in `budgets`, in place): whether one goes below
        zero."""
        covering = self.budgets_of(pod)
        for key in covering:
            budgets[key] = budgets.get(key, 0) - 1
        return any(budgets[key] < 0 for key in covering)



@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """What `_select_on` found for a class on a node, and what it learnt about the preemptor (`Unserved`): kept
    while it stands. `stamp`: when the kinds read beyond the node (a domain's counts, pods added anywhere), the
    ledger state alone it stands for."""

    choice: Choice | None
    blocked: Rejection | None = None
    capped: Source | None = None
    stamp: int | None = None


@dataclass(slots=True)
class Unserved:
    """What victim selection found out about the preemptors it could not serve: the stage's output beside
    the ledger."""

    why: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # preemptor -> why not
    capped: dict[str, Source] = field(default_factory=dict)  # preemptor -> a cap that ruled out some node
    # preemptor -> node -> the kind rejecting it there even with every pod it may evict on that node gone
    blocked: dict[str, dict[str, Rejection]] = field(default_factory=lambda: defaultdict(dict))

    def not_reached(self, units: list[list[Pod]]) -> None:
        """The stage's deadline came before these pods were served (or before what was chosen for them was settled):
        they are told they are tried again next cycle."""
        for pod in (p for unit in units for p in unit):
            self.why[pod.key] = [OUT_OF_TIME]



@dataclass(frozen=True, slots=True)
class PreemptionSettings:
    """How the stage runs: the policies' placement rules, the solver's, and when it must be done (the deadline's
    clock is the stage's: a test may give its own)."""

    policy: PolicyRules | None
    deadline: Deadline
    workers: int
    seed: int
    # the strategies to try, in order, the next taking over when one declines (engine.preempt.STRATEGIES); a test may
    # name one alone
    strategies: tuple[str, ...] = ("batch model", "per-node search")
    moment: Moment = Moment()  # the plan's now and the reservations preemption plans beside (the carried ones)



def left(deadline: Deadline) -> float:
    """Seconds before `deadline` on its clock (0 once passed, inf without one)."""
    return float("inf") if deadline.at is None else max(0.0, deadline.at - deadline.clock())



def within(deadline: Deadline, share: float) -> Deadline:
    """The deadline `share` of the way from now to `deadline`, on the same clock."""
    return deadline if deadline.at is None else Deadline(deadline.clock() + share * left(deadline), deadline.clock)



def start(cluster: Cluster, plan: Plan, rules: PreemptionRules | None, preemptors: list[Pod],
           deadline: Deadline, moment: Moment = Moment()) -> Session | None:
    """What the stage reads (`Session`: the cluster with the first plan's placements bound, the candidates), with
    victim selection's deadline (VICTIMS_SHARE of the time left; the rest is the re-plans'); None when the stage's
    deadline passes first."""
    compiled = plan.details.compiled
    if deadline.passed() or compiled is None:
        return None
    placed = tuple(replace(p, node_name=plan.assignments[p.key]) for p in cluster.pending if p.key in plan.assignments)
    fixed = replace(cluster, bound=cluster.bound + list(placed), pending=[], notes=[], skipped={})
    session = _candidates(fixed, compiled.view.moved(added=placed).settled(), rules, preemptors, set(plan.assignments),
                     Reclaim.of(fixed, preemptors, with_pods(compiled.usage, placed), compiled.usage), deadline, moment)
    return None if session is None else replace(session, deadline=within(deadline, VICTIMS_SHARE))



def _candidates(fixed: Cluster, view: View, rules: PreemptionRules | None, preemptors: list[Pod],
            placed: set[str], reclaim: Reclaim | None, deadline: Deadline, moment: Moment) -> Session | None:
    """Running pods some preemptor may evict (below the highest preemptor priority, without quotas), by node,
    minus those a policy protects (pods the first plan just placed are not running yet and are never victims). A
    PodGroup-mode group is one unit: a protected member protects all of them. None when `deadline` passes first."""
    evictable = evictable_by(preemptors, reclaim)
    found: list[Candidate] = []
    protected: dict[str, tuple[Pod, Source]] = {}
    for k, pod in enumerate(fixed.bound):
        if k % SEARCH_CHECK == 0 and deadline.passed():
            return None
        if pod.terminating or pod.key in placed or pod.node_name is None or not evictable(pod):
            continue
        guards = [kind.guard(pod, rules) for kind in GUARDS]  # the kinds with a word on victims
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
    entangled = frozenset(n for n, cs in by_node.items() if any(c.caps or c.unit is not None for c in cs))
    session = Session(fixed, view, dict(by_node), view.positions(), protected, {k: tuple(v) for k, v in units.items()}, reclaim,
                    batch=Batch.alone_on(fixed, view, moment), entangled=entangled,
                      moment=moment)
    if reclaim is not None:
        session = replace(session, quota_order=quota_order(session, reclaim))
    return session



def evictable_by(preemptors: list[Pod], reclaim: Reclaim | None) -> Callable[[Pod], bool]:
    """Whether some preemptor may evict a running pod: one of a lower priority than the highest preemptor's
    without quotas; with them, engine.preempt.reclaim's rule for some preemptor's stance (each distinct stance once)."""
    top = max(p.priority for p in preemptors)
    if reclaim is None:
        return lambda pod: pod.priority < top
    stances = set(reclaim.stances.values())
    known: dict[tuple[str | None, int], bool] = {}  # the rule reads only the victim's tenant and priority

    def evictable(pod: Pod) -> bool:
        key = (reclaim.tenant(pod), pod.priority)
        if key not in known:
            known[key] = any(reclaim.may_evict(s, pod) for s in stances)
        return known[key]

    return evictable



def quota_order(session: Session, reclaim: Reclaim) -> tuple[Unit, ...]:
    """The candidates' units that count toward some quota, lowest priority first, then the newest first (as
    upstream orders victims): where the quota rows' room is taken from when a node's own victims are not enough."""
    found = [c for cs in session.by_node.values() for c in cs if reclaim.covering(c.pod)]
    found.sort(key=lambda c: c.pod.created, reverse=True)
    found.sort(key=lambda c: c.pod.priority)
    return tuple(session.units_of(found))



def with_pods(usage: Usage | None, pods: Iterable[Pod], sign: int = 1) -> Usage | None:
    """A copy of `usage` with `pods` added (sign -1: taken off), not a count over every running pod again: the stage
    starts from compile's usage (the loop's is kept across cycles) with the first plan's placements (None: no
    quotas)."""
    if usage is None:
        return None
    out = usage.copy()
    out.add_all(pods, sign)
    return out



@dataclass(frozen=True, slots=True)
class FeasibleClass:
    """Preemptors of one compiled class: the nodes each passes once the pods it may evict are gone (None: not known
    in time) and the pods."""

    nodes: tuple[str, ...] | None
    pods: list[Pod]


@dataclass(slots=True)
class FeasibleNodes:
    """Upstream's first step: the nodes each preemptor passes every filter on once all pods it may evict are gone.
    Compiled (on a view of the stage's index) once per group of preemptors that may evict the same pods (`of`:
    a priority level, and under quotas a stance, as the quota rows' PreFilter passes once the borrowers' pods are
    gone), when the first of them is served, and only before the search's deadline: a pod whose group, or whose
    class in it, that deadline left unchecked has no answer (None) and waits for the next cycle."""

    session: Session
    policy: PolicyRules | None
    groups: dict[str, list[Pod]]  # preemptor key -> its group
    nodes: dict[str, tuple[str, ...] | None] = field(default_factory=dict)
    left: dict[str, list[tuple[Rejection, int]]] = field(default_factory=dict)  # why the other nodes fail, and on how many
    class_of: dict[str, tuple[str, str]] = field(default_factory=dict)  # preemptor key -> (its group's first pod, class)

    @classmethod
    def of(cls, session: Session, policy: PolicyRules | None, preemptors: list[Pod]) -> FeasibleNodes:
        """Grouped, the preemptors that may evict the same pods: one priority level (and one stance under quotas)."""
        groups: dict[tuple, list[Pod]] = defaultdict(list)
        for p in preemptors:
            groups[(p.priority, session.reclaim.stances[p.key] if session.reclaim is not None else None)].append(p)
        return cls(session, policy, {p.key: pods for pods in groups.values() for p in pods})

    def nodes_of(self, pod: Pod) -> tuple[str, ...] | None:
        if pod.key not in self.nodes:
            self._compile(self.groups[pod.key])
        return self.nodes[pod.key]

    def classes(self, preemptors: list[Pod]) -> list[FeasibleClass]:
        """The preemptors by class (the pods of one compiled class pass the same nodes and ask alike), in the order
        their first pod comes; a pod whose nodes were not known in time is a class of its own with `nodes` None."""
        found: dict[tuple[str, str] | str, FeasibleClass] = {}
        for p in preemptors:
            nodes = self.nodes_of(p)
            key = self.class_of.get(p.key, p.key) if nodes is not None else p.key
            if key not in found:
                found[key] = FeasibleClass(nodes, [])
            found[key].pods.append(p)
        return list(found.values())

    def _compile(self, pods: list[Pod]) -> None:
        self.nodes.update(dict.fromkeys((p.key for p in pods), None))
        session = self.session
        if session.deadline.passed():
            return
        going = [c.pod for cs in session.by_node.values() for c in cs if session.may_evict(pods[0], c.pod)]
        gone = frozenset(c.key for c in going)
        cluster = replace(session.cluster, bound=[b for b in session.cluster.bound if b.key not in gone], pending=pods,
                          gangs={})  # the filters alone: the preemptors' gangs have their quorum (short_of_members)
        compiled = compile_cluster(cluster, self.policy, session.deadline, session.view.moved(removed=going).settled(),
                                   with_pods(session.reclaim.start if session.reclaim is not None else None, going, -1),
                                   session.moment)
        unchecked = set(compiled.problem.unchecked)
        for a, info in enumerate(compiled.classes):
            if a not in unchecked:
                nodes = tuple(compiled.cluster.nodes[i].name for i in info.rejected.passing())
                self.nodes.update(dict.fromkeys((p.key for p in info.pods), nodes))
                self.class_of.update(dict.fromkeys((p.key for p in info.pods), (pods[0].key, str(a))))
                spec = ClassSpec(len(session.specs), info.sample, info.constraints)
                session.specs.update(dict.fromkeys((p.key for p in info.pods), spec))
                left = [(r, len(members)) for r, members in info.rejected.groups.items() if len(members)]
                self.left.update(dict.fromkeys((p.key for p in info.pods), left))



def victim_reason(rejection: Rejection | None) -> str:
    """Why a victim goes, in the words of the kind that would reject the preemptor with it there."""
    if rejection is None:
        return "the preemptor's quota needs its room"
    return f"{rejection.plugin}: {joined(rejection.reasons)}"



def nothing(preemptors: list[Pod]) -> Plan:
    """The plan of a re-plan with no victims: no preemptor placed."""
    return Plan({}, {p.key: [] for p in preemptors}, Stats())

