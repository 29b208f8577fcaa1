"""The loop's PreBind for devices (upstream's DynamicResources): before a pod is bound, the claim it allocates
gets the delete-protection finalizer and its status (the devices Reserve chose, the node, the pod in
reservedFor); a claim allocated already only gains the pod in reservedFor; a failed write or bind takes
everything back and requeues the pod."""
from __future__ import annotations

import threading

from loopfake import FakeAPI, node, pod, synced_loop
from testkit.manifests import claims, device_class, gpu, resource_claim, resource_slice


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
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
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
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert api.binds == []
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert not (claim.get("status") or {}).get("allocation") and not claim["metadata"].get("finalizers")
    assert not s.store.is_assumed("default/trainer")
    s.events.close()


def test_a_failed_bind_takes_the_allocation_back() -> None:
    api = FakeAPI(fail_binds={"default/trainer": 500})
    _cluster(api)
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    claim = api.objects[("ResourceClaim", "default", "train")]
    assert not (claim.get("status") or {}).get("allocation")
    assert not (claim.get("status") or {}).get("reservedFor")
    assert not claim["metadata"].get("finalizers")
    s.events.close()
