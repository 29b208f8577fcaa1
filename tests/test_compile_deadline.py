"""The time limit as a wall for compile: past its deadline compile stops checking pod classes (highest
priority first, so the least important are left), the plan is still valid, and stats say what happened.

Deadlines here run on a counting clock (one tick per class checked), so nothing depends on timing."""

from __future__ import annotations

from itertools import count

import pytest

from engine.model.rejections import UNCHECKED
from engine.planning.compile import Deadline, compile_cluster
from engine.planning.plan import plan_from_solution
from engine.reading.load import build_cluster
from engine.solve import Status, solve
from engine.solve.greedy import greedy
from engine.solve.problem import Solution
from engine.solve.sequential import sequential
from testkit.checker import check_plan
from testkit.manifests import POD_GROUP_LABEL, anti, node, pod, podgroup, spread, term

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
    assert plan.stats.status == Status.FEASIBLE.value  # the unchecked pods were not shown unplaceable
    assert "2 pod class(es) left unchecked" in plan.stats.strategy
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
    assert len(plan.assignments) == 7 and plan.stats.status == Status.OPTIMAL.value
    assert "unchecked" not in plan.stats.strategy


def test_past_the_time_limit_the_starting_plans_stop_where_they_are():
    # 3 pods of 3 cpu on 2 nodes of 4 cpu: the greedy leaves one out, which would run the one-at-a-time plan
    docs = [node("n0"), node("n1")] + [pod(f"p{i}", cpu="3") for i in range(3)]
    problem = compile_cluster(build_cluster([("test", d) for d in docs])).problem
    late = solve(problem, time_limit=0.0)
    assert late.sequential_placed is None  # no one-at-a-time plan past the wall
    assert sum(late.placed.values()) == 2  # but the first greedy has its floor: a late cycle still places what fits
    assert late.status in (Status.FEASIBLE, Status.OPTIMAL)
    asked = solve(problem, time_limit=0.0, baseline=True)  # --baseline runs it whatever the clock says
    assert asked.sequential_placed == 2
    on_time = solve(problem, time_limit=5.0)  # capacity proves the greedy's 2 best: no one-at-a-time plan needed
    assert on_time.sequential_placed is None and sum(on_time.placed.values()) == 2
    assert on_time.status == Status.OPTIMAL and on_time.bound == 2


def ticks_after(n: int):
    """A stop that says the time is up after it was asked `n` times (a clock counting checks, not seconds)."""
    asked = count()
    return lambda: next(asked) >= n


def spread_docs() -> list[dict]:
    """Eight nodes over two zones; six pods of a hard zone spread, four plain pods and a gang of three."""
    docs = [node(f"n{i}", labels={ZONE: f"z{i % 2}"}) for i in range(8)]
    docs += [pod(f"s{i}", labels={"app": "s"}, topologySpreadConstraints=[spread({"app": "s"})]) for i in range(6)]
    docs += [pod(f"p{i}", cpu="1") for i in range(4)]
    docs += [podgroup("g", 3)] + [pod(f"g{i}", labels={POD_GROUP_LABEL: "g"}) for i in range(3)]
    return docs


@pytest.mark.parametrize("start", [greedy, lambda p, stop: greedy(p, largest_first=False, stop=stop), sequential])
@pytest.mark.parametrize("after", [0, 1, 2, 4, 7, 11])
def test_a_starting_plan_stopped_early_is_a_valid_part_of_the_whole(start, after):
    docs = spread_docs()
    compiled = compile_cluster(build_cluster([("test", d) for d in docs]))
    whole = start(compiled.problem, stop=None)
    part = start(compiled.problem, stop=ticks_after(after))
    assert sum(part.values()) < sum(whole.values()) == 13  # it stopped before the end
    plan = plan_from_solution(compiled, Solution(part, Status.FEASIBLE, 0), 0.0)
    assert check_plan(docs, plan.assignments) == []  # hard spread and the gang (all or none) hold
    gang = [k for k in plan.assignments if k.startswith("default/g")]
    assert len(gang) in (0, 3)
