"""Partitionable devices (DRAPartitionableDevices, beta and on since 1.36): a pool's shared counters, in a slice of
their own, and devices consuming them. One GPU of 40Gi is offered whole and as two halves: the devices Reserve
hands out never consume more than the counters hold, whether the pods come in one batch or one after another, and
the batch model counts the counters so that its plan is what Reserve can serve."""
from __future__ import annotations

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import (
    claims,
    counter_slice,
    device_class,
    device_request,
    gpu,
    node,
    partition,
    pod,
    resource_claim,
    resource_slice,
)

WHOLE = 'device.attributes["gpu.example.com"].part == "whole"'
HALF = 'device.attributes["gpu.example.com"].part == "half"'


def gpu_in_parts(node_name: str = "gpu-1", pool: str | None = None) -> list[dict]:
    """One 40Gi GPU on `node_name`: its counters, and three devices consuming them (whole, two halves)."""
    pool = pool or node_name
    return [counter_slice(pool, {"gpu-0": {"memory": "40Gi"}}, node=node_name),
            resource_slice(node_name, [partition("whole", "gpu-0", "40Gi", part="whole"),
                                       partition("half-0", "gpu-0", "20Gi", part="half"),
                                       partition("half-1", "gpu-0", "20Gi", part="half")], pool=pool, slices=2)]


def plan_for(docs: list[dict], **options):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(**{"time_limit": 3, "workers": 1, **options}))
    assert check_plan(docs, plan.assignments) == []
    return plan


def allocated(plan) -> list[str]:
    return sorted(d for key in plan.assignments for a in plan.details.reserved[key]["DynamicResources"].values()
                  for _, d in a.devices)


def memory_used(devices: list[str]) -> int:
    return sum(40 if d.endswith("whole") else 20 for d in devices)


def _pods(n: int, *requests: dict) -> list[dict]:
    return [doc for i in range(n) for doc in (resource_claim(f"c{i}", *requests),
                                              pod(f"p{i}", resourceClaims=claims(f"c{i}")))]


def test_three_pods_each_claiming_one_device_of_one_gpu_get_the_two_halves() -> None:
    """The issue's case, as kube-scheduler v1.37.2 decides it: the two halves, and the third pod refused."""
    plan = plan_for([node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(3)])
    assert len(plan.assignments) == 2
    assert allocated(plan) == ["gpu.example.com/gpu-1/half-0", "gpu.example.com/gpu-1/half-1"]
    (left,) = {f"default/p{i}" for i in range(3)} - set(plan.assignments)
    assert plan.unschedulable[left]


def test_a_whole_and_a_half_never_go_together() -> None:
    """Pods asking for the whole GPU and for halves by selector: two kinds of device, one counter."""
    docs = [node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(1, device_request(selectors=(WHOLE,))),
            resource_claim("h0", device_request(selectors=(HALF,))), pod("q0", resourceClaims=claims("h0")),
            resource_claim("h1", device_request(selectors=(HALF,))), pod("q1", resourceClaims=claims("h1"))]
    plan = plan_for(docs)
    assert memory_used(allocated(plan)) <= 40
    assert set(plan.assignments) == {"default/q0", "default/q1"}  # two pods beat one


def test_the_batch_model_counts_the_counters() -> None:
    """Two GPUs in parts on two nodes, six pods: four halves in all, each node's pair within its counter (the
    rows bound the plan, so Reserve drops no pod the solver placed)."""
    docs = [node("gpu-1"), node("gpu-2"), device_class(), *gpu_in_parts("gpu-1"), *gpu_in_parts("gpu-2"), *_pods(6)]
    plan = plan_for(docs)
    assert len(plan.assignments) == 4
    assert sorted(plan.assignments.values()) == ["gpu-1", "gpu-1", "gpu-2", "gpu-2"]
    assert all(d.rsplit("/", 1)[1].startswith("half") for d in allocated(plan))
    assert not any("went to other pods" in " ".join(r) for r in plan.unschedulable.values())


def test_a_device_allocated_already_consumes_its_counters() -> None:
    """The whole GPU allocated to a claim of a running pod: no half is free."""
    taken = resource_claim("running", allocated=[("gpu-1", "whole")], node="gpu-1")
    plan = plan_for([node("gpu-1"), device_class(), *gpu_in_parts(), taken, *_pods(2)])
    assert plan.assignments == {}


def test_a_count_of_two_takes_the_halves_not_the_whole() -> None:
    """One request for two devices: the whole GPU first in order fits with neither half; the allocator tries on."""
    plan = plan_for([node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(1, device_request(count=2))])
    assert plan.assignments == {"default/p0": "gpu-1"}
    assert allocated(plan) == ["gpu.example.com/gpu-1/half-0", "gpu.example.com/gpu-1/half-1"]


def test_all_devices_of_a_partitioned_gpu_cannot_be_allocated_at_once() -> None:
    plan = plan_for([node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(1, device_request(all_devices=True))])
    assert plan.assignments == {}


def test_a_device_consuming_a_counter_set_its_pool_lacks_makes_the_pool_invalid() -> None:
    """Upstream: "counter set ... not found" makes the pool invalid; none of its devices is allocated, devices of
    other pools still are."""
    broken = [counter_slice("gpu-1", {"other": {"memory": "40Gi"}}, node="gpu-1"),
              resource_slice("gpu-1", [partition("half-0", "gpu-0", "20Gi")], pool="gpu-1", slices=2)]
    docs = [node("gpu-1"), device_class(), *broken, *_pods(1)]
    assert plan_for(docs).assignments == {}
    docs.append(resource_slice("gpu-1", [gpu("plain")], pool="plain"))
    assert plan_for(docs).assignments == {"default/p0": "gpu-1"}


def test_a_counter_set_named_twice_in_a_pool_makes_it_invalid() -> None:
    twice = counter_slice("gpu-1", {"gpu-0": {"memory": "40Gi"}}, node="gpu-1")
    twice["metadata"]["name"] = "again"
    docs = [node("gpu-1"), device_class(), *gpu_in_parts(), twice, *_pods(1)]
    assert plan_for(docs).assignments == {}


def test_per_device_node_selection_puts_each_partition_on_its_node() -> None:
    """perDeviceNodeSelection: the slice says nothing of nodes, each device names its own."""
    devices = [{**partition("a", "gpu-0", "20Gi"), "nodeName": "gpu-2"},
               {**partition("b", "gpu-0", "20Gi"), "nodeName": "gpu-2"}]
    spec_slice = resource_slice(None, devices, pool="p", slices=2)
    del spec_slice["spec"]["allNodes"]
    spec_slice["spec"]["perDeviceNodeSelection"] = True
    docs = [node("gpu-1"), node("gpu-2"), device_class(), counter_slice("p", {"gpu-0": {"memory": "20Gi"}}),
            spec_slice, *_pods(2)]
    plan = plan_for(docs)
    assert list(plan.assignments.values()) == ["gpu-2"]


def test_the_one_at_a_time_baseline_respects_the_counters_too() -> None:
    """kube-scheduler's way (a pod at a time, --baseline): the same two halves, never the physical GPU twice."""
    plan = plan_for([node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(3)], baseline=True)
    assert len(plan.assignments) == 2 and memory_used(allocated(plan)) == 40


def test_the_independent_checker_counts_the_counters() -> None:
    """testkit's checker (which every plan here passes) refuses three pods on one 40Gi GPU in parts."""
    docs = [node("gpu-1"), device_class(), *gpu_in_parts(), *_pods(3)]
    assert check_plan(docs, {f"default/p{i}": "gpu-1" for i in range(2)}) == []
    assert check_plan(docs, {f"default/p{i}": "gpu-1" for i in range(3)}) != []
