"""Marginal scores (engine.solve.problem.MarginalScores): soft points whose worth depends on the pods a plan placed
before (a node's fragmentation). The starting plans ask them pod by pod, try shuffled orders, judge every plan by
their value, and never call a plan optimal on them; gangs rolled back take their points back."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from engine.solve import solve
from engine.solve.greedy import GreedyState, greedy
from engine.solve.problem import GangRow, PodClass, Problem, Status


@dataclass
class Crowding:
    """A pod earns `alone` on an empty node and loses `crowd` for each pod the plan put there before it; a plan's
    value is the same summed in any order (so it must spread pods a static score would stack)."""

    classes: frozenset[int]
    alone: int = 10
    crowd: int = 20
    orders: int = 2
    asked: list[tuple[int, int]] = field(default_factory=list)

    def tracker(self) -> CrowdTracker:
        return CrowdTracker(self)

    def value(self, placed: dict[tuple[int, int], int]) -> int:
        per_node: Counter[int] = Counter()
        for (c, n), k in placed.items():
            if c in self.classes:
                per_node[n] += k
        return sum(self.alone * k - self.crowd * k * (k - 1) // 2 for k in per_node.values())


@dataclass
class CrowdTracker:
    scores: Crowding
    on: Counter[int] = field(default_factory=Counter)

    def points(self, c: int, n: int) -> int | None:
        self.scores.asked.append((c, n))
        return self.scores.alone - self.scores.crowd * self.on[n]

    def place(self, c: int, n: int) -> None:
        self.on[n] += 1

    def undo(self, c: int, n: int) -> None:
        self.on[n] -= 1


def problem(pods: int = 3, nodes: int = 3, scores: tuple[int, ...] = ()) -> Problem:
    cls = PodClass(count=pods, demand=(1,), weight=1, candidates=tuple(range(nodes)), scores=scores)
    return Problem(resources=("cpu",), free=[(10,)] * nodes, capacity=[(10,)] * nodes, classes=[cls])


def test_each_pod_is_scored_on_the_nodes_as_the_plan_left_them() -> None:
    """Static scores alone stack the three pods on the first node (first fit); asked pod by pod, the crowding
    sends each to an empty node."""
    assert greedy(problem()) == {(0, 0): 3}
    p = problem()
    p.marginal = Crowding(frozenset({0}))
    assert greedy(p) == {(0, 0): 1, (0, 1): 1, (0, 2): 1}


def test_static_scores_and_marginal_points_add_up() -> None:
    """Node 2's static 25 outweighs crowding once (10 − 20 + 25 > 10) but not twice (10 − 40 + 25 < 10)."""
    p = problem(pods=3, scores=(0, 0, 25))
    p.marginal = Crowding(frozenset({0}))
    assert greedy(p) == {(0, 2): 2, (0, 0): 1}


def test_a_plan_is_judged_by_the_marginal_value_and_never_called_optimal() -> None:
    p = problem()
    p.marginal = Crowding(frozenset({0}))
    solution = solve(p, time_limit=5, workers=1)
    assert solution.placed == {(0, 0): 1, (0, 1): 1, (0, 2): 1}
    assert solution.soft_value == 30  # three pods alone
    assert solution.status == Status.FEASIBLE
    assert "starting orders by the marginal scores" in solution.strategy
    assert p.soft_value({(0, 0): 3}) == 30 - 20 - 40


def test_the_shuffled_orders_are_tried_and_the_best_kept() -> None:
    """Two pods that may go anywhere and one that only node 0 takes: in the classes' own order (largest first or
    smallest, alike here) the two spread over nodes 0 and 1 and the third crowds node 0 (10 + 10 − 10); a shuffled
    order that places the pinned pod first leaves every pod alone (30), and that plan is kept."""
    free = [(4,)] * 3
    anywhere = PodClass(count=2, demand=(1,), weight=1, candidates=(0, 1, 2))
    pinned = PodClass(count=1, demand=(1,), weight=1, candidates=(0,))
    p = Problem(resources=("cpu",), free=free, capacity=free, classes=[anywhere, pinned])
    p.marginal = Crowding(frozenset({0, 1}), orders=0)
    assert p.soft_value(solve(p, time_limit=5, workers=1).placed) == 10
    p.marginal = Crowding(frozenset({0, 1}), orders=4)
    solution = solve(p, time_limit=5, workers=1)
    assert solution.soft_value == 30
    assert solution.placed == {(1, 0): 1, (0, 1): 1, (0, 2): 1}


def test_a_gang_taken_back_takes_its_points_back() -> None:
    """A gang of four on two nodes with room for three: it cannot start, and the tracker is left as it was."""
    gang = PodClass(count=4, demand=(1,), weight=1, candidates=(0, 1), gang=0)
    p = Problem(resources=("cpu",), free=[(2,), (1,)], capacity=[(2,), (1,)], classes=[gang],
                gangs=[GangRow((0,), 4)])
    p.marginal = Crowding(frozenset({0}))
    state = GreedyState(p)
    mark = len(state.log)
    state.place(0, 0)
    state.place(0, 1)
    assert state.marginal.on == Counter({0: 1, 1: 1})
    state.undo_to(mark)
    assert +state.marginal.on == Counter()
    assert greedy(p) == {}


def test_a_shuffled_order_takes_pods_one_by_one_within_ranks_and_gangs_whole() -> None:
    from random import Random

    from engine.solve.greedy import _shuffled
    classes = [PodClass(count=3, demand=(1,), weight=1, candidates=(0,), rank=1),
               PodClass(count=2, demand=(1,), weight=1, candidates=(0,), rank=0),
               PodClass(count=4, demand=(1,), weight=1, candidates=(0,), rank=1, gang=0)]
    p = Problem(resources=("cpu",), free=[(9,)], classes=classes, gangs=[GangRow((2,), 4)])
    orders = {tuple(_shuffled(p, [(0, None), (2, None), (1, None)], Random(seed))) for seed in range(20)}
    assert len(orders) > 1
    for order in orders:
        assert sorted(order[:4]) == [(0, 1), (0, 1), (0, 1), (2, None)]  # rank 1 first: a pod each, the gang whole
        assert order[4:] == ((1, 1), (1, 1))


def test_a_plan_cp_sat_completes_is_not_optimal_on_marginal_scores() -> None:
    """Both greedy orders and the one-at-a-time baseline place three of these pods; CP-SAT places four, which
    proves placement (every pod that can be), but not the marginal scores."""
    free = [(2,), (3,), (2,)]
    classes = [PodClass(count=k, demand=(d,), weight=1, candidates=c)
               for k, d, c in ((1, 2, (0, 1)), (1, 1, (0, 1, 2)), (2, 3, (0, 1, 2)), (2, 2, (0, 1, 2)))]
    p = Problem(resources=("cpu",), free=free, capacity=free, classes=classes)
    p.marginal = Crowding(frozenset(range(4)), orders=0)
    solution = solve(p, time_limit=5, workers=1)
    assert solution.placed_value == solution.bound == 4
    assert solution.strategy.startswith("CP-SAT")
    assert solution.status == Status.FEASIBLE
