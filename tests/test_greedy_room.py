"""The starting plans' vectorised room check (issue 30): a fill drops, in one step, the candidates without room for
one more pod of its class (`GreedyState.with_room`), exactly the nodes its scan would have found dead on the way,
so the plans are the same with it as without it."""
from __future__ import annotations

import importlib
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings

from engine.planning.compile import compile_cluster
from engine.reading.load import build_cluster
from engine.solve.problem import PodClass, Problem
from strategies import clusters, mixed_apps

G = importlib.import_module("engine.solve.greedy")  # the package's `greedy` is the function


def _problem(docs: list[dict]) -> Problem:
    return compile_cluster(build_cluster([("test", d) for d in docs])).problem


def _starts(problem: Problem, vectorised: bool) -> tuple[dict, dict]:
    with patch.object(G, "ROOM_SCAN_MIN", 0 if vectorised else 10**9):
        return G.greedy(problem), G.greedy(problem, largest_first=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(max_nodes=8, max_pods=12))
def test_greedy_places_alike_with_and_without_the_room_step(docs: list[dict]) -> None:
    problem = _problem(docs)
    assert _starts(problem, True) == _starts(problem, False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mixed_apps())
def test_greedy_places_alike_on_mixed_apps(docs: list[dict]) -> None:
    problem = _problem(docs)
    assert _starts(problem, True) == _starts(problem, False)


def _toy(free: list[tuple[int, ...]], demands: list[tuple[int, ...]]) -> Problem:
    problem = Problem(resources=("cpu", "memory"), free=free)
    nodes = tuple(range(len(free)))
    problem.classes = [PodClass(count=3, demand=d, weight=1, candidates=nodes) for d in demands]
    return problem


def test_with_room_is_the_nodes_with_room_now_in_order_through_places_and_undo() -> None:
    problem = _toy([(4, 8), (1, 8), (4, 1), (2, 2), (0, 0)], [(2, 2), (1, 1)])
    state = G.GreedyState(problem)
    with patch.object(G, "ROOM_SCAN_MIN", 0):
        assert state.with_room(0, problem.classes[0].candidates) == [0, 3]
        mark = len(state.log)
        state.place(0, 3)
        assert state.with_room(0, problem.classes[0].candidates) == [0]
        assert state.with_room(1, problem.classes[1].candidates) == [0, 1, 2]
        state.undo_to(mark)
        assert state.with_room(0, problem.classes[0].candidates) == [0, 3]
        assert state.free[3] == [2, 2]


def test_with_room_keeps_every_node_below_the_threshold_or_for_amounts_not_integers() -> None:
    problem = _toy([(4, 8), (0, 0)], [(2, 2)])
    state = G.GreedyState(problem)
    assert state.with_room(0, (0, 1)) == [0, 1]  # two candidates: scanned one by one as before
    fractional = _toy([(4.5, 8), (0.5, 0)], [(2, 2)])
    with patch.object(G, "ROOM_SCAN_MIN", 0):
        assert G.GreedyState(fractional).with_room(0, (0, 1)) == [0, 1]
