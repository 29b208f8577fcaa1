"""Builders for real Kubernetes manifests (plain dicts, as `kubectl get -o yaml` prints them) and a runner."""

from __future__ import annotations

from typing import Any

from engine.load import build_cluster
from engine.plan import Plan, make_plan

SCHED = "policy-scheduler"


def node(name: str, cpu: str = "4", memory: str = "16Gi", pods: int = 110, labels: dict | None = None,
         taints: list[dict] | None = None, unschedulable: bool = False, **extra: Any) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **extra}
    meta_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": meta_labels},
            "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, cpu: str | None = "100m", memory: str | None = None, ns: str = "default",
        labels: dict | None = None, node_name: str | None = None, scheduler: str = SCHED, priority: int | None = None,
        phase: str | None = None, **spec_extra: Any) -> dict:
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    extra_requests = spec_extra.pop("requests", {})
    requests.update(extra_requests)
    container: dict[str, Any] = {"name": "main", "image": "registry.k8s.io/pause:3.9", "resources": {"requests": requests}}
    if "ports" in spec_extra:
        container["ports"] = spec_extra.pop("ports")
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container], **spec_extra}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    status = {"phase": phase or ("Running" if node_name else "Pending")}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
            "spec": spec, "status": status}


def podgroup(name: str, min_member: int, ns: str = "default") -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns}, "spec": {"minMember": min_member}}


def term(labels: dict, key: str = "kubernetes.io/hostname", **extra: Any) -> dict:
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti(*terms: dict) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def node_affinity(*terms: list[dict], fields: list[dict] | None = None) -> dict:
    node_terms = [{"matchExpressions": t} for t in terms]
    if fields is not None:
        node_terms.append({"matchFields": fields})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}}}


def expr(key: str, op: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def spread(labels: dict, key: str = "topology.kubernetes.io/zone", skew: int = 1, hard: bool = True, **extra) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels}, **extra}


def run(docs: list[dict], time_limit: float = 5.0, scheduler: str = SCHED, **kw: Any) -> Plan:
    """Plan the snapshot with a reproducible solver (one worker, fixed seed)."""
    cluster = build_cluster([("test", d) for d in docs], scheduler)
    return make_plan(cluster, time_limit=time_limit, workers=1, seed=0, **kw)
