"""Realistic, heterogeneous cluster snapshots for issue 6 (the engine at production scale).

``bench/workloads.py`` mirrors scheduler_perf: one pod shape, minimal metadata. Real clusters are
not like that, and the engine's cost grows with how many *distinct* pods there are, so these
workloads carry what ``kubectl get nodes,pods,podgroups -A -o yaml`` prints on an EKS-like
cluster: many Deployments, Jobs and StatefulSets across namespaces, running pods bound to nodes,
uids, creationTimestamps, ownerReferences and the per-pod labels (``pod-template-hash``,
``controller-revision-hash``, ``statefulset.kubernetes.io/pod-name``,
``batch.kubernetes.io/job-completion-index``, ...) that no scheduling constraint reads.

Workloads (``WORKLOADS``; sizes are parameters so ``bench/scale.py sweep`` can reuse them):

* ``hetero-jobs``: 1,500 m5.4xlarge-like nodes in 3 zones, 24,000 running pods of 500
  Deployments in 40 namespaces, 1,500 pending pods of 50 indexed Jobs x 30 (three cpu and three
  memory sizes), each with *preferred* hostname anti-affinity (weight 50) to its own Job;
* ``hetero-affinity``: 300 nodes, 1,500 pending pods in 100 stacks of a cache StatefulSet (zone
  spread, hostname anti-affinity), workers (required pod affinity to their cache's zone, an init
  container) and an api (hostname anti-affinity, zone spread); three priorities;
* ``statefulset``: 20 StatefulSets x 50 replicas on 500 nodes, required hostname anti-affinity
  per set, the first 20 replicas of half of them running, plus background Deployments;
* ``rich-mixed``: 5,000 nodes in three pools (general, tainted high-memory, tainted GPU),
  50,000 running and 5,000 pending pods mixing all of the above with pool node affinity, GPU
  pods, ``spec.priority`` without PriorityClasses and gangs (PodGroups, minMember).

Everything is deterministic (``random.Random(seed)``). Running pods are placed by the generator
itself (first fit over a skewed random order, so some nodes are fuller than others), honouring
capacity, pool, taints and hostname anti-affinity, so a snapshot is a state a scheduler could
have produced.

Two writers share one set of manifest builders: ``iter_manifests`` (dicts, the reference) and
``write_snapshot`` (one ``yaml.dump`` per object *shape*, then string formatting per object; the
same documents ~50x faster). ``python bench/realistic.py --selfcheck`` compares the two.

``validate`` checks a plan cheaply from the generator's own model (no YAML parse): capacity
(cpu, memory, pods, GPUs) including running pods, pools and taints, required hostname
anti-affinity, required zone affinity, hard zone spread, gangs all-or-nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import workloads as W
from testkit import manifests as M

SCHEDULER_NAME = W.SCHEDULER_NAME
HOSTNAME_KEY, ZONE_KEY, REGION_KEY = W.HOSTNAME_KEY, W.ZONE_KEY, W.REGION_KEY
INSTANCE_TYPE_KEY = W.INSTANCE_TYPE_KEY
POOL_KEY = "eks.amazonaws.com/nodegroup"
GPU = "nvidia.com/gpu"
NAME_LABEL = "app.kubernetes.io/name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
REGION = "us-east-1"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
DETAILS = ("full", "lean")
EPOCH = 1_793_491_200          # 2026-11-01T00:00:00Z: cluster creation
PENDING_EPOCH = 1_795_302_000  # 2026-11-21T23:00:00Z: the pending pods are recent
KUBELET = "v1.31.2-eks-94953ac"


# --------------------------------------------------------------------------- #
# Model
# --------------------------------------------------------------------------- #

@dataclass(frozen=True)
class NodePool:
    """An EKS managed node group: identical allocatable, labels and taints."""

    name: str
    count: int
    instance_type: str
    cpu_m: int                 # allocatable
    memory_ki: int             # allocatable
    capacity_cpu: int          # cores
    capacity_memory_ki: int
    pods: int = 110
    gpus: int = 0
    taints: tuple[tuple[str, str, str], ...] = ()   # (key, value, effect)


def m5_4xlarge(count: int, name: str = "general") -> NodePool:
    return NodePool(name, count, "m5.4xlarge", 15_890, 64_918_136, 16, 65_023_104)


def m5_2xlarge(count: int, name: str = "general") -> NodePool:
    return NodePool(name, count, "m5.2xlarge", 7_910, 31_960_184, 8, 32_408_680, pods=58)


def r5_4xlarge(count: int, name: str = "highmem") -> NodePool:
    return NodePool(name, count, "r5.4xlarge", 15_890, 129_900_000, 16, 130_440_000,
                    taints=(("dedicated", "highmem", "NoSchedule"),))


def p3_8xlarge(count: int, name: str = "gpu") -> NodePool:
    return NodePool(name, count, "p3.8xlarge", 31_850, 245_000_000, 32, 251_000_000, pods=234,
                    gpus=4, taints=((GPU, "present", "NoSchedule"),))


@dataclass(frozen=True)
class Owner:
    """A controller (Deployment, Job or StatefulSet) and what its pods ask for.

    The first ``running`` replicas are bound; the rest are pending for policy-scheduler."""

    kind: str                   # Deployment | Job | StatefulSet
    name: str                   # unique in the whole cluster (validation keys on it)
    namespace: str
    replicas: int
    running: int
    cpu_m: int
    memory_mi: int
    created: int                # epoch seconds
    gpus: int = 0
    priority: int | None = None
    init_cpu_m: int = 0         # > 0: an init container with these cpu m (and memory_mi)
    pool: str | None = None     # required node affinity to this node group
    tolerate: tuple[tuple[str, str], ...] = ()     # (key, effect): Exists tolerations
    anti_host: str | None = None            # "required" | "preferred" (weight 50)
    spread_zone: str | None = None          # DoNotSchedule | ScheduleAnyway, maxSkew 1
    affinity_to: str | None = None          # required pod affinity on zone to this owner
    prefer_zone: str | None = None          # preferred node affinity (weight 20)
    gang: bool = False                      # PodGroup of its own name, minMember = replicas
    first: int = 0                          # global pod index of replica 0 (names, uids)

    @property
    def pending(self) -> int:
        return self.replicas - self.running

    @property
    def selector(self) -> dict[str, str]:
        """Labels that select exactly this owner's pods (what charts put in selectors)."""
        return {JOB_NAME_LABEL: self.name} if self.kind == "Job" else {NAME_LABEL: self.name}

    @property
    def request_cpu_m(self) -> int:
        return max(self.cpu_m, self.init_cpu_m)


@dataclass
class Cluster:
    """A generated cluster: nodes, owners, and where the running replicas are bound."""

    name: str
    pools: tuple[NodePool, ...]
    owners: list[Owner]
    bound: dict[str, list[int]] = field(default_factory=dict)   # owner -> node per running pod

    @property
    def nodes(self) -> int:
        return sum(p.count for p in self.pools)

    @property
    def running(self) -> int:
        return sum(o.running for o in self.owners)

    @property
    def pending(self) -> int:
        return sum(o.pending for o in self.owners)

    @cached_property
    def pool_of(self) -> list[NodePool]:
        """The pool of every node, by node index."""
        return [p for p in self.pools for _ in range(p.count)]


# --------------------------------------------------------------------------- #
# Deterministic names, uids, times
# --------------------------------------------------------------------------- #

def uid(*parts: object) -> str:
    h = hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:32]}"


def node_ip(i: int) -> str:
    return f"10.{16 + (i >> 14)}.{(i >> 6) & 255}.{4 + (i & 63)}"


def node_name(i: int) -> str:
    return "ip-" + node_ip(i).replace(".", "-") + ".ec2.internal"


def node_zone(i: int) -> str:
    return ZONES[i % len(ZONES)]


def pod_ip(g: int) -> str:
    return f"100.{64 + (g >> 16)}.{(g >> 8) & 255}.{g & 255}"


def timestamp(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def short_hash(*parts: object) -> str:
    """10 characters of the apimachinery rand alphabet, like pod-template-hash."""
    return W.template_hash("/".join(map(str, parts)))


def pod_name(o: Owner, i: int) -> str:
    if o.kind == "StatefulSet":
        return f"{o.name}-{i}"
    if o.kind == "Job":
        return f"{o.name}-{i}-{W._suffix(o.first + i)}"
    return f"{o.name}-{short_hash(o.namespace, o.name)}-{W._suffix(o.first + i)}"


def pod_created(o: Owner, i: int) -> int:
    """Running replicas date from their owner; pending ones are recent, in owner order."""
    if i < o.running:
        return o.created + 3 * i
    return PENDING_EPOCH + (o.created - EPOCH) // 600 + i


# --------------------------------------------------------------------------- #
# Manifest builders (shared by both writers; per-object values may be tokens)
# --------------------------------------------------------------------------- #

@dataclass(frozen=True)
class NodeFields:
    """The per-node strings of a node manifest."""

    name: str
    uid: str
    zone: str
    ip: str
    instance: str
    created: str


@dataclass(frozen=True)
class PodFields:
    """The per-pod strings of a pod manifest (node fields empty for pending pods)."""

    name: str
    uid: str
    index: str
    created: str
    vol: str                    # the service-account volume's name
    node: str = ""
    hostip: str = ""
    podip: str = ""


def node_fields(i: int) -> NodeFields:
    return NodeFields(node_name(i), uid("node", i), node_zone(i), node_ip(i),
                      f"aws:///{node_zone(i)}/i-0{hashlib.sha1(b'%d' % i).hexdigest()[:16]}",
                      timestamp(EPOCH + 60 * (i % 5000)))


def _node_labels(pool: NodePool, f: NodeFields) -> dict[str, str]:
    return {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": pool.instance_type,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "ON_DEMAND",
        POOL_KEY: pool.name,
        "eks.amazonaws.com/nodegroup-image": "ami-0c1f7b7a3d5e8f901",
        "failure-domain.beta.kubernetes.io/region": REGION,
        "failure-domain.beta.kubernetes.io/zone": f.zone,
        "k8s.io/cloud-provider-aws": "4f3a1d2e9b8c7a6f5e4d3c2b1a0f9e8d",
        "kubernetes.io/arch": "amd64",
        HOSTNAME_KEY: f.name,
        "kubernetes.io/os": "linux",
        INSTANCE_TYPE_KEY: pool.instance_type,
        "topology.ebs.csi.aws.com/zone": f.zone,
        REGION_KEY: REGION,
        ZONE_KEY: f.zone,
    }


def _node_resources(pool: NodePool, allocatable: bool) -> dict[str, str]:
    res = {"cpu": f"{pool.cpu_m}m" if allocatable else str(pool.capacity_cpu),
           "ephemeral-storage": "95491281146" if allocatable else "104845292Ki",
           "hugepages-1Gi": "0", "hugepages-2Mi": "0",
           "memory": f"{pool.memory_ki if allocatable else pool.capacity_memory_ki}Ki",
           "pods": str(pool.pods)}
    if pool.gpus:
        res[GPU] = str(pool.gpus)
    return res


def _node_status_detail(f: NodeFields) -> dict[str, Any]:
    """What kubelet reports besides resources: conditions, addresses, nodeInfo."""
    hb = {"lastHeartbeatTime": f.created, "lastTransitionTime": f.created}
    conds = [("MemoryPressure", "False", "KubeletHasSufficientMemory",
              "kubelet has sufficient memory available"),
             ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
             ("PIDPressure", "False", "KubeletHasSufficientPID",
              "kubelet has sufficient PID available"),
             ("Ready", "True", "KubeletReady", "kubelet is posting ready status")]
    return {
        "addresses": [{"address": f.ip, "type": "InternalIP"},
                      {"address": f.name, "type": "Hostname"},
                      {"address": f.name, "type": "InternalDNS"}],
        "conditions": [{**hb, "message": m, "reason": r, "status": s, "type": t}
                       for t, s, r, m in conds],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {"architecture": "amd64", "bootID": f.uid,
                     "containerRuntimeVersion": "containerd://1.7.22",
                     "kernelVersion": "5.10.227-219.884.amzn2.x86_64",
                     "kubeProxyVersion": KUBELET, "kubeletVersion": KUBELET,
                     "machineID": f.uid, "operatingSystem": "linux",
                     "osImage": "Amazon Linux 2", "systemUUID": f.uid},
    }


def node_doc(pool: NodePool, f: NodeFields, detail: str) -> dict[str, Any]:
    """A Node as the API server returns it."""
    status: dict[str, Any] = {"allocatable": _node_resources(pool, True),
                              "capacity": _node_resources(pool, False)}
    if detail == "full":
        status.update(_node_status_detail(f))
    else:
        status["conditions"] = [{"status": "True", "type": "Ready"}]
    doc = M.node(f.name, labels=_node_labels(pool, f), status=status,
                 taints=[{"effect": e, "key": k, "value": v} for k, v, e in pool.taints])
    doc["spec"]["providerID"] = f.instance
    meta = doc["metadata"]
    meta.update(creationTimestamp=f.created, uid=f.uid)
    if detail == "full":
        meta["annotations"] = {"alpha.kubernetes.io/provided-node-ip": f.ip,
                               "node.alpha.kubernetes.io/ttl": "0",
                               "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
        meta["resourceVersion"] = "48213377"
    return doc


def _owner_ref(o: Owner) -> dict[str, Any]:
    if o.kind == "Deployment":
        api, kind, name = "apps/v1", "ReplicaSet", f"{o.name}-{short_hash(o.namespace, o.name)}"
    else:
        api, kind, name = ("batch/v1" if o.kind == "Job" else "apps/v1"), o.kind, o.name
    return {"apiVersion": api, "blockOwnerDeletion": True, "controller": True, "kind": kind,
            "name": name, "uid": uid(kind, o.namespace, name)}


def _pod_labels(o: Owner, f: PodFields) -> dict[str, str]:
    labels = {NAME_LABEL: o.name, "app.kubernetes.io/instance": o.namespace}
    if o.kind == "Deployment":
        labels["pod-template-hash"] = short_hash(o.namespace, o.name)
    elif o.kind == "StatefulSet":
        labels.update({"apps.kubernetes.io/pod-index": f.index,
                       "controller-revision-hash": f"{o.name}-{short_hash('rev', o.name)}",
                       "statefulset.kubernetes.io/pod-name": f.name})
    else:
        job_uid = uid("Job", o.namespace, o.name)
        labels.update({"batch.kubernetes.io/controller-uid": job_uid,
                       "batch.kubernetes.io/job-completion-index": f.index,
                       JOB_NAME_LABEL: o.name, "controller-uid": job_uid, "job-name": o.name})
    if o.gang:
        labels[W.POD_GROUP_LABEL] = o.name
    return labels


def _pod_affinity(o: Owner) -> dict[str, Any]:
    """spec.affinity: pool, zone preference, pod (anti-)affinity."""
    aff: dict[str, Any] = {}
    node: dict[str, Any] = {}
    if o.pool:
        node["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": POOL_KEY, "operator": "In", "values": [o.pool]}]}]}
    if o.prefer_zone:
        node["preferredDuringSchedulingIgnoredDuringExecution"] = [{"preference": {
            "matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": [o.prefer_zone]}]},
            "weight": 20}]
    if node:
        aff["nodeAffinity"] = node
    own = {"labelSelector": {"matchLabels": o.selector}, "topologyKey": HOSTNAME_KEY}
    if o.anti_host == "required":
        aff["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [own]}
    elif o.anti_host == "preferred":
        aff["podAntiAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"podAffinityTerm": own, "weight": 50}]}
    if o.affinity_to:
        aff["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {NAME_LABEL: o.affinity_to}},
            "topologyKey": ZONE_KEY}]}
    return aff


def _memory(mi: int) -> str:
    return f"{mi // 1024}Gi" if mi % 1024 == 0 else f"{mi}Mi"


def _resources(cpu_m: int, memory_mi: int, gpus: int) -> dict[str, Any]:
    """Burstable: cpu and memory requests, a memory limit (what most charts set)."""
    req = {"cpu": f"{cpu_m}m", "memory": _memory(memory_mi)}
    lim: dict[str, str] = {"memory": _memory(memory_mi)}
    if gpus:
        req[GPU] = lim[GPU] = str(gpus)
    return {"limits": lim, "requests": req}


def _container(o: Owner, name: str, cpu_m: int, f: PodFields, detail: str) -> dict[str, Any]:
    c: dict[str, Any] = {"image": f"registry.example.com/{o.namespace}/{o.name}:1.{len(o.name)}.0",
                         "name": name, "resources": _resources(cpu_m, o.memory_mi, o.gpus)}
    if name == "main":
        c["ports"] = [{"containerPort": 8080, "name": "http", "protocol": "TCP"}]
        c["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.name"}}}]
    if detail == "full":
        c.update({"imagePullPolicy": "IfNotPresent",
                  "terminationMessagePath": "/dev/termination-log",
                  "terminationMessagePolicy": "File",
                  "volumeMounts": [{"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                                    "name": f.vol, "readOnly": True}]})
    return c


def _tolerations(o: Owner, detail: str) -> list[dict[str, Any]]:
    tol: list[dict[str, Any]] = [{"effect": e, "key": k, "operator": "Exists"}
                                 for k, e in o.tolerate]
    if detail == "full":
        tol += [{"effect": "NoExecute", "key": f"node.kubernetes.io/{k}", "operator": "Exists",
                 "tolerationSeconds": 300} for k in ("not-ready", "unreachable")]
    return tol


def _service_account_volume(f: PodFields) -> dict[str, Any]:
    return {"name": f.vol, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}],
                       "name": "kube-root-ca.crt"}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1",
                                                 "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}}


def _pod_spec(o: Owner, f: PodFields, detail: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(o, "main", o.cpu_m, f, detail)],
                            "restartPolicy": "Never" if o.kind == "Job" else "Always",
                            "schedulerName": SCHEDULER_NAME if not f.node else "default-scheduler"}
    if o.init_cpu_m:
        spec["initContainers"] = [_container(o, "migrate", o.init_cpu_m, f, detail)]
    if aff := _pod_affinity(o):
        spec["affinity"] = aff
    if tol := _tolerations(o, detail):
        spec["tolerations"] = tol
    if o.spread_zone:
        spec["topologySpreadConstraints"] = [{
            "labelSelector": {"matchLabels": o.selector}, "maxSkew": 1,
            "topologyKey": ZONE_KEY, "whenUnsatisfiable": o.spread_zone}]
    if o.priority is not None or detail == "full":
        spec["priority"] = o.priority or 0
    if o.kind == "StatefulSet":
        spec.update({"hostname": f.name, "subdomain": o.name})
    if f.node:
        spec["nodeName"] = f.node
    if detail == "full":
        spec.update({"dnsPolicy": "ClusterFirst", "enableServiceLinks": True,
                     "preemptionPolicy": "PreemptLowerPriority",
                     "securityContext": {}, "serviceAccount": "default",
                     "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
                     "volumes": [_service_account_volume(f)]})
    return spec


def _pod_status(f: PodFields, detail: str) -> dict[str, Any]:
    if not f.node:
        return {"phase": "Pending", "qosClass": "Burstable"}
    status: dict[str, Any] = {"hostIP": f.hostip, "phase": "Running", "podIP": f.podip,
                              "qosClass": "Burstable"}
    if detail == "full":
        status["conditions"] = [{"lastProbeTime": None, "lastTransitionTime": f.created,
                                 "status": "True", "type": t}
                                for t in ("Initialized", "Ready", "ContainersReady",
                                          "PodScheduled")]
        status["hostIPs"] = [{"ip": f.hostip}]
        status["podIPs"] = [{"ip": f.podip}]
        status["startTime"] = f.created
    return status


def pod_doc(o: Owner, f: PodFields, detail: str) -> dict[str, Any]:
    """A Pod as the API server returns it; bound when ``f.node`` is set."""
    meta: dict[str, Any] = {"creationTimestamp": f.created, "labels": _pod_labels(o, f),
                            "name": f.name, "namespace": o.namespace,
                            "ownerReferences": [_owner_ref(o)], "uid": f.uid}
    if o.kind != "StatefulSet":
        meta["generateName"] = pod_name(o, 0).rsplit("-", 1)[0] + "-"
    if o.kind == "Job":
        meta["annotations"] = {"batch.kubernetes.io/job-completion-index": f.index}
    if detail == "full":
        meta["resourceVersion"] = "51002381"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": _pod_spec(o, f, detail),
            "status": _pod_status(f, detail)}


def pod_group_doc(o: Owner) -> dict[str, Any]:
    doc = M.podgroup(o.name, o.replicas, o.namespace, timeout_s=600)
    doc["metadata"].update(creationTimestamp=timestamp(o.created), uid=uid("PodGroup", o.namespace, o.name))
    doc["status"] = {"phase": "Pending"}
    return doc


# --------------------------------------------------------------------------- #
# Objects in `kubectl get` order
# --------------------------------------------------------------------------- #

def pod_fields(c: Cluster, o: Owner, i: int) -> PodFields:
    g = o.first + i
    f = PodFields(pod_name(o, i), uid("Pod", o.namespace, o.name, i), str(i),
                  timestamp(pod_created(o, i)), "kube-api-access-" + W._suffix(g, 777))
    if i >= o.running:
        return f
    n = c.bound[o.name][i]
    return replace(f, node=node_name(n), hostip=node_ip(n), podip=pod_ip(g))


def pod_order(c: Cluster) -> list[tuple[str, str, int, int]]:
    """(namespace, name, owner index, replica) sorted as kubectl lists pods."""
    return sorted((o.namespace, pod_name(o, i), k, i)
                  for k, o in enumerate(c.owners) for i in range(o.replicas))


def iter_manifests(c: Cluster, detail: str = "full") -> Iterator[dict[str, Any]]:
    """Nodes, pods (by namespace and name), PodGroups: the reference (dict) path."""
    for i, pool in enumerate(c.pool_of):
        yield node_doc(pool, node_fields(i), detail)
    for _, _, k, i in pod_order(c):
        yield pod_doc(c.owners[k], pod_fields(c, c.owners[k], i), detail)
    for o in c.owners:
        if o.gang:
            yield pod_group_doc(o)


def _plain(v: str) -> str:
    """The YAML scalar for a substituted string: bare when it cannot read as anything else."""
    return v if W._SAFE_VALUE.match(v) else "'" + v.replace("'", "''") + "'"


class _Templates:
    """One format string per object shape (node pool; owner x bound/pending)."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        self.cache: dict[tuple[str, bool], str] = {}
        self.node_tokens = NodeFields(*(W._tok(n) for n in NodeFields.__dataclass_fields__))
        self.pod_tokens = PodFields(*(W._tok(n) for n in PodFields.__dataclass_fields__))

    def node(self, pool: NodePool) -> str:
        key = ("pool:" + pool.name, True)
        if key not in self.cache:
            self.cache[key] = W._template(node_doc(pool, self.node_tokens, self.detail))
        return self.cache[key]

    def pod(self, o: Owner, bound: bool) -> str:
        key = (o.name, bound)
        if key not in self.cache:
            f = self.pod_tokens if bound else replace(self.pod_tokens, node="", hostip="",
                                                      podip="")
            self.cache[key] = W._template(pod_doc(o, f, self.detail))
        return self.cache[key]


def _fill(template: str, fields: NodeFields | PodFields) -> str:
    return template.format(**{k: _plain(v) for k, v in vars(fields).items() if v})


def write_snapshot(c: Cluster, path: str | os.PathLike, detail: str = "full") -> int:
    """Write ``c`` as one ``kind: List`` document, streamed (20,000 nodes make ~1 GB);
    returns the size in bytes."""
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {DETAILS}, not {detail!r}")
    t = _Templates(detail)
    head, tail = yaml.dump(W.as_list([{"x": "zqSPLITqz"}]), **W._DUMP_KW).split(
        "- x: zqSPLITqz\n")
    with open(path, "w", encoding="utf-8", newline="\n", buffering=1 << 20) as f:
        f.write(head)
        for i, pool in enumerate(c.pool_of):
            f.write(_fill(t.node(pool), node_fields(i)))
        for _, _, k, i in pod_order(c):
            o = c.owners[k]
            f.write(_fill(t.pod(o, i < o.running), pod_fields(c, o, i)))
        for o in c.owners:
            if o.gang:
                f.write(yaml.dump([pod_group_doc(o)], **W._DUMP_KW))
        f.write(tail)
        return f.tell()


# --------------------------------------------------------------------------- #
# Placing the running pods
# --------------------------------------------------------------------------- #

@dataclass
class Usage:
    """Requests bound on each node (running pods), by node index."""

    cpu_m: list[int]
    memory_ki: list[int]
    pods: list[int]
    gpus: list[int]

    @classmethod
    def empty(cls, n: int) -> Usage:
        return cls([0] * n, [0] * n, [0] * n, [0] * n)

    def fits(self, pool: NodePool, n: int, o: Owner) -> bool:
        return (self.cpu_m[n] + o.request_cpu_m <= pool.cpu_m
                and self.memory_ki[n] + o.memory_mi * 1024 <= pool.memory_ki
                and self.pods[n] + 1 <= pool.pods and self.gpus[n] + o.gpus <= pool.gpus)

    def add(self, n: int, o: Owner) -> None:
        self.cpu_m[n] += o.request_cpu_m
        self.memory_ki[n] += o.memory_mi * 1024
        self.pods[n] += 1
        self.gpus[n] += o.gpus


def may_use(pool: NodePool, o: Owner) -> bool:
    """The owner's required pool (if any) and every hard taint tolerated."""
    return o.pool in (None, pool.name) and all(
        (k, e) in o.tolerate for k, _, e in pool.taints if e in ("NoSchedule", "NoExecute"))


def allowed_nodes(c: Cluster, o: Owner) -> list[int]:
    return [n for n, p in enumerate(c.pool_of) if may_use(p, o)]


def place_running(c: Cluster, seed: int) -> Usage:
    """Bind every owner's running replicas (skewed random first fit); fills ``c.bound``."""
    rng = random.Random(seed)
    pools = c.pool_of
    usage = Usage.empty(len(pools))
    allowed: dict[tuple[str | None, tuple], list[int]] = {}
    for o in c.owners:
        key = (o.pool, o.tolerate)
        if key not in allowed:
            allowed[key] = allowed_nodes(c, o)
        cand = allowed[key]
        c.bound[o.name] = []
        used: set[int] = set()
        for _ in range(o.running):
            n = _place_one(rng, cand, pools, usage, o, used)
            usage.add(n, o)
            c.bound[o.name].append(n)
            if o.anti_host == "required":
                used.add(n)
    return usage


def _place_one(rng: random.Random, cand: list[int], pools: list[NodePool], usage: Usage,
               o: Owner, taken: set[int]) -> int:
    """A node for one running pod: skewed random tries (uneven fill), then a scan."""
    for _ in range(40):
        n = cand[int(len(cand) * rng.random() ** 1.6)]
        if n not in taken and usage.fits(pools[n], n, o):
            return n
    for n in cand:
        if n not in taken and usage.fits(pools[n], n, o):
            return n
    raise ValueError(f"running pods of {o.namespace}/{o.name} do not fit the cluster")


# --------------------------------------------------------------------------- #
# Owner catalogues
# --------------------------------------------------------------------------- #

TEAMS = ("payments", "checkout", "search", "catalog", "identity", "platform", "data", "ml",
         "media", "growth")
ENVS = ("prod", "staging", "canary", "batch")
NAMESPACES = tuple(f"{t}-{e}" for e in ENVS for t in TEAMS)          # 40
SERVICES = ("api", "gateway", "worker", "frontend", "indexer", "cache-proxy", "scheduler",
            "notifier", "renderer", "exporter", "ingest", "resolver", "ledger", "auth",
            "session", "profile", "billing", "pricing", "recommender", "feed", "uploader",
            "thumbnailer", "router", "audit", "metrics")
ROLES = ("v1", "v2", "blue", "green", "east", "west", "internal", "public", "batch", "stream",
         "sync", "async", "grpc", "rest", "admin", "edge", "core", "lite", "ha", "shadow")
CPU_SIZES_M = (50, 100, 100, 200, 250, 250, 500, 500, 1000)   # ~330m: 16/node ~1/3 full
MEMORY_SIZES_MI = (64, 128, 256, 256, 512, 512, 1024, 2048, 4096)
BIG_CPU_SIZES_M = (250, 500, 500, 1000, 1000, 2000)           # ~875m: 10/node ~55% full
BIG_MEMORY_SIZES_MI = (512, 1024, 2048, 4096, 8192)
JOB_CPU_M = (500, 1000, 2000)
JOB_MEMORY_MI = (1024, 2048, 4096)


def split(total: int, parts: int, rng: random.Random) -> list[int]:
    """``total`` split into ``parts`` uneven positive-ish shares (largest remainder)."""
    if parts <= 0:
        return []
    weights = [rng.choice((1, 1, 2, 3, 5, 8, 13)) for _ in range(parts)]
    raw = [w * total / sum(weights) for w in weights]
    out = [int(x) for x in raw]
    for k in sorted(range(parts), key=lambda k: out[k] - raw[k])[: total - sum(out)]:
        out[k] += 1
    return out


class Owners:
    """Appends owners with unique names, global pod indices and creation times."""

    def __init__(self, seed: int, cpu_sizes_m: tuple[int, ...] = CPU_SIZES_M,
                 memory_sizes_mi: tuple[int, ...] = MEMORY_SIZES_MI) -> None:
        self.rng = random.Random(seed)
        self.cpu_sizes_m, self.memory_sizes_mi = cpu_sizes_m, memory_sizes_mi
        self.items: list[Owner] = []
        self.names: Counter[str] = Counter()
        self.next_first = 0

    def add(self, kind: str, base: str, namespace: str, replicas: int, running: int,
            **kw: Any) -> Owner:
        self.names[base] += 1
        name = base if self.names[base] == 1 else f"{base}-{self.names[base]}"
        kw.setdefault("cpu_m", self.rng.choice(self.cpu_sizes_m))
        kw.setdefault("memory_mi", self.rng.choice(self.memory_sizes_mi))
        created = EPOCH + 3600 * len(self.items) % (20 * 86400)
        o = Owner(kind, name, namespace, replicas, running, created=created,
                  first=self.next_first, **kw)
        self.next_first += replicas
        self.items.append(o)
        return o


def background_deployments(ow: Owners, running: int, deployments: int, **kw: Any) -> None:
    """Running Deployments (no constraints beyond ``kw``) holding ``running`` pods."""
    for d, n in enumerate(split(running, deployments, ow.rng)):
        if n:
            base = f"{SERVICES[d % len(SERVICES)]}-{ROLES[d // len(SERVICES) % len(ROLES)]}"
            ow.add("Deployment", base, NAMESPACES[d % len(NAMESPACES)], n, n, **kw)


def soft_anti_jobs(ow: Owners, pending: int, per_job: int = 30, **kw: Any) -> None:
    """Indexed Jobs with the chart-default preferred hostname anti-affinity to themselves."""
    jobs = max(1, -(-pending // per_job))
    for j, n in enumerate(split_even(pending, jobs)):
        ow.add("Job", f"etl-{TEAMS[j % len(TEAMS)]}-{j:03d}", NAMESPACES[j % len(NAMESPACES)],
               n, 0, cpu_m=JOB_CPU_M[j % 3], memory_mi=JOB_MEMORY_MI[j // 3 % 3],
               anti_host="preferred", **kw)


def split_even(total: int, parts: int) -> list[int]:
    return [total // parts + (k < total % parts) for k in range(parts)]


def affinity_stacks(ow: Owners, pending: int, **kw: Any) -> None:
    """Stacks of 15 pods: cache StatefulSet (3, priority 2000, zone spread, hostname
    anti-affinity), workers (9, priority 1000, required pod affinity to the cache's zone,
    init container, soft zone spread) and api (3, priority 0, hostname anti-affinity,
    zone spread). Caches outrank workers, so a one-at-a-time scheduler places them first."""
    rng = ow.rng
    for s, n in enumerate(split_even(pending, max(1, pending // 15))):
        ns, svc = NAMESPACES[s % len(NAMESPACES)], SERVICES[s % len(SERVICES)]
        cache = ow.add("StatefulSet", f"{svc}-cache-{s}", ns, 3, 0, priority=2000,
                       cpu_m=rng.choice((250, 500, 1000)), memory_mi=rng.choice((1024, 2048,
                                                                                  4096)),
                       anti_host="required", spread_zone="DoNotSchedule", **kw)
        api = min(3, n - 3 - 1)
        ow.add("Deployment", f"{svc}-worker-{s}", ns, n - 3 - api, 0, priority=1000,
               cpu_m=rng.choice((100, 250, 500)), init_cpu_m=rng.choice((500, 1000)),
               affinity_to=cache.name, spread_zone="ScheduleAnyway", **kw)
        if api > 0:
            ow.add("Deployment", f"{svc}-api-{s}", ns, api, 0, priority=0,
                   cpu_m=rng.choice((250, 500)), anti_host="required",
                   spread_zone="DoNotSchedule", **kw)


def stateful_sets(ow: Owners, sets: int, replicas: int, running: int, **kw: Any) -> None:
    """StatefulSets with required hostname anti-affinity; even-numbered sets partly running."""
    for s in range(sets):
        ow.add("StatefulSet", f"{SERVICES[s % len(SERVICES)]}-db-{s}",
               NAMESPACES[s % len(NAMESPACES)], replicas, running if s % 2 == 0 else 0,
               cpu_m=ow.rng.choice((500, 1000, 2000)), memory_mi=ow.rng.choice((2048, 4096)),
               anti_host="required", **kw)


# --------------------------------------------------------------------------- #
# Workloads
# --------------------------------------------------------------------------- #

def _finish(name: str, pools: tuple[NodePool, ...], ow: Owners, seed: int) -> Cluster:
    names = Counter(o.name for o in ow.items)
    assert max(names.values(), default=1) == 1, names.most_common(3)
    c = Cluster(name, pools, ow.items)
    place_running(c, seed)
    return c


def hetero_jobs(nodes: int = 1500, running: int = 24_000, pending: int = 1500,
                deployments: int = 500, seed: int = 1) -> Cluster:
    ow = Owners(seed)
    background_deployments(ow, running, min(deployments, max(1, running // 16)))
    soft_anti_jobs(ow, pending)
    return _finish("hetero-jobs", (m5_4xlarge(nodes),), ow, seed)


def hetero_affinity(nodes: int = 300, running: int = 0, pending: int = 1500,
                    seed: int = 2) -> Cluster:
    ow = Owners(seed)
    background_deployments(ow, running, max(1, running // 16))
    affinity_stacks(ow, pending)
    return _finish("hetero-affinity", (m5_2xlarge(nodes),), ow, seed)


def statefulset(nodes: int = 500, running: int = 4000, pending: int = 800,
                seed: int = 3) -> Cluster:
    """``pending`` pods of 50-replica sets (the first 20 of every other set running) on top of
    ``running`` background Deployment pods."""
    sets = max(1, round(pending / 40))   # 50 replicas, half the sets with 20 running: 40 avg
    ow = Owners(seed)
    stateful_sets(ow, sets, 50, 20)
    bg = running - sum(o.running for o in ow.items)
    background_deployments(ow, bg, max(1, bg // 16))
    return _finish("statefulset", (m5_4xlarge(nodes),), ow, seed)


def rich_mixed(nodes: int = 5000, running: int = 50_000, pending: int = 5000,
               seed: int = 4) -> Cluster:
    """Three pools (70% general, 25% tainted high-memory, 5% tainted GPU), ~55% of cpu used by
    bigger running pods, and a pending mix:
    30% soft anti-affinity Jobs, 18% affinity stacks, ~10% StatefulSets, 20% high-memory pool
    Deployments, 6% GPU pods, ~6% gangs, the rest plain Deployments with priorities."""
    gpu_n = max(1, nodes // 20)
    highmem_n = nodes // 4
    pools = (m5_4xlarge(nodes - gpu_n - highmem_n), r5_4xlarge(highmem_n), p3_8xlarge(gpu_n))
    ow = Owners(seed, BIG_CPU_SIZES_M, BIG_MEMORY_SIZES_MI)
    highmem = {"pool": "highmem", "tolerate": (("dedicated", "NoSchedule"),)}
    gpu = {"pool": "gpu", "tolerate": ((GPU, "NoSchedule"),), "gpus": 1, "cpu_m": 4000,
               "memory_mi": 16384}
    sts = max(1, pending // 400)
    bg = running - 20 * ((sts + 1) // 2) - gpu_n       # the rest of `running` after these
    background_deployments(ow, bg * 4 // 5, max(1, bg * 4 // 5 // 50))
    background_deployments(ow, bg - bg * 4 // 5, max(1, (bg - bg * 4 // 5) // 50), **highmem)
    background_deployments(ow, gpu_n, max(1, gpu_n // 10), **gpu)
    stateful_sets(ow, sts, 50, 20)
    soft_anti_jobs(ow, pending * 3 // 10)
    affinity_stacks(ow, pending * 18 // 100)
    _pool_deployments(ow, pending // 5, highmem)
    for g in range(max(1, pending // 200)):
        ow.add("Deployment", f"inference-{g}", NAMESPACES[g % 10 + 30], 15, 0,
               priority=100_000, **gpu)
    _gangs(ow, pending * 6 // 100, gpu)
    _pool_deployments(ow, pending - sum(o.pending for o in ow.items), {})
    return _finish("rich-mixed", pools, ow, seed)


def _pool_deployments(ow: Owners, pending: int, pool: dict[str, Any]) -> None:
    """Pending Deployments of ~25 (``pool``'s node affinity and tolerations, a zone
    preference on every other one, three priorities)."""
    for d, n in enumerate(split_even(pending, max(1, pending // 25)) if pending > 0 else []):
        ow.add("Deployment", f"{SERVICES[d % len(SERVICES)]}-{'mem' if pool else 'app'}-{d}",
               NAMESPACES[d % len(NAMESPACES)], n, 0, priority=(0, 1000, 100_000)[d % 3],
               prefer_zone=ZONES[d % 3] if d % 2 else None, **pool)


def _gangs(ow: Owners, pending: int, gpu: dict[str, Any]) -> None:
    """Training gangs of 16 (every fourth on GPUs), each with a PodGroup."""
    for g in range(max(1, pending // 16)):
        extra = gpu if g % 4 == 3 else {"cpu_m": 2000, "memory_mi": 8192}
        ow.add("Job", f"train-{TEAMS[g % len(TEAMS)]}-{g}", NAMESPACES[g % 10 + 10], 16, 0,
               gang=True, priority=1000, **extra)


Generator = Callable[..., Cluster]
WORKLOADS: dict[str, Generator] = {"hetero-jobs": hetero_jobs,
                                   "hetero-affinity": hetero_affinity,
                                   "statefulset": statefulset, "rich-mixed": rich_mixed}


def build(name: str, **sizes: int | None) -> Cluster:
    """Workload ``name`` with optional nodes / running / pending overrides."""
    if name not in WORKLOADS:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")
    return WORKLOADS[name](**{k: v for k, v in sizes.items() if v is not None})


# --------------------------------------------------------------------------- #
# Validating a plan (cheap: from the model, no YAML)
# --------------------------------------------------------------------------- #

@dataclass
class Placement:
    """A plan read against the model: owner -> node index per placed pending pod."""

    by_owner: dict[str, list[int]]
    placed: int


def read_plan(c: Cluster, assignments: dict[str, str], problem: Callable[[str], None]
              ) -> Placement:
    keys = {f"{o.namespace}/{pod_name(o, i)}": o.name
            for o in c.owners for i in range(o.running, o.replicas)}
    index = {node_name(i): i for i in range(c.nodes)}
    by_owner: dict[str, list[int]] = defaultdict(list)
    placed = 0
    for pod, node in assignments.items():
        if pod not in keys:
            problem(f"assignment of unknown or non-pending pod {pod!r}")
        elif node not in index:
            problem(f"{pod} assigned to unknown node {node!r}")
        else:
            by_owner[keys[pod]].append(index[node])
            placed += 1
    return Placement(by_owner, placed)


def _check_capacity(c: Cluster, p: Placement, problem: Callable[[str], None]) -> None:
    pools = c.pool_of
    usage = Usage.empty(len(pools))
    for o in c.owners:
        for n in c.bound.get(o.name, []) + p.by_owner.get(o.name, []):
            usage.add(n, o)
    for n, pool in enumerate(pools):
        over = [f"{what} {used}/{cap}" for what, used, cap in (
            ("cpu m", usage.cpu_m[n], pool.cpu_m), ("memory Ki", usage.memory_ki[n],
                                                     pool.memory_ki),
            ("pods", usage.pods[n], pool.pods), ("gpus", usage.gpus[n], pool.gpus))
            if used > cap]
        if over:
            problem(f"{node_name(n)}: over capacity: {', '.join(over)}")


def _check_owner(c: Cluster, o: Owner, nodes: list[int], zone_has: dict[str, set[str]],
                 problem: Callable[[str], None]) -> None:
    """Pool/taints, hostname anti-affinity, zone affinity, zone spread, gang of one owner."""
    pools = c.pool_of
    bad = [n for n in nodes if not may_use(pools[n], o)]
    if bad:
        problem(f"{o.namespace}/{o.name}: {len(bad)} pods on nodes outside its pool/taints")
    every = c.bound.get(o.name, []) + nodes
    if o.anti_host == "required" and len(set(every)) < len(every):
        problem(f"{o.namespace}/{o.name}: two pods on one node despite hostname anti-affinity")
    if o.affinity_to:
        off = {node_zone(n) for n in nodes} - zone_has.get(o.affinity_to, set())
        if off:
            problem(f"{o.namespace}/{o.name}: pods in {sorted(off)} without {o.affinity_to}")
    if o.spread_zone == "DoNotSchedule" and nodes:
        per_zone = Counter({node_zone(n): 0 for n in allowed_nodes(c, o)})
        per_zone.update(node_zone(n) for n in every)
        if max(per_zone.values()) - min(per_zone.values()) > 1:
            problem(f"{o.namespace}/{o.name}: zone skew > 1: {dict(per_zone)}")
    if o.gang and 0 < len(nodes) < o.pending:
        problem(f"gang {o.namespace}/{o.name}: {len(nodes)}/{o.pending} placed")


def validate(c: Cluster, assignments: dict[str, str], limit: int = 20) -> tuple[int, list[str]]:
    """``(placed, violations)`` of a ``{"ns/pod": "node"}`` plan for ``c``."""
    problems = W._Problems(limit)
    p = read_plan(c, assignments, problems.add)
    _check_capacity(c, p, problems.add)
    zone_has: dict[str, set[str]] = {
        o.name: {node_zone(n) for n in c.bound.get(o.name, []) + p.by_owner.get(o.name, [])}
        for o in c.owners}
    for o in c.owners:
        _check_owner(c, o, p.by_owner.get(o.name, []), zone_has, problems.add)
    return p.placed, problems.lines()


# --------------------------------------------------------------------------- #
# Standalone use
# --------------------------------------------------------------------------- #

def describe(c: Cluster) -> str:
    kinds = Counter(o.kind for o in c.owners)
    return (f"{c.name}: {c.nodes} nodes, {c.running} running, {c.pending} pending pods; "
            + ", ".join(f"{n} {k}s" for k, n in sorted(kinds.items())))


def selfcheck(c: Cluster, detail: str, tmp: Path) -> list[str]:
    """Differences between the fast writer and the dict path (empty = identical documents)."""
    fast = tmp / "fast.yaml"
    write_snapshot(c, fast, detail)
    got = yaml.load(fast.read_text(), Loader=yaml.CSafeLoader)["items"]
    want = list(iter_manifests(c, detail))
    return [f"item {k}: {a.get('kind')} {a['metadata']['name']} differs"
            for k, (a, b) in enumerate(zip(want, got)) if a != b] + (
        [f"{len(got)} items written, {len(want)} expected"] if len(got) != len(want) else [])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write a realistic cluster snapshot "
                                             "(one kind: List YAML document).")
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("-o", "--output", default="-")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--running", type=int)
    ap.add_argument("--pending", type=int)
    ap.add_argument("--detail", choices=DETAILS, default="full")
    ap.add_argument("--selfcheck", action="store_true",
                    help="compare the fast writer with the dict path instead of writing")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    c = build(a.workload, nodes=a.nodes, running=a.running, pending=a.pending)
    print(describe(c), file=sys.stderr)
    if a.selfcheck:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            diffs = selfcheck(c, a.detail, Path(d))
        print("\n".join(diffs[:20]) or "selfcheck: identical", file=sys.stderr)
        return 1 if diffs else 0
    write_snapshot(c, "/dev/stdout" if a.output == "-" else a.output, a.detail)
    print(f"wrote {a.workload} in {time.perf_counter() - t0:.2f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
