"""The time limit as a wall for compile: past its deadline compile stops checking pod classes (highest
priority first, so the least important are left), the plan is still valid, and stats say what happened.

Deadlines here run on a counting clock (one tick per class checked), so nothing depends on timing."""

from __future__ import annotations

from itertools import count

from engine.compile import Deadline, compile_cluster
from engine.load import build_cluster
from engine.plan import plan_from_solution
from engine.rejections import UNCHECKED
from engine.solve import Status, solve
from testkit.checker import check_plan
from testkit.manifests import anti, node, pod, term

ZONE = "topology.kubernetes.io/zone"


def cluster_docs() -> list[dict]:
    """Three pod classes at three priorities, with anti-affinity between two of them."""
    docs = [node(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(4)]
    docs += [pod(f"low-{i}", priority=0, labels={"app": "low"}) for i in range(3)]
    docs += [pod(f"mid-{i}", priority=100, labels={"app": "mid"}, affinity=anti(term({"app": "top"})))
             for i in range(2)]
    docs += [pod(f"top-{i}", priority=1000, labels={"app": "top"}) for i in range(2)]
    return docs


def after_classes(checked: int) -> Deadline:
    """A deadline that passes once `checked` classes have been checked (the clock ticks once per check)."""
    ticks = count()
    return Deadline(at=checked, clock=lambda: next(ticks))


def plan_with(docs: list[dict], deadline: Deadline | None):
    compiled = compile_cluster(build_cluster([("test", d) for d in docs]), deadline=deadline)
    return compiled, plan_from_solution(compiled, solve(compiled.problem, time_limit=5.0), 0.0)


def test_compile_stops_at_its_deadline_and_the_plan_is_valid_and_says_so():
    docs = cluster_docs()
    compiled, plan = plan_with(docs, after_classes(1))
    assert compiled.problem.unchecked  # without the deadline every class is checked
    assert check_plan(docs, plan.assignments) == []
    assert set(plan.assignments) == {"default/top-0", "default/top-1"}  # the highest priority went first
    for key in ("default/low-0", "default/mid-1"):
        assert UNCHECKED in plan.unschedulable[key][0]
    assert plan.stats["status"] == Status.FEASIBLE.value  # the unchecked pods were not shown unplaceable
    assert "2 pod class(es) left unchecked" in plan.stats["strategy"]
    assert any("compile reached the time limit" in note for note in plan.notes)


def test_a_deadline_reached_later_checks_more_classes_in_priority_order():
    docs = cluster_docs()
    compiled, plan = plan_with(docs, after_classes(2))
    assert len(compiled.problem.unchecked) == 1
    assert check_plan(docs, plan.assignments) == []
    assert {k.split("-")[0] for k in plan.assignments} == {"default/top", "default/mid"}
    assert all(k.startswith("default/low") for k in plan.unschedulable)


def test_a_deadline_already_passed_leaves_every_pod_unplaced_with_a_reason():
    docs = cluster_docs()
    _compiled, plan = plan_with(docs, Deadline.after(0.0))
    assert plan.assignments == {}
    assert all(UNCHECKED in reasons[0] for reasons in plan.unschedulable.values())
    assert len(plan.unschedulable) == 7


def test_without_a_deadline_every_class_is_checked():
    docs = cluster_docs()
    compiled, plan = plan_with(docs, None)
    assert compiled.problem.unchecked == ()
    assert len(plan.assignments) == 7 and plan.stats["status"] == Status.OPTIMAL.value
    assert "unchecked" not in plan.stats["strategy"]


def test_past_the_time_limit_only_the_first_starting_plan_runs():
    # 3 pods of 3 cpu on 2 nodes of 4 cpu: the greedy leaves one out, which would run the one-at-a-time plan
    docs = [node("n0"), node("n1")] + [pod(f"p{i}", cpu="3") for i in range(3)]
    problem = compile_cluster(build_cluster([("test", d) for d in docs])).problem
    late = solve(problem, time_limit=0.0)
    assert late.sequential_placed is None and sum(late.placed.values()) == 2
    asked = solve(problem, time_limit=0.0, baseline=True)  # --baseline runs it whatever the clock says
    assert asked.sequential_placed == 2
    assert solve(problem, time_limit=5.0).sequential_placed == 2
