"""The capacity bound (engine.solve.bound): never below what a valid plan places (checked against the exhaustive
oracle on random clusters), and tight enough that a batch which cannot fit is proven best by its starting
plan, without CP-SAT searching to the time limit."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from engine.planning.compile import compile_cluster
from engine.reading.load import build_cluster
from engine.solve import Status, solve
from engine.solve.bound import capacity_bound, class_caps
from oracle import best_plan
from strategies import clusters
from testkit.manifests import POD_GROUP_LABEL, anti, node, pod, podgroup, term


def compiled_of(docs: list[dict]):
    return compile_cluster(build_cluster([("test", d) for d in docs]))


def plan_value(compiled, assignments: dict[str, str]) -> int:
    """Tier 1 of a plan given pod by pod: the weight of each placed pod's class."""
    weight = {pod.key: compiled.problem.classes[c].weight for c, info in enumerate(compiled.classes) for pod in info.pods}
    return sum(weight[key] for key in assignments if key in weight)


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=3, max_pods=5))
def test_no_valid_plan_places_more_than_the_bound(docs):
    compiled = compiled_of(docs)
    _, assignments = best_plan(docs)
    assert plan_value(compiled, assignments) <= capacity_bound(compiled.problem, 1.0)


def two_gangs_on_room_for_four() -> list[dict]:
    """Coscheduling's case: two gangs of 3 × 1 cpu, two 2-cpu nodes. One gang starts; the plain bound says 6."""
    docs = [node("n0", cpu="2"), node("n1", cpu="2"), podgroup("a", 3), podgroup("b", 3)]
    return docs + [pod(f"{g}{i}", cpu="1", labels={POD_GROUP_LABEL: g}) for g in "ab" for i in range(3)]


def test_gangs_are_all_or_nothing_in_the_bound():
    problem = compiled_of(two_gangs_on_room_for_four()).problem
    assert problem.upper_bound() == 6
    assert capacity_bound(problem, 1.0) == 3


def test_a_batch_that_cannot_fit_is_proven_by_its_starting_plan():
    solution = solve(compiled_of(two_gangs_on_room_for_four()).problem, time_limit=5.0)
    assert sum(solution.placed.values()) == 3 and solution.bound == 3
    assert solution.status == Status.OPTIMAL
    assert solution.phases.model == 0.0 and solution.strategy == "greedy"  # no CP-SAT model was built


def test_a_class_takes_no_more_than_one_pod_per_node_of_a_hard_self_anti_affinity():
    docs = [node(f"n{i}") for i in range(2)]
    docs += [pod(f"w{i}", labels={"app": "w"}, affinity=anti(term({"app": "w"}))) for i in range(3)]
    problem = compiled_of(docs).problem
    assert class_caps(problem) == [2]
    assert capacity_bound(problem, 1.0) == 2


def test_classes_confined_to_a_node_share_its_room():
    # four 1-cpu pods pinned to a 2-cpu node (two classes), and two free pods on a 4-cpu node: at most 2 + 2
    docs = [node("small", cpu="2"), node("big", cpu="4")]
    pinned = {"nodeSelector": {"kubernetes.io/hostname": "small"}}
    docs += [pod(f"a{i}", cpu="1", labels={"app": "a"}, **pinned) for i in range(2)]
    docs += [pod(f"b{i}", cpu="1", labels={"app": "b"}, **pinned) for i in range(2)]
    docs += [pod(f"c{i}", cpu="2", labels={"app": "c"}) for i in range(2)]
    problem = compiled_of(docs).problem
    assert problem.upper_bound() == 6
    assert capacity_bound(problem, 1.0) == 4
