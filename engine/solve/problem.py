"""The solver's input and output: plain integers and indices, no Kubernetes.

The compiler turns pods into *classes* (interchangeable pods) and nodes into indices; constraints between
pods become constraints between classes over *partitions* (a topology key's split of nodes into domains).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Protocol

NO_DOMAIN = -1


class Check(Enum):
    """What stops one more pod of a class on a node in a partial plan: the solver's own checks, one per kind
    of row (the starting plans return it in a Blocker; the constraint kind that emitted the row explains it)."""

    RESOURCES = "resources"  # the node's free capacity
    ONE_PER_NODE = "one per node"  # PodClass.max_per_node
    PORTS = "ports"  # an exclusive group (host ports) already on the node
    SEPARATION = "separation"
    LIMIT = "limit"
    AFFINITY = "affinity"  # colocation support missing
    SPREAD = "spread"
    BUDGET = "budget"  # a cluster-wide amount a set of classes shares (a tenant's quota of one resource)


class Status(StrEnum):
    """How good a plan is known to be (the string value is what the dry-run prints)."""

    OPTIMAL = "OPTIMAL"  # proven best placement (and preferences, unless notes say otherwise)
    FEASIBLE = "FEASIBLE"  # valid; the bound says how far from the best it may be
    GREEDY = "GREEDY"  # valid; CP-SAT did not improve or prove it within the time limit


@dataclass(frozen=True, slots=True)
class Blocker:
    """Why a node cannot take one more pod of a class now: the check that failed, and its row (if any)."""

    check: Check
    rule: object = None


class MarginalTracker(Protocol):
    """One starting plan's running state of the marginal scores, told of every pod it places and takes back."""

    def points(self, c: int, n: int) -> int | None:
        """What one more pod of class c earns on node n now (None: it does not fit there at the grain the scores
        see, such as one device's free share, which the capacity rows only sum per node)."""

    def place(self, c: int, n: int) -> None: ...

    def undo(self, c: int, n: int) -> None:
        """The last `place(c, n)` taken back."""


class MarginalScores(Protocol):
    """Soft points a pod earns on a node that depend on the pods the same plan puts there before it — a node's
    fragmentation: two half-GPU pods on one idle GPU leave nothing over, each alone leaves half a GPU no whole-GPU
    pod can use. No term per pod and node says that, so neither the classes' `scores` nor CP-SAT's tier 2 hold
    them: the starting plans ask them pod by pod (`tracker`), in their own orders and `orders` shuffled ones, and
    every plan is judged by `value`."""

    classes: frozenset[int]
    orders: int

    def tracker(self) -> MarginalTracker: ...

    def value(self, placed: dict[tuple[int, int], int]) -> int:
        """What a plan earns, whatever order its pods were placed in (part of tier 2)."""


@dataclass(slots=True)
class PodClass:
    count: int
    demand: tuple[int, ...]
    weight: int  # tier-1 value of one placed pod (priority, lexicographic)
    candidates: tuple[int, ...]  # node indices that pass every static filter
    scores: tuple[int, ...] = ()  # soft score of one pod on each candidate (aligned with candidates)
    max_per_node: int | None = None
    per_node_check: Check = Check.ONE_PER_NODE  # what a full max_per_node reports (host ports: PORTS)
    gang: int | None = None
    rank: int = 0  # greedy order: higher first
    queue: tuple[int, ...] = ()  # each pod's place in a one-at-a-time scheduler's queue (priority, age)


@dataclass(slots=True)
class GangRow:
    classes: tuple[int, ...]
    need: int  # pending members that must be placed for the gang to start (minMember minus bound members)
    partition: int | None = None  # all members in one domain of this partition…
    domains: frozenset[int] | None = None  # …one of these (where bound members already are), if given
    prefer: tuple[PreferredLevel, ...] = ()  # the fewest domains of each, the first first (the topology tier)
    least: LeastPerDomain | None = None
    in_set: int | None = None  # the GangSet it starts with (a CompositePodGroup's child)


@dataclass(frozen=True, slots=True)
class GangSet:
    """Gangs started together (a CompositePodGroup's children): at least `need` of `gangs` start, each whole, or none
    does; every member of every one in one domain of `partition` (one of `domains`, where bound members run)."""

    gangs: tuple[int, ...]
    need: int
    partition: int | None = None
    domains: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class PreferredLevel:
    """A gang spans as few domains of `partition` as it can; those where bound members run (`held`) count once
    whatever the plan does, so only new ones cost."""

    partition: int
    held: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class LeastPerDomain:
    """Hard: a domain of `partition` where the plan puts a member holds at least `count` members, the bound ones
    there (`bound`: domain -> members) included (8 per node: a job's NVLink traffic stays inside each host)."""

    partition: int
    count: int
    bound: tuple[tuple[int, int], ...] = ()

    def bound_in(self, d: int) -> int:
        return next((k for domain, k in self.bound if domain == d), 0)


@dataclass(slots=True)
class Separation:
    """Pods of class `subject` share no domain with pods of `others` (if `subject` is in `others`: at most one
    `subject` per domain).

    Hard when weight is None; soft: a penalty of `weight` per domain that hosts both.
    """

    partition: int
    subject: int
    others: tuple[int, ...]
    weight: int | None = None
    why: str = ""  # the rule in words, for explanations (the solver never reads it)


@dataclass(slots=True)
class Colocation:
    """Every domain hosting a pod of `carriers` also hosts a pod of `supporters` (or is `supported`
    already by bound pods).

    Upstream checks affinity one pod at a time, so support must be realisable in some order: a supporter
    that is itself `chained` (carries required affinity) must come earlier, which the model expresses with
    ranks. `seeders` are the carriers the rule's own selector matches: upstream
    lets the first pod of such a series start anywhere while nothing matches yet, so one domain, shared by
    all carriers (and by every rule in the same `seed_group`), may be opened by a seeder instead. Soft (one
    carrier): a bonus of `weight` per domain hosting it that also hosts a supporter.
    """

    partition: int
    carriers: tuple[int, ...]
    supporters: tuple[int, ...]
    supported: frozenset[int] = frozenset()
    seeders: tuple[int, ...] = ()
    chained: frozenset[int] = frozenset()
    weight: int | None = None
    seed_group: int = 0  # rules whose selectors overlap share one seed: only the very first pod may seed
    why: str = ""


@dataclass(slots=True)
class Spread:
    """count(domain) − min over eligible domains ≤ max_skew for every domain hosting class `subject`.

    Counts are bound matching pods (`existing`) plus placed pods of `counted` classes, only on the
    eligible nodes of each domain. Soft: minimise (max − min) by `weight`.
    """

    subject: int
    counted: tuple[int, ...]
    domain_nodes: dict[int, tuple[int, ...]]  # eligible domain -> its eligible nodes
    existing: dict[int, int]
    max_skew: int
    min_domains: int = 1
    weight: int | None = None
    why: str = ""


@dataclass(slots=True)
class Limit:
    """Every domain hosting class `subject` holds at most `most` pods of `counted` classes plus `existing` bound ones."""

    partition: int
    subject: int
    counted: tuple[int, ...]
    existing: dict[int, int]
    most: int
    why: str = ""


@dataclass(slots=True)
class Budget:
    """Pods of `classes` placed together use at most `most` of one amount, one pod of classes[k] `weights[k]` of
    it, wherever they go (a tenant's quota of a resource: what it may still take).

    With `groups` (a group per entry of `classes`) and `own` (per group, an amount of its own), only what each
    group uses beyond its own draws on `most`: Σ_g max(0, Σ_{k in g} weights[k]·placed(classes[k]) − own[g])
    ≤ most (tenants borrowing from the minimums others leave idle)."""

    classes: tuple[int, ...]
    weights: tuple[int, ...]
    most: int
    why: str = ""
    groups: tuple[int, ...] = ()
    own: tuple[int, ...] = ()

    def group_of(self, k: int) -> int:
        return self.groups[k] if self.groups else 0

    def own_of(self, g: int) -> int:
        return self.own[g] if self.own else 0

    def drawn(self, per_group: dict[int, int]) -> int:
        """What groups using `per_group` draw on `most`."""
        return sum(max(0, used - self.own_of(g)) for g, used in per_group.items())


SHARE_SCALE = 1000  # a Share's value is in thousandths, rounded up


@dataclass(slots=True)
class Share:
    """A tenant's dominant share in thousandths: over `terms` (one per resource: what is used already, what
    one pod of each of `classes` adds, and the weighted total they are a fraction of), the largest
    ⌈1000 · (base + Σ coefficient · placed) / divisor⌉. Unfairness is Σ weight · share², minimised below
    tier 1 (pods placed by priority): its minimum evens out the shares (each already divided by its tenant's
    weight), where the quadratic without `weight` would favour heavy tenants twice."""

    classes: tuple[int, ...]
    terms: tuple[tuple[int, tuple[int, ...], int], ...]  # (base, per-class coefficients, divisor)
    weight: int = 1
    why: str = ""

    def value(self, counts: dict[int, int]) -> int:
        return max((-(-SHARE_SCALE * (base + sum(w * counts.get(c, 0) for c, w in zip(self.classes, per))) // divisor)
                    for base, per, divisor in self.terms), default=0)


@dataclass(frozen=True, slots=True)
class Keep:
    """Pods of `classes` kept placed, softly: each pod placed short of `least` costs `weight` of tier 1. A disruption
    budget over the running pods the batch model of preemption may evict (engine.preempt.model): `least` is how many
    of them it keeps. Its cost counts at a level of tier 1's lexicographic weights (`level`, as a class's: compile
    weighs the shortfall as `least` pods of that level), just below the lowest preemptor and above every running pod,
    so that placing a preemptor outweighs any violations and a violation outweighs keeping any running pod
    (upstream's candidate order: preemptors first, then the fewest violations, then the victims)."""

    classes: tuple[int, ...]
    least: int
    level: tuple[bool, bool, int]
    weight: int = 0  # set by compile with the classes' weights
    why: str = ""

    def short(self, counts: dict[int, int]) -> int:
        """How many pods short of `least` a placement with `counts` per class keeps."""
        return max(0, self.least - sum(counts.get(c, 0) for c in self.classes))


@dataclass(slots=True)
class Problem:
    resources: tuple[str, ...]
    free: list[tuple[int, ...]]  # per node: capacity left after bound pods
    capacity: list[tuple[int, ...]] = field(default_factory=list)  # per node: allocatable
    partitions: list[list[int]] = field(default_factory=list)  # per partition: domain of each node
    classes: list[PodClass] = field(default_factory=list)
    gangs: list[GangRow] = field(default_factory=list)
    gang_sets: list[GangSet] = field(default_factory=list)
    separations: list[Separation] = field(default_factory=list)
    colocations: list[Colocation] = field(default_factory=list)
    spreads: list[Spread] = field(default_factory=list)
    limits: list[Limit] = field(default_factory=list)
    budgets: list[Budget] = field(default_factory=list)
    shares: list[Share] = field(default_factory=list)  # tenants' dominant shares: the fairness tier
    keeps: list[Keep] = field(default_factory=list)  # disruption budgets over pods the batch model may evict
    guards: int = 0  # the last `guards` resources are the batch model's room by priority (engine.kinds.resources)
    openings: list[tuple[tuple[int, ...], int]] = field(default_factory=list)  # (classes, cost per node opened)
    empty: frozenset[int] = frozenset()  # nodes no bound pod uses
    exclusive: list[tuple[int, ...]] = field(default_factory=list)  # classes of which a node takes at most one pod
    unchecked: tuple[int, ...] = ()  # classes the compiler had no time to check: no candidates, not proven unplaceable
    # rows counted beside the nodes' allocatable (devices, volumes): per node, whether it has no limit there
    counted: dict[str, tuple[bool, ...]] = field(default_factory=dict)
    marginal: MarginalScores | None = None  # soft points that depend on the pods placed before (fragmentation)

    def has_levels(self) -> bool:
        """Some gang prefers the fewest domains of a level (the topology tier has work)."""
        return any(g.prefer for g in self.gangs)

    def has_soft_terms(self) -> bool:
        return (
            any(any(c.scores) for c in self.classes)
            or any(s.weight is not None for s in self.separations)
            or any(s.weight is not None for s in self.colocations)
            or any(s.weight is not None for s in self.spreads)
            or bool(self.openings)
        )

    def score_bound(self) -> int:
        """No plan's node scores exceed every pod on its best candidate."""
        return sum(c.count * max(c.scores) for c in self.classes if c.scores and c.candidates)

    def score(self, placed: dict[tuple[int, int], int]) -> int:
        """The node-score part of tier 2 for a placement."""
        lookup = {c: dict(zip(cls.candidates, cls.scores)) for c, cls in enumerate(self.classes) if cls.scores}
        return sum(k * lookup[c][n] for (c, n), k in placed.items() if c in lookup)

    def upper_bound(self) -> int:
        """Tier-1 value if every pod that has a candidate node were placed, except the members of gangs that
        cannot reach their quorum (fewer members with any candidate than the gang needs): no plan places
        those, and counting them would send a batch of still-arriving gangs to CP-SAT for nothing."""
        return sum(c.weight * c.count for c, k in zip(self.classes, self.placeable()) if k)

    def placeable(self) -> list[int]:
        """Per class, the pods a plan at the upper bound places: all of a class with candidate nodes, none of a
        gang that cannot reach its quorum."""
        hopeless: set[int] = set()
        for g in self.gangs:
            if sum(self.classes[c].count for c in g.classes if self.classes[c].candidates) < g.need:
                hopeless.update(g.classes)
        return [c.count if c.candidates and i not in hopeless else 0 for i, c in enumerate(self.classes)]

    def value(self, placed: dict[tuple[int, int], int]) -> int:
        """Tier 1 of a placement: pods placed, weighted by priority, less what it falls short of the keeps."""
        value = sum(self.classes[c].weight * k for (c, _), k in placed.items())
        if self.keeps:
            counts: dict[int, int] = defaultdict(int)
            for (c, _), k in placed.items():
                counts[c] += k
            value -= sum(keep.weight * keep.short(counts) for keep in self.keeps)
        return value

    def unfairness(self, placed: dict[tuple[int, int], int]) -> int:
        """The fairness tier of a placement (lower is fairer): Σ weight · share² over the tenants."""
        if not self.shares:
            return 0
        counts: dict[int, int] = defaultdict(int)
        for (c, _), k in placed.items():
            counts[c] += k
        return sum(s.weight * s.value(counts) ** 2 for s in self.shares)

    def fairness_settled(self, placed: dict[tuple[int, int], int]) -> bool:
        """No plan placing as many pods could share more fairly: every pod of every tenant is placed (a share
        depends only on which pods are placed, not where)."""
        counts: dict[int, int] = defaultdict(int)
        for (c, _), k in placed.items():
            counts[c] += k
        return all(counts[c] >= self.classes[c].count for s in self.shares for c in s.classes)

    def soft_value(self, placed: dict[tuple[int, int], int]) -> int:
        """Tier 2 of a placement, counted exactly as the CP-SAT model counts it, and the marginal scores' value
        (which the model has no term for)."""
        per_domain: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for (c, n), k in placed.items():
            for p, part in enumerate(self.partitions):
                if part[n] != NO_DOMAIN:
                    per_domain[(p, c)][part[n]] += k
        total = self.score(placed)
        for sep in self.separations:
            if sep.weight is not None:
                total -= sep.weight * _separation_cost(sep, per_domain)
        for coloc in self.colocations:
            if coloc.weight is not None:
                total += coloc.weight * _colocation_gain(coloc, per_domain)
        for spread in self.spreads:
            if spread.weight is not None:
                total -= spread.weight * _skew(spread, placed)
        for classes, cost in self.openings:
            members = set(classes)
            total -= cost * len({n for (c, n), k in placed.items() if k and c in members and n in self.empty})
        if self.marginal is not None:
            total += self.marginal.value(placed)
        return total

    def soft_bound(self) -> int | None:
        """No plan that places every placeable pod (the plans `_proven` compares) has a tier 2 above this (None:
        no cheap bound, as for marginal scores). Penalties can at best be avoided, so they bound at 0, except a soft
        spread's: its pods cannot split evenly over domains that do not divide them; gains are bounded by every pod
        on its best node or in a supported domain."""
        if self.marginal is not None:
            return None
        if any(s.weight is not None and s.weight < 0 for s in self.separations + self.colocations):
            return None
        bound = self.score_bound()
        placeable = self.placeable()
        for spread in self.spreads:
            if spread.weight is not None:
                total = sum(spread.existing.values()) + sum(placeable[c] for c in spread.counted)
                bound -= spread.weight * _least_skew(total, len(spread.domain_nodes), spread.min_domains)
        for s in self.colocations:
            if s.weight is not None:
                bound += s.weight * self.classes[s.carriers[0]].count
        for classes, cost in self.openings:
            if cost < 0:
                bound += -cost * min(len(self.empty), sum(self.classes[c].count for c in classes))
        return bound


def _separation_cost(s: Separation, per_domain) -> int:
    """Domains hosting both sides, plus extra pods of a self-separated class per domain."""
    mine = per_domain.get((s.partition, s.subject), {})
    others = [per_domain.get((s.partition, o), {}) for o in s.others if o != s.subject]
    cost = sum(1 for d, k in mine.items() if k and any(o.get(d) for o in others))
    if s.subject in s.others:
        cost += sum(k - 1 for k in mine.values() if k > 1)
    return cost


def _colocation_gain(s: Colocation, per_domain) -> int:
    """Domains hosting the (soft) carrier that are supported, by bound pods or by the batch."""
    mine = per_domain.get((s.partition, s.carriers[0]), {})
    support = [per_domain.get((s.partition, o), {}) for o in s.supporters]
    return sum(1 for d, k in mine.items() if k and (d in s.supported or any(o.get(d) for o in support)))


def _least_skew(pods: int, domains: int, min_domains: int) -> int:
    """The smallest max − min any split of `pods` over `domains` can have (min taken as 0 with fewer domains
    than minDomains, as `_skew` counts it)."""
    if domains == 0:
        return 0
    if domains < min_domains:
        return -(-pods // domains)
    return 1 if pods % domains else 0


def _skew(s: Spread, placed: dict[tuple[int, int], int]) -> int:
    """max − min over the eligible domains (min 0 with fewer domains than minDomains)."""
    counted = set(s.counted)
    count = dict(s.existing)
    where = {n: d for d, nodes in s.domain_nodes.items() for n in nodes}
    for (c, n), k in placed.items():
        if c in counted and n in where:
            count[where[n]] = count.get(where[n], 0) + k
    values = [count.get(d, 0) for d in s.domain_nodes]
    if not values:
        return 0
    low = 0 if len(values) < s.min_domains else min(values)
    return max(values) - low


@dataclass(slots=True)
class Phases:
    """Seconds spent in each step of a solve (the dry-run's stats.phases)."""

    start: float = 0.0  # greedy and one-at-a-time plans
    model: float = 0.0  # building CP-SAT models
    solve: float = 0.0  # CP-SAT searching


@dataclass(slots=True)
class Solution:
    placed: dict[tuple[int, int], int]  # (class, node) -> pods
    status: Status
    placed_value: int
    soft_value: int = 0
    bound: int | None = None  # proven tier-1 bound
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    phases: Phases = field(default_factory=Phases)
    strategy: str = ""  # where the plan came from and how much of the model CP-SAT saw
    sequential_placed: int | None = None  # pods the one-at-a-time baseline placed, when it ran
    _counts: dict[int, int] | None = field(default=None, init=False, repr=False, compare=False)

    def class_counts(self) -> dict[int, int]:
        """Pods placed per class (counted once: explaining 626 classes counted 10,000 placements for each)."""
        if self._counts is None:
            out: dict[int, int] = {}
            for (c, _), k in self.placed.items():
                out[c] = out.get(c, 0) + k
            self._counts = out
        return self._counts

    @property
    def gap(self) -> float:
        if self.bound is None or self.bound == 0:
            return 0.0
        return max(0.0, (self.bound - self.placed_value) / self.bound)
