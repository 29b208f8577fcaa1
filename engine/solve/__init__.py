"""Solve a placement problem within a hard time limit.

Starting plans first (two greedy orders and the one-at-a-time baseline, and shuffled orders when the problem
has marginal scores, soft points that depend on the pods placed before: engine.solve.problem.MarginalScores);
when they are provably best (every pod placed, preferences at their bound) CP-SAT never runs, nor when all that
is left to improve is marginal scores, which CP-SAT has no term for. Otherwise CP-SAT improves the best
start in two lexicographic tiers — tier 1 maximises pods placed (weighted by priority, gangs
all-or-nothing), tier 2, with tier 1 fixed, soft preferences — on the full model when it fits the time
left, else on neighbourhoods of bounded size, round after round while time is left. The best start is
always kept, so a plan exists whatever the time limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .bound import capacity_bound
from .cpsat import ClassModel, TierResult, cp_model
from .greedy import greedy
from .neighbourhood import model_size, per_pair, restrict, room_order
from .problem import Colocation, GangRow, Phases, PodClass, Problem, Separation, Solution, Spread, Status
from .sequential import sequential
from .topology import span_cost, span_floor

__all__ = ["Colocation", "GangRow", "PodClass", "Problem", "Separation", "Solution", "Spread", "Status", "load_solver",
           "solve"]

Progress = Callable[[str], None]

MODEL_VARS_PER_SECOND = 20_000  # CP-SAT model building in Python, measured on the benchmark machine
MAX_MODEL_VARS = 100_000  # memory: ~10 KiB per variable with its constraints (1.55 M variables took 13.8 GB)
MODEL_SHARE = 0.3  # of the time left, for building one model
MIN_ROUND_SECONDS = 0.2  # a CP-SAT round shorter than this rarely finds anything
TIER1_SHARE = 0.6  # of a round's time, for placement when preferences follow
BOUND_SECONDS, BOUND_SHARE = 0.25, 0.1  # the capacity bound's time: at most this, and this share of the time left


@dataclass(slots=True)
class _Plan:
    placed: dict[tuple[int, int], int]
    value: int  # tier 1
    soft: int  # tier 2
    origin: str
    unfair: int = 0  # between them: the tenants' squared shares (lower is fairer)…
    spans: int = 0  # …then the gangs' weighted spans over their preferred levels (lower is tighter)

    def beats(self, other: _Plan) -> bool:
        return (self.value, -self.unfair, -self.spans, self.soft) > (other.value, -other.unfair, -other.spans,
                                                                      other.soft)


class _Clock:
    def __init__(self, limit: float):
        self.start = time.perf_counter()
        self.limit = limit

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> float:
        return self.limit - self.elapsed()

    def up(self) -> bool:
        """The time limit has passed (the starting plans stop there and return what they have)."""
        return self.left() <= 0


def load_solver() -> None:
    """Load OR-tools now rather than in the first batch that needs CP-SAT (about 0.3-0.6 s): a long-running
    scheduler pays it once at start, while its lists are on their way, not in some pod's time to bind."""
    _ = cp_model.CpModel


def _plan(problem: Problem, placed: dict[tuple[int, int], int], origin: str) -> _Plan:
    spans = span_cost(problem, placed) if problem.has_levels() else 0
    return _Plan(placed, problem.value(placed), problem.soft_value(placed), origin, problem.unfairness(placed), spans)


class _Bound:
    """The tier-1 bound: every placeable pod, tightened once by what capacity allows (solve.bound) when a plan
    falls short of that, so that a batch that cannot fit is proven without further starts or CP-SAT."""

    def __init__(self, problem: Problem, clock: _Clock | None):
        self.p, self.clock = problem, clock
        self.value = problem.upper_bound()
        self.tightened = False

    def reached_by(self, plan: _Plan) -> bool:
        if plan.value < self.value and not self.tightened:
            self.tightened = True
            left = self.clock.left() if self.clock is not None else BOUND_SECONDS / BOUND_SHARE
            if not self.p.unchecked and left > 0:
                self.value = min(self.value, capacity_bound(self.p, min(BOUND_SECONDS, BOUND_SHARE * left)))
        return plan.value >= self.value


GREEDY_FLOOR_SECONDS = 0.25  # the first greedy runs this long even past the time limit: a cycle whose compile
# took its whole limit (a few pods retried on 5,000 nodes) still places what fits, rather than nothing, for ever


def starting_plan(problem: Problem, baseline: bool = False, clock: _Clock | None = None,
                  bound: _Bound | None = None) -> tuple[_Plan, int | None]:
    """The best of the greedy orders and the one-at-a-time baseline (run when the greedy left pods out that
    `bound` does not rule out, or when asked), and how many pods the baseline placed (None if it did not run).
    A further starting plan runs only if the time left could fit another run as long as the first greedy's
    (and the baseline always when asked for); each stops at the clock's limit with what it has placed (but a
    baseline asked for, a measurement, runs to its end, and the first greedy runs at least GREEDY_FLOOR_SECONDS):
    a plan is always returned, on time or nearly."""
    started = time.perf_counter()
    bound = bound or _Bound(problem, clock)
    stop = clock.up if clock is not None else None
    floor = started + GREEDY_FLOOR_SECONDS
    best = _plan(problem, greedy(problem, stop=None if clock is None else lambda: clock.up() and time.perf_counter() > floor),
                 "greedy")
    first = time.perf_counter() - started

    def late() -> bool:
        return clock is not None and clock.left() < first

    if (not bound.reached_by(best) or problem.has_soft_terms() or problem.has_levels() or problem.marginal) \
            and not late():
        other = _plan(problem, greedy(problem, largest_first=False, stop=stop), "greedy (smallest first)")
        best = other if other.beats(best) else best
    several = sum(c.count for c in problem.classes if c.candidates) > 1  # one pod has one order
    for k in range(problem.marginal.orders if problem.marginal is not None and several else 0):
        if late():
            break
        other = _plan(problem, greedy(problem, stop=stop, shuffle=k), f"greedy (shuffled order {k + 1})")
        best = other if other.beats(best) else best
    placed_by_baseline = None
    if (not bound.reached_by(best) and not late()) or baseline:
        one_by_one = _plan(problem, sequential(problem, None if baseline else stop), "one pod at a time")
        placed_by_baseline = sum(one_by_one.placed.values())
        best = one_by_one if one_by_one.beats(best) else best
    return best, placed_by_baseline


def _spans_settled(problem: Problem, plan: _Plan) -> bool:
    """No plan starting the same gangs spans fewer domains (or no gang prefers any level)."""
    return not problem.has_levels() or plan.spans <= span_floor(problem, plan.placed)


def _proven(problem: Problem, plan: _Plan, bound: int) -> bool:
    """Placement at its `bound` and the preferences at a bound no plan can pass (never while some class
    went unchecked: its pods were not shown to be unplaceable)."""
    if problem.unchecked or plan.value < bound or not problem.fairness_settled(plan.placed):
        return False
    if not _spans_settled(problem, plan) or problem.marginal is not None:
        return False
    if not problem.has_soft_terms():
        return True
    soft_bound = problem.soft_bound()
    return soft_bound is not None and plan.soft >= soft_bound


def _only_marginal_left(problem: Problem, plan: _Plan, bound: int) -> bool:
    """Placement, fairness and spans proven and no soft term CP-SAT could weigh: only the marginal scores could
    still improve, which the starting orders have judged and CP-SAT cannot."""
    return (not problem.unchecked and plan.value >= bound
            and problem.fairness_settled(plan.placed) and _spans_settled(problem, plan)
            and not problem.has_soft_terms())


def solve(
    problem: Problem,
    time_limit: float = 10.0,
    workers: int = 2,
    seed: int = 0,
    progress: Progress | None = None,
    baseline: bool = False,
    preference_limit: float | None = None,
) -> Solution:
    """The best plan found within `time_limit`; once a starting plan places every pod that can be placed, only
    preferences are left to improve, and they get at most `preference_limit` seconds more (None: the time left)."""
    say = progress or (lambda _msg: None)
    clock = _Clock(time_limit)
    tier1 = _Bound(problem, clock)
    best, by_baseline = starting_plan(problem, baseline, clock, tier1)
    tier1.reached_by(best)
    bound = tier1.value
    phases = Phases(start=clock.elapsed())
    if preference_limit is not None and best.value >= bound:
        clock.limit = min(clock.limit, clock.elapsed() + preference_limit)  # placement proven: preferences only
    pods = sum(c.count for c in problem.classes)
    say(f"placed {sum(best.placed.values())} of {pods} pods at once ({best.origin}), "
        f"at most {_placeable(problem)} possible")
    unchecked = len(problem.unchecked)
    if _proven(problem, best, bound):
        return _solution(best, Status.OPTIMAL, bound, clock, phases, best.origin, by_baseline)
    if problem.marginal is not None and _only_marginal_left(problem, best, bound):
        return _solution(best, Status.FEASIBLE, bound, clock, phases, f"{best.origin}, the best of the starting "
                         "orders by the marginal scores (CP-SAT has no term for them)", by_baseline)
    search = _Search(problem, best, bound, clock, phases, workers, seed, say)
    search.run()
    return _solution(search.best, search.status(), search.bound, clock, phases, search.strategy, by_baseline,
                     search.notes, unchecked)


def _placeable(problem: Problem) -> int:
    return sum(c.count for c in problem.classes if c.candidates)


def _solution(plan: _Plan, status: Status, bound: int, clock: _Clock, phases: Phases, strategy: str,
              by_baseline: int | None, notes: list[str] | None = None, unchecked: int = 0) -> Solution:
    if unchecked:
        strategy += f"; {unchecked} pod class(es) left unchecked: compile reached the time limit"
    return Solution(plan.placed, status, plan.value, plan.soft, bound, clock.elapsed(), notes or [], phases,
                    strategy, by_baseline)


class _Search:
    """CP-SAT rounds over the full model, or over moving neighbourhoods when the full one will not fit."""

    def __init__(self, problem: Problem, best: _Plan, bound: int, clock: _Clock, phases: Phases,
                 workers: int, seed: int, say: Progress):
        self.p, self.best, self.bound, self.clock, self.phases = problem, best, bound, clock, phases
        self.workers, self.seed, self.say = workers, seed, say
        self.soft = problem.has_soft_terms()
        self.placement_proven = best.value >= bound
        self.fairness_proven = problem.fairness_settled(best.placed)
        self.levels = problem.has_levels()
        self.topology_proven = _spans_settled(problem, best)
        self.preferences_proven = _proven(problem, best, bound)
        self.rounds = 0
        self.window: int | None = None
        self.notes: list[str] = []

    def _budget(self) -> float:
        """Model variables that can be built in the time left (and held in memory)."""
        return min(MAX_MODEL_VARS, MODEL_VARS_PER_SECOND * MODEL_SHARE * max(0.0, self.clock.left()))

    def run(self) -> None:
        if model_size(self.p) <= self._budget():
            self._round(self.p, full=True)
            return
        order = room_order(self.p)
        classes = max(1, len(self.p.classes))
        while self.clock.left() > MIN_ROUND_SECONDS and not self.preferences_proven:
            k = int((self._budget() / per_pair(self.p) - len(self.best.placed)) / classes)
            if k < 1:
                self.notes.append("the time limit leaves no room for a CP-SAT model; kept the starting plan")
                return
            self.window = k
            self._round(restrict(self.p, self.best.placed, k, self.rounds, order), full=False)
            self.rounds += 1
            if self.placement_proven and self.fairness_proven and self.topology_proven and not self.soft:
                return

    def _round(self, problem: Problem, full: bool) -> None:
        started = time.perf_counter()
        model = ClassModel(problem)
        self.phases.model += time.perf_counter() - started
        self.say(f"CP-SAT model: {len(model.y)} variables over {len(problem.classes)} pod classes"
                 + ("" if full else f" (neighbourhood {self.rounds + 1}: up to {self.window} extra nodes per class)"))
        tier1 = model.tier1()
        if not self.placement_proven:
            share = TIER1_SHARE if self.soft else 1.0
            result = self._search(model, tier1, self._slice(full) * share, "placement")
            self._take_tier1(result, full)
        model.fix_at_least(tier1, self.best.value)
        model.keep_gangs(self.best.placed)
        if not self.fairness_proven and self.clock.left() > 0.05:
            self._fairness(model, full)
        if self.levels and self.clock.left() > 0.05:
            self._topology(model, full)
        if self.soft and self.clock.left() > 0.05:
            model.fix_at_least(model.fairness(), -self.best.unfair)
            model.fix_at_least(model.topology(), -self.best.spans)
            result = self._search(model, model.tier2(), self._slice(full), "preferences")
            if result.found:
                candidate = _plan(self.p, result.placed, "CP-SAT")
                if candidate.beats(self.best):
                    self.best = candidate
                if full and result.proven and self.placement_proven:
                    self.preferences_proven = True

    def _fairness(self, model: ClassModel, full: bool) -> None:
        """With tier 1 fixed, the fairest split of what is placed between the tenants."""
        if self._tier(model, model.fairness(), full, "fairness"):
            self.fairness_proven = True

    def _topology(self, model: ClassModel, full: bool) -> None:
        """With placement and fairness fixed, the gangs' fewest domains over their preferred levels (the whole
        batch at once: one gang's rack choice can free another's)."""
        model.fix_at_least(model.fairness(), -self.best.unfair)
        self.topology_proven = _spans_settled(self.p, self.best)  # the best may be new
        if self.topology_proven:
            return
        if self._tier(model, model.topology(), full, "topology"):
            self.topology_proven = True

    def _tier(self, model: ClassModel, objective, full: bool, tier: str) -> bool:
        """One tier between placement and the preferences: its best plan taken when it beats the best so far;
        whether CP-SAT proved it on the full model."""
        share = TIER1_SHARE if self.soft else 1.0
        result = self._search(model, objective, self._slice(full) * share, tier)
        if not result.found:
            return False
        candidate = _plan(self.p, result.placed, "CP-SAT")
        if candidate.beats(self.best):
            self.best = candidate
        return full and result.proven

    def _slice(self, full: bool) -> float:
        left = max(0.05, self.clock.left())
        return left if full else max(MIN_ROUND_SECONDS, min(left, left / 2))

    def _search(self, model: ClassModel, objective, seconds: float, tier: str) -> TierResult:
        model.hint(self.best.placed)
        report = lambda v, b: self.say(f"{tier}: value {v:.0f}, bound {b:.0f}")  # noqa: E731
        started = time.perf_counter()
        result = model.solve_tier(objective, seconds, self.workers, self.seed, report)
        self.phases.solve += time.perf_counter() - started
        if result.infeasible:  # cannot happen with a correct model: the hint is feasible
            self.notes.append("CP-SAT reported a model infeasible; kept the best plan so far")
        refused = f"CP-SAT refused to solve ({result.refused}); kept the best plan so far"
        if result.refused and refused not in self.notes:  # said once, however many rounds it refuses
            self.notes.append(refused)
        return result

    def _take_tier1(self, result: TierResult, full: bool) -> None:
        if not result.found:
            return
        if full:
            self.bound = min(self.bound, result.value if result.proven else result.bound)
        candidate = _plan(self.p, result.placed, "CP-SAT")
        if candidate.value > self.best.value:
            self.best = candidate
        if self.best.value >= self.bound:
            self.placement_proven = True

    @property
    def strategy(self) -> str:
        """Where the plan came from, and what CP-SAT saw of the problem."""
        if not self.phases.model:
            return self.best.origin
        if self.window is None:
            return f"{self.best.origin}, CP-SAT on the full model"
        return (f"{self.best.origin}, CP-SAT on {self.rounds} neighbourhood(s) of the best plan, up to {self.window} "
                f"extra nodes per class (the full model would not fit the time limit)")

    def status(self) -> Status:
        if self.p.unchecked:
            return Status.FEASIBLE
        if self.placement_proven and self.fairness_proven and self.topology_proven and (
                not self.soft or self.preferences_proven) and self.p.marginal is None:
            return Status.OPTIMAL  # (marginal scores are never proven: CP-SAT has no term for them)
        return Status.FEASIBLE
