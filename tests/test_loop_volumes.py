"""The loop's PreBind for volumes (upstream's VolumeBinding): before a pod is bound, the static PV chosen for
each unbound claim gets the claim (claimRef, bound-by-controller) and a claim left to a provisioner gets
volume.kubernetes.io/selected-node; a failed step undoes the others and requeues the pod, unbound."""
from __future__ import annotations

import threading

from loopfake import FakeAPI, node, pod, synced_loop
from testkit.manifests import claim, mounts, storage_class, volume


def _cluster(api: FakeAPI) -> None:
    api.put("Node", node("n1"))
    api.put("Node", node("n2"))
    api.put("StorageClass", storage_class("local"))
    api.put("StorageClass", storage_class("ebs", provisioner="ebs.csi.aws.com"))
    api.put("PersistentVolume", volume("pv-n2", node="n2"))
    api.put("PersistentVolumeClaim", claim("data", storage_class="local"))
    api.put("PersistentVolumeClaim", claim("scratch", storage_class="ebs"))
    api.put("Pod", pod("db", volumes=mounts("data", "scratch")))


def test_claims_are_prepared_before_the_pod_is_bound() -> None:
    api = FakeAPI()
    _cluster(api)
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert api.binds == [("default/db", "n2")]  # the only node with a PV for the local claim
    pv = api.objects[("PersistentVolume", "", "pv-n2")]
    assert pv["spec"]["claimRef"]["name"] == "data" and pv["spec"]["claimRef"]["uid"] == "uid-PersistentVolumeClaim-default-data"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    scratch = api.objects[("PersistentVolumeClaim", "default", "scratch")]
    assert scratch["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "n2"
    s.events.close()


def test_a_failed_volume_step_undoes_the_rest_and_requeues_the_pod() -> None:
    api = FakeAPI(fail_patches={"PersistentVolumeClaim scratch": 500})
    _cluster(api)
    s, loop = synced_loop(api)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert api.binds == []
    pv = api.objects[("PersistentVolume", "", "pv-n2")]
    assert not pv["spec"].get("claimRef") and "pv.kubernetes.io/bound-by-controller" not in pv["metadata"].get("annotations", {})
    unit = loop.queue._units["default/db"]
    assert "default/db" in unit.waiting and unit.attempts == 1 and not s.store.is_assumed("default/db")
    api.fail_patches.clear()
    for r in s.resources:  # what the watch would show: the volume's new resourceVersion
        if r.kind == "PersistentVolume":
            s.store.replace(r, api.list(r)[0])
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=2.0)).result()
    assert api.binds == [("default/db", "n2")]
    s.events.close()


def test_a_volume_taken_meanwhile_is_not_taken_twice() -> None:
    api = FakeAPI()
    _cluster(api)
    s, loop = synced_loop(api)
    taken = dict(api.objects[("PersistentVolume", "", "pv-n2")])
    taken["spec"] = {**taken["spec"], "claimRef": {"namespace": "other", "name": "theirs"}}
    api.put("PersistentVolume", taken)  # another scheduler bound it; our store has not seen it yet
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert api.binds == [] and api.objects[("PersistentVolume", "", "pv-n2")]["spec"]["claimRef"]["name"] == "theirs"
    assert "volume.kubernetes.io/selected-node" not in api.objects[("PersistentVolumeClaim", "default", "scratch")]["metadata"].get("annotations", {})
    s.events.close()
