"""Volumes end to end on the real apiserver with the real PV controller (kube-controller-manager's
persistentvolume-binder and statefulset controllers): a local-PV StatefulSet lands where its PVs are and each
claim is bound to a PV of its own; a WaitForFirstConsumer claim of a provisioner gets the pod's node as
`volume.kubernetes.io/selected-node` (the test plays the provisioner) and ends Bound."""
from __future__ import annotations

from testkit.controlplane import ControlPlane, controllers
from testkit.manifests import HOSTNAME_KEY, ZONE_KEY, api_pod, claim, created, storage_class, volume
from testkit.scheduling import Kube, node_of, wait_for

SELECTED_NODE = "volume.kubernetes.io/selected-node"


def _claims(kube: Kube, ns: str) -> dict[str, dict]:
    return {c["metadata"]["name"]: c for c in kube.ok("GET", f"/api/v1/namespaces/{ns}/persistentvolumeclaims")["items"]}


def _statefulset(name: str, ns: str, replicas: int, storage: str, sel: dict) -> dict:
    labels = {"app": name}
    spec = api_pod(name, ns, labels=labels, nodeSelector=sel)["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
                     "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": spec},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                         "accessModes": ["ReadWriteOnce"], "storageClassName": storage,
                         "resources": {"requests": {"storage": "1Gi"}}}}]}}


def test_a_local_pv_statefulset_is_bound_end_to_end(control_plane: ControlPlane, kube: Kube, chart_schedulers,
                                                    tmp_path) -> None:
    ns, sel = "vol-local", {"e2e": "vol-local"}
    control_plane.ensure_namespace(ns)
    for name in ("local-a", "local-b", "local-c"):
        control_plane.create_ready_node(name, labels=sel)
    kube.create(created(storage_class("e2e-local")))
    for i, where in enumerate(["local-b", "local-b", "local-c"]):
        kube.create(created(volume(f"e2e-local-{i}", storage_class="e2e-local", node=where)))
    with controllers(control_plane, ("persistentvolume-binder-controller", "statefulset-controller"), tmp_path / "kcm"):
        chart_schedulers.start()
        kube.create(_statefulset("db", ns, 3, "e2e-local", sel))
        wait_for("3 replicas bound", lambda: sum(1 for p in kube.pods(ns).values() if node_of(p)) == 3, timeout=90)
        where = sorted(node_of(p) for p in kube.pods(ns).values())
        assert where == ["local-b", "local-b", "local-c"]  # never local-a: it has no PV
        wait_for("every claim Bound", lambda: all(c.get("status", {}).get("phase") == "Bound" for c in _claims(kube, ns).values())
                 and len(_claims(kube, ns)) == 3, timeout=90)
    claims = _claims(kube, ns)
    volumes = {c["spec"]["volumeName"] for c in claims.values()}
    assert volumes == {"e2e-local-0", "e2e-local-1", "e2e-local-2"}  # one PV each
    pods = kube.pods(ns)
    for c in claims.values():
        replica = c["metadata"]["name"].removeprefix("data-")
        pv = kube.ok("GET", f"/api/v1/persistentvolumes/{c['spec']['volumeName']}")
        pinned = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
        assert pinned["key"] == HOSTNAME_KEY and pinned["values"] == [node_of(pods[replica])]


def test_a_wait_for_first_consumer_claim_is_provisioned_where_the_pod_goes(control_plane: ControlPlane, kube: Kube,
                                                                          chart_schedulers, tmp_path) -> None:
    ns, sel = "vol-wffc", {"e2e": "vol-wffc"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("wffc-a", labels={**sel, ZONE_KEY: "a"})
    control_plane.create_ready_node("wffc-b", labels={**sel, ZONE_KEY: "b"})
    kube.create(created(storage_class("e2e-zonal", provisioner="e2e.example.com", zones=["b"])))
    kube.create(created(claim("scratch", storage_class="e2e-zonal", ns=ns)))
    with controllers(control_plane, ("persistentvolume-binder-controller",), tmp_path / "kcm"):
        chart_schedulers.start()
        kube.create(api_pod("job", ns, nodeSelector=sel, volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "scratch"}}]))
        wait_for("pod bound", lambda: node_of(kube.pods(ns)["job"]), timeout=60)
        assert node_of(kube.pods(ns)["job"]) == "wffc-b"  # the class provisions in zone b only
        annotated = wait_for("selected-node", lambda: _claims(kube, ns)["scratch"]["metadata"].get("annotations", {}).get(SELECTED_NODE))
        assert annotated == "wffc-b"
        # the provisioner's part: a volume in the selected node's zone, pre-bound to the claim
        pv = volume("e2e-provisioned", storage_class="e2e-zonal", zone="b", claim_ref=(ns, "scratch"),
                    csi=("e2e.example.com", "handle-1"))
        pv["spec"]["claimRef"]["uid"] = _claims(kube, ns)["scratch"]["metadata"]["uid"]
        kube.create(created(pv))
        wait_for("claim Bound", lambda: _claims(kube, ns)["scratch"].get("status", {}).get("phase") == "Bound", timeout=60)
    assert _claims(kube, ns)["scratch"]["spec"]["volumeName"] == "e2e-provisioned"
