"""Greedy placement: fast, always feasible, the warm start for CP-SAT and the fallback on timeout.

Classes go in rank order (priority first); each pod takes the first candidate node, in the class's
preference order, on which every hard constraint still holds in the final state. Gangs are placed
tentatively and rolled back whole when they cannot reach their minimum. Pods that no node takes only for
now wait and are tried again once others have landed (`requeue`, as kube-scheduler's queue does).
"""

from __future__ import annotations

import heapq
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np

from . import topology
from .problem import NO_DOMAIN, Blocker, Check, Problem

ROOM_SCAN_MIN = 64  # candidates from which a fill drops the nodes without room in one step (GreedyState.with_room)
Stop = Callable[[], bool]  # a starting plan's deadline: True once its time is up
Unit = TypeVar("Unit")


def _never() -> bool:
    return False


RESOURCES, PORTS = Blocker(Check.RESOURCES), Blocker(Check.PORTS)


class _DomainCounts:
    """Pods per eligible domain of one spread constraint, with its minimum kept in O(1) per change."""

    def __init__(self, domains, existing: dict[int, int], min_domains: int):
        self.count = {d: existing.get(d, 0) for d in domains}
        self.hist: dict[int, int] = defaultdict(int)
        for v in self.count.values():
            self.hist[v] += 1
        self.low = min(self.count.values(), default=0)
        self.too_few = len(self.count) < min_domains  # upstream then takes the global minimum as 0

    def __getitem__(self, d: int) -> int:
        return self.count[d]

    def add(self, d: int, k: int) -> None:
        v = self.count[d]
        self.hist[v] -= 1
        self.hist[v + k] += 1
        self.count[d] = v + k
        if k < 0 and v + k < self.low:
            self.low = v + k
        while self.hist[self.low] == 0 and self.count:
            self.low += 1

    def minimum(self, bumped: int | None = None) -> int:
        """The minimum over domains, as it would be with one more pod in domain `bumped`."""
        if self.too_few:
            return 0
        if bumped is not None and self.count[bumped] == self.low and self.hist[self.low] == 1:
            return self.low + 1
        return self.low


def _node_domains(problem: Problem) -> list[dict[int, int]]:
    """Per spread, each eligible node's domain. Spreads that share one `domain_nodes` (the compiler gives
    classes with the same key and node rules the same one) share the map: at 20,000 nodes, one map per
    spread was millions of entries built at every start."""
    shared: dict[int, dict[int, int]] = {}
    out = []
    for s in problem.spreads:
        key = id(s.domain_nodes)
        if key not in shared:
            shared[key] = {n: d for d, nodes in s.domain_nodes.items() for n in nodes}
        out.append(shared[key])
    return out


class GreedyState:
    """Mutable placement state with incremental constraint checks and an undo log."""

    def __init__(self, problem: Problem, stop: Stop | None = None):
        self.p = problem
        self.stop: Stop = stop or _never
        self.free = [list(f) for f in problem.free]
        self.on_node: dict[tuple[int, int], int] = defaultdict(int)
        # (partition, class) -> domain -> pods
        self.in_domain: dict[tuple[int, int], dict[int, int]] = defaultdict(lambda: defaultdict(int))
        self.exclusive_used: list[set[int]] = [set() for _ in problem.exclusive]
        self.placed_count: dict[int, int] = defaultdict(int)
        self.spread_counts = [_DomainCounts(s.domain_nodes, s.existing, s.min_domains) for s in problem.spreads]
        self.spread_node_domain = _node_domains(problem)
        self.budget_used = [0] * len(problem.budgets)  # what each budget's groups draw on its `most`
        self.group_used: list[dict[int, int]] = [defaultdict(int) for _ in problem.budgets]
        self.log: list[tuple[int, int]] = []
        self.room: np.ndarray | None = None  # `free` as an array (nodes × resources), made when a fill first asks
        self.node_arrays: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}  # id(candidates) -> (them, array)
        self.marginal = problem.marginal.tracker() if problem.marginal is not None else None
        self.marginal_classes = problem.marginal.classes if problem.marginal is not None else frozenset()
        self._index(problem)

    def _index(self, p: Problem) -> None:
        self.sep_of: dict[int, list] = defaultdict(list)
        self.soft_sep_of: dict[int, list] = defaultdict(list)
        for s in p.separations:
            for c in {s.subject, *s.others}:
                (self.sep_of if s.weight is None else self.soft_sep_of)[c].append(s)
        self.coloc_of: dict[int, list] = defaultdict(list)
        for i, coloc in enumerate(p.colocations):
            if coloc.weight is None:
                for c in coloc.carriers:
                    self.coloc_of[c].append((i, coloc))
        self.spread_of: dict[int, list[int]] = defaultdict(list)
        self.soft_spread_of: dict[int, list[int]] = defaultdict(list)  # soft spreads a class owns
        self.soft_counted_in: dict[int, list[int]] = defaultdict(list)  # soft spreads counting a class
        for i, spread in enumerate(p.spreads):
            if spread.weight is None:
                for c in {spread.subject, *spread.counted}:
                    self.spread_of[c].append(i)
            else:
                self.soft_spread_of[spread.subject].append(i)
                for c in spread.counted:
                    self.soft_counted_in[c].append(i)
        self.budget_of: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # class -> (budget, weight, group)
        for b, budget in enumerate(p.budgets):
            for k, (c, w) in enumerate(zip(budget.classes, budget.weights)):
                if w:
                    self.budget_of[c].append((b, w, budget.group_of(k)))
        self.limit_of: dict[int, list] = defaultdict(list)
        for limit in p.limits:
            for c in {limit.subject, *limit.counted}:
                self.limit_of[c].append(limit)
        self.excl_of: dict[int, list[int]] = defaultdict(list)
        for i, group in enumerate(p.exclusive):
            for c in group:
                self.excl_of[c].append(i)
        self.pinned_below = _pinned_ranks(p)

    def claimed_last(self, c: int, alive: list[int]) -> list[int]:
        """`alive` with the nodes a lower-ranked class of one candidate node needs moved to the end, the lowest
        ranked of those first (otherwise in their order): a pod that can go elsewhere leaves a pinned one its node,
        and displaces the least important first (preemption's running pods, weighed below the preemptors, are such
        classes: a preemptor takes empty room, then the lowest priority's, as upstream picks victims)."""
        if self.pinned_below is None or not alive:
            return alive
        low = self.pinned_below[np.asarray(alive, dtype=np.intp)]
        claimed = low < self.p.classes[c].rank
        if not claimed.any():
            return alive
        order = np.lexsort((np.where(claimed, low, 0), claimed))  # unclaimed first, then by the rank they would displace
        return [alive[i] for i in order.tolist()]

    def _domain_has(self, partition: int, classes, d: int) -> bool:
        return any(self.in_domain[(partition, o)].get(d, 0) > 0 for o in classes)

    def permanently_blocked(self, c: int, n: int) -> bool:
        return self.permanent_blocker(c, n) is not None

    def currently_blocked(self, c: int, n: int) -> bool:
        return self.current_blocker(c, n) is not None

    def blocker(self, c: int, n: int) -> Blocker | None:
        """The first check that stops one more pod of c on node n in this state: one that holds for good, else one
        that holds for now (None: nothing does)."""
        return self.permanent_blocker(c, n) or self.current_blocker(c, n)

    def waits(self, c: int) -> bool:
        """Some candidate node blocks one more pod of c only for now (its required affinity's support is not
        there yet, or a spread's counts would tip): pods landing later may open it, as they may not a node
        blocked for good (room, ports, separations, limits, budgets only get worse). A class no co-location or
        spread row names never waits: nothing blocks it for now (asked node by node, a batch of 1,875 gangs that
        did not fit on 5,000 nodes spent 2.7 s here)."""
        if not self.coloc_of.get(c) and not self.spread_of.get(c):
            return False
        return any(self.permanent_blocker(c, n) is None and self.current_blocker(c, n) is not None
                   for n in self.p.classes[c].candidates)

    def permanent_blocker(self, c: int, n: int) -> Blocker | None:
        """Checks that can only get worse as pods are added (capacity, ports, separation, count limits)."""
        cls = self.p.classes[c]
        free = self.free[n]
        if any(f < d for f, d in zip(free, cls.demand)):
            return RESOURCES
        if cls.max_per_node is not None and self.on_node[(c, n)] >= cls.max_per_node:
            return Blocker(cls.per_node_check)
        if any(n in self.exclusive_used[g] for g in self.excl_of.get(c, ())):
            return PORTS
        for s in self.sep_of.get(c, ()):
            d = self.p.partitions[s.partition][n]
            if d == NO_DOMAIN:
                continue
            if s.subject == c:
                if self._domain_has(s.partition, s.others, d):
                    return Blocker(Check.SEPARATION, s)
            elif self.in_domain[(s.partition, s.subject)].get(d, 0) > 0:
                return Blocker(Check.SEPARATION, s)
        for s in self.limit_of.get(c, ()):
            d = self.p.partitions[s.partition][n]
            if d == NO_DOMAIN or (s.subject != c and not self.in_domain[(s.partition, s.subject)].get(d, 0)):
                continue
            held = s.existing.get(d, 0) + sum(self.in_domain[(s.partition, o)].get(d, 0) for o in s.counted)
            if held + (1 if c in s.counted else 0) > s.most:
                return Blocker(Check.LIMIT, s)
        for b, w, g in self.budget_of.get(c, ()):
            if self.budget_used[b] + self._draw(b, g, w) > self.p.budgets[b].most:
                return Blocker(Check.BUDGET, self.p.budgets[b])
        return None

    def taken(self, budget: object, c: int) -> int:
        """What the placed pods of class c's group take of `budget` (all its pods when it has no groups)."""
        for b, _, g in self.budget_of.get(c, ()):
            if self.p.budgets[b] is budget:
                return self.group_used[b][g]
        return 0

    def _draw(self, b: int, g: int, w: int) -> int:
        """How much more group g of budget b draws on its `most` with `w` more used."""
        own, used = self.p.budgets[b].own_of(g), self.group_used[b][g]
        return max(0, used + w - own) - max(0, used - own)

    def current_blocker(self, c: int, n: int) -> Blocker | None:
        """Checks that adding other pods may fix (co-location support, spread skew)."""
        for _, s in self.coloc_of.get(c, ()):
            d = self.p.partitions[s.partition][n]
            if d == NO_DOMAIN:
                return Blocker(Check.AFFINITY, s)
            if self._supported(s, d):
                continue
            if c in s.seeders and not any(self.placed_count[o] for o in s.supporters):
                continue  # upstream: the first pod of a self-affine series may start anywhere
            return Blocker(Check.AFFINITY, s)
        for i in self.spread_of.get(c, ()):
            s = self.p.spreads[i]
            counts = self.spread_counts[i]
            d = self.spread_node_domain[i].get(n)
            if s.subject == c and d is None:
                return Blocker(Check.SPREAD, s)
            if d is None:
                continue
            if c not in s.counted:
                if s.subject == c and counts[d] - counts.minimum() > s.max_skew:
                    return Blocker(Check.SPREAD, s)
                continue
            # adding one pod to d must keep every domain hosting `subject` within max_skew
            if (s.subject == c or self.in_domain_spread(i, d)) and counts[d] + 1 - counts.minimum(d) > s.max_skew:
                return Blocker(Check.SPREAD, s)
        return None

    def soft_penalty(self, c: int, n: int) -> int:
        """What one more pod of c on node n adds to the soft separation penalties (preferred
        anti-affinity), counted as the CP-SAT model counts them: per domain hosting both sides, and per
        extra pod of a self-separated class in one domain."""
        penalty = 0
        for s in self.soft_sep_of.get(c, ()):
            d = self.p.partitions[s.partition][n]
            if d == NO_DOMAIN:
                continue
            a_here = self.in_domain[(s.partition, s.subject)].get(d, 0) > 0
            others = [o for o in s.others if o != s.subject]
            others_here = self._domain_has(s.partition, others, d)
            if s.subject == c:
                if c in s.others and a_here:
                    penalty += s.weight
                if others_here and not a_here:
                    penalty += s.weight
            elif a_here and not others_here:
                penalty += s.weight
        return penalty

    def in_domain_spread(self, i: int, d: int) -> bool:
        s = self.p.spreads[i]
        return any(self.on_node[(s.subject, n)] for n in s.domain_nodes[d])

    def _supported(self, s, d: int) -> bool:
        """Pods are placed one at a time here, so any supporter already in the domain counts (as upstream)."""
        return d in s.supported or self._domain_has(s.partition, s.supporters, d)

    def place(self, c: int, n: int) -> None:
        cls = self.p.classes[c]
        free = self.free[n]
        room = self.room
        for r, d in enumerate(cls.demand):
            free[r] -= d
            if room is not None:
                room[n, r] -= d
        self.on_node[(c, n)] += 1
        self.placed_count[c] += 1
        for part_index, part in enumerate(self.p.partitions):
            d = part[n]
            if d != NO_DOMAIN:
                self.in_domain[(part_index, c)][d] += 1
        for g in self.excl_of.get(c, ()):
            self.exclusive_used[g].add(n)
        for b, w, g in self.budget_of.get(c, ()):
            self.budget_used[b] += self._draw(b, g, w)
            self.group_used[b][g] += w
        self._count_spreads(c, n, 1)
        self.log.append((c, n))
        if self.marginal is not None and c in self.marginal_classes:
            self.marginal.place(c, n)

    def _count_spreads(self, c: int, n: int, k: int) -> None:
        """Add k pods of c on n to the domain counts of the spreads that count c (hard and soft)."""
        for i in (*self.spread_of.get(c, ()), *self.soft_counted_in.get(c, ())):
            domain = self.spread_node_domain[i].get(n)
            if domain is not None and c in self.p.spreads[i].counted:
                self.spread_counts[i].add(domain, k)

    def undo_to(self, mark: int) -> None:
        while len(self.log) > mark:
            c, n = self.log.pop()
            cls = self.p.classes[c]
            for r, d in enumerate(cls.demand):
                self.free[n][r] += d
                if self.room is not None:
                    self.room[n, r] += d
            self.on_node[(c, n)] -= 1
            self.placed_count[c] -= 1
            for part_index, part in enumerate(self.p.partitions):
                d = part[n]
                if d != NO_DOMAIN:
                    self.in_domain[(part_index, c)][d] -= 1
            for g in self.excl_of.get(c, ()):
                self.exclusive_used[g].discard(n)
            for b, w, g in self.budget_of.get(c, ()):
                self.group_used[b][g] -= w
                self.budget_used[b] -= self._draw(b, g, w)
            self._count_spreads(c, n, -1)
            if self.marginal is not None and c in self.marginal_classes:
                self.marginal.undo(c, n)

    def with_room(self, c: int, nodes: tuple[int, ...]) -> list[int]:
        """`nodes`, in order, without those that lack the room for one more pod of c now: the nodes a fill's scan
        would drop as dead on the way (room only shrinks while a class fills), in one vectorised step rather than
        one check each (first fit walks past every node the earlier classes filled)."""
        demand = np.asarray(self.p.classes[c].demand[:len(self.p.resources)])
        if len(nodes) < ROOM_SCAN_MIN or not self.p.resources or demand.dtype.kind not in "iu":
            return list(nodes)
        if self.room is None:
            self.room = np.array(self.free).reshape(len(self.free), len(self.p.resources))
        if self.room.dtype.kind not in "iu":  # amounts are integers; anything else is scanned as before
            return list(nodes)
        known = self.node_arrays.get(id(nodes))
        if known is None or known[0] is not nodes:
            known = self.node_arrays[id(nodes)] = (nodes, np.fromiter(nodes, dtype=np.intp, count=len(nodes)))
        fits = (self.room[known[1], :len(demand)] >= demand).all(axis=1)
        return known[1][fits].tolist()

    def _open(self, c: int, alive: list[int], dead: set[int], start: int) -> Iterator[int]:
        """Indices in `alive`, from `start` on, of the nodes that take a pod of c now; nodes that never
        will again are dropped into `dead` on the way."""
        for step in range(len(alive)):
            i = (start + step) % len(alive)
            n = alive[i]
            if n in dead:
                continue
            if self.permanently_blocked(c, n):
                dead.add(n)
            elif not self.currently_blocked(c, n):
                yield i

    def _choose(self, c: int, alive: list[int], dead: set[int], start: int, score: dict[int, int] | None) -> int | None:
        """The best open node by static score minus soft separation penalty.

        Without scores the first open node with no penalty ends the search; with scores the scan
        starts at 0 (scores descend along `alive`), so the same holds: no later node can beat it.
        """
        best: tuple[int, int] | None = None  # (value, index)
        for i in self._open(c, alive, dead, start):
            n = alive[i]
            base = score[n] if score is not None else 0
            value = base - self.soft_penalty(c, n)
            if best is None or value > best[0]:
                best = (value, i)
            if value == base:
                break
        return None if best is None else best[1]

    def fill(self, c: int, limit: int, within: tuple[tuple[int, int], ...] | None = None) -> int:
        """Place up to `limit` pods of class c; return how many were placed.

        `within` = ((partition, domain), …) keeps the pods inside one topology domain of each partition.

        Nodes that can never take another pod of the class are dropped for good. Each pod scans the
        preference order from where the last one went: the same node for first-fit (it may take more),
        the next one for a class with hard topology spread, so that each pod finds the next under-filled
        domain at once instead of rescanning the full ones. A class with soft separations (preferred
        anti-affinity) takes the best node by score minus penalty, as kube-scheduler's scoring would.
        """
        if limit <= 0:
            return 0
        cls = self.p.classes[c]
        soft = bool(self.soft_sep_of.get(c))
        spread_fill = self.soft_spread_of.get(c) and not (soft or self.spread_of.get(c) or self.coloc_of.get(c))
        alive = list(cls.candidates) if spread_fill else self.with_room(c, cls.candidates)
        for p, d in within or ():
            part = self.p.partitions[p]
            alive = [n for n in alive if part[n] == d]
        if cls.scores:
            score = dict(zip(cls.candidates, cls.scores))
            alive.sort(key=lambda n: -score[n])
        alive = self.claimed_last(c, alive)
        if self.marginal is not None and c in self.marginal_classes:
            return self._fill_marginal(c, alive, limit, score if cls.scores else None)
        if spread_fill:
            return self._fill_spread(c, alive, limit)  # (a node blocked only for now would be dropped there)
        rolling = (soft and not cls.scores) or any(self.p.spreads[i].subject == c for i in self.spread_of.get(c, ()))
        dead: set[int] = set()
        placed = 0
        start = 0
        while placed < limit and alive and not self.stop():
            if soft:
                chosen = self._choose(c, alive, dead, start, score if cls.scores else None)
            else:
                chosen = next(self._open(c, alive, dead, start), None)
            if chosen is None:
                break
            n = alive[chosen]
            self.place(c, n)
            placed += 1
            if len(dead) * 2 > len(alive):  # compact now and then, keeping the scan position
                alive = [m for m in alive if m not in dead]
                dead.clear()
                chosen = alive.index(n) if n in alive else 0
            start = chosen + 1 if rolling else (0 if soft else chosen)
        return placed

    def _fill_marginal(self, c: int, alive: list[int], limit: int, score: dict[int, int] | None) -> int:
        """A class the marginal scores weigh: each pod on the open node where its static score plus what it earns
        there now (after the pods before it) less soft separation penalties is highest, the first of equals; a
        node where it does not fit at the scores' grain is dropped (pods only take room)."""
        assert self.marginal is not None
        dead: set[int] = set()
        placed = 0
        while placed < limit and not self.stop():
            best: tuple[int, int] | None = None  # (value, node)
            for n in alive:
                if n in dead:
                    continue
                points = self.marginal.points(c, n)
                if points is None:
                    dead.add(n)
                    continue
                value = (score[n] if score is not None else 0) + points
                if best is not None and value <= best[0]:
                    continue  # a penalty only lowers it: the checks below are asked of nodes that could win
                if self.permanently_blocked(c, n):
                    dead.add(n)
                    continue
                value -= self.soft_penalty(c, n)
                if (best is None or value > best[0]) and not self.currently_blocked(c, n):
                    best = (value, n)
            if best is None:
                break
            self.place(c, best[1])
            placed += 1
            if len(dead) * 2 > len(alive):  # compact now and then
                alive = [n for n in alive if n not in dead]
                dead = set()
        return placed

    def _fill_spread(self, c: int, alive: list[int], limit: int) -> int:
        """A class with soft topology spread (ScheduleAnyway, system-default spreading): each pod goes to the
        domain of its coarsest spread (fewest domains: zones before nodes) that holds the fewest counted pods,
        bound ones included, and within it to the node whose finer spreads count the fewest pods there (a
        hostname spread: the emptiest node, as kube-scheduler's PodTopologySpread score prefers), the first in
        preference order from the last one chosen among equals (packing, without a finer spread). Nodes outside
        every eligible domain come last."""
        own = self.soft_spread_of[c]
        coarse = min(own, key=lambda i: len(self.p.spreads[i].domain_nodes))
        finer = [i for i in own if len(self.p.spreads[i].domain_nodes) > len(self.p.spreads[coarse].domain_nodes)]
        domain_of, counts = self.spread_node_domain[coarse], self.spread_counts[coarse]
        buckets: dict[int, list[int]] = defaultdict(list)
        for n in alive:
            buckets[domain_of.get(n, NO_DOMAIN)].append(n)
        heap = [(counts[d], d) for d in buckets if d != NO_DOMAIN]
        heapq.heapify(heap)
        starts: dict[int, int] = defaultdict(int)
        dead: set[int] = set()
        placed = 0
        while placed < limit and (heap or NO_DOMAIN in buckets) and not self.stop():
            d = heapq.heappop(heap)[1] if heap else NO_DOMAIN
            if d != NO_DOMAIN and heap and counts[d] > heap[0][0]:
                heapq.heappush(heap, (counts[d], d))  # stale: its count grew since it was pushed
                continue
            nodes = buckets.pop(d) if d == NO_DOMAIN else buckets[d]
            while placed < limit and not self.stop() and (i := self._emptiest(c, nodes, dead, starts[d], finer)) is not None:
                self.place(c, nodes[i])
                placed += 1
                starts[d] = i + int(bool(finer))
                if d != NO_DOMAIN:
                    heapq.heappush(heap, (counts[d], d))
                    break
        return placed

    def _emptiest(self, c: int, nodes: list[int], dead: set[int], start: int, finer: list[int]) -> int | None:
        """The index in `nodes` of the open node whose domains of the `finer` spreads hold the fewest counted pods,
        the first from `start` among equals (without finer spreads: the first open one)."""
        if not finer:
            return next(self._open(c, nodes, dead, start), None)
        floor = sum(self.spread_counts[i].minimum() for i in finer)  # no node can hold fewer
        best: tuple[int, int] | None = None  # (load, index)
        for i in self._open(c, nodes, dead, start):
            load = sum(self._count_at(f, nodes[i]) for f in finer)
            if best is None or load < best[0]:
                best = (load, i)
            if load <= floor:
                break
        return None if best is None else best[1]

    def _count_at(self, i: int, n: int) -> int:
        """The pods spread `i` counts in node n's domain (0 outside its eligible domains)."""
        d = self.spread_node_domain[i].get(n)
        return 0 if d is None else self.spread_counts[i][d]


def _pinned_ranks(problem: Problem) -> np.ndarray | None:
    """Per node, the lowest rank of a class whose only candidate it is (None: no such class; +inf where none)."""
    pinned = [(cls.candidates[0], cls.rank) for cls in problem.classes if len(cls.candidates) == 1 and cls.count]
    if not pinned:
        return None
    low = np.full(len(problem.free), np.inf)
    for n, rank in pinned:
        low[n] = min(low[n], rank)
    return low


def members_that_fit(state: GreedyState, problem: Problem, gang) -> int:
    """How many pending members of `gang` one at a time would place in `state` (in its best region, for a gang
    with topology levels), gang or not; `state` is left as it was."""
    return max(topology.fit_by_region(state, problem, gang, topology.regions(problem, gang, state, enough=1)),
               default=0)


def replay(problem: Problem, placed: dict[tuple[int, int], int]) -> GreedyState:
    """A plan's placements (class, node) -> pods as a placement state, to ask what stops one more pod."""
    state = GreedyState(problem)
    for (c, n), k in sorted(placed.items()):
        for _ in range(k):
            state.place(c, n)
    return state


def place_gang(state: GreedyState, problem: Problem, gang, outer: topology.Region = ()) -> bool:
    """All of the gang or none: the first region (engine.solve.topology.regions) that takes it whole, inside `outer`;
    whether it started."""
    for region in topology.regions(problem, gang, state, outer=outer):
        mark = len(state.log)
        if topology.fill_gang(state, problem, gang, region) >= gang.need:
            return True
        state.undo_to(mark)
    return False


def place_set(state: GreedyState, problem: Problem, gang_set) -> None:
    """At least `need` of the set's gangs, each whole, in the first domain where enough of them start; or none."""
    for region in topology.set_regions(problem, gang_set):
        mark = len(state.log)
        started = sum(place_gang(state, problem, problem.gangs[g], region) for g in gang_set.gangs)
        if started >= gang_set.need:
            return
        state.undo_to(mark)


def unit_of(problem: Problem, g: int) -> tuple[str, int]:
    """What gang g is placed as: its set, when it starts with one, else itself."""
    set_index = problem.gangs[g].in_set
    return ("gang", g) if set_index is None else ("set", set_index)


def _sizes(problem: Problem) -> list[float]:
    """Each class's pod as a share of the largest free node, summed over resources (first-fit order)."""
    biggest = [max(column) for column in zip(*problem.free)] or [0] * len(problem.resources)
    return [sum(d / b for d, b in zip(cls.demand, biggest) if b > 0) for cls in problem.classes]


def requeue(units: Iterable[Unit], attempt: Callable[[Unit], tuple[int, bool]], stop: Stop) -> None:
    """Each unit in order (a pod, a class, a gang: `attempt` places what it can of it and says how many pods
    landed and whether the unit still waits — some node blocked it only for now); then the waiting ones
    again, in order, each once pods have landed since it last failed, until a pass lands none. So
    kube-scheduler's queue moves an unschedulable pod back when a pod is added: a pod whose support comes
    later in the queue, or which would tip another pod's spread until the counts even out, is placed once
    they have, never left out of a plan it fits as it stands. Ends when `stop()` says the time is up."""
    landed = 0
    waiting: list[tuple[Unit, int]] = [(unit, -1) for unit in units]  # (unit, pods landed when it last failed)
    while any(seen < landed for _, seen in waiting) and not stop():
        retry, waiting = waiting, []
        for unit, seen in retry:
            if seen == landed or stop():
                waiting.append((unit, seen))
                continue
            placed, waits = attempt(unit)
            landed += placed
            if waits:
                waiting.append((unit, landed))


def attempt_gang(state: GreedyState, problem: Problem, gang) -> tuple[int, bool]:
    """`place_gang` as a `requeue` attempt (or `place_set`, for a gang that starts with a set): pods placed, and
    whether a gang that did not start waits."""
    mark = len(state.log)
    if gang.in_set is None:
        place_gang(state, problem, gang)
        classes = gang.classes
    else:
        gang_set = problem.gang_sets[gang.in_set]
        place_set(state, problem, gang_set)
        classes = tuple(c for g in gang_set.gangs for c in problem.gangs[g].classes)
    placed = len(state.log) - mark
    return placed, not placed and any(state.waits(m) for m in classes)


def _shuffled(problem: Problem, units: list[tuple[int, int | None]],
              rng: random.Random) -> list[tuple[int, int | None]]:
    """The units a pod each (a gang stays whole), in a random order within each rank: pods of one class apart, as a
    stream of arrivals would bring them (taken a class at a time, alike pods land side by side)."""
    pods: list[tuple[int, int | None]] = [(c, n) for c, n in units if problem.classes[c].gang is not None]
    pods += [(c, 1) for c, _ in units if problem.classes[c].gang is None for _ in range(problem.classes[c].count)]
    draws = [rng.random() for _ in pods]
    return [pods[i] for i in sorted(range(len(pods)), key=lambda i: (-problem.classes[pods[i][0]].rank, draws[i]))]


def greedy(problem: Problem, largest_first: bool = True, stop: Stop | None = None,
           shuffle: int | None = None) -> dict[tuple[int, int], int]:
    """A feasible placement (every hard constraint holds), good but not optimal.

    Within a rank, largest pods first packs tightly (first-fit decreasing); smallest first places more
    pods when the batch does not fit. The solver tries both. With `shuffle` (a seed), the pods of a rank go one by
    one in a random order instead (`_shuffled`: the further orders of a problem with marginal scores, whose worth
    depends on which pods come first). A class (or gang) that some node blocked only
    for now is tried again once pods have landed (`requeue`). Once `stop()` says the time is up it returns
    what it has placed so far (a gang it was filling is taken back whole), which is still feasible.
    """
    state = GreedyState(problem, stop)
    sign = -1 if largest_first else 1
    size = _sizes(problem)
    order = sorted(range(len(problem.classes)), key=lambda c: (-problem.classes[c].rank, sign * size[c]))
    units: list[tuple[int, int | None]] = []  # (class, pods it places: None for all of them, or a gang)
    gangs: set[tuple[str, int]] = set()
    for c in order:  # a gang (or a set of gangs) once, at its first class
        gang = problem.classes[c].gang
        if gang is None and not problem.classes[c].count:
            continue  # nothing to place (the other classes of a problem asking about a few, as a gang's fit alone)
        unit = None if gang is None else unit_of(problem, gang)
        if unit is None or unit not in gangs:
            units.append((c, None))
        if unit is not None:
            gangs.add(unit)
    if shuffle is not None:
        units = _shuffled(problem, units, random.Random(shuffle))

    def attempt(unit: tuple[int, int | None]) -> tuple[int, bool]:
        c, pods = unit
        cls = problem.classes[c]
        if cls.gang is not None:
            return attempt_gang(state, problem, problem.gangs[cls.gang])
        left = cls.count - state.placed_count[c]
        want = left if pods is None else min(pods, left)
        placed = state.fill(c, want)
        return placed, placed < want and state.waits(c)

    requeue(units, attempt, state.stop)
    out: dict[tuple[int, int], int] = defaultdict(int)
    for c, n in state.log:
        out[(c, n)] += 1
    return dict(out)
