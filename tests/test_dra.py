"""Dynamic Resource Allocation (resource.k8s.io/v1) in the batch solve: each test places pods that would go to a
node without the devices, or share one device, if DRA were ignored; the checker judges every plan's rest."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.ir import Rules
from engine.load import build_cluster
from engine.planner import Options, plan_batch
from testkit.checker import check_plan
from testkit.manifests import (
    claims,
    device_class,
    device_request,
    gpu,
    node,
    pod,
    resource_claim,
    resource_slice,
)


def plan_for(docs: list[dict], time_limit: float = 3):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(time_limit=time_limit, workers=1))
    assert check_plan(docs, plan.assignments) == []
    return plan


def reasons(plan, pod_name: str) -> str:
    return " ".join(plan.unschedulable.get(f"default/{pod_name}", []))


def cluster(*extra: dict) -> list[dict]:
    return [node("cpu-1"), node("gpu-1"), node("gpu-2"), device_class(),
            resource_slice("gpu-1", [gpu("g0"), gpu("g1", model="h100", memory="80Gi")]),
            resource_slice("gpu-2", [gpu("g0")]), *extra]


def test_a_pod_claiming_a_gpu_goes_where_the_gpu_is() -> None:
    plan = plan_for(cluster(resource_claim("train"), pod("trainer", resourceClaims=claims("train"))))
    assert plan.assignments["default/trainer"] in ("gpu-1", "gpu-2")


def test_two_claims_never_get_one_device() -> None:
    docs = cluster(*(resource_claim(f"c{i}") for i in range(4)),
                   *(pod(f"p{i}", resourceClaims=claims(f"c{i}")) for i in range(4)))
    plan = plan_for(docs)
    assert len(plan.assignments) == 3  # three GPUs in all
    per_node = sorted(plan.assignments.values())
    assert per_node == ["gpu-1", "gpu-1", "gpu-2"]
    allocated = [d for key in plan.assignments for a in plan.reserved[key]["DynamicResources"].values() for _, d in a]
    assert len(allocated) == len(set(allocated)) == 3
    (left,) = {f"default/p{i}" for i in range(4)} - set(plan.assignments)
    assert "cannot allocate all claims" in " ".join(plan.unschedulable[left])


def test_cel_selectors_pick_the_device() -> None:
    big = device_request(selectors=('device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0',))
    plan = plan_for(cluster(resource_claim("big", big), pod("p", resourceClaims=claims("big"))))
    assert plan.assignments == {"default/p": "gpu-1"}
    (allocation,) = plan.reserved["default/p"]["DynamicResources"].values()
    assert allocation == (("gpu", "gpu.example.com/gpu-1/g1"),)


def test_a_count_of_two_needs_two_devices_on_one_node() -> None:
    plan = plan_for(cluster(resource_claim("two", device_request(count=2)), pod("p", resourceClaims=claims("two"))))
    assert plan.assignments == {"default/p": "gpu-1"}


def test_allocation_mode_all_takes_every_matching_device() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("a"), gpu("b")]),
            resource_claim("all", device_request(all_devices=True)), pod("p", resourceClaims=claims("all"))]
    plan = plan_for(docs)
    (allocation,) = plan.reserved["default/p"]["DynamicResources"].values()
    assert sorted(d for _, d in allocation) == ["gpu.example.com/n1/a", "gpu.example.com/n1/b"]
    crowded = plan_for(docs + [resource_claim("one"), pod("q", resourceClaims=claims("one"))])
    assert len(crowded.assignments) == 1  # All leaves nothing for a second claim on the node
    (waiting,) = crowded.unschedulable
    assert "cannot allocate all claims" in " ".join(crowded.unschedulable[waiting])


def test_a_missing_claim_keeps_the_pod_pending_with_its_name() -> None:
    plan = plan_for(cluster(pod("p", resourceClaims=claims("nope"))))
    assert plan.assignments == {}
    assert 'resourceclaim.resource.k8s.io "nope" not found' in reasons(plan, "p")


def test_an_allocated_claim_holds_its_device_and_its_node() -> None:
    taken = resource_claim("held", allocated=[("gpu-2", "g0")], node="gpu-2")
    docs = cluster(taken, pod("user", resourceClaims=claims("held")),
                   resource_claim("new"), pod("other", resourceClaims=claims("new")))
    plan = plan_for(docs)
    assert plan.assignments["default/user"] == "gpu-2"  # the allocation's node selector
    assert plan.assignments["default/other"] == "gpu-1"  # gpu-2's only device is taken


def test_first_available_falls_back_in_order() -> None:
    wanted = {"name": "gpu", "firstAvailable": [
        {"name": "h100", "deviceClassName": "gpu", "selectors": [{"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]},
        {"name": "any", "deviceClassName": "gpu"}]}
    docs = cluster(resource_claim("a", wanted), resource_claim("b", wanted),
                   pod("pa", resourceClaims=claims("a")), pod("pb", resourceClaims=claims("b")))
    plan = plan_for(docs)
    assert len(plan.assignments) == 2
    subs = sorted(r for key in plan.assignments for a in plan.reserved[key]["DynamicResources"].values() for r, _ in a)
    assert subs == ["gpu/any", "gpu/h100"]


def test_match_attribute_keeps_devices_alike() -> None:
    docs = [node("n1"), device_class(),
            resource_slice("n1", [gpu("a", model="a100"), gpu("b", model="h100"), gpu("c", model="a100")]),
            resource_claim("pair", device_request(count=2), match_attribute="gpu.example.com/model"),
            pod("p", resourceClaims=claims("pair"))]
    plan = plan_for(docs)
    (allocation,) = plan.reserved["default/p"]["DynamicResources"].values()
    assert sorted(d for _, d in allocation) == ["gpu.example.com/n1/a", "gpu.example.com/n1/c"]


def test_a_shared_device_reachable_from_every_node() -> None:
    docs = [node("n1"), node("n2"), device_class(), resource_slice(None, [gpu("net0")]),
            resource_claim("a"), resource_claim("b"),
            pod("pa", resourceClaims=claims("a")), pod("pb", resourceClaims=claims("b"))]
    plan = plan_for(docs)
    assert len(plan.assignments) == 1  # one device for two claims: Reserve takes the second out


def test_the_checker_refuses_plans_that_break_devices() -> None:
    docs = cluster(resource_claim("a"), resource_claim("b"),
                   pod("pa", resourceClaims=claims("a")), pod("pb", resourceClaims=claims("b")))
    assert any("cannot be met on cpu-1" in v for v in check_plan(docs, {"default/pa": "cpu-1"}))
    shared = check_plan(docs, {"default/pa": "gpu-2", "default/pb": "gpu-2"})  # gpu-2 has one device
    assert any("more distinct devices" in v for v in shared)
    assert check_plan(docs, {"default/pa": "gpu-1", "default/pb": "gpu-1"}) == []


@st.composite
def device_clusters(draw) -> list[dict]:
    docs: list[dict] = [device_class()]
    for i in range(draw(st.integers(1, 3))):
        docs.append(node(f"n{i}"))
        models = draw(st.lists(st.sampled_from(["a100", "h100"]), max_size=3))
        if models:
            docs.append(resource_slice(f"n{i}", [gpu(f"g{j}", model=m) for j, m in enumerate(models)]))
    for k in range(draw(st.integers(1, 5))):
        model = draw(st.sampled_from([None, "a100", "h100"]))
        selectors = (f'device.attributes["gpu.example.com"].model == "{model}"',) if model else ()
        request = device_request(count=draw(st.integers(1, 2)), selectors=selectors,
                                 all_devices=draw(st.integers(0, 5)) == 0)
        docs += [resource_claim(f"c{k}", request), pod(f"p{k}", resourceClaims=claims(f"c{k}"))]
    return docs


@settings(max_examples=60, deadline=None)
@given(device_clusters())
def test_every_plan_gives_each_device_once_and_meets_every_claim(docs: list[dict]) -> None:
    plan = plan_for(docs, time_limit=1)  # the checker: claims met, devices distinct
    allocated = [d for key in plan.assignments for a in plan.reserved[key]["DynamicResources"].values() for _, d in a]
    assert len(allocated) == len(set(allocated))
    assert set(plan.reserved) == set(plan.assignments)
