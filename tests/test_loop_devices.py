"""The loop's PreBind for devices (upstream's DynamicResources): before a pod is bound, the claim it allocates
gets the delete-protection finalizer and its status (the devices Reserve chose, the node, the pod in
reservedFor); a claim allocated already only gains the pod in reservedFor; a failed write or bind takes
everything back and requeues the pod."""
from __future__ import annotations

import threading

from engine.loop.scheduler import BIND_STAGES
from loopfake import FakeAPI, node, pod, synced_loop
from testkit.manifests import claims, device_class, gpu, resource_claim, resource_slice


def _one_cycle(api: FakeAPI):
    """A synced scheduler over `api` that has planned and bound whatever is pending."""
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    return s, loop


def _cluster(api: FakeAPI) -> None:
    api.put("Node", node("cpu"))
    api.put("Node", node("gpu-1"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("gpu-1", [gpu("g0")]))
    api.put("ResourceClaim", resource_claim("train"))
    api.put("Pod", pod("trainer", resourceClaims=claims("train")))


def test_the_claim_is_allocated_and_reserved_before_the_bind() -> None:
    api = FakeAPI()
    _cluster(api)
    s, _loop = _one_cycle(api)
    assert api.binds == [("default/trainer", "gpu-1")]
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == ("gpu.example.com", "gpu-1", "g0")
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["gpu-1"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]
    s.events.close()


def test_a_failed_claim_write_takes_everything_back() -> None:
    api = FakeAPI(fail_patches={"ResourceClaim train": 500})
    _cluster(api)
    s, _loop = _one_cycle(api)
    assert api.binds == []
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert not (claim.get("status") or {}).get("allocation") and not claim["metadata"].get("finalizers")
    assert not s.store.is_assumed("default/trainer")
    s.events.close()


def test_a_failed_bind_takes_the_allocation_back() -> None:
    api = FakeAPI(fail_binds={"default/trainer": 500})
    _cluster(api)
    s, _loop = _one_cycle(api)
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert not (claim.get("status") or {}).get("allocation")
    assert not (claim.get("status") or {}).get("reservedFor")
    assert not claim["metadata"].get("finalizers")
    s.events.close()


def test_pods_sharing_a_claim_are_all_reserved_on_one_allocation() -> None:
    api = FakeAPI()
    api.put("Node", node("gpu-1", cpu="4"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("gpu-1", [gpu("g0"), gpu("g1")]))
    api.put("ResourceClaim", resource_claim("shared"))
    for i in range(3):
        api.put("Pod", pod(f"p{i}", resourceClaims=claims("shared")))
    s, _loop = _one_cycle(api)
    assert sorted(api.binds) == [("default/p0", "gpu-1"), ("default/p1", "gpu-1"), ("default/p2", "gpu-1")]
    claim = api.objects[("ResourceClaim", "default", "shared")]
    assert len(claim["status"]["allocation"]["devices"]["results"]) == 1
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["p0", "p1", "p2"]
    allocations = [body for kind, _, body in api.patches if "allocation" in (body.get("status") or {})]
    assert len(allocations) == 1  # written once, by the pod that allocates it
    s.events.close()


def test_the_allocation_carries_the_class_config() -> None:
    api = FakeAPI()
    _cluster(api)
    cls = device_class()
    cls["spec"]["config"] = [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "exclusive"}}}]
    api.put("DeviceClass", cls)
    s, _loop = _one_cycle(api)
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert claim["status"]["allocation"]["devices"]["config"] == [
        {"source": "FromClass", "requests": ["gpu"], **cls["spec"]["config"][0]}]
    s.events.close()


class _Backwards:
    """A bind pool that runs its work last first: were pods sharing a claim bound independently, a follower
    would be bound before the claim it follows is allocated."""

    def map(self, fn, items):
        items = list(items)
        done = {i: fn(item) for i, item in reversed(list(enumerate(items)))}
        return [done[i] for i in range(len(items))]

    def shutdown(self, wait: bool = True) -> None:
        pass


def test_the_pod_allocating_a_shared_claim_is_bound_before_those_following_it() -> None:
    api = FakeAPI()
    api.put("Node", node("gpu-1", cpu="4"))
    api.put("DeviceClass", device_class())
    api.put("ResourceSlice", resource_slice("gpu-1", [gpu("g0")]))
    api.put("ResourceClaim", resource_claim("shared"))
    for i in range(3):
        api.put("Pod", pod(f"p{i}", resourceClaims=claims("shared")))
    s, loop = synced_loop(api)
    loop.binder.pool = _Backwards()
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert next(key for key, _ in api.binds) == "default/p0"  # the one allocating it
    first_status = next(body for kind, _, body in api.patches if kind == "ResourceClaim" and "status" in body)
    assert "allocation" in first_status["status"]
    s.events.close()


def test_the_next_cycle_sees_the_allocation_before_the_watch_brings_it() -> None:
    api = FakeAPI()
    api.put("Node", node("gpu-1", cpu="4"))
    api.put("Node", node("gpu-2", cpu="4"))
    api.put("DeviceClass", device_class())
    for name in ("gpu-1", "gpu-2"):
        api.put("ResourceSlice", resource_slice(name, [gpu("g0")]))
    api.put("ResourceClaim", resource_claim("shared"))
    api.put("Pod", pod("p0", resourceClaims=claims("shared")))
    s, loop = synced_loop(api)  # no watch threads: the store learns only what the loop itself wrote
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    s.store.apply("Pod", "ADDED", api.put("Pod", pod("p1", resourceClaims=claims("shared"))))
    loop.cycle(["default/p1"]).result()
    assert len({n for _, n in api.binds}) == 1 and len(api.binds) == 2  # p1 follows p0's allocation
    allocations = [body for kind, _, body in api.patches if "allocation" in (body.get("status") or {})]
    assert len(allocations) == 1
    s.events.close()


def _extended(api: FakeAPI) -> None:
    api.put("Node", node("cpu"))
    api.put("Node", node("gpu-1"))
    cls = device_class()
    cls["spec"]["extendedResourceName"] = "example.com/gpu"
    api.put("DeviceClass", cls)
    api.put("ResourceSlice", resource_slice("gpu-1", [gpu("g0")]))
    api.put("Pod", pod("trainer", requests={"example.com/gpu": "1"}))


def test_an_extended_resource_gets_its_claim_made_allocated_and_named_on_the_pod() -> None:
    api = FakeAPI()
    _extended(api)
    s, _loop = _one_cycle(api)
    assert api.binds == [("default/trainer", "gpu-1")]
    ((kind, ns, name),) = api.created
    claim = api.objects[(kind, ns, name)]
    assert name.startswith("trainer-extended-resources-")
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Pod", "trainer", True)
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["request"], result["pool"], result["device"]) == ("container-0-request-1", "gpu-1", "g0")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]
    status = api.objects[("Pod", "default", "trainer")]["status"]["extendedResourceClaimStatus"]
    assert status == {"resourceClaimName": name, "requestMappings": [
        {"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-0-request-1"}]}
    s.events.close()


def test_a_failed_bind_deletes_the_extended_resource_claim() -> None:
    api = FakeAPI(fail_binds={"default/trainer": 500})
    _extended(api)
    s, _loop = _one_cycle(api)
    assert len(api.created) == 1 and not any(k[0] == "ResourceClaim" for k in api.objects)
    assert api.objects[("Pod", "default", "trainer")]["status"].get("extendedResourceClaimStatus") is None
    s.events.close()


def test_after_a_failed_bind_the_next_cycle_makes_a_new_extended_resource_claim() -> None:
    api = FakeAPI(fail_binds={"default/trainer": 500})
    _extended(api)
    s, loop = _one_cycle(api)
    api.fail_binds.clear()
    loop.cycle(["default/trainer"]).result()
    assert api.binds == [("default/trainer", "gpu-1")] and len(api.created) == 2
    s.events.close()


def test_a_cycle_planned_while_the_last_one_binds_does_not_reuse_its_devices() -> None:
    api = FakeAPI()
    _cluster(api)  # gpu-1 has one device; trainer claims it
    api.put("ResourceClaim", resource_claim("second"))  # its pod asks no cpu: only the device stands in its way
    s, loop = synced_loop(api)
    held = threading.Event()
    for _ in range(BIND_STAGES):  # every bind stage is busy: the first cycle's binds wait behind these
        loop.bind_stage.submit(held.wait, 10)
    first = loop.cycle(["default/trainer"])
    s.store.apply("Pod", "ADDED", api.put("Pod", pod("second", cpu="0", resourceClaims=claims("second"))))
    second = loop.cycle(["default/second"])
    held.set()
    first.result(), second.result()
    assert api.binds == [("default/trainer", "gpu-1")]  # the one device went to the first cycle's claim
    allocated = [r["device"] for c in ("train", "second")
                 for r in ((api.objects[("ResourceClaim", "default", c)].get("status") or {}).get("allocation") or {})
                 .get("devices", {}).get("results", [])]
    assert allocated == ["g0"]
    s.events.close()


def test_the_loop_watches_device_taint_rules_where_the_apiserver_serves_them() -> None:
    """A DeviceTaintRule (resource.k8s.io/v1, GA in 1.37) keeps the loop off the device it taints; where the API
    does not serve the kind (1.36 by default), there are no rules and the device is allocated."""
    api = FakeAPI()
    _cluster(api)
    api.put("DeviceTaintRule", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                                "metadata": {"name": "drain"},
                                "spec": {"deviceSelector": {"pool": "gpu-1"},
                                         "taint": {"key": "maintenance", "effect": "NoSchedule"}}})
    s, _loop = _one_cycle(api)
    assert api.binds == []
    s.events.close()
    absent = FakeAPI(absent_kinds={"DeviceTaintRule"})
    _cluster(absent)
    s, _loop = _one_cycle(absent)
    assert absent.binds == [("default/trainer", "gpu-1")]
    s.events.close()
