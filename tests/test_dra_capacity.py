"""Consumable capacity (DRAConsumableCapacity, beta and on since 1.36): a device with `allowMultipleAllocations`
is shared by claims while their amounts fit its capacity; a request's amount is rounded up to the device's
requestPolicy (upstream's consumable_capacity.go), and an amount the policy refuses keeps the device from it.
The batch model counts the shares, so one batch never promises a device more than it has; Reserve writes each
share's consumedCapacity (and the loop a shareID)."""
from __future__ import annotations

import threading

import pytest

from engine.devices.dra_capacity import consumed
from engine.model.cluster import CapacityPolicy, Device, SubRequest
from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from loopfake import node as api_node
from loopfake import pod as api_pod
from testkit.checker import check_plan
from testkit.manifests import claims, device_class, node, pod, resource_claim, resource_slice

GI = 1024**3 * 1000  # milli-units


def shared_gpu(name: str = "g0", memory: str = "40Gi", policy: dict | None = None) -> dict:
    capacity: dict = {"value": memory}
    if policy:
        capacity["requestPolicy"] = policy
    return {"name": name, "allowMultipleAllocations": True, "capacity": {"memory": capacity}}


def memory_request(amount: str | None, name: str = "gpu") -> dict:
    exactly: dict = {"deviceClassName": "gpu", "count": 1}
    if amount:
        exactly["capacity"] = {"requests": {"memory": amount}}
    return {"name": name, "exactly": exactly}


def plan_for(docs: list[dict]):
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(time_limit=3, workers=1))
    assert check_plan(docs, plan.assignments) == []
    return plan


def shares(plan) -> list[tuple[str, int]]:
    return sorted((d, amount[0][2]) for key in plan.assignments
                  for a in plan.details.reserved[key]["DynamicResources"].values() for _, d, amount in a.shares)


def _pods(amounts: list[str | None]) -> list[dict]:
    return [doc for i, amount in enumerate(amounts)
            for doc in (resource_claim(f"c{i}", memory_request(amount)), pod(f"p{i}", resourceClaims=claims(f"c{i}")))]


RANGE = {"default": "10Gi", "validRange": {"min": "10Gi", "max": "30Gi", "step": "5Gi"}}


@pytest.mark.parametrize(("asked", "policy", "got"), [
    (None, None, 40), ("8Gi", None, 8),  # no policy: all of it, or what is asked
    (None, RANGE, 10), ("4Gi", RANGE, 10), ("12Gi", RANGE, 15), ("15Gi", RANGE, 15), ("30Gi", RANGE, 30),
    ("31Gi", RANGE, None),  # rounded to 35Gi, beyond max
    ("12Gi", {"default": "8Gi", "validValues": ["8Gi", "16Gi"]}, 16), ("17Gi", {"default": "8Gi", "validValues": ["8Gi", "16Gi"]}, None),
    ("41Gi", None, None),  # more than the device has
])
def test_a_request_s_amount_is_rounded_as_upstream_rounds_it(asked, policy, got) -> None:
    docs = [resource_slice("n", [shared_gpu(policy=policy)]), resource_claim("c", memory_request(asked))]
    cluster = build_cluster([(f"d{i}", d) for i, d in enumerate(docs)])
    sub = cluster.devices.claims["default/c"].requests[0].alternatives[0]
    amount = consumed(cluster.devices.devices[0], sub)
    assert (amount[0][2] // GI if amount else None) == got


def test_a_request_naming_a_capacity_the_device_lacks_is_not_served() -> None:
    device = Device("d", "p", "g", capacity=(("d", "memory", 1000),), multiple=True)
    assert consumed(device, SubRequest("r", "gpu", capacity=(("cores", 1000),))) is None
    assert consumed(device, SubRequest("r", "gpu", capacity=(("memory", 500),))) == (("d", "memory", 500),)
    stepped = Device("d", "p", "g", capacity=(("d", "c", 1000),), multiple=True,
                     policies=(("d", "c", CapacityPolicy(200, (), 200, 1000, 100)),))
    assert consumed(stepped, SubRequest("r", "gpu", capacity=(("c", 250),))) == (("d", "c", 300),)  # 1.37: 0.3


def test_four_pods_share_one_gpu_within_its_capacity() -> None:
    """Five pods asking 10Gi each of one shared 40Gi GPU: four are placed on it, in one batch, the fifth waits."""
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu()]), *_pods(["10Gi"] * 5)]
    plan = plan_for(docs)
    assert len(plan.assignments) == 4
    assert shares(plan) == [("gpu.example.com/gpu-1/g0", 10 * GI)] * 4


def test_pods_of_different_amounts_never_share_past_the_capacity() -> None:
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu()]), *_pods(["30Gi", "20Gi", "20Gi"])]
    plan = plan_for(docs)
    assert sum(amount for _, amount in shares(plan)) <= 40 * GI
    assert set(plan.assignments) == {"default/p1", "default/p2"}  # two pods beat one


def test_a_refused_share_names_the_amounts_asked_once_each() -> None:
    """Shares of different amounts on one device are different kinds of request: the reason names each by what it
    asks (not the device class alone, repeated), and at most two of them, however many sizes the batch holds."""
    amounts = ["30Gi", "20Gi", "20Gi", "15Gi", "25Gi"]
    plan = plan_for([node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu()]), *_pods(amounts)])
    said = " ".join(" ".join(why) for why in plan.unschedulable.values())
    assert plan.unschedulable and ("asking 20Gi memory" in said or "asking 30Gi memory" in said), said
    assert "gpu or gpu" not in said, said
    assert "more kind(s)" in said, said


def test_a_share_the_plan_promised_but_no_single_device_holds_is_told_where_it_was_planned() -> None:
    """Two 40Gi GPUs and shares of 30, 30, 15 and 5Gi: the batch's capacity row counts the node's 80Gi together, so
    the plan may promise all four, but once each GPU holds a 30Gi share neither has room for the 15Gi one; Reserve
    serves three and the fourth is refused naming the node it was planned on (not "0/1 nodes", which a cluster of
    many nodes would read as wrong)."""
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu("g0"), shared_gpu("g1")]),
            *_pods(["30Gi", "30Gi", "15Gi", "5Gi"])]
    plan = plan_for(docs)
    assert len(plan.assignments) == 3
    (why,) = plan.unschedulable.values()
    assert why[0].startswith("node gpu-1 was planned for it, but it cannot allocate all claims there"), why


def test_larger_shares_are_served_first_so_mixed_sizes_pack_as_the_plan_promised() -> None:
    """Two 40Gi GPUs and shares of 15, 15, 25 and 25Gi (80Gi in all, as the node's capacity row counts it): served
    in the pods' order the two 15s take one GPU and the second 25 finds no room; served larger first (first-fit
    decreasing) each GPU takes a 25 and a 15, and all four run."""
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu("g0"), shared_gpu("g1")]),
            *_pods(["15Gi", "15Gi", "25Gi", "25Gi"])]
    plan = plan_for(docs)
    assert len(plan.assignments) == 4, plan.unschedulable
    per_device: dict[str, int] = {}
    for device, amount in shares(plan):
        per_device[device] = per_device.get(device, 0) + amount
    assert per_device == {"gpu.example.com/gpu-1/g0": 40 * GI, "gpu.example.com/gpu-1/g1": 40 * GI}


def test_a_request_naming_no_amount_takes_the_whole_device() -> None:
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu()]), *_pods([None, "10Gi"])]
    assert len(plan_for(docs).assignments) == 1


def test_shares_allocated_already_count() -> None:
    held = resource_claim("held", memory_request("30Gi"))
    held["status"] = {"allocation": {"devices": {"results": [{
        "request": "gpu", "driver": "gpu.example.com", "pool": "gpu-1", "device": "g0",
        "shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "consumedCapacity": {"memory": "30Gi"}}]}}}
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu()]), held, *_pods(["20Gi", "10Gi"])]
    plan = plan_for(docs)
    assert set(plan.assignments) == {"default/p1"}


def _held(name: str, device: str, amount: str) -> dict:
    claim = resource_claim(name, memory_request(amount))
    claim["status"] = {"allocation": {"devices": {"results": [{
        "request": "gpu", "driver": "gpu.example.com", "pool": "gpu-1", "device": device,
        "shareID": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "consumedCapacity": {"memory": amount}}]}}}
    return claim


def test_a_share_and_a_whole_device_both_fit_beside_a_share_held_already() -> None:
    """g1 holds a 30Gi share: a pod asking g-whole and one asking 10Gi fit together only with the 10Gi on g1. Reserve
    serves the pod with fewer free devices first, counting the share held (counting none, both had two choices and
    the share took g0 first, leaving the whole pod out)."""
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu("g0"), shared_gpu("g1")]),
            _held("held", "g1", "30Gi"), *_pods(["10Gi", None])]
    plan = plan_for(docs)
    assert set(plan.assignments) == {"default/p0", "default/p1"}
    assert shares(plan) == [("gpu.example.com/gpu-1/g0", 40 * GI), ("gpu.example.com/gpu-1/g1", 10 * GI)]


def test_a_share_goes_where_it_leaves_least_free() -> None:
    """Best fit among shared devices: a 10Gi share on the GPU with 10Gi left, not on the idle one listed first."""
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [shared_gpu("g0"), shared_gpu("g1")]),
            _held("held", "g1", "30Gi"), *_pods(["10Gi"])]
    assert shares(plan_for(docs)) == [("gpu.example.com/gpu-1/g1", 10 * GI)]


def test_a_device_not_shared_is_filtered_by_the_amount_asked() -> None:
    """capacity.requests on a device without allowMultipleAllocations: a filter (upstream's CmpRequestOverCapacity)."""
    plain = {"name": "g0", "capacity": {"memory": {"value": "40Gi"}}}
    docs = [node("gpu-1"), device_class(), resource_slice("gpu-1", [plain]), *_pods(["80Gi"])]
    assert plan_for(docs).assignments == {}
    docs[-2] = resource_claim("c0", memory_request("20Gi"))
    plan = plan_for(docs)
    assert plan.assignments == {"default/p0": "gpu-1"} and shares(plan) == []


def test_the_loop_writes_each_share_with_its_id_and_consumed_capacity() -> None:
    api = FakeAPI()
    api.put("Node", api_node("gpu-1", cpu="2"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("gpu-1", [shared_gpu()]))
    for i in range(2):
        api.put("ResourceClaim", resource_claim(f"c{i}", memory_request("20Gi")))
        api.put("Pod", api_pod(f"p{i}", resourceClaims=claims(f"c{i}")))
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    results = [api.objects[("ResourceClaim", "default", f"c{i}")]["status"]["allocation"]["devices"]["results"][0]
               for i in range(2)]
    assert [r["consumedCapacity"] for r in results] == [{"memory": "21474836480"}] * 2
    assert len({r["shareID"] for r in results}) == 2 and sorted(api.binds) == [("default/p0", "gpu-1"), ("default/p1", "gpu-1")]
    s.events.close()
