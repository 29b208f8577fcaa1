"""bench/compare_workloads.py's issue-30 workload (`mixed-hetero`) and bench/cycle_profile.py's way of feeding it
to the loop's cache, without a control plane: the shares the issue names, deterministic, registered for batch
arrival, and the loop's one cycle over it places every pod in a plan the independent checker accepts."""
from __future__ import annotations

from collections import Counter

import pytest

from bench import cycle_profile as profile
from testkit.checker import check_plan

CW = profile.CW  # bench/compare_workloads.py (cycle_profile puts bench/ on the path it imports from)

NODES = 200


@pytest.fixture(scope="module")
def scenario() -> CW.Scenario:
    return CW.WORKLOADS["mixed-hetero"].build(NODES)


def test_registered_for_batch_arrival() -> None:
    assert CW.WORKLOADS["mixed-hetero"].arrival == "batch"


def test_every_hundred_apps_have_the_issues_shares() -> None:
    rules = CW.app_rules(300)
    for start in (0, 100, 200):
        assert Counter(rules[start:start + 100]) == dict(CW.APP_RULES)


def test_nodes_three_shapes_15_percent_gpu_5_percent_cordoned(scenario: CW.Scenario) -> None:
    nodes = scenario.nodes
    assert len(nodes) == NODES
    assert {n.allocatable["cpu"] for n in nodes} == {"4", "8", "16"}
    gpu = [n for n in nodes if CW.GPU_RESOURCE in n.allocatable]
    cordoned = [n for n in nodes if n.unschedulable]
    assert len(gpu) == NODES * 15 // 100 and all(CW.GPU_TAINT in n.taints for n in gpu)
    assert len(cordoned) == NODES * 5 // 100 and all(CW.CORDON_TAINT in n.taints for n in cordoned)
    assert not {n.name for n in gpu} & {n.name for n in cordoned}
    assert {n.labels[CW.DISK_KEY] for n in nodes} == {"ssd", "hdd"}


def test_pods_five_per_node_with_the_rules_shares(scenario: CW.Scenario) -> None:
    pods = scenario.pending
    assert len(pods) == 5 * NODES
    spec = [p["spec"] for p in pods]
    anti = sum(1 for s in spec if "podAntiAffinity" in s.get("affinity", {}))
    zone = sum(1 for s in spec if "podAffinity" in s.get("affinity", {}))
    disk = sum(1 for s in spec if s.get("nodeSelector") == {CW.DISK_KEY: "ssd"})
    gpu = sum(1 for s in spec if s.get("tolerations"))
    port = sum(1 for s in spec if any("hostPort" in p for c in s["containers"] for p in c.get("ports", ())))
    gang = sum(1 for p in pods if CW.POD_GROUP_LABEL in p["metadata"]["labels"])
    assert (anti, disk, zone, gpu, port, gang) == tuple(len(pods) * share // 100 for share in (30, 10, 10, 7, 3, 10))
    assert len(scenario.pod_groups) == gang // CW.PODS_PER_APP
    assert all("schedulerName" not in s for s in spec)


def test_deterministic() -> None:
    assert CW.mixed_hetero(60) == CW.mixed_hetero(60)


def test_one_loop_cycle_places_every_pod_in_a_plan_the_checker_accepts() -> None:
    docs = profile.scenario_docs(CW.mixed_hetero(40))
    _, cache, batch = profile.fill(docs)
    seconds, result = profile.one_cycle(cache, batch)
    assert seconds > 0
    plan = result.plan
    assert len(plan.assignments) == len(batch) == 200 and not plan.unschedulable
    assert check_plan(docs, plan.assignments, profile.SCHEDULER) == []
    cordoned = {d["metadata"]["name"] for d in docs if d["kind"] == "Node" and d["spec"].get("unschedulable")}
    assert cordoned and not cordoned & set(plan.assignments.values())


def test_timers_nest_and_restore() -> None:
    class Owner:
        def outer(self) -> int:
            return self.inner() + 1

        def inner(self) -> int:
            return 1

    timers = profile.Timers()
    before = Owner.outer
    timers.wrap(Owner, "outer", "outer")
    timers.wrap(Owner, "inner", "inner")
    assert Owner().outer() == 2
    assert timers.calls == {"outer": 1, "outer > inner": 1}
    assert timers.seconds["outer"] >= timers.seconds["outer > inner"] >= 0
    timers.restore()
    assert Owner.outer is before and Owner().outer() == 2
