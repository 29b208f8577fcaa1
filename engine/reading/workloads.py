"""Which pods upstream's system-default spreading spreads, and over which pods: resolved once per snapshot.

kube-scheduler's PodTopologySpread gives a pod without its own `topologySpreadConstraints` two soft defaults
(hostname maxSkew 3, zone maxSkew 5), counting the pods that match the selectors of the Services selecting it
and of the ReplicaSet, StatefulSet or ReplicationController controlling it (helper.DefaultSelector); a pod
nothing selects gets none. engine.reading.resolve puts that selector on the snapshot's copy of the pod
(`Pod.default_spread`); podspec turns it into spread rules. One departure, on purpose: pods of a gang or a Job
keep packing (a batch job wants its workers close, and a headless Service for their DNS names would otherwise
spread them).
"""

from __future__ import annotations

from ..model.cluster import Cluster, LabelSelector, Pod, Requirement, Workloads

CONTROLLERS = ("ReplicaSet", "StatefulSet", "ReplicationController")
BATCH_OWNERS = ("Job",)


def default_selector(pod: Pod, workloads: Workloads, gang: str | None) -> LabelSelector | None:
    """helper.DefaultSelector: the merged selectors of the Services in the pod's namespace that select it, ANDed
    with the selector of its controller; None when that is empty (nothing selects the pod), or for batch pods."""
    if gang is not None or (pod.owner is not None and pod.owner[0] in BATCH_OWNERS):
        return None
    merged: dict[str, str] = {}
    for selector in workloads.services.get(pod.namespace, ()):
        if all(pod.labels.get(k) == v for k, v in selector.items()):
            merged.update(selector)
    requirements = [Requirement(k, "In", (v,)) for k, v in sorted(merged.items())]
    if pod.owner is not None and pod.owner[0] in CONTROLLERS:
        controller = workloads.controllers.get((pod.owner[0], pod.namespace, pod.owner[1]))
        if controller is not None and not controller.nothing:
            requirements += [r for r in controller.requirements if r not in requirements]
    return LabelSelector(tuple(requirements)) if requirements else None


def missing_controllers(cluster: Cluster) -> int:
    """Pending pods whose ReplicaSet, StatefulSet or ReplicationController the snapshot lacks (their default
    spreading then counts only Services, as upstream's would with the object gone)."""
    known = cluster.workloads.controllers
    return sum(1 for p in cluster.pending
               if p.owner is not None and p.owner[0] in CONTROLLERS and p.gang is None
               and (p.owner[0], p.namespace, p.owner[1]) not in known)
