"""`gang by workload` against a real kube-apiserver: the JobSet, LeaderWorkerSet, RayCluster, PyTorchJob and MPIJob
CRDs installed from their pinned releases' manifests (testkit/workloads.py), the workload objects and their pods
made by hand as their controllers would (no controller runs here), and the scheduler, as the chart's
ServiceAccount, binding each gang whole or not at all: a JobSet larger than the room waits whole, one of two LeaderWorkerSet groups starts (never a
part of each), a RayCluster's head and minimum workers start together, a PyTorchJob waits whole and an MPIJob starts
whole."""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import created
from testkit.scheduling import Kube, node_of, wait_for
from testkit.workloads import (
    PLURAL,
    jobset,
    jobset_pod,
    leaderworkerset,
    lws_pod,
    mpi_pod,
    mpijob,
    pytorch_pod,
    pytorchjob,
    ray_pod,
    raycluster,
    workload_crd,
)

SCHEDULER = "workload-sched"
NS = "sched-workloads"
SELECTOR = {"e2e": "workloads"}
RAY_NS = "sched-ray"
POLICY = 'policy workloads {\n  applies to all pods\n  gang by workload\n}\n'


def _install(kube: Kube, kind: str) -> None:
    """`kind`'s released CRD, idempotent, once it is served."""
    crd = workload_crd(kind)
    status, data = kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status in (201, 409), (status, data)
    group = crd["spec"]["group"]
    version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
    wait_for(f"{kind} CRD established",
             lambda: kube.request("GET", f"/apis/{group}/{version}/{crd['spec']['names']['plural']}")[0] == 200)


def _create(kube: Kube, obj: dict, ns: str = NS) -> dict:
    """A workload object (its uid, for its pods' owner references, is the server's)."""
    path = f"/apis/{obj['apiVersion']}/namespaces/{ns}/{PLURAL[obj['kind']]}"
    return kube.ok("POST", path, created({**obj, "metadata": {**obj["metadata"], "namespace": ns}}))


def _pod(kube: Kube, manifest: dict, uid: str = "", ns: str = NS) -> None:
    manifest["metadata"]["namespace"] = ns
    if uid:
        manifest["metadata"]["ownerReferences"][0]["uid"] = uid
    kube.create(created(manifest))


def _start(kube: Kube, chart_schedulers, chart_identity, ns: str) -> None:
    """The scheduler, as the chart installed in `ns` with a profile reading its ConfigMap of policies there."""
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policies", "namespace": ns},
                 "data": {"workloads.policy": POLICY}})
    identity = chart_identity(f"{ns}-chart", ns, {"profiles": [{"name": SCHEDULER, "existingConfigMap": "policies"}]})
    chart_schedulers.start("--scheduler-name", SCHEDULER, "--policy-configmap", f"{ns}/policies", kubeconfig=identity)


def _said(kube: Kube, name: str, ns: str = NS) -> dict | None:
    """The pod's PodScheduled=False condition, once the scheduler has written it."""
    conditions = (kube.pods(ns)[name].get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)


def test_workload_gangs_start_whole_or_wait(control_plane: ControlPlane, kube: Kube, chart_schedulers,
                                            chart_identity) -> None:
    for kind in ("JobSet", "LeaderWorkerSet", "RayCluster"):
        _install(kube, kind)
    control_plane.ensure_namespace(NS)
    for i in range(2):
        control_plane.create_ready_node(f"workloads-{i}", cpu="2", labels=SELECTOR)
    _create(kube, jobset("big", [("w", 5, 1, 1)]))  # 5 pods of 1 cpu: room for 4
    lws = _create(kube, leaderworkerset("lws", size=3, replicas=2))  # two groups of 3: room for one
    _start(kube, chart_schedulers, chart_identity, NS)
    spec = {"scheduler": SCHEDULER, "cpu": "1", "nodeSelector": SELECTOR}
    for i in range(5):
        _pod(kube, jobset_pod(f"big-{i}", "big", "w", i, **spec))
    wait_for("the JobSet's pods told they wait", lambda: all(_said(kube, f"big-{i}") for i in range(5)), timeout=60)
    assert not any(node_of(p) for p in kube.pods(NS).values())
    assert "JobSet" in _said(kube, "big-0")["message"]
    for group in range(2):
        for worker in range(3):
            _pod(kube, lws_pod(f"lws-{group}-{worker}", "lws", group, worker, **spec), lws["metadata"]["uid"])
    wait_for("one LeaderWorkerSet group bound", lambda: sum(1 for p in kube.pods(NS).values() if node_of(p)) == 3,
             timeout=60)
    bound = sorted(n for n, p in kube.pods(NS).items() if node_of(p))
    assert len({n.split("-")[1] for n in bound}) == 1 and all(n.startswith("lws-") for n in bound), bound
    assert not any(node_of(p) for n, p in kube.pods(NS).items() if n.startswith("big-"))


def test_a_rayclusters_head_and_minimum_workers_start_together(control_plane: ControlPlane, kube: Kube,
                                                               chart_schedulers, chart_identity) -> None:
    _install(kube, "RayCluster")
    ns_nodes = {"e2e": "ray"}
    control_plane.ensure_namespace(RAY_NS)
    control_plane.create_ready_node("ray-0", cpu="3", labels=ns_nodes)
    rc = _create(kube, raycluster("rc", [("gpu", 3, 1)]), RAY_NS)  # head + 3 workers, room for 3
    _start(kube, chart_schedulers, chart_identity, RAY_NS)
    spec = {"scheduler": SCHEDULER, "cpu": "1", "nodeSelector": ns_nodes}
    _pod(kube, ray_pod("rc-head", "rc", **spec), rc["metadata"]["uid"], RAY_NS)
    for i in range(3):
        _pod(kube, ray_pod(f"rc-w{i}", "rc", "gpu", **spec), rc["metadata"]["uid"], RAY_NS)
    wait_for("the cluster's pods told they wait",
             lambda: all(_said(kube, n, RAY_NS) for n in ("rc-head", "rc-w0")), timeout=60)
    assert not any(node_of(p) for p in kube.pods(RAY_NS).values())
    control_plane.create_ready_node("ray-1", cpu="1", labels=ns_nodes)  # room for all four
    wait_for("the whole cluster bound", lambda: sum(1 for p in kube.pods(RAY_NS).values() if node_of(p)) == 4,
             timeout=60)


def test_kubeflow_jobs_start_whole(control_plane: ControlPlane, kube: Kube, chart_schedulers, chart_identity) -> None:
    """A PyTorchJob (master and 3 workers) with room for 3 waits whole; an MPIJob (launcher and 2 workers, the launcher
    a Job's pod) then starts whole in that room."""
    for kind in ("PyTorchJob", "MPIJob"):
        _install(kube, kind)
    ns, nodes = "sched-kubeflow", {"e2e": "kubeflow"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("kubeflow-0", cpu="3", labels=nodes)
    pt = _create(kube, pytorchjob("pt", workers=3), ns)
    mpi = _create(kube, mpijob("mpi", workers=2), ns)
    _start(kube, chart_schedulers, chart_identity, ns)
    spec = {"scheduler": SCHEDULER, "cpu": "1", "nodeSelector": nodes}
    _pod(kube, pytorch_pod("pt-master-0", "pt", "master", **spec), pt["metadata"]["uid"], ns)
    for i in range(3):
        _pod(kube, pytorch_pod(f"pt-worker-{i}", "pt", "worker", **spec), pt["metadata"]["uid"], ns)
    wait_for("the PyTorchJob's pods told they wait",
             lambda: all(_said(kube, n, ns) for n in ("pt-master-0", "pt-worker-2")), timeout=60)
    assert not any(node_of(p) for p in kube.pods(ns).values())
    _pod(kube, mpi_pod("mpi-launcher", "mpi", "launcher", **spec), ns=ns)
    for i in range(2):
        _pod(kube, mpi_pod(f"mpi-worker-{i}", "mpi", "worker", **spec), mpi["metadata"]["uid"], ns)
    wait_for("the MPIJob bound whole", lambda: sorted(n for n, p in kube.pods(ns).items() if node_of(p)) == [
        "mpi-launcher", "mpi-worker-0", "mpi-worker-1"], timeout=60)
