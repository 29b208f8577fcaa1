"""System-default spreading in the cluster: the loop watches ReplicaSets and Services (under the RBAC it is
given) and spreads a Deployment's replicas as kube-scheduler would, where bare pods pack."""
from __future__ import annotations

import time
from collections import Counter

from testkit.controlplane import ControlPlane
from testkit.manifests import ZONE_KEY, api_pod, created, replica_set, service
from testkit.scheduling import Kube, node_of, wait_for


def _replicas(kube: Kube, rs: dict, count: int, scheduler: str, sel: dict, every: float = 0.0) -> None:
    """Create the ReplicaSet's pods web-0.. as its controller would (owned by it, its template's labels), `every`
    seconds apart."""
    meta = rs["metadata"]
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": meta["name"], "uid": meta["uid"], "controller": True}]
    labels = rs["spec"]["template"]["metadata"]["labels"]
    for i in range(count):
        pod = api_pod(f"web-{i}", meta["namespace"], scheduler=scheduler, labels=labels, nodeSelector=sel)
        pod["metadata"]["ownerReferences"] = owner
        kube.create(pod)
        time.sleep(every)


def test_a_replica_sets_pods_spread_and_bare_pods_pack(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    ns, sel = "sched-spread", {"e2e": "spread"}
    control_plane.ensure_namespace(ns)
    for i in range(4):
        control_plane.create_ready_node(f"spread-{i}", cpu="8", labels=sel)
    labels = {"app": "web", "pod-template-hash": "abc"}
    rs = kube.create(created(replica_set("web-abc", labels, 8, ns=ns)))
    schedulers.start("--scheduler-name", "spread-scheduler")
    _replicas(kube, rs, 8, "spread-scheduler", sel)
    wait_for("replicas bound", lambda: all(node_of(p) for p in kube.pods(ns).values()) and len(kube.pods(ns)) == 8)
    assert sorted(Counter(node_of(p) for p in kube.pods(ns).values()).values()) == [2, 2, 2, 2]

    for i in range(4):
        kube.create(api_pod(f"bare-{i}", ns, scheduler="spread-scheduler", labels={"app": "batch"}, nodeSelector=sel))
    wait_for("bare pods bound", lambda: all(node_of(p) for p in kube.pods(ns).values()) and len(kube.pods(ns)) == 12)
    bare = {node_of(p) for n, p in kube.pods(ns).items() if n.startswith("bare")}
    assert len(bare) == 1  # no selector, no spreading: they pack


def test_replicas_arriving_at_two_per_second_go_one_per_node_as_the_dry_run_plans(control_plane: ControlPlane,
                                                                                  kube: Kube, schedulers) -> None:
    """Issue 25: 6 replicas (a Service selects them) arriving at 2/s on 6 nodes in 3 zones: kube-scheduler puts
    one per node; the loop put two per node on three nodes while the dry-run picked an empty node."""
    ns, sel = "sched-arrivals", {"e2e": "arrivals"}
    control_plane.ensure_namespace(ns)
    for i in range(6):
        control_plane.create_ready_node(f"arrive-{i}", cpu="4", labels={**sel, ZONE_KEY: f"zone-{i % 3}"})
    labels = {"app": "web", "pod-template-hash": "def"}
    rs = kube.create(created(replica_set("web-def", labels, 6, ns=ns)))
    kube.create(created(service("web", {"app": "web"}, ns=ns)))
    schedulers.start("--scheduler-name", "arrivals-scheduler")
    _replicas(kube, rs, 6, "arrivals-scheduler", sel, every=0.5)
    wait_for("replicas bound", lambda: len(kube.pods(ns)) == 6 and all(node_of(p) for p in kube.pods(ns).values()))
    nodes = [node_of(p) for p in kube.pods(ns).values()]
    assert sorted(Counter(nodes).values()) == [1] * 6, nodes
