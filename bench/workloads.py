"""Synthetic cluster snapshots for benchmarking policy-scheduler.

The workloads mirror the upstream Kubernetes scheduler benchmarks
(kubernetes/test/integration/scheduler_perf: SchedulingBasic,
SchedulingPodAntiAffinity, SchedulingNodeAffinity, TopologySpreading; plus
``spread-hostname``, TopologySpreading with ``kubernetes.io/hostname`` as key):

* nodes follow scheduler_perf's node-default template (4 CPU, 32Gi, 110 pods),
  labelled with ``kubernetes.io/hostname`` and one of ``ZONES`` zones;
* pending pods follow its pod-default template (one pause container requesting
  100m CPU / 500Mi memory), are owned by a Deployment-style ReplicaSet, use
  ``spec.schedulerName: policy-scheduler`` and live in namespace ``sched-0``.

The ``mixed`` workloads go beyond scheduler_perf to exercise the CP-SAT path:
16Gi nodes of two instance types, ~25 Deployments of varied sizes whose cpu
demand exceeds capacity (~115%), soft zone spread, preferred node affinity,
required hostname anti-affinity, two priorities and three gangs (PodGroups).
Not every pod fits, so their ``expect_all_placed`` is False.

A snapshot is ONE ``kind: List`` YAML document, the shape printed by
``kubectl get nodes,pods,podgroups -A -o yaml``: nodes first, then
already-bound pods (optional, ``bound=N``), then the pending pods, then the
PodGroups (mixed only).

Two ways to produce it:

* ``manifests(workload)`` returns the list of manifest dicts and
  ``write_list(items, path)`` dumps any such list with ``yaml.CSafeDumper``
  (general, but PyYAML's Python representer makes it ~1 ms per pod);
* ``write_snapshot(workload, path)`` writes byte-identical output quickly: it
  dumps one prototype object per object shape with the same dumper and then
  fills in the per-object fields (name, uid, zone, ...) by string formatting.
  5000 nodes x 10000 pods takes well under a second.

Everything is deterministic: names, uids and hashes derive from the indices.

Run ``python bench/workloads.py --help`` for a small standalone generator.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the test kit (testkit/)

from testkit import manifests as M
from testkit import quantity

# --------------------------------------------------------------------------- #
# Workload catalogue
# --------------------------------------------------------------------------- #

SCHEDULER_NAME = M.SCHEDULER_NAME
NAMESPACE = "sched-0"          # pending pods
BOUND_NAMESPACE = "sched-1"    # optional already-running pods
BOUND_APP = "existing"

ZONES = 10
ZONE_NAMES = tuple(f"zone-{i}" for i in range(ZONES))
REGION = "region-1"
NODE_AFFINITY_ZONES = ("zone-1", "zone-4", "zone-7")   # 3 of the 10 zones
SPREAD_MAX_SKEW = 1

HOSTNAME_KEY, ZONE_KEY = M.HOSTNAME_KEY, M.ZONE_KEY
REGION_KEY = "topology.kubernetes.io/region"
INSTANCE_TYPE_KEY = "node.kubernetes.io/instance-type"
POD_GROUP_LABEL, POD_GROUP_API = M.POD_GROUP_LABEL, M.POD_GROUP_API

# scheduler_perf node-default / pod-default templates
NODE_CPU, NODE_MEMORY, NODE_PODS = "4", "32Gi", "110"
POD_CPU, POD_MEMORY = "100m", "500Mi"
PAUSE_IMAGE = M.PAUSE_IMAGE

CREATION_TIMESTAMP = "2024-01-01T00:00:00Z"

KINDS = ("basic", "anti-affinity", "node-affinity", "topology-spread", "spread-hostname",
         "mixed")
DETAILS = ("minimal", "full")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str                 # one of KINDS: which constraint the pods carry
    nodes: int
    pods: int                 # pending pods to schedule
    target: float | None      # pods/s end to end, None = no target
    description: str
    expect_all_placed: bool = True   # False: pods left unplaced are not a failure
    node_memory: str = NODE_MEMORY
    gangs: tuple[int, ...] = ()      # mixed: pods per gang (1 cpu each, minMember = size)

    @property
    def app(self) -> str:
        """Value of the ``app`` label of the pending pods (one Deployment)."""
        return self.kind


WORKLOADS: dict[str, Workload] = {}


def _add(w: Workload) -> None:
    WORKLOADS[w.name] = w


_add(Workload("basic", "basic", 5000, 10_000, 1500.0,
              "SchedulingBasic: identical pods, resources only"))
_add(Workload("anti-affinity", "anti-affinity", 5000, 2000, 600.0,
              "SchedulingPodAntiAffinity: required anti-affinity to own app on hostname"))
_add(Workload("node-affinity", "node-affinity", 5000, 5000, None,
              "SchedulingNodeAffinity: required nodeAffinity zone In 3 of 10 zones"))
_add(Workload("topology-spread", "topology-spread", 5000, 5000, None,
              "TopologySpreading: DoNotSchedule maxSkew 1 on zone"))
_add(Workload("spread-hostname", "spread-hostname", 5000, 5000, None,
              "TopologySpreading on hostname: DoNotSchedule maxSkew 1 per node"))
# quick variants (anti-affinity keeps its 2.5 nodes/pod ratio: 1 pod per node max)
_add(Workload("small-basic", "basic", 500, 1000, None, "small SchedulingBasic"))
_add(Workload("small-anti-affinity", "anti-affinity", 500, 200, None,
              "small SchedulingPodAntiAffinity"))
_add(Workload("small-node-affinity", "node-affinity", 500, 1000, None,
              "small SchedulingNodeAffinity"))
_add(Workload("small-topology-spread", "topology-spread", 500, 1000, None,
              "small TopologySpreading"))
_add(Workload("small-spread-hostname", "spread-hostname", 500, 1000, None,
              "small TopologySpreading on hostname"))
# CP-SAT at scale: cpu demand ~115% of capacity, soft preferences, gangs, priorities
_add(Workload("mixed", "mixed", 1000, 4000, None,
              "25 Deployments + 3 gangs, cpu demand ~115%: soft spread, preferred "
              "node affinity, hostname anti-affinity, 2 priorities, PodGroups",
              expect_all_placed=False, node_memory="16Gi", gangs=(16, 32, 64)))
_add(Workload("small-mixed", "mixed", 100, 400, None, "small mixed",
              expect_all_placed=False, node_memory="16Gi", gangs=(4, 8, 16)))

FULL_WORKLOADS = tuple(n for n in WORKLOADS if not n.startswith("small-"))
SMALL_WORKLOADS = tuple(n for n in WORKLOADS if n.startswith("small-"))


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}") from None


# --------------------------------------------------------------------------- #
# Deterministic names
# --------------------------------------------------------------------------- #

# alphabet of k8s.io/apimachinery/pkg/util/rand (generateName suffixes, hashes)
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_SUFFIX_LEN = 5
_SUFFIX_SPACE = len(_ALPHANUMS) ** _SUFFIX_LEN       # 27**5 = 14,348,907
_SCRAMBLE = 7_654_321                                # coprime with 27 -> bijection


def _base27(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, len(_ALPHANUMS))
        out.append(_ALPHANUMS[r])
    return "".join(out)


def _suffix(i: int, salt: int = 0) -> str:
    """Random-looking but unique 5-char suffix for index i (< 27**5)."""
    return _base27(((i + salt) * _SCRAMBLE + 12345) % _SUFFIX_SPACE, _SUFFIX_LEN)


def template_hash(app: str) -> str:
    """pod-template-hash of the Deployment named ``app`` (10 chars like k8s)."""
    return _base27(int.from_bytes(hashlib.sha1(app.encode()).digest()[:8], "big"), 10)


def node_name(i: int) -> str:
    return f"node-{i + 1:05d}"


def node_zone(i: int) -> str:
    return ZONE_NAMES[i % ZONES]


def node_uid(i: int) -> str:
    return f"5e1f0a3c-0000-4000-a000-{i:012x}"


def pod_name(app: str, i: int) -> str:
    return f"{app}-{template_hash(app)}-{_suffix(i)}"


def _pod_uid(ns_tag: int, i: int) -> str:
    return f"9b2d7c41-{ns_tag:04x}-4000-b000-{i:012x}"


def _owner_uid(app: str, owner_kind: str = "ReplicaSet") -> str:
    tag = "rs/" if owner_kind == "ReplicaSet" else owner_kind.lower() + "/"
    h = hashlib.sha1((tag + app).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def _rs_uid(app: str) -> str:
    return _owner_uid(app, "ReplicaSet")


def node_instance_type(w: Workload, i: int) -> str | None:
    """mixed: 30% m5.xlarge in every zone (3 of every 10 consecutive nodes per zone)."""
    if w.kind != "mixed":
        return None
    return "m5.xlarge" if (i // ZONES) % 10 < 3 else "c5.xlarge"


# --------------------------------------------------------------------------- #
# Pending pod sets (one Deployment / gang each)
# --------------------------------------------------------------------------- #

@dataclass(frozen=True)
class MixedDeployment:
    name: str
    replicas: int                  # at full scale (``mixed``); scaled for small-mixed
    cpu: str
    memory: str
    priority: int = 0
    spread: bool = False           # ScheduleAnyway maxSkew 1 on zone
    preferred: tuple[str, int] | None = None   # (instance type, weight)
    anti: bool = False             # required anti-affinity to own app on hostname


HIGH_PRIORITY = 1000
_M5, _C5 = "m5.xlarge", "c5.xlarge"
D = MixedDeployment
# 25 Deployments, 3888 pods, 4494.5 cpu; + gangs 16/32/64 x 1 cpu -> 4000 pods,
# 4606.5 cpu = 115% of 1000 x 4 cpu. 5 of 25 at priority 1000 (565 cpu, 14% of capacity).
MIXED_DEPLOYMENTS: tuple[MixedDeployment, ...] = (
    D("api-gateway", 200, "500m", "1Gi", HIGH_PRIORITY, spread=True, preferred=(_M5, 50)),
    D("checkout", 160, "1", "2Gi", HIGH_PRIORITY, spread=True),
    D("payments", 120, "1500m", "3Gi", HIGH_PRIORITY, preferred=(_M5, 80)),
    D("auth", 150, "500m", "512Mi", HIGH_PRIORITY, spread=True),
    D("ingress-proxy", 200, "250m", "512Mi", HIGH_PRIORITY, anti=True),
    D("web-frontend", 200, "500m", "1Gi", spread=True, preferred=(_C5, 20)),
    D("catalog", 240, "1", "2Gi", spread=True),
    D("search", 200, "2", "4Gi", spread=True, preferred=(_M5, 60)),
    D("recommendations", 180, "1500m", "3Gi", preferred=(_M5, 40)),
    D("cart", 160, "500m", "1536Mi", spread=True),
    D("inventory", 140, "2", "1Gi"),
    D("orders", 160, "1", "2Gi", spread=True, preferred=(_C5, 30)),
    D("notifications", 120, "250m", "512Mi"),
    D("media-transcode", 160, "2", "2Gi", preferred=(_C5, 70)),
    D("analytics-etl", 160, "2", "4Gi"),
    D("report-builder", 120, "1500m", "2Gi", spread=True),
    D("image-resize", 200, "1500m", "1Gi", preferred=(_C5, 10)),
    D("session-cache", 100, "500m", "4Gi", preferred=(_M5, 30), anti=True),
    D("metrics-agent", 120, "250m", "768Mi", spread=True),
    D("log-shipper", 110, "250m", "512Mi"),
    D("feature-store", 120, "1500m", "4Gi", spread=True, preferred=(_M5, 20)),
    D("ml-inference", 160, "2", "3Gi", spread=True),
    D("batch-scoring", 160, "2", "2Gi"),
    D("graph-api", 100, "1", "2Gi", spread=True, anti=True),
    D("email-render", 148, "1500m", "1Gi"),
)
del D
GANG_CPU, GANG_MEMORY = "1", "2Gi"
GANG_NAMES = ("train-a", "train-b", "train-c")


@dataclass(frozen=True, eq=False)
class PodSet:
    """Identical pending pods of one owner (ReplicaSet of a Deployment, or a gang's Job)."""

    app: str
    count: int
    first: int                     # global index of its first pod (name suffix, uid)
    extras: dict[str, Any]         # constraint part of the spec
    cpu: str = POD_CPU
    memory: str = POD_MEMORY
    priority: int | None = None    # None: spec.priority not written (minimal detail)
    owner_kind: str = "ReplicaSet"
    gang: str | None = None        # PodGroup name (== app) for gangs
    anti: bool = False

    @property
    def prefix(self) -> str:
        """Pod names are prefix + 5-char suffix (generateName)."""
        if self.owner_kind == "ReplicaSet":
            return f"{self.app}-{template_hash(self.app)}-"
        return f"{self.app}-"

    def names(self) -> list[str]:
        return [self.prefix + _suffix(self.first + i) for i in range(self.count)]


def _scaled_replicas(w: Workload) -> list[int]:
    """MIXED_DEPLOYMENTS replicas scaled (largest remainder) to w.pods - gang pods."""
    total = w.pods - sum(w.gangs)
    base = [d.replicas for d in MIXED_DEPLOYMENTS]
    raw = [r * total / sum(base) for r in base]
    out = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda k: (out[k] - raw[k], k))
    for k in order[: total - sum(out)]:
        out[k] += 1
    return out


def _mixed_extras(d: MixedDeployment) -> dict[str, Any]:
    sel = {"matchLabels": {"app": d.name}}
    extras: dict[str, Any] = {}
    affinity: dict[str, Any] = {}
    if d.preferred:
        itype, weight = d.preferred
        affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "preference": {"matchExpressions": [
                {"key": INSTANCE_TYPE_KEY, "operator": "In", "values": [itype]}]},
            "weight": weight}]}
    if d.anti:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": sel, "topologyKey": HOSTNAME_KEY}]}
    if affinity:
        extras["affinity"] = affinity
    if d.spread:
        extras["topologySpreadConstraints"] = [{
            "labelSelector": sel, "maxSkew": 1, "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "ScheduleAnyway"}]
    return extras


def pod_sets(w: Workload) -> list[PodSet]:
    """The pending pods of ``w`` grouped by owner, in file order."""
    if w.kind != "mixed":
        return [PodSet(w.app, w.pods, 0, _pod_spec_extras(w))]
    sets: list[PodSet] = []
    first = 0
    for d, n in zip(MIXED_DEPLOYMENTS, _scaled_replicas(w)):
        if n <= 0:
            continue
        sets.append(PodSet(d.name, n, first, _mixed_extras(d), d.cpu, d.memory, d.priority,
                           anti=d.anti))
        first += n
    for name, n in zip(GANG_NAMES, w.gangs):
        sets.append(PodSet(name, n, first, {}, GANG_CPU, GANG_MEMORY, 0, owner_kind="Job",
                           gang=name))
        first += n
    assert first == w.pods, (first, w.pods)
    return sets


def _pod_group(name: str, size: int) -> dict[str, Any]:
    group = M.podgroup(name, size, NAMESPACE)
    group["metadata"].update(creationTimestamp=CREATION_TIMESTAMP, uid=_owner_uid(name, "PodGroup"))
    return group


def pod_groups(w: Workload) -> list[dict[str, Any]]:
    return [_pod_group(ps.app, ps.count) for ps in pod_sets(w) if ps.gang]


def pending_pod_keys(w: Workload) -> list[str]:
    """``namespace/name`` of every pending pod, in file order."""
    return [f"{NAMESPACE}/{n}" for ps in pod_sets(w) for n in ps.names()]


def demand(w: Workload) -> tuple[float, float]:
    """Pending cpu and memory requests as fractions of the nodes' allocatable."""
    cpu = sum(_cpu_m(ps.cpu) * ps.count for ps in pod_sets(w))
    mem = sum(_bytes(ps.memory) * ps.count for ps in pod_sets(w))
    return (cpu / (_cpu_m(NODE_CPU) * w.nodes),
            mem / (_bytes(w.node_memory) * w.nodes))


def bound_pod_node(w: Workload, j: int) -> int:
    """Index of the node the j-th already-bound pod runs on (round robin)."""
    return j % w.nodes


# --------------------------------------------------------------------------- #
# Manifest builders (shared by the dict API and the fast writer)
# --------------------------------------------------------------------------- #

def _node(name: str, uid: str, zone: str, detail: str, ip: str,
          memory: str = NODE_MEMORY, instance_type: str | None = None) -> dict[str, Any]:
    node = M.node(name, cpu=NODE_CPU, memory=memory, pods=NODE_PODS,
                  labels={"kubernetes.io/os": "linux", REGION_KEY: REGION, ZONE_KEY: zone})
    node["metadata"].update(creationTimestamp=CREATION_TIMESTAMP, uid=uid)
    node["status"]["conditions"] = [{"status": "True", "type": "Ready"}]
    labels = node["metadata"]["labels"]
    if detail == "full":
        labels.update({
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "n2-standard-4",
        })
        node["metadata"]["annotations"] = {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
        node["metadata"]["resourceVersion"] = "1000"
        extra = {"ephemeral-storage": "100Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
        node["status"]["allocatable"].update(extra)
        node["status"]["capacity"].update(extra)
        hb = {"lastHeartbeatTime": CREATION_TIMESTAMP, "lastTransitionTime": CREATION_TIMESTAMP}
        node["status"]["conditions"] = [
            {**hb, "message": "kubelet has sufficient memory available",
             "reason": "KubeletHasSufficientMemory", "status": "False", "type": "MemoryPressure"},
            {**hb, "message": "kubelet has no disk pressure",
             "reason": "KubeletHasNoDiskPressure", "status": "False", "type": "DiskPressure"},
            {**hb, "message": "kubelet has sufficient PID available",
             "reason": "KubeletHasSufficientPID", "status": "False", "type": "PIDPressure"},
            {**hb, "message": "kubelet is posting ready status",
             "reason": "KubeletReady", "status": "True", "type": "Ready"},
        ]
        node["status"]["addresses"] = [
            {"address": ip, "type": "InternalIP"},
            {"address": name, "type": "Hostname"},
        ]
        node["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
        node["status"]["nodeInfo"] = {
            "architecture": "amd64",
            "bootID": uid,
            "containerRuntimeVersion": "containerd://1.7.13",
            "kernelVersion": "6.1.0-18-cloud-amd64",
            "kubeProxyVersion": "v1.30.0",
            "kubeletVersion": "v1.30.0",
            "machineID": uid,
            "operatingSystem": "linux",
            "osImage": "Debian GNU/Linux 12 (bookworm)",
            "systemUUID": uid,
        }
    if instance_type is not None:
        labels[INSTANCE_TYPE_KEY] = instance_type
    return node


def _pod_spec_extras(w: Workload) -> dict[str, Any]:
    """The constraint part of a pending pod's spec for this workload kind."""
    app_selector = {"matchLabels": {"app": w.app}}
    if w.kind == "basic":
        return {}
    if w.kind == "anti-affinity":
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": app_selector, "topologyKey": HOSTNAME_KEY}]}}}
    if w.kind == "node-affinity":
        return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE_KEY, "operator": "In", "values": list(NODE_AFFINITY_ZONES)}]}]}}}}
    if w.kind in ("topology-spread", "spread-hostname"):
        return {"topologySpreadConstraints": [{
            "labelSelector": app_selector,
            "maxSkew": SPREAD_MAX_SKEW,
            "topologyKey": ZONE_KEY if w.kind == "topology-spread" else HOSTNAME_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
        }]}
    raise ValueError(f"unknown workload kind {w.kind!r}")


def _pod(*, app: str, namespace: str, name: str, uid: str, vol_suffix: str,
         spec_extras: dict[str, Any], detail: str,
         node: str | None = None, cpu: str = POD_CPU, memory: str = POD_MEMORY,
         priority: int | None = None, owner_kind: str = "ReplicaSet",
         gang: str | None = None) -> dict[str, Any]:
    if owner_kind == "ReplicaSet":
        h = template_hash(app)
        owner = f"{app}-{h}"
        labels = {"app": app, "pod-template-hash": h}
        owner_api = "apps/v1"
    else:  # a Job's pods
        owner = app
        labels = {"app": app, "batch.kubernetes.io/job-name": app, "job-name": app}
        owner_api = "batch/v1"
    if gang is not None:
        labels[POD_GROUP_LABEL] = gang
    pod = M.pod(name, cpu=cpu, memory=memory, ns=namespace, labels=labels, node_name=node, scheduler=SCHEDULER_NAME,
                priority=priority, limits={"cpu": cpu, "memory": memory}, container="pause", image=PAUSE_IMAGE,
                ports=[{"containerPort": 80, "protocol": "TCP"}], restartPolicy="Always", **spec_extras)
    pod["metadata"].update({
        "creationTimestamp": CREATION_TIMESTAMP,
        "generateName": owner + "-",
        "ownerReferences": [{
            "apiVersion": owner_api,
            "blockOwnerDeletion": True,
            "controller": True,
            "kind": owner_kind,
            "name": owner,
            "uid": _owner_uid(app, owner_kind),
        }],
        "uid": uid,
    })
    spec, status = pod["spec"], pod["status"]
    container = spec["containers"][0]
    status["qosClass"] = "Guaranteed"
    if detail == "full":
        vol = f"kube-api-access-{vol_suffix}"
        pod["metadata"]["resourceVersion"] = "2000"
        container.update({
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "name": vol, "readOnly": True}],
        })
        spec.update({
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": priority or 0,
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                 "operator": "Exists", "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable",
                 "operator": "Exists", "tolerationSeconds": 300},
            ],
            "volumes": [{"name": vol, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                               "name": "kube-root-ca.crt"}},
                {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                         "fieldPath": "metadata.namespace"},
                                            "path": "namespace"}]}},
            ]}}],
        })
        if node is not None:
            status["conditions"] = [
                {"lastProbeTime": None, "lastTransitionTime": CREATION_TIMESTAMP,
                 "status": "True", "type": t}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")]
            status["startTime"] = CREATION_TIMESTAMP
    return pod


def _node_ip(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def _bound_pod(w: Workload, j: int, detail: str, node: str) -> dict[str, Any]:
    return _pod(app=BOUND_APP, namespace=BOUND_NAMESPACE, name=pod_name(BOUND_APP, j),
                uid=_pod_uid(1, j), vol_suffix=_suffix(j, 777), spec_extras={},
                detail=detail, node=node)


def _pending_pod(ps: PodSet, i: int, detail: str, *, name: str | None = None,
                 uid: str | None = None, vol: str | None = None) -> dict[str, Any]:
    """The i-th pod of ``ps`` (tokens may replace name/uid/vol for templating)."""
    g = ps.first + i
    return _pod(app=ps.app, namespace=NAMESPACE, name=name or ps.prefix + _suffix(g),
                uid=uid or _pod_uid(0, g), vol_suffix=vol or _suffix(g, 777),
                spec_extras=ps.extras, detail=detail, cpu=ps.cpu, memory=ps.memory,
                priority=ps.priority, owner_kind=ps.owner_kind, gang=ps.gang)


# --------------------------------------------------------------------------- #
# Public API: dicts
# --------------------------------------------------------------------------- #

def iter_manifests(w: Workload | str, bound: int = 0, detail: str = "minimal") -> Iterator[dict]:
    """Yield the manifests of a snapshot: nodes, bound pods, pending pods, PodGroups."""
    if isinstance(w, str):
        w = get_workload(w)
    _check_args(w, bound, detail)
    for i in range(w.nodes):
        yield _node(node_name(i), node_uid(i), node_zone(i), detail, _node_ip(i),
                    w.node_memory, node_instance_type(w, i))
    for j in range(bound):
        yield _bound_pod(w, j, detail, node_name(bound_pod_node(w, j)))
    for ps in pod_sets(w):
        for i in range(ps.count):
            yield _pending_pod(ps, i, detail)
    yield from pod_groups(w)


def manifests(w: Workload | str, bound: int = 0, detail: str = "minimal") -> list[dict]:
    """The snapshot as a list of Kubernetes manifest dicts."""
    return list(iter_manifests(w, bound, detail))


def as_list(items: Iterable[dict]) -> dict[str, Any]:
    """Wrap manifests the way ``kubectl get ... -o yaml`` does."""
    return {"apiVersion": "v1", "items": list(items), "kind": "List",
            "metadata": {"resourceVersion": ""}}


class _Dumper(yaml.CSafeDumper):
    """CSafeDumper that never emits &anchors/*aliases for shared sub-objects."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_DUMP_KW = {"Dumper": _Dumper, "default_flow_style": False, "sort_keys": True,
                "allow_unicode": True, "width": 1 << 16}


def write_list(items: Iterable[dict], path: str | os.PathLike) -> None:
    """Dump arbitrary manifests as ONE ``kind: List`` document (general path)."""
    with open(path, "w", encoding="utf-8") as f:
        yaml.dump(as_list(items), f, **_DUMP_KW)


# --------------------------------------------------------------------------- #
# Public API: fast writer
# --------------------------------------------------------------------------- #

_TOKEN_RE = re.compile(r"zq([A-Z]+)qz")
_SAFE_VALUE = re.compile(r"^[a-z][a-z0-9.-]*$"
                         r"|^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
                         r"|^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$")


def _tok(field: str) -> str:
    return f"zq{field.upper()}qz"


def _template(obj: dict) -> str:
    """Dump a prototype (as a list item, like under ``items:``) and turn its
    placeholder tokens into ``str.format`` fields."""
    text = yaml.dump([obj], **_DUMP_KW)
    text = text.replace("{", "{{").replace("}", "}}")
    return _TOKEN_RE.sub(lambda m: "{" + m.group(1).lower() + "}", text)


def _check_args(w: Workload, bound: int, detail: str) -> None:
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {DETAILS}, not {detail!r}")
    if bound < 0 or bound >= _SUFFIX_SPACE or w.pods >= _SUFFIX_SPACE:
        raise ValueError("too many pods")


def write_snapshot(w: Workload | str, path: str | os.PathLike, bound: int = 0,
                   detail: str = "minimal") -> int:
    """Write the snapshot of ``w`` to ``path``; same bytes as
    ``write_list(manifests(w, bound, detail), path)``, ~100x faster.

    Returns the file size in bytes.
    """
    if isinstance(w, str):
        w = get_workload(w)
    _check_args(w, bound, detail)

    itype = _tok("itype") if w.kind == "mixed" else None
    node_t = _template(_node(_tok("name"), _tok("uid"), _tok("zone"), detail, _tok("ip"),
                             w.node_memory, itype))
    sets = pod_sets(w)
    pending_ts = [_template(_pending_pod(ps, 0, detail, name=_tok("name"), uid=_tok("uid"),
                                         vol=_tok("vol")))
                  for ps in sets]
    bound_t = _template(_pod(app=BOUND_APP, namespace=BOUND_NAMESPACE, name=_tok("name"),
                             uid=_tok("uid"), vol_suffix=_tok("vol"), spec_extras={},
                             detail=detail, node=_tok("node")))

    head, tail = yaml.dump(as_list([{"x": "zqSPLITqz"}]), **_DUMP_KW).split("- x: zqSPLITqz\n")

    # The substituted values are plain YAML scalars that stay strings; make sure.
    samples = [node_name(0), node_uid(0), node_zone(0), _node_ip(0), _pod_uid(0, 0),
               _pod_uid(1, 0), _suffix(0, 777), pod_name(BOUND_APP, 0)]
    samples += [ps.prefix + _suffix(ps.first) for ps in sets]
    samples += [t for i in range(min(w.nodes, 100)) if (t := node_instance_type(w, i))]
    bad = [s for s in samples if not _SAFE_VALUE.match(s)]
    assert not bad, f"unsafe template values: {bad}"

    buf = io.StringIO()
    write = buf.write
    write(head)
    fmt = node_t.format
    for i in range(w.nodes):
        write(fmt(name=node_name(i), uid=node_uid(i), zone=node_zone(i), ip=_node_ip(i),
                  itype=node_instance_type(w, i)))
    fmt = bound_t.format
    b_prefix = f"{BOUND_APP}-{template_hash(BOUND_APP)}-"
    for j in range(bound):
        write(fmt(name=b_prefix + _suffix(j), uid=_pod_uid(1, j), vol=_suffix(j, 777),
                  node=node_name(bound_pod_node(w, j))))
    for ps, t in zip(sets, pending_ts):
        fmt = t.format
        p_prefix = ps.prefix
        for i in range(ps.count):
            g = ps.first + i
            write(fmt(name=p_prefix + _suffix(g), uid=_pod_uid(0, g), vol=_suffix(g, 777)))
    for pg in pod_groups(w):
        write(yaml.dump([pg], **_DUMP_KW))
    write(tail)
    data = buf.getvalue().encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


# --------------------------------------------------------------------------- #
# Validation of a scheduler's answer
# --------------------------------------------------------------------------- #

def _cpu_m(q: str) -> int:
    return quantity.amount("cpu", q)


def _bytes(q: str) -> int:
    return quantity.amount("memory", q)


def pods_per_node_limit() -> int:
    """How many template pods fit on one template node (all pods are equal)."""
    return min(_cpu_m(NODE_CPU) // _cpu_m(POD_CPU),
               _bytes(NODE_MEMORY) // _bytes(POD_MEMORY),
               int(NODE_PODS))


def validate(w: Workload | str, assignments: dict[str, str], bound: int = 0,
             limit: int = 20) -> tuple[int, list[str]]:
    """Check a scheduler's ``{"ns/pod": "node"}`` answer against the workload.

    Returns ``(placed, violations)``: how many pending pods were assigned, and
    human-readable descriptions of broken constraints (at most ``limit``
    entries plus a summary line). Checks: only known pending pods on known
    nodes; node capacity (cpu, memory, pods, counting bound pods); the
    workload's constraint (anti-affinity, node affinity, zone spread, hostname
    spread: per-node count max - min over ALL nodes <= maxSkew). For
    ``mixed``: per-node cpu/memory/pods, required anti-affinity (at most one pod
    of such a Deployment per node) and gangs all-or-nothing; the soft
    preferences are not checked.
    """
    if isinstance(w, str):
        w = get_workload(w)
    problems = _Problems(limit)
    problem = problems.add
    if w.kind == "mixed":
        placed = _validate_mixed(w, assignments, bound, problem)
        return placed, problems.lines()

    expected = set(pending_pod_keys(w))
    node_index = {node_name(i): i for i in range(w.nodes)}
    per_node: Counter[str] = Counter()
    placed = 0
    for pod, node in assignments.items():
        if pod not in expected:
            problem(f"assignment of unknown or non-pending pod {pod!r}")
            continue
        if node not in node_index:
            problem(f"{pod} assigned to unknown node {node!r}")
            continue
        placed += 1
        per_node[node] += 1

    cap = pods_per_node_limit()
    already = Counter(node_name(bound_pod_node(w, j)) for j in range(bound))
    for node, n in per_node.items():
        if n + already[node] > cap:
            problem(f"{node}: {n} new + {already[node]} bound pods exceed capacity ({cap})")

    if w.kind == "anti-affinity":
        for node, n in per_node.items():
            if n > 1:
                problem(f"{node}: {n} pods of app={w.app} violate hostname anti-affinity")
    elif w.kind == "node-affinity":
        allowed = set(NODE_AFFINITY_ZONES)
        for node, n in per_node.items():
            z = node_zone(node_index[node])
            if z not in allowed:
                problem(f"{node} (zone {z}): {n} pods outside required zones {sorted(allowed)}")
    elif w.kind == "topology-spread":
        zones = Counter(dict.fromkeys(ZONE_NAMES, 0))
        for node, n in per_node.items():
            zones[node_zone(node_index[node])] += n
        skew = max(zones.values()) - min(zones.values())
        if skew > SPREAD_MAX_SKEW:
            problem(f"zone skew {skew} > maxSkew {SPREAD_MAX_SKEW}: {dict(sorted(zones.items()))}")
    elif w.kind == "spread-hostname":
        # every node is a domain (nodes without a pod count as 0)
        counts = [per_node[node_name(i)] for i in range(w.nodes)]
        lo, hi = min(counts), max(counts)
        if hi - lo > SPREAD_MAX_SKEW:
            hist = dict(sorted(Counter(counts).items()))
            problem(f"hostname skew {hi - lo} > maxSkew {SPREAD_MAX_SKEW}: "
                    f"min {lo}, max {hi} pods of app={w.app} per node "
                    f"(pods per node -> nodes: {hist})")

    return placed, problems.lines()


class _Problems:
    """At most ``limit`` messages plus a count of the rest."""

    def __init__(self, limit: int) -> None:
        self.limit, self.n, self.msgs = limit, 0, []

    def add(self, msg: str) -> None:
        self.n += 1
        if len(self.msgs) < self.limit:
            self.msgs.append(msg)

    def lines(self) -> list[str]:
        extra = [f"... and {self.n - len(self.msgs)} more"] if self.n > len(self.msgs) else []
        return self.msgs + extra


def _placements(w: Workload, assignments: dict[str, str],
                problem: Callable[[str], None]) -> tuple[
        dict[str, Counter[int]], int]:
    """Per pod set (app): Counter node index -> pods; plus the number placed."""
    key_set = {f"{NAMESPACE}/{n}": ps.app for ps in pod_sets(w) for n in ps.names()}
    node_index = {node_name(i): i for i in range(w.nodes)}
    out: dict[str, Counter[int]] = {ps.app: Counter() for ps in pod_sets(w)}
    placed = 0
    for pod, node in assignments.items():
        app = key_set.get(pod)
        if app is None:
            problem(f"assignment of unknown or non-pending pod {pod!r}")
            continue
        n = node_index.get(node)
        if n is None:
            problem(f"{pod} assigned to unknown node {node!r}")
            continue
        placed += 1
        out[app][n] += 1
    return out, placed


def _validate_mixed(w: Workload, assignments: dict[str, str], bound: int,
                    problem: Callable[[str], None]) -> int:
    sets = {ps.app: ps for ps in pod_sets(w)}
    by_app, placed = _placements(w, assignments, problem)
    cpu = [0] * w.nodes
    mem = [0] * w.nodes
    pods = [0] * w.nodes
    for j in range(bound):
        n = bound_pod_node(w, j)
        cpu[n] += _cpu_m(POD_CPU)
        mem[n] += _bytes(POD_MEMORY)
        pods[n] += 1
    for app, per_node in by_app.items():
        ps = sets[app]
        c, m = _cpu_m(ps.cpu), _bytes(ps.memory)
        for n, k in per_node.items():
            cpu[n] += c * k
            mem[n] += m * k
            pods[n] += k
            if ps.anti and k > 1:
                problem(f"{node_name(n)}: {k} pods of app={app} violate required "
                        "hostname anti-affinity")
        if ps.gang:
            got = sum(per_node.values())
            if 0 < got < ps.count:
                problem(f"gang {NAMESPACE}/{ps.gang}: {got}/{ps.count} pods placed "
                        f"(minMember {ps.count}: all or nothing)")
    cap_cpu, cap_mem, cap_pods = (_cpu_m(NODE_CPU), _bytes(w.node_memory),
                                  int(NODE_PODS))
    for n in range(w.nodes):
        over = [f"{what} {used}/{cap}" for what, used, cap in (
            ("cpu m", cpu[n], cap_cpu), ("memory Mi", mem[n] >> 20, cap_mem >> 20),
            ("pods", pods[n], cap_pods)) if used > cap]
        if over:
            problem(f"{node_name(n)}: over capacity: {', '.join(over)}")
    return placed


def summarize(w: Workload | str, assignments: dict[str, str]) -> str:
    """One line on who got placed (mixed: per priority and gangs); "" otherwise."""
    if isinstance(w, str):
        w = get_workload(w)
    if w.kind != "mixed":
        return ""
    by_app, _ = _placements(w, assignments, lambda _msg: None)
    per_prio: dict[int, list[int]] = {}
    gangs_done = 0
    sets = pod_sets(w)
    for ps in sets:
        got = sum(by_app[ps.app].values())
        acc = per_prio.setdefault(ps.priority or 0, [0, 0])
        acc[0] += got
        acc[1] += ps.count
        gangs_done += bool(ps.gang) and got == ps.count
    parts = [f"priority {p}: {a}/{b}" for p, (a, b) in sorted(per_prio.items(), reverse=True)]
    parts.append(f"gangs complete {gangs_done}/{sum(1 for ps in sets if ps.gang)}")
    return ", ".join(parts)


# --------------------------------------------------------------------------- #
# Standalone use
# --------------------------------------------------------------------------- #

def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    p = argparse.ArgumentParser(description="Write a scheduler_perf-like cluster snapshot "
                                            "(one kind: List YAML document).")
    p.add_argument("workload", nargs="?", help="workload name (see --list)")
    p.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    p.add_argument("--bound", type=int, default=0, help="already-running pods to add")
    p.add_argument("--detail", choices=DETAILS, default="minimal",
                   help="'full' adds the default fields a real kubectl dump carries")
    p.add_argument("--slow", action="store_true",
                   help="build dicts and yaml.dump them (reference path) instead of templating")
    p.add_argument("--list", action="store_true", help="list workloads")
    a = p.parse_args(argv)
    if a.list or not a.workload:
        for w in WORKLOADS.values():
            tgt = f"{w.target:g} pods/s" if w.target else "-"
            cpu = f"cpu {100 * demand(w)[0]:.0f}%"
            print(f"{w.name:24} {w.nodes:>6} nodes {w.pods:>7} pods  {cpu:>8}  target {tgt:>12}"
                  f"  {w.description}")
        return 0
    t0 = time.perf_counter()
    out = "/dev/stdout" if a.output == "-" else a.output
    if a.slow:
        write_list(iter_manifests(a.workload, a.bound, a.detail), out)
    else:
        write_snapshot(a.workload, out, a.bound, a.detail)
    print(f"wrote {a.workload} in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
