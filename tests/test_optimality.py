"""Plans are optimal in pods placed (lexicographic by priority) on small problems, checked against an
exhaustive search (tests/oracle.py) that shares no code with the engine; and every plan on random
clusters satisfies every hard constraint (testkit/checker.py)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from oracle import best_placed, placed_vector
from runner import run
from strategies import clusters
from testkit.checker import check_plan
from testkit.manifests import anti, node, pod, podgroup, spread, term

ZONE = "topology.kubernetes.io/zone"


def assert_optimal(docs):
    plan = run(docs)
    assert check_plan(docs, plan.assignments) == []
    assert placed_vector(docs, plan.assignments) == best_placed(docs), plan.assignments
    return plan


def test_tight_packing_beats_first_fit_decreasing():
    # greedy (biggest first) puts the 2-cpu pod on n1 and places 2 pods; the optimum places the 3 small ones
    docs = [node("n1", cpu="2"), node("n2", cpu="1"), pod("big", cpu="2", labels={"size": "big"})] + [
        pod(f"s{i}", cpu="1", labels={"size": "small"}) for i in range(3)]
    plan = assert_optimal(docs)
    assert len(plan.assignments) == 3
    assert plan.stats.status == "OPTIMAL"


def test_tight_packing_mixed_sizes():
    docs = [node("n1", cpu="5"), node("n2", cpu="5")] + [
        pod(f"p{i}", cpu=c, labels={"i": str(i)}) for i, c in enumerate(["3", "3", "2", "2", "1500m", "1"])]
    assert_optimal(docs)


def test_gangs_choose_the_bigger_start():
    docs = [node("n1", cpu="3"), node("n2", cpu="2"), podgroup("small", 2), podgroup("large", 4)]
    docs += [pod(f"s{i}", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "small"}) for i in range(2)]
    docs += [pod(f"l{i}", cpu="1", labels={"scheduling.x-k8s.io/pod-group": "large"}) for i in range(4)]
    plan = assert_optimal(docs)
    assert sum(k.startswith("default/l") for k in plan.assignments) == 4


def test_anti_affinity_with_zones_and_capacity():
    nodes = [node("a1", cpu="1", labels={ZONE: "a"}), node("a2", cpu="2", labels={ZONE: "a"}),
             node("b1", cpu="1", labels={ZONE: "b"})]
    web = {"app": "web"}
    docs = nodes + [pod(f"w{i}", cpu="1", labels=web, affinity=anti(term(web, ZONE))) for i in range(2)] + [
        pod(f"x{i}", cpu="1", labels={"app": "x"}) for i in range(3)]
    assert_optimal(docs)


def test_priority_lexicographic_with_anti_affinity():
    web = {"app": "web"}
    docs = [node("n1", cpu="2"), node("n2", cpu="1")] + [
        pod("vip", cpu="2", priority=100, labels={"app": "vip"}),
        pod("w0", cpu="1", labels=web, affinity=anti(term(web))),
        pod("w1", cpu="1", labels=web, affinity=anti(term(web))),
    ]
    plan = assert_optimal(docs)
    assert "default/vip" in plan.assignments


def test_spread_with_tight_capacity():
    nodes = [node("a1", cpu="2", labels={ZONE: "a"}), node("b1", cpu="1", labels={ZONE: "b"})]
    app = {"app": "api"}
    docs = nodes + [pod(f"p{i}", cpu="1", labels=app, topologySpreadConstraints=[spread(app)]) for i in range(4)]
    plan = assert_optimal(docs)
    assert len(plan.assignments) == 3


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=5, max_pods=8))
def test_every_plan_satisfies_every_hard_constraint(docs):
    plan = run(docs, time_limit=2.0)
    assert check_plan(docs, plan.assignments) == []
    pending = {f"default/{d['metadata']['name']}" for d in docs if d["kind"] == "Pod" and not d["spec"].get("nodeName")}
    assert set(plan.assignments) | set(plan.unschedulable) == pending
    assert all(plan.unschedulable.values())


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=3, max_pods=5))
def test_small_plans_are_optimal(docs):
    plan = run(docs, time_limit=5.0)
    assert check_plan(docs, plan.assignments) == []
    assert placed_vector(docs, plan.assignments) == best_placed(docs), plan.assignments


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=5, max_pods=8))
def test_cp_sat_model_alone_respects_every_hard_constraint(docs):
    """The model without its greedy warm start or shortcut: whatever CP-SAT returns must be valid too."""
    from engine.planning.compile import compile_cluster
    from engine.planning.plan import plan_from_solution
    from engine.reading.load import build_cluster
    from engine.solve.cpsat import ClassModel
    from engine.solve.problem import Solution, Status

    compiled = compile_cluster(build_cluster([("test", d) for d in docs]))
    model = ClassModel(compiled.problem)
    result = model.solve_tier(model.tier1(), 5.0, 1, 0)
    assert result.found
    plan = plan_from_solution(compiled, Solution(result.placed, Status.FEASIBLE, result.value), 0.0)
    assert check_plan(docs, plan.assignments) == []
    if result.proven:
        assert placed_vector(docs, plan.assignments) <= best_placed(docs)
