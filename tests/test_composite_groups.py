"""CompositePodGroups (scheduling.k8s.io: 1.37's v1alpha3 behind its alpha gate, 1.38's v1beta1): child PodGroups
started together, `gang.minGroupCount` of them whole or none, all in one domain of the composite's key while each
child keeps to its own (a block above racks). Each test would fail if the rule were ignored; the independent checker
judges every plan."""
from __future__ import annotations

from collections import Counter

import pytest

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import composite_group, in_group, native_group, node, pod

V1BETA1, V1ALPHA3 = "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"


def plan_for(docs: list[dict]):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(time_limit=5, workers=1))
    assert check_plan(docs, plan.assignments) == []
    return plan


def gpu_node(name: str, gpus: int, **labels: str) -> dict:
    return node(name, cpu="64", labels=labels, **{"nvidia.com/gpu": str(gpus)})


def child(name: str, parent: str, size: int, topology: str | None = None, api: str = V1BETA1,
          **extra) -> list[dict]:
    group = native_group(name, size, topology=topology, api_version=api, parent=parent)
    return [group, *[pod(f"{name}-{i}", cpu="1", requests={"nvidia.com/gpu": "1"}, schedulingGroup=in_group(name),
                         **extra) for i in range(size)]]


def nodes_of(plan, name: str) -> Counter:
    return Counter(n for k, n in plan.assignments.items() if k.startswith(f"default/{name}-"))


@pytest.mark.parametrize("api", [V1BETA1, V1ALPHA3])
def test_a_composite_gang_starts_its_groups_together_or_none(api) -> None:
    """minGroupCount 2: room for one child of 4 (6 GPUs) leaves both out, though one would fit alone; room for both
    (8) starts both."""
    composite = composite_group("job", 2, api_version=api)
    groups = [*child("a", "job", 4, api=api), *child("b", "job", 4, api=api)]
    plan = plan_for([gpu_node("n1", 6), composite, *groups])
    assert not plan.assignments
    plan = plan_for([gpu_node("n1", 8), composite, *groups])
    assert len(plan.assignments) == 8


def test_a_composite_keeps_every_child_in_one_block_and_each_in_one_rack() -> None:
    """Block b1 has racks of 4 and 4, block b2 racks of 4 and 2: two children of 4 each keep to one rack, together to
    one block: only b1 holds both."""
    nodes = [gpu_node("a", 4, block="b2", rack="r1"), gpu_node("b", 2, block="b2", rack="r2"),
             gpu_node("c", 4, block="b1", rack="r3"), gpu_node("d", 4, block="b1", rack="r4")]
    docs = [*nodes, composite_group("job", 2, topology="block"), *child("x", "job", 4, topology="rack"),
            *child("y", "job", 4, topology="rack")]
    plan = plan_for(docs)
    assert set(plan.assignments.values()) == {"c", "d"}
    assert len(nodes_of(plan, "x")) == len(nodes_of(plan, "y")) == 1
    without = plan_for([*nodes, *child("x", "job", 4, topology="rack"), *child("y", "job", 4, topology="rack"),
                        composite_group("job", None)])
    assert len(without.assignments) == 8  # a basic composite without a key: each child on its own (a rack each)


def test_min_group_count_below_the_children_starts_what_fits() -> None:
    """minGroupCount 1 of two children: one fits (4 GPUs), the other waits; with 2 it would start none."""
    docs = [gpu_node("n1", 4), composite_group("job", 1), *child("a", "job", 4), *child("b", "job", 4)]
    assert len(plan_for(docs).assignments) == 4


def test_a_child_already_running_counts_towards_min_group_count() -> None:
    """Child a runs whole (bound); minGroupCount 2 then needs only b, which fits."""
    docs = [gpu_node("n1", 8), composite_group("job", 2), native_group("a", 2, api_version=V1BETA1, parent="job"),
            *[pod(f"a-{i}", cpu="1", requests={"nvidia.com/gpu": "1"}, schedulingGroup=in_group("a"),
                  node_name="n1") for i in range(2)], *child("b", "job", 4)]
    assert len(plan_for(docs).assignments) == 4


def test_a_bound_child_fixes_the_composites_block() -> None:
    """Child a runs in block b1 (node z1); child b must join it there, though node a1 of block b2 comes first and has
    more room."""
    docs = [gpu_node("a1", 8, block="b2"), gpu_node("z1", 4, block="b1"), composite_group("job", 2, topology="block"),
            native_group("a", 2, api_version=V1BETA1, parent="job"),
            *[pod(f"a-{i}", cpu="1", requests={"nvidia.com/gpu": "1"}, schedulingGroup=in_group("a"),
                  node_name="z1") for i in range(2)], *child("b", "job", 2)]
    plan = plan_for(docs)
    assert set(plan.assignments.values()) == {"z1"}


def test_a_missing_composite_holds_its_childrens_pods() -> None:
    cluster = build_cluster([("n", gpu_node("n1", 8)), *[(f"d{i}", d) for i, d in enumerate(child("a", "job", 2))]])
    assert not cluster.pending
    assert "composite pod group 'job'" in cluster.skipped["default/a-0"]


def test_a_bad_composite_is_refused_with_its_name() -> None:
    bad = composite_group("job", 2)
    bad["spec"]["schedulingPolicy"]["gang"]["minGroupCount"] = 0
    cluster = build_cluster([("bad.yaml", bad), ("n", gpu_node("n1", 8)),
                             *[(f"d{i}", d) for i, d in enumerate(child("a", "job", 2))]], strict=False)
    assert any("CompositePodGroup" in str(r) and "job" in str(r) and "minGroupCount" in str(r)
               for r in cluster.refused)
    assert not cluster.pending  # its children wait for it


def test_a_child_that_waits_for_its_siblings_is_told_so() -> None:
    composite = composite_group("job", 2, topology="block")
    plan = plan_for([gpu_node("n1", 6, block="b1"), composite, *child("a", "job", 4), *child("b", "job", 4)])
    reasons = " ".join(plan.unschedulable["default/a-0"])
    assert "composite pod group default/job could not be completed: needs 2 of its 2 pod group(s)" in reasons
    assert "in one block domain (minGroupCount 2), and only 0 could be" in reasons


def test_the_loop_tells_a_composite_whether_its_children_started() -> None:
    """Through the loop (a fake API): a composite whose two children fit gets CompositePodGroupInitiallyScheduled
    True/Scheduled; one whose children do not fit together gets False/Unschedulable with why, its code first."""
    import threading

    from engine.reading.objects import NATIVE_POD_GROUP
    from loopfake import FakeAPI, synced_loop
    from loopfake import node as one_cpu_node
    from loopfake import pod as one_cpu_pod

    for nodes, want in ((4, ("True", "Scheduled")), (3, ("False", "Unschedulable"))):
        api = FakeAPI()
        for i in range(nodes):
            api.put("Node", one_cpu_node(f"n{i}"))
        api.put("CompositePodGroup", composite_group("job", 2))
        for name in ("a", "b"):
            api.put(NATIVE_POD_GROUP, native_group(name, 2, api_version=V1BETA1, parent="job"))
            for i in range(2):
                api.put("Pod", one_cpu_pod(f"{name}-{i}", schedulingGroup=in_group(name)))
        s, loop = synced_loop(api, backoff=0.0)
        loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
        s.events.close()
        found = api.objects[("CompositePodGroup", "default", "job")]
        [condition] = [c for c in (found.get("status") or {}).get("conditions") or []
                       if c["type"] == "CompositePodGroupInitiallyScheduled"]
        assert (condition["status"], condition["reason"]) == want
        if want[0] == "False":
            assert "composite pod group default/job could not be completed" in condition["message"]
