"""Dynamic Resource Allocation (resource.k8s.io/v1) in the batch solve: each test places pods that would go to a
node without the devices, or share one device, if DRA were ignored; the checker judges every plan's rest."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.devices.dra import Allocator
from engine.model.ir import Rules
from engine.planning.compile import compile_cluster
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import (
    claims,
    device_class,
    device_request,
    gpu,
    in_group,
    native_group,
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
    allocated = [d for key in plan.assignments for a in plan.details.reserved[key]["DynamicResources"].values() for _, d in a.devices]
    assert len(allocated) == len(set(allocated)) == 3
    (left,) = {f"default/p{i}" for i in range(4)} - set(plan.assignments)
    assert "cannot allocate all claims" in " ".join(plan.unschedulable[left])


def test_cel_selectors_pick_the_device() -> None:
    big = device_request(selectors=('device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0',))
    plan = plan_for(cluster(resource_claim("big", big), pod("p", resourceClaims=claims("big"))))
    assert plan.assignments == {"default/p": "gpu-1"}
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert allocation.devices == (("gpu", "gpu.example.com/gpu-1/g1"),)


def test_a_count_of_two_needs_two_devices_on_one_node() -> None:
    plan = plan_for(cluster(resource_claim("two", device_request(count=2)), pod("p", resourceClaims=claims("two"))))
    assert plan.assignments == {"default/p": "gpu-1"}


def test_allocation_mode_all_takes_every_matching_device() -> None:
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu("a"), gpu("b")]),
            resource_claim("all", device_request(all_devices=True)), pod("p", resourceClaims=claims("all"))]
    plan = plan_for(docs)
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert sorted(d for _, d in allocation.devices) == ["gpu.example.com/n1/a", "gpu.example.com/n1/b"]
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
    subs = sorted(r for key in plan.assignments for a in plan.details.reserved[key]["DynamicResources"].values() for r, _ in a.devices)
    assert subs == ["gpu/any", "gpu/h100"]


def test_match_attribute_keeps_devices_alike() -> None:
    docs = [node("n1"), device_class(),
            resource_slice("n1", [gpu("a", model="a100"), gpu("b", model="h100"), gpu("c", model="a100")]),
            resource_claim("pair", device_request(count=2), match_attribute="gpu.example.com/model"),
            pod("p", resourceClaims=claims("pair"))]
    plan = plan_for(docs)
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert sorted(d for _, d in allocation.devices) == ["gpu.example.com/n1/a", "gpu.example.com/n1/c"]


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


H100 = 'device.attributes["gpu.example.com"].model == "h100"'
BIG = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'


def test_kinds_of_device_that_overlap_never_count_a_device_twice() -> None:
    """An h100 is both "an h100" and "a GPU of 40Gi or more": the rows must not let a training pod (2 h100) and
    three inference pods (1 big GPU each) share a node of four; the best plan is all four inference pods."""
    docs = [node("n1"), device_class(), resource_slice("n1", [gpu(f"g{i}", model="h100", memory="80Gi") for i in range(4)]),
            resource_claim("train", device_request(count=2, selectors=(H100,))), pod("train", resourceClaims=claims("train")),
            *(resource_claim(f"infer-{i}", device_request(selectors=(BIG,))) for i in range(4)),
            *(pod(f"infer-{i}", resourceClaims=claims(f"infer-{i}")) for i in range(4))]
    plan = plan_for(docs)
    assert len(plan.assignments) == 4
    assert not any("went to other pods of this batch" in r for rs in plan.unschedulable.values() for r in rs)


def gangs_of_devices() -> list[dict]:
    """52 h100s on 13 nodes, gangs of 4 pods x 2 h100: six gangs fit."""
    docs: list[dict] = [device_class()]
    for i in range(13):
        docs += [node(f"n{i}"), resource_slice(f"n{i}", [gpu(f"x{j}", model="h100") for j in range(4)])]
    for k in range(8):
        docs.append(native_group(f"g{k}", 4))
        for m in range(4):
            docs += [resource_claim(f"c{k}-{m}", device_request(count=2, selectors=(H100,))),
                     pod(f"g{k}-{m}", resourceClaims=claims(f"c{k}-{m}"), schedulingGroup=in_group(f"g{k}"))]
    return docs


def test_gangs_of_devices_are_proven_best() -> None:
    """Summed per node the rows allow 6.5 gangs; the cluster-wide count of h100s lets CP-SAT prove six is the best
    (how soon: the `perf` test below)."""
    plan = plan_for(gangs_of_devices(), time_limit=10)
    assert len(plan.assignments) == 24 and plan.stats.status == "OPTIMAL"


@pytest.mark.perf
def test_gangs_of_devices_are_proven_best_at_once() -> None:
    """At once, instead of at the time limit."""
    plan = plan_for(gangs_of_devices(), time_limit=10)
    assert plan.stats.status == "OPTIMAL" and plan.stats.seconds < 5


# --- a claim shared by several pods of the batch: one allocation, every pod where its devices are ----------

def test_pods_sharing_a_claim_are_placed_together_on_one_allocation() -> None:
    docs = [node("cpu-1", cpu="8"), node("gpu-1", cpu="1"), node("gpu-2", cpu="2"), device_class(),
            resource_slice("gpu-1", [gpu("g0")]), resource_slice("gpu-2", [gpu("g0")]),
            resource_claim("shared"), *(pod(f"p{i}", cpu="1", resourceClaims=claims("shared")) for i in range(2))]
    plan = plan_for(docs)
    assert plan.assignments == {"default/p0": "gpu-2", "default/p1": "gpu-2"}  # gpu-1 has room for one only
    allocations = [a for key in plan.assignments for a in plan.details.reserved[key]["DynamicResources"].values()]
    assert [a.devices for a in allocations] == [(("gpu", "gpu.example.com/gpu-2/g0"),)]  # allocated once


def test_a_shared_claim_leaves_a_follower_out_where_its_allocating_pod_cannot_go() -> None:
    docs = [node("gpu-1", cpu="1"), node("gpu-2", cpu="1"), device_class(), resource_slice("gpu-1", [gpu("g0")]),
            resource_slice("gpu-2", [gpu("g0")]), resource_claim("shared"),
            *(pod(f"p{i}", cpu="1", resourceClaims=claims("shared")) for i in range(2))]
    plan = plan_for(docs)
    assert list(plan.assignments) == ["default/p0"]  # p1 would fit on the other node, but not with the allocation
    assert "shared ResourceClaim default/shared (allocated with pod default/p0)" in reasons(plan, "p1")


def test_a_shared_claim_on_a_device_every_node_reaches_lets_its_pods_spread() -> None:
    docs = [node("n1", cpu="1"), node("n2", cpu="1"), device_class(), resource_slice(None, [gpu("net0")]),
            resource_claim("shared"), *(pod(f"p{i}", cpu="1", resourceClaims=claims("shared")) for i in range(2))]
    plan = plan_for(docs)
    assert sorted(plan.assignments.values()) == ["n1", "n2"]
    (allocation,) = plan.details.reserved["default/p0"]["DynamicResources"].values()
    assert allocation.node_selector is None  # upstream: an allocation every node can use has no node selector


def test_the_checker_counts_a_shared_claim_once_and_on_all_its_nodes() -> None:
    docs = [node("gpu-1"), node("gpu-2"), device_class(), resource_slice("gpu-1", [gpu("g0")]),
            resource_slice("gpu-2", [gpu("g0")]), resource_claim("shared"),
            *(pod(f"p{i}", resourceClaims=claims("shared")) for i in range(2))]
    assert check_plan(docs, {"default/p0": "gpu-1", "default/p1": "gpu-1"}) == []
    assert any("cannot be met" in v for v in check_plan(docs, {"default/p0": "gpu-1", "default/p1": "gpu-2"}))


def _selector_slice() -> dict:
    found = resource_slice(None, [gpu("r0")], pool="rack-a")
    del found["spec"]["allNodes"]
    found["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["a"]}]}]}
    return found


def test_the_allocation_node_selector_is_the_devices_own() -> None:
    docs = [node("n1", labels={"rack": "a"}), node("n2", labels={"rack": "b"}), device_class(), _selector_slice(),
            resource_claim("c"), pod("p", resourceClaims=claims("c"))]
    plan = plan_for(docs)
    assert plan.assignments == {"default/p": "n1"}
    (allocation,) = plan.details.reserved["default/p"]["DynamicResources"].values()
    assert allocation.node_selector == {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["a"]}]}]}
    local = plan_for(cluster(resource_claim("c"), pod("p", resourceClaims=claims("c"))))
    (pinned,) = local.details.reserved["default/p"]["DynamicResources"].values()
    node_name = local.assignments["default/p"]
    assert pinned.node_selector == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}


def test_class_and_claim_config_are_copied_into_the_allocation() -> None:
    opaque = {"opaque": {"driver": "gpu.example.com", "parameters": {"sharing": "timeslice"}}}
    cls = device_class()
    cls["spec"]["config"] = [{"opaque": {"driver": "gpu.example.com", "parameters": {"mig": False}}}]
    claim = resource_claim("c", device_request("a"), device_request("b"))
    claim["spec"]["devices"]["config"] = [{"requests": ["b"], **opaque}, opaque]
    docs = [node("n1"), cls, resource_slice("n1", [gpu("g0"), gpu("g1")]), claim, pod("p", resourceClaims=claims("c"))]
    (allocation,) = plan_for(docs).details.reserved["default/p"]["DynamicResources"].values()
    assert list(allocation.config) == [
        {"source": "FromClass", "requests": ["a", "b"], **cls["spec"]["config"][0]},
        {"source": "FromClaim", "requests": ["b"], **opaque},
        {"source": "FromClaim", **opaque}]


# --- DRAExtendedResource: an extended resource no node advertises, served by a DeviceClass ------------------

def _extended_class() -> dict:
    cls = device_class()
    cls["spec"]["extendedResourceName"] = "example.com/gpu"
    return cls


def test_an_extended_resource_no_node_advertises_is_served_by_its_device_class() -> None:
    docs = [node("cpu-1"), node("gpu-1"), node("gpu-2"), _extended_class(),
            resource_slice("gpu-1", [gpu("g0"), gpu("g1")]), resource_slice("gpu-2", [gpu("g0")]),
            pod("two", requests={"example.com/gpu": "2"}), pod("one", requests={"example.com/gpu": "1"})]
    plan = plan_for(docs)
    assert plan.assignments == {"default/two": "gpu-1", "default/one": "gpu-2"}
    (allocation,) = plan.details.reserved["default/two"]["DynamicResources"].values()
    assert sorted(r for r, _ in allocation.devices) == ["container-0-request-1"] * 2  # upstream's request name
    assert allocation.create == {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}
    assert allocation.mappings == (("main", "example.com/gpu", "container-0-request-1"),)
    crowded = plan_for(docs + [pod("three", requests={"example.com/gpu": "1"})])
    assert len(crowded.assignments) == 2 and "cannot allocate all claims" in reasons(crowded, "three")


def test_the_implicit_device_class_resource_name_works_too() -> None:
    docs = [node("cpu-1"), node("gpu-1"), device_class(), resource_slice("gpu-1", [gpu("g0")]),
            pod("p", requests={"deviceclass.resource.kubernetes.io/gpu": "1"})]
    assert plan_for(docs).assignments == {"default/p": "gpu-1"}


def test_an_extended_resource_a_node_advertises_stays_the_device_plugins() -> None:
    plugin = node("plugin-1")
    plugin["status"]["allocatable"]["example.com/gpu"] = "1"
    docs = [node("gpu-1"), plugin, _extended_class(), resource_slice("gpu-1", [gpu("g0")]),
            pod("p", requests={"example.com/gpu": "1"})]
    plan = plan_for(docs)
    assert plan.assignments == {"default/p": "plugin-1"} and not plan.details.reserved


def test_the_checker_knows_extended_resources_served_by_devices() -> None:
    docs = [node("cpu-1"), node("gpu-1"), _extended_class(), resource_slice("gpu-1", [gpu("g0")]),
            pod("p", requests={"example.com/gpu": "1"})]
    assert check_plan(docs, {"default/p": "gpu-1"}) == []
    assert any("cannot be met on cpu-1" in v for v in check_plan(docs, {"default/p": "cpu-1"}))


# --- device taints and tolerations ----------------------------------------------------------------------------

def _tainted(effect: str = "NoSchedule") -> dict:
    broken = gpu("g0")
    broken["taints"] = [{"key": "gpu.example.com/unhealthy", "value": "ecc", "effect": effect}]
    return broken


def test_a_tainted_device_is_not_allocated_unless_tolerated() -> None:
    docs = [node("gpu-1"), node("gpu-2"), device_class(), resource_slice("gpu-1", [_tainted()]),
            resource_slice("gpu-2", [gpu("g0")]), resource_claim("a"), resource_claim("b"),
            pod("pa", resourceClaims=claims("a")), pod("pb", resourceClaims=claims("b"))]
    plan = plan_for(docs)
    assert list(plan.assignments.values()) == ["gpu-2"]  # gpu-1's only device is tainted NoSchedule
    tolerant = device_request()
    tolerant["exactly"]["tolerations"] = [{"key": "gpu.example.com/unhealthy", "operator": "Exists",
                                           "effect": "NoSchedule"}]
    docs[5] = resource_claim("a", tolerant)
    assert len(plan_for(docs).assignments) == 2


def test_a_none_effect_taint_does_not_keep_a_device_from_being_allocated() -> None:
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [_tainted("None")]), resource_claim("a"),
            pod("pa", resourceClaims=claims("a"))]
    assert plan_for(docs).assignments == {"default/pa": "gpu-1"}


def test_a_device_taint_rule_taints_the_devices_it_selects() -> None:
    rule = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "drain-gpu-1"},
            "spec": {"deviceSelector": {"driver": "gpu.example.com", "pool": "gpu-1"},
                     "taint": {"key": "maintenance", "effect": "NoExecute"}}}
    docs = [node("gpu-1"), node("gpu-2"), device_class(), resource_slice("gpu-1", [gpu("g0"), gpu("g1")]),
            resource_slice("gpu-2", [gpu("g0")]), rule, resource_claim("two", device_request(count=2)),
            pod("p", resourceClaims=claims("two"))]
    plan = plan_for(docs)
    assert plan.assignments == {} and "cannot allocate all claims" in reasons(plan, "p")
    assert plan_for(docs[:5] + docs[6:]).assignments == {"default/p": "gpu-1"}


def test_a_device_taint_rule_without_a_device_selector_taints_no_device() -> None:
    """1.37.1+ (resource.k8s.io/v1, GA): no `deviceSelector` matches no device (1.36 took it for every device);
    a rule selecting by driver alone still taints them all."""
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "no-selector"},
            "spec": {"taint": {"key": "maintenance", "effect": "NoSchedule"}}}
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [gpu("g0"), gpu("g1"), gpu("g2")]), rule,
            *(resource_claim(f"c{i}") for i in range(3)), *(pod(f"p{i}", resourceClaims=claims(f"c{i}")) for i in range(3))]
    assert len(plan_for(docs).assignments) == 3
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    assert cluster.devices.taint_rules == []
    docs[3] = {**rule, "spec": {**rule["spec"], "deviceSelector": {"driver": "gpu.example.com"}}}
    assert plan_for(docs).assignments == {}


@st.composite
def device_clusters(draw) -> list[dict]:
    docs: list[dict] = [device_class()]
    for i in range(draw(st.integers(1, 3))):
        docs.append(node(f"n{i}"))
        models = draw(st.lists(st.sampled_from(["a100", "h100"]), max_size=3))
        if models:
            devices = [gpu(f"g{j}", model=m) for j, m in enumerate(models)]
            for d in devices:
                if draw(st.integers(0, 3)) == 0:  # some devices tainted
                    d["taints"] = [{"key": "bad", "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "None"]))}]
            docs.append(resource_slice(f"n{i}", devices))
    shared = draw(st.booleans())  # the last two pods may share one claim
    for k in range(draw(st.integers(1, 5))):
        model = draw(st.sampled_from([None, "a100", "h100"]))
        selectors = (f'device.attributes["gpu.example.com"].model == "{model}"',) if model else ()
        request = device_request(count=draw(st.integers(1, 2)), selectors=selectors,
                                 all_devices=draw(st.integers(0, 5)) == 0)
        if draw(st.booleans()):
            request["exactly"]["tolerations"] = [{"key": "bad", "operator": "Exists"}]
        docs.append(resource_claim(f"c{k}", request))
        docs.append(pod(f"p{k}", resourceClaims=claims(f"c{k - 1}" if shared and k >= 2 and k % 2 else f"c{k}")))
    return docs


@settings(max_examples=60, deadline=None)
@given(device_clusters())
def test_every_plan_gives_each_device_once_and_meets_every_claim(docs: list[dict]) -> None:
    plan = plan_for(docs, time_limit=1)  # the checker: claims met, devices distinct
    allocated = [d for key in plan.assignments for a in plan.details.reserved[key]["DynamicResources"].values() for _, d in a.devices]
    assert len(allocated) == len(set(allocated))
    assert set(plan.details.reserved) == set(plan.assignments)
    if not any(r.get("exactly", {}).get("allocationMode") == "All" for d in docs if d["kind"] == "ResourceClaim"
               for r in d["spec"]["devices"]["requests"]):  # the rows are exact: Reserve never has to take a pod out
        assert not any("went to other pods" in r for rs in plan.unschedulable.values() for r in rs)


def test_nodes_whose_devices_are_alike_are_asked_of_the_allocator_once(monkeypatch) -> None:
    """Twenty nodes of one kind (a GPU each, one of them in use) and a pod asking for a GPU: the filter asks the
    allocator once per kind of node state (free, in use), not once a node, and the verdicts stay each node's own."""
    calls = []
    allocate = Allocator.allocate
    monkeypatch.setattr(Allocator, "allocate", lambda self, *a: calls.append(a[1].name) or allocate(self, *a))
    names = [f"gpu-{i:02d}" for i in range(20)]
    docs = [*(node(n) for n in names), device_class(), *(resource_slice(n, [gpu("g0")]) for n in names),
            resource_claim("held", allocated=[("gpu-00", "g0")], node="gpu-00", reserved_for=["old"]),
            resource_claim("train"), pod("trainer", resourceClaims=claims("train"))]
    cluster_ = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    compiled = compile_cluster(cluster_, None)
    (info,) = compiled.classes
    assert "gpu-00" in {cluster_.nodes[i].name for i in info.rejected.as_dict()}
    assert len(compiled.problem.classes[0].candidates) == 19
    assert len([c for c in calls if c != "gpu-00"]) <= 2
