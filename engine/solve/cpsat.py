"""The CP-SAT model over pod classes: integer y[class, node] = pods of the class placed on the node."""

from __future__ import annotations

import importlib.util
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .problem import NO_DOMAIN, SHARE_SCALE, GangRow, Problem
from .topology import span_weights

if TYPE_CHECKING:
    from ortools.sat.python.cp_model import IntVar, LinearExpr


def _lazy(name: str) -> ModuleType:
    """Import `name` on first attribute use: ortools (and the pandas it imports) takes ~0.5 s to load, and most
    batches are settled by the starting plans without ever building a CP-SAT model."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cp_model: Any = _lazy("ortools.sat.python.cp_model")

# CP-SAT's own bound on num_workers (kMaxReasonableParallelism in ortools/sat/parameters_validation.cc, 0 meaning
# "every core"): above it CP-SAT refuses the parameters and solves nothing (MODEL_INVALID)
MAX_WORKERS = 10_000


@dataclass(slots=True)
class TierResult:
    """One CP-SAT run: did it find a plan (`found`), was it proven best (`proven`), the plan, its
    objective value and CP-SAT's bound on it; `infeasible` would mean the model is wrong (the greedy
    hint is always feasible); `refused` is why CP-SAT would not solve at all (its parameters or model invalid)."""

    found: bool
    proven: bool = False
    infeasible: bool = False
    placed: dict[tuple[int, int], int] = field(default_factory=dict)
    value: int = 0
    bound: int = 0
    refused: str = ""


class ClassModel:
    """Builds the model once; `solve_tier` then optimises tier 1 (placement), fairness, the gangs' topology or tier 2
    (preferences), each with the ones before it fixed."""

    def __init__(self, problem: Problem):
        self.p = problem
        self.m = cp_model.CpModel()
        self.y: dict[tuple[int, int], IntVar] = {}
        self.ub: dict[int, int] = {}
        self.placed: list[LinearExpr | int] = []  # per class: its pods placed (0: it has no variable)
        self._presence: dict[tuple[int, int, int], IntVar | int] = {}
        self._by_domain: dict[tuple[int, int], dict[int, list[IntVar]]] = {}
        self._rank: dict[int, IntVar] = {}
        self._seeds: dict[int, dict[tuple[int, int], IntVar]] = {}  # group -> (node, class) -> first pod
        self._seed_domains: dict[tuple, dict[int, list[IntVar]]] = {}
        self.soft_terms: list = []
        self.gang_on: list[IntVar] = []  # per gang: started
        self.spans: list[LinearExpr | int] = []  # the gangs' weighted spans over their preferred levels
        self._build()

    # -- variables -----------------------------------------------------------------------------
    def _upper(self, c: int, n: int) -> int:
        cls = self.p.classes[c]
        ub = cls.count if cls.max_per_node is None else min(cls.count, cls.max_per_node)
        for f, d in zip(self.p.free[n], cls.demand):
            if d > 0:
                ub = min(ub, f // d)
        return ub

    def in_domain(self, partition: int, c: int) -> dict[int, list[IntVar]]:
        """Domain -> the y variables of class c on that domain's nodes (built once per partition and class)."""
        key = (partition, c)
        if key not in self._by_domain:
            part = self.p.partitions[partition]
            out: dict[int, list[IntVar]] = defaultdict(list)
            for n in self.p.classes[c].candidates:
                if (c, n) in self.y and part[n] != NO_DOMAIN:
                    out[part[n]].append(self.y[(c, n)])
            self._by_domain[key] = out
        return self._by_domain[key]

    def any_placed(self, ys: list[IntVar], name: str, exact: bool = True) -> IntVar:
        """A boolean that is 1 if any of `ys` is positive; with `exact`, also 0 if all are zero."""
        b = self.m.new_bool_var(name)
        for v in ys:
            self.m.add(v <= self.ub[v.index] * b)
        if exact:
            self.m.add(sum(ys) >= b)
        return b

    def presence(self, partition: int, c: int, d: int) -> IntVar | int:
        """A boolean equal to 'class c has a pod in domain d of the partition' (0 if it cannot)."""
        key = (partition, c, d)
        if key not in self._presence:
            ys = self.in_domain(partition, c).get(d)
            self._presence[key] = self.any_placed(ys, f"in_{partition}_{c}_{d}") if ys else 0
        return self._presence[key]

    def _domains_of(self, partition: int, c: int) -> set[int]:
        return set(self.in_domain(partition, c))

    # -- constraints ---------------------------------------------------------------------------
    def _build(self) -> None:
        p, m = self.p, self.m
        by_node: dict[int, list[tuple[int, IntVar]]] = defaultdict(list)
        for c, cls in enumerate(p.classes):
            row = []
            for n in cls.candidates:
                ub = self._upper(c, n)
                if ub <= 0:
                    continue
                v = m.new_int_var(0, ub, f"y_{c}_{n}")
                self.y[(c, n)] = v
                self.ub[v.index] = ub
                by_node[n].append((c, v))
                row.append(v)
            total = sum(row) if row else 0
            self.placed.append(total)
            if row:
                m.add(total <= cls.count)
        for n, items in by_node.items():
            for r, cap in enumerate(p.free[n]):
                terms = [(p.classes[c].demand[r], v) for c, v in items if p.classes[c].demand[r] > 0]
                if sum(d * self.ub[v.index] for d, v in terms) > cap:
                    m.add(sum(d * v for d, v in terms) <= cap)
        for group in p.exclusive:
            members = set(group)
            for items in by_node.values():
                vs = [v for c, v in items if c in members]
                if len(vs) > 1 or (vs and self.ub[vs[0].index] > 1):
                    m.add(sum(vs) <= 1)
        for gang in p.gangs:
            self._gang(gang)
        for gang_set in p.gang_sets:
            self._gang_set(gang_set)
        for sep in p.separations:
            self._separation(sep)
        for coloc in p.colocations:
            self._colocation(coloc)
        for seeds in self._seeds.values():
            if len(seeds) > 1:
                m.add(sum(seeds.values()) <= 1)
        for spread in p.spreads:
            self._spread(spread)
        for limit in p.limits:
            self._limit(limit)
        for budget in p.budgets:
            self._budget(budget)
        self.shortfalls = [keep.weight * self._keep(keep) for keep in p.keeps]
        self.shares = [share.weight * self._share(share) for share in p.shares]
        for classes, cost in p.openings:
            self._opening(classes, cost)
        for c, cls in enumerate(p.classes):
            for n, score in zip(cls.candidates, cls.scores):
                if score and (c, n) in self.y:
                    self.soft_terms.append(score * self.y[(c, n)])

    def _gang(self, gang) -> None:
        """All of the gang or none, in its topology: one domain of the required level, at least N per domain of a
        level, and its spans over the preferred levels for the topology tier."""
        on = self.m.new_bool_var("gang")
        self.gang_on.append(on)
        self.m.add(sum(self.placed[c] for c in gang.classes) >= gang.need * on)
        for c in gang.classes:
            self.m.add(self.placed[c] <= self.p.classes[c].count * on)
        if gang.partition is not None:
            self._gang_within(gang)
        if gang.least is not None:
            self._least_per_domain(gang)
        self.spans.extend(self._spans(gang))

    def _gang_set(self, gang_set) -> None:
        """At least `need` of the set's gangs start, or none; all of their members in one domain."""
        on = self.m.new_bool_var("gang_set")
        self.m.add(sum(self.gang_on[g] for g in gang_set.gangs) >= gang_set.need * on)
        for g in gang_set.gangs:
            self.m.add(self.gang_on[g] <= on)
        if gang_set.partition is not None:
            classes = tuple(c for g in gang_set.gangs for c in self.p.gangs[g].classes)
            self._gang_within(GangRow(classes, 0, gang_set.partition, gang_set.domains))

    def _gang_within(self, gang) -> None:
        """Every member in one domain: one chosen domain per gang, members only on its nodes."""
        chosen: dict[int, IntVar] = {}
        for c in gang.classes:
            for d, ys in self.in_domain(gang.partition, c).items():
                if gang.domains is not None and d not in gang.domains:
                    for v in ys:
                        self.m.add(v == 0)
                    continue
                if d not in chosen:
                    chosen[d] = self.m.new_bool_var(f"gang_in_{d}")
                for v in ys:
                    self.m.add(v <= self.ub[v.index] * chosen[d])
            part = self.p.partitions[gang.partition]
            for n in self.p.classes[c].candidates:
                if part[n] == NO_DOMAIN and (c, n) in self.y:
                    self.m.add(self.y[(c, n)] == 0)
        if len(chosen) > 1:
            self.m.add(sum(chosen.values()) <= 1)

    def _gang_in(self, partition: int, gang) -> dict[int, list[IntVar]]:
        """Domain -> the y variables of every member class of the gang on that domain's nodes."""
        out: dict[int, list[IntVar]] = defaultdict(list)
        for c in gang.classes:
            for d, ys in self.in_domain(partition, c).items():
                out[d].extend(ys)
        return out

    def _least_per_domain(self, gang) -> None:
        """A domain holding a member holds at least `count` (bound members there included); a node in no domain
        of the level takes none."""
        least = gang.least
        for d, ys in self._gang_in(least.partition, gang).items():
            short = least.count - least.bound_in(d)
            if short > 0:
                self.m.add(sum(ys) >= short * self.any_placed(ys, f"least_{d}"))
        part = self.p.partitions[least.partition]
        for c in gang.classes:
            for n in self.p.classes[c].candidates:
                if part[n] == NO_DOMAIN and (c, n) in self.y:
                    self.m.add(self.y[(c, n)] == 0)

    def _spans(self, gang) -> list[LinearExpr | int]:
        """Per preferred level, its weight times the new domains the gang occupies (engine.solve.topology.span_cost
        counts the same)."""
        out = []
        for level, w in zip(gang.prefer, span_weights(self.p, gang)):
            used = [self.any_placed(ys, f"span_{level.partition}_{d}", exact=False)
                    for d, ys in self._gang_in(level.partition, gang).items() if d not in level.held]
            if used:
                out.append(w * sum(used))
        return out

    def _separation(self, s) -> None:
        m = self.m
        others = [o for o in s.others if o != s.subject]
        self_too = s.subject in s.others
        for d in self._domains_of(s.partition, s.subject):
            a_in = self.presence(s.partition, s.subject, d)
            if isinstance(a_in, int):
                continue
            if self_too:
                ys = self.in_domain(s.partition, s.subject)[d]
                if s.weight is None:
                    if len(ys) > 1 or self.ub[ys[0].index] > 1:
                        m.add(sum(ys) <= 1)
                else:
                    excess = m.new_int_var(0, self.p.classes[s.subject].count, "excess")
                    m.add(excess >= sum(ys) - 1)
                    self.soft_terms.append(-s.weight * excess)
            present = [x for x in (self.presence(s.partition, o, d) for o in others) if not isinstance(x, int)]
            if not present:
                continue
            if s.weight is None:
                for x in present:
                    m.add(a_in + x <= 1)
            else:
                both = m.new_bool_var("both")
                for x in present:
                    m.add(both >= a_in + x - 1)
                self.soft_terms.append(-s.weight * both)

    def rank(self, c: int) -> IntVar:
        """Class c's position in an order in which every supported pod comes after its support.

        One rank per class (not per domain) also rules out cycles across topology keys (a follows b
        per zone while b follows a per node), at the price of forbidding opposite orders in two domains.
        """
        if c not in self._rank:
            self._rank[c] = self.m.new_int_var(1, len(self.p.classes), f"rank_{c}")
        return self._rank[c]

    def _seed_in(self, s, d: int) -> list[IntVar]:
        """'The series' first pod is class x's, on node n' for the seeders x and nodes n of domain d.

        One first pod per seed group in all; per node rather than per domain, so that a pod with several
        affinity terms opens its zone and its host at once.
        """
        key = (s.seed_group, s.partition, s.seeders)
        if key not in self._seed_domains:
            seeds = self._seeds.setdefault(s.seed_group, {})
            part = self.p.partitions[s.partition]
            by_domain: dict[int, list[IntVar]] = defaultdict(list)
            for x in s.seeders:
                for n in self.p.classes[x].candidates:
                    if (x, n) not in self.y:
                        continue
                    if (n, x) not in seeds:
                        seeds[(n, x)] = b = self.m.new_bool_var(f"seed_{s.seed_group}_{n}_{x}")
                        self.m.add(b <= self.y[(x, n)])
                    if part[n] != NO_DOMAIN:
                        by_domain[part[n]].append(seeds[(n, x)])
            self._seed_domains[key] = by_domain
        return self._seed_domains[key].get(d, [])

    def _colocation(self, s) -> None:
        m = self.m
        domains = set().union(*(self._domains_of(s.partition, a) for a in s.carriers))
        for d in domains:
            if s.weight is not None:
                a_in = self.presence(s.partition, s.carriers[0], d)
                if isinstance(a_in, int):
                    continue
                if d in s.supported:
                    self.soft_terms.append(s.weight * a_in)
                    continue
                support = [x for x in (self.presence(s.partition, o, d) for o in s.supporters) if not isinstance(x, int)]
                if support:
                    bonus = m.new_bool_var("together")
                    m.add(bonus <= a_in)
                    m.add(bonus <= sum(support))
                    self.soft_terms.append(s.weight * bonus)
                continue
            if d in s.supported:
                continue
            seed = self._seed_in(s, d) if s.seeders else []
            for a in s.carriers:
                a_in = self.presence(s.partition, a, d)
                if isinstance(a_in, int):
                    continue
                options = []
                for o in s.supporters:
                    x = self.presence(s.partition, o, d) if o != a else 0
                    if isinstance(x, int):
                        continue
                    if o in s.chained:
                        earlier = m.new_bool_var("earlier")
                        m.add(earlier <= x)
                        m.add(self.rank(o) < self.rank(a)).only_enforce_if(earlier)
                        options.append(earlier)
                    else:
                        options.append(x)
                options.extend(seed)  # after the series' first pod, any carrier may join it
                m.add(a_in <= sum(options)) if options else m.add(a_in == 0)

    def _spread(self, s) -> None:
        m = self.m
        counted = set(s.counted)
        counts = {}
        for d, nodes in s.domain_nodes.items():
            expr = [self.y[(c, n)] for n in nodes for c in counted if (c, n) in self.y]
            counts[d] = s.existing.get(d, 0) + sum(expr) if expr else s.existing.get(d, 0)
        total = sum(self.p.classes[c].count for c in counted) + sum(s.existing.values())
        low = m.new_int_var(0, total, "spread_min")
        if len(counts) < s.min_domains:
            m.add(low == 0)
        else:
            for expr in counts.values():
                m.add(low <= expr)
        if s.weight is not None:
            high = m.new_int_var(0, total, "spread_max")
            for expr in counts.values():
                m.add(high >= expr)
            self.soft_terms.append(-s.weight * (high - low))
            return
        a_nodes = set(self.p.classes[s.subject].candidates)
        for d, nodes in s.domain_nodes.items():
            ys = [self.y[(s.subject, n)] for n in nodes if n in a_nodes and (s.subject, n) in self.y]
            if not ys:
                continue
            a_in = self.any_placed(ys, "spread_in", exact=False)
            m.add(counts[d] - low <= s.max_skew).only_enforce_if(a_in)

    def _opening(self, classes: tuple[int, ...], cost: int) -> None:
        """Pack (cost > 0) or spread (cost < 0): each empty node these classes start using counts once."""
        for n in self.p.empty:
            ys = [self.y[(c, n)] for c in classes if (c, n) in self.y]
            if not ys:
                continue
            # a cost only needs 'used' forced up; a reward also needs it forced down
            used = self.any_placed(ys, f"opened_{n}", exact=cost < 0)
            self.soft_terms.append(-cost * used)

    def _budget(self, b) -> None:
        """Σ_g max(0, what group g uses − its own) ≤ most; a plain sum when no group has anything of its own."""
        used: dict[int, list] = defaultdict(list)
        for k, (c, w) in enumerate(zip(b.classes, b.weights)):
            if w and not isinstance(self.placed[c], int):
                used[b.group_of(k)].append(w * self.placed[c])
        if not any(b.own_of(g) for g in used):
            if used:
                self.m.add(sum(sum(terms) for terms in used.values()) <= b.most)
            return
        drawn = []
        for g, terms in used.items():
            beyond = self.m.new_int_var(0, max(0, b.most), f"borrow_{g}")
            self.m.add(beyond >= sum(terms) - b.own_of(g))
            drawn.append(beyond)
        self.m.add(sum(drawn) <= b.most)

    def _keep(self, keep) -> IntVar | int:
        """How many pods short of `keep.least` the placement keeps of its classes (its tier-1 cost per pod)."""
        kept = [self.placed[c] for c in keep.classes]
        short = self.m.new_int_var(0, keep.least, f"short_{id(keep)}")
        self.m.add(short >= keep.least - sum(kept))
        return short

    def _share(self, share) -> IntVar:
        """The share's square: divisor · share ≥ 1000 · each term's use."""
        counts = {c: self.p.classes[c].count for c in share.classes}
        top = max(1, share.value(counts))
        s = self.m.new_int_var(0, top, "share")
        for base, per, divisor in share.terms:
            added = [w * self.placed[c] for c, w in zip(share.classes, per) if w and not isinstance(self.placed[c], int)]
            self.m.add(divisor * s >= SHARE_SCALE * (base + sum(added)))
        square = self.m.new_int_var(0, top * top, "share_sq")
        self.m.add_multiplication_equality(square, [s, s])
        return square

    def _limit(self, s) -> None:
        for d in self._domains_of(s.partition, s.subject):
            a_in = self.presence(s.partition, s.subject, d)
            if isinstance(a_in, int):
                continue
            ys = [v for o in s.counted for v in self.in_domain(s.partition, o).get(d, [])]
            if ys:
                self.m.add(s.existing.get(d, 0) + sum(ys) <= s.most).only_enforce_if(a_in)

    # -- solving -------------------------------------------------------------------------------
    def tier1(self) -> LinearExpr | int:
        placed = sum(self.p.classes[c].weight * x for c, x in enumerate(self.placed) if not isinstance(x, int))
        return placed - sum(self.shortfalls) if self.shortfalls else placed

    def fairness(self) -> LinearExpr | int:
        """The fairness tier, to maximise: minus Σ weight · share²."""
        return -sum(self.shares) if self.shares else 0

    def topology(self) -> LinearExpr | int:
        """The topology tier, to maximise: minus the gangs' weighted spans over their preferred levels."""
        return -sum(self.spans) if self.spans else 0

    def tier2(self) -> LinearExpr | int:
        return sum(self.soft_terms) if self.soft_terms else 0

    def hint(self, placed: dict[tuple[int, int], int]) -> None:
        self.m.clear_hints()
        for key, v in self.y.items():
            self.m.add_hint(v, placed.get(key, 0))

    def solve_tier(
        self,
        objective,
        time_limit: float,
        workers: int,
        seed: int,
        on_solution: Callable[[float, float], None] | None = None,
    ) -> TierResult:
        """Maximise `objective` within the time limit."""
        self.m.maximize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(0.05, time_limit)
        solver.parameters.num_workers = max(1, workers)
        solver.parameters.random_seed = seed
        callback = _progress(on_solution) if on_solution else None
        status = solver.solve(self.m, callback)
        if status == cp_model.MODEL_INVALID:
            return TierResult(False, refused=solver.solution_info() or "the model or its parameters are invalid")
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return TierResult(False, infeasible=status == cp_model.INFEASIBLE)
        placed = {k: int(solver.value(v)) for k, v in self.y.items()}
        placed = {k: v for k, v in placed.items() if v}
        return TierResult(True, status == cp_model.OPTIMAL, False, placed, round(solver.objective_value),
                          round(solver.best_objective_bound))

    def fix_at_least(self, objective, value: int) -> None:
        self.m.add(objective >= value)

    def keep_gangs(self, placed: dict[tuple[int, int], int]) -> None:
        """Gangs started in `placed` stay started: preferences never swap which of two equal gangs starts
        (the older PodGroup, placed first by the starting plans, keeps its place, as Coscheduling's queue)."""
        counts: dict[int, int] = defaultdict(int)
        for (c, _), k in placed.items():
            counts[c] += k
        for on, gang in zip(self.gang_on, self.p.gangs):
            if sum(counts[c] for c in gang.classes) >= gang.need:
                self.m.add(on == 1)


def _progress(report: Callable[[float, float], None]):
    """A solution callback reporting (objective, bound); its class is made here, when ortools is loaded anyway."""

    class Progress(cp_model.CpSolverSolutionCallback):
        def on_solution_callback(self) -> None:
            report(self.objective_value, self.best_objective_bound)

    return Progress()
