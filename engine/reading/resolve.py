"""What the pods of one snapshot mean together: gangs, volumes, default spreading and ResourceClaims.

These facts depend on the whole snapshot (a gang's other members, the claims and volumes that exist, the
Services that select a pod), so they are derived per snapshot and put on copies of the pods that have any:
the pods a caller passes in are never written to. That is what lets the scheduler loop's cache keep its pods
between cycles (a gang mark or a claim's allocation from one cycle cannot leak into the next) and what makes
`Pod` a frozen value.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..devices.dra import extended_claims, pod_claims, tainted
from ..devices.storage import held_volumes, pending_volumes
from ..model.cluster import Cluster, Pod
from ..model.gangs import find_gangs
from ..model.ir import GangRules
from ..model.reasons import Code
from .workloads import default_selector, missing_controllers


def resolve_cluster(cluster: Cluster, gangs: GangRules | None, bound: bool = True) -> Cluster:
    """`cluster` with its gangs, and copies of the pods whose facts differ from a bare pod's (`bound`: the bound
    pods' volumes too; the scheduler loop's cache keeps those itself)."""
    members = find_gangs(cluster, gangs)
    if members.waiting:
        cluster = _set_waiting_aside(cluster, members.waiting)
    pending, claims = extended_claims(cluster)
    dra = pod_claims(pending, claims, cluster.namespaces)
    devices = replace(cluster.devices, devices=tainted(cluster.devices), claims=claims)
    storage, workloads = cluster.storage, cluster.workloads
    out = []
    for pod in pending:
        gang = members.pending.get(pod.key)
        facts: dict[str, Any] = {}
        if gang is not None:
            facts["gang"] = gang
        if pod.claims:
            facts["volumes"] = pending_volumes(pod, storage)
        if (spread := default_selector(pod, workloads, gang)) is not None:
            facts["default_spread"] = spread
        if pod.key in dra:
            facts["dra"] = dra[pod.key]
        out.append(replace(pod, **facts) if facts else pod)
    placed = _placed(cluster, members.bound, bound)
    resolved = replace(cluster, pending=out, bound=placed, gangs=members.gangs, devices=devices)
    if missing := missing_controllers(resolved):
        resolved = replace(resolved, notes=[
            *cluster.notes, f"{missing} pending pod(s) are controlled by ReplicaSets, StatefulSets or "
            "ReplicationControllers the snapshot lacks, so their default spreading counts only "
            "Services (include them: kubectl get replicasets,statefulsets,services -A -o yaml)"])
    return resolved


def _set_waiting_aside(cluster: Cluster, waiting: dict[str, str]) -> Cluster:
    """`cluster` with the pending pods that wait for their workload object skipped, saying so (InvalidObject, as a
    pod waiting for its PodGroup)."""
    return replace(cluster, pending=[p for p in cluster.pending if p.key not in waiting],
                   skipped={**cluster.skipped, **waiting},
                   skipped_codes={**cluster.skipped_codes, **dict.fromkeys(waiting, Code.INVALID_OBJECT)})


def _placed(cluster: Cluster, gang_of: dict[str, str], volumes: bool) -> list[Pod]:
    """The bound pods as this snapshot sees them. Without volumes to resolve or a gang with a pending member, as
    they are: the loop's cycle asks this of every bound pod, most of which are neither (25,000 at 5,000 nodes)."""
    if not volumes and not gang_of:
        return list(cluster.bound)
    return [_held(pod, gang_of.get(pod.key), cluster, volumes) for pod in cluster.bound]


def _held(pod: Pod, gang: str | None, cluster: Cluster, volumes: bool) -> Pod:
    """A bound pod as this snapshot sees it: a member of a gang with a pending member, holding its volumes."""
    facts: dict[str, Any] = {}
    if gang is not None:
        facts["gang"] = gang
    if volumes and pod.claims:
        facts["volumes"] = held_volumes(pod, cluster.storage)
    return replace(pod, **facts) if facts else pod
