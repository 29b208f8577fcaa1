"""The solver's input and output: plain integers and indices, no Kubernetes.

The compiler turns pods into *classes* (interchangeable pods) and nodes into indices; constraints between
pods become constraints between classes over *partitions* (a topology key's split of nodes into domains).
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_DOMAIN = -1


@dataclass(slots=True)
class PodClass:
    count: int
    demand: tuple[int, ...]
    weight: int  # tier-1 value of one placed pod (priority, lexicographic)
    candidates: tuple[int, ...]  # node indices that pass every static filter
    scores: tuple[int, ...] = ()  # soft score of one pod on each candidate (aligned with candidates)
    max_per_node: int | None = None
    gang: int | None = None
    rank: int = 0  # greedy order: higher first
    queue: tuple[int, ...] = ()  # each pod's place in a one-at-a-time scheduler's queue (priority, age)


@dataclass(slots=True)
class Gang:
    classes: tuple[int, ...]
    need: int  # pending members that must be placed for the gang to start (minMember minus bound members)
    partition: int | None = None  # all members in one domain of this partition…
    domains: frozenset[int] | None = None  # …one of these (where bound members already are), if given


@dataclass(slots=True)
class Separation:
    """Pods of `a` share no domain with pods of `others` (if `a` is in `others`: at most one `a` per domain).

    Hard when weight is None; soft: a penalty of `weight` per domain that hosts both.
    """

    partition: int
    a: int
    others: tuple[int, ...]
    weight: int | None = None


@dataclass(slots=True)
class Colocation:
    """Every domain hosting a pod of `carriers` also hosts a pod of `supporters` (or is `supported`
    already by bound pods).

    Upstream checks affinity one pod at a time, so support must be realisable in some order: a supporter
    that is itself `chained` (carries required affinity) must come earlier, which the model expresses with
    ranks. `seeders` are the carriers the rule's own selector matches: upstream
    lets the first pod of such a series start anywhere while nothing matches yet, so one domain, shared by
    all carriers (and by every rule in the same `seed_group`), may be opened by a seeder instead. Soft (one carrier): a bonus of `weight` per domain
    hosting it that also hosts a supporter.
    """

    partition: int
    carriers: tuple[int, ...]
    supporters: tuple[int, ...]
    supported: frozenset[int] = frozenset()
    seeders: tuple[int, ...] = ()
    chained: frozenset[int] = frozenset()
    weight: int | None = None
    seed_group: int = 0  # rules whose selectors overlap share one seed: only the very first pod may seed


@dataclass(slots=True)
class Spread:
    """count(domain) − min over eligible domains ≤ max_skew for every domain hosting `a`.

    Counts are bound matching pods (`existing`) plus placed pods of `counted` classes, only on the
    eligible nodes of each domain. Soft: minimise (max − min) by `weight`.
    """

    a: int
    counted: tuple[int, ...]
    domain_nodes: dict[int, tuple[int, ...]]  # eligible domain -> its eligible nodes
    existing: dict[int, int]
    max_skew: int
    min_domains: int = 1
    weight: int | None = None


@dataclass(slots=True)
class Limit:
    """Every domain hosting `a` holds at most `most` pods of `counted` classes plus `existing` bound ones."""

    partition: int
    a: int
    counted: tuple[int, ...]
    existing: dict[int, int]
    most: int


@dataclass(slots=True)
class Problem:
    resources: tuple[str, ...]
    free: list[tuple[int, ...]]  # per node: capacity left after bound pods
    capacity: list[tuple[int, ...]] = field(default_factory=list)  # per node: allocatable
    partitions: list[list[int]] = field(default_factory=list)  # per partition: domain of each node
    classes: list[PodClass] = field(default_factory=list)
    gangs: list[Gang] = field(default_factory=list)
    separations: list[Separation] = field(default_factory=list)
    colocations: list[Colocation] = field(default_factory=list)
    spreads: list[Spread] = field(default_factory=list)
    limits: list[Limit] = field(default_factory=list)
    openings: list[tuple[tuple[int, ...], int]] = field(default_factory=list)  # (classes, cost per node opened)
    empty: frozenset[int] = frozenset()  # nodes no bound pod uses
    exclusive: list[tuple[int, ...]] = field(default_factory=list)  # classes of which a node takes at most one pod

    def has_soft_terms(self) -> bool:
        return (
            any(any(c.scores) for c in self.classes)
            or any(s.weight is not None for s in self.separations)
            or any(s.weight is not None for s in self.colocations)
            or any(s.weight is not None for s in self.spreads)
            or bool(self.openings)
        )

    def score_only(self) -> bool:
        """Soft terms are per-pod node scores only (no pairwise or per-domain terms)."""
        return not (any(s.weight is not None for s in self.separations)
                    or any(s.weight is not None for s in self.colocations)
                    or any(s.weight is not None for s in self.spreads)
                    or self.openings)

    def score_bound(self) -> int:
        """With score_only(): no plan scores more than every pod on its best candidate."""
        return sum(c.count * max(c.scores) for c in self.classes if c.scores and c.candidates)

    def score(self, placed: dict[tuple[int, int], int]) -> int:
        """The node-score part of tier 2 for a placement."""
        lookup = {c: dict(zip(cls.candidates, cls.scores)) for c, cls in enumerate(self.classes) if cls.scores}
        return sum(k * lookup[c][n] for (c, n), k in placed.items() if c in lookup)

    def upper_bound(self) -> int:
        """Tier-1 value if every pod that has a candidate node were placed."""
        return sum(c.weight * c.count for c in self.classes if c.candidates)


@dataclass(slots=True)
class Solution:
    placed: dict[tuple[int, int], int]  # (class, node) -> pods
    status: str  # OPTIMAL, FEASIBLE, GREEDY
    placed_value: int
    soft_value: int = 0
    bound: int | None = None  # proven tier-1 bound
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def class_counts(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for (c, _), k in self.placed.items():
            out[c] = out.get(c, 0) + k
        return out

    @property
    def gap(self) -> float:
        if self.bound is None or self.bound == 0:
            return 0.0
        return max(0.0, (self.bound - self.placed_value) / self.bound)
