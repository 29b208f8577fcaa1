"""Synthetic cluster snapshots for benchmarking policy-scheduler.

The workloads mirror the upstream Kubernetes scheduler benchmarks
(kubernetes/test/integration/scheduler_perf: SchedulingBasic,
SchedulingPodAntiAffinity, SchedulingNodeAffinity, TopologySpreading):

* nodes follow scheduler_perf's node-default template (4 CPU, 32Gi, 110 pods),
  labelled with ``kubernetes.io/hostname`` and one of ``ZONES`` zones;
* pending pods follow its pod-default template (one pause container requesting
  100m CPU / 500Mi memory), are owned by a Deployment-style ReplicaSet, use
  ``spec.schedulerName: policy-scheduler`` and live in namespace ``sched-0``.

A snapshot is ONE ``kind: List`` YAML document, the shape printed by
``kubectl get nodes,pods -A -o yaml``: nodes first, then already-bound pods
(optional, ``bound=N``), then the pending pods.

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
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import yaml

# --------------------------------------------------------------------------- #
# Workload catalogue
# --------------------------------------------------------------------------- #

SCHEDULER_NAME = "policy-scheduler"
NAMESPACE = "sched-0"          # pending pods
BOUND_NAMESPACE = "sched-1"    # optional already-running pods
BOUND_APP = "existing"

ZONES = 10
ZONE_NAMES = tuple(f"zone-{i}" for i in range(ZONES))
REGION = "region-1"
NODE_AFFINITY_ZONES = ("zone-1", "zone-4", "zone-7")   # 3 of the 10 zones
SPREAD_MAX_SKEW = 1

HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
REGION_KEY = "topology.kubernetes.io/region"

# scheduler_perf node-default / pod-default templates
NODE_CPU, NODE_MEMORY, NODE_PODS = "4", "32Gi", "110"
POD_CPU, POD_MEMORY = "100m", "500Mi"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

CREATION_TIMESTAMP = "2024-01-01T00:00:00Z"

KINDS = ("basic", "anti-affinity", "node-affinity", "topology-spread")
DETAILS = ("minimal", "full")


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str                 # one of KINDS: which constraint the pods carry
    nodes: int
    pods: int                 # pending pods to schedule
    target: float | None      # pods/s end to end, None = no target
    description: str

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
# quick variants (anti-affinity keeps its 2.5 nodes/pod ratio: 1 pod per node max)
_add(Workload("small-basic", "basic", 500, 1000, None, "small SchedulingBasic"))
_add(Workload("small-anti-affinity", "anti-affinity", 500, 200, None,
              "small SchedulingPodAntiAffinity"))
_add(Workload("small-node-affinity", "node-affinity", 500, 1000, None,
              "small SchedulingNodeAffinity"))
_add(Workload("small-topology-spread", "topology-spread", 500, 1000, None,
              "small TopologySpreading"))

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


def _rs_uid(app: str) -> str:
    h = hashlib.sha1(("rs/" + app).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-8{h[17:20]}-{h[20:32]}"


def pending_pod_keys(w: Workload) -> list[str]:
    """``namespace/name`` of every pending pod, in file order."""
    prefix = f"{NAMESPACE}/{w.app}-{template_hash(w.app)}-"
    return [prefix + _suffix(i) for i in range(w.pods)]


def bound_pod_node(w: Workload, j: int) -> int:
    """Index of the node the j-th already-bound pod runs on (round robin)."""
    return j % w.nodes


# --------------------------------------------------------------------------- #
# Manifest builders (shared by the dict API and the fast writer)
# --------------------------------------------------------------------------- #

def _node(name: str, uid: str, zone: str, detail: str, ip: str) -> dict[str, Any]:
    resources = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    labels = {
        HOSTNAME_KEY: name,
        "kubernetes.io/os": "linux",
        REGION_KEY: REGION,
        ZONE_KEY: zone,
    }
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "creationTimestamp": CREATION_TIMESTAMP,
            "labels": labels,
            "name": name,
            "uid": uid,
        },
        "spec": {},
        "status": {
            "allocatable": dict(resources),
            "capacity": dict(resources),
            "conditions": [{"status": "True", "type": "Ready"}],
        },
    }
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
    if w.kind == "topology-spread":
        return {"topologySpreadConstraints": [{
            "labelSelector": app_selector,
            "maxSkew": SPREAD_MAX_SKEW,
            "topologyKey": ZONE_KEY,
            "whenUnsatisfiable": "DoNotSchedule",
        }]}
    raise ValueError(f"unknown workload kind {w.kind!r}")


def _pod(*, app: str, namespace: str, name: str, uid: str, vol_suffix: str,
         spec_extras: dict[str, Any], detail: str,
         node: str | None = None) -> dict[str, Any]:
    h = template_hash(app)
    rs = f"{app}-{h}"
    res = {"cpu": POD_CPU, "memory": POD_MEMORY}
    container: dict[str, Any] = {
        "image": PAUSE_IMAGE,
        "name": "pause",
        "ports": [{"containerPort": 80, "protocol": "TCP"}],
        "resources": {"limits": dict(res), "requests": dict(res)},
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Always",
        "schedulerName": SCHEDULER_NAME,
    }
    spec.update(spec_extras)
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Guaranteed"}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": CREATION_TIMESTAMP,
            "generateName": rs + "-",
            "labels": {"app": app, "pod-template-hash": h},
            "name": name,
            "namespace": namespace,
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": rs,
                "uid": _rs_uid(app),
            }],
            "uid": uid,
        },
        "spec": spec,
        "status": status,
    }
    if node is not None:
        spec["nodeName"] = node
        status["phase"] = "Running"
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
            "priority": 0,
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


def _pending_pod(w: Workload, i: int, detail: str, extras: dict[str, Any]) -> dict[str, Any]:
    return _pod(app=w.app, namespace=NAMESPACE, name=pod_name(w.app, i),
                uid=_pod_uid(0, i), vol_suffix=_suffix(i, 777), spec_extras=extras,
                detail=detail)


# --------------------------------------------------------------------------- #
# Public API: dicts
# --------------------------------------------------------------------------- #

def iter_manifests(w: Workload | str, bound: int = 0, detail: str = "minimal") -> Iterator[dict]:
    """Yield the manifests of a snapshot: nodes, bound pods, pending pods."""
    if isinstance(w, str):
        w = get_workload(w)
    _check_args(w, bound, detail)
    for i in range(w.nodes):
        yield _node(node_name(i), node_uid(i), node_zone(i), detail, _node_ip(i))
    for j in range(bound):
        yield _bound_pod(w, j, detail, node_name(bound_pod_node(w, j)))
    extras = _pod_spec_extras(w)
    for i in range(w.pods):
        yield _pending_pod(w, i, detail, extras)


def manifests(w: Workload | str, bound: int = 0, detail: str = "minimal") -> list[dict]:
    """The snapshot as a list of Kubernetes manifest dicts."""
    return list(iter_manifests(w, bound, detail))


def as_list(items: Iterable[dict]) -> dict[str, Any]:
    """Wrap manifests the way ``kubectl get ... -o yaml`` does."""
    return {"apiVersion": "v1", "items": list(items), "kind": "List",
            "metadata": {"resourceVersion": ""}}


class _Dumper(yaml.CSafeDumper):
    """CSafeDumper that never emits &anchors/*aliases for shared sub-objects."""

    def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002
        return True


_DUMP_KW = dict(Dumper=_Dumper, default_flow_style=False, sort_keys=True,
                allow_unicode=True, width=1 << 16)


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

    node_t = _template(_node(_tok("name"), _tok("uid"), _tok("zone"), detail, _tok("ip")))
    extras = _pod_spec_extras(w)
    pending_t = _template(_pod(app=w.app, namespace=NAMESPACE, name=_tok("name"),
                               uid=_tok("uid"), vol_suffix=_tok("vol"),
                               spec_extras=extras, detail=detail))
    bound_t = _template(_pod(app=BOUND_APP, namespace=BOUND_NAMESPACE, name=_tok("name"),
                             uid=_tok("uid"), vol_suffix=_tok("vol"), spec_extras={},
                             detail=detail, node=_tok("node")))

    head, tail = yaml.dump(as_list([{"x": "zqSPLITqz"}]), **_DUMP_KW).split("- x: zqSPLITqz\n")

    # The substituted values are plain YAML scalars that stay strings; make sure.
    samples = [node_name(0), node_uid(0), node_zone(0), _node_ip(0), pod_name(w.app, 0),
               _pod_uid(0, 0), _pod_uid(1, 0), _suffix(0, 777), pod_name(BOUND_APP, 0)]
    bad = [s for s in samples if not _SAFE_VALUE.match(s)]
    assert not bad, f"unsafe template values: {bad}"

    buf = io.StringIO()
    write = buf.write
    write(head)
    fmt = node_t.format
    for i in range(w.nodes):
        write(fmt(name=node_name(i), uid=node_uid(i), zone=node_zone(i), ip=_node_ip(i)))
    fmt = bound_t.format
    b_prefix = f"{BOUND_APP}-{template_hash(BOUND_APP)}-"
    for j in range(bound):
        write(fmt(name=b_prefix + _suffix(j), uid=_pod_uid(1, j), vol=_suffix(j, 777),
                  node=node_name(bound_pod_node(w, j))))
    fmt = pending_t.format
    p_prefix = f"{w.app}-{template_hash(w.app)}-"
    for i in range(w.pods):
        write(fmt(name=p_prefix + _suffix(i), uid=_pod_uid(0, i), vol=_suffix(i, 777)))
    write(tail)
    data = buf.getvalue().encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


# --------------------------------------------------------------------------- #
# Validation of a scheduler's answer
# --------------------------------------------------------------------------- #

def _qty_cpu_milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


_MEM_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}


def _qty_bytes(q: str) -> int:
    for unit, mult in _MEM_UNITS.items():
        if q.endswith(unit):
            return int(q[: -len(unit)]) * mult
    return int(q)


def pods_per_node_limit() -> int:
    """How many template pods fit on one template node (all pods are equal)."""
    return min(_qty_cpu_milli(NODE_CPU) // _qty_cpu_milli(POD_CPU),
               _qty_bytes(NODE_MEMORY) // _qty_bytes(POD_MEMORY),
               int(NODE_PODS))


def validate(w: Workload | str, assignments: dict[str, str], bound: int = 0,
             limit: int = 20) -> tuple[int, list[str]]:
    """Check a scheduler's ``{"ns/pod": "node"}`` answer against the workload.

    Returns ``(placed, violations)``: how many pending pods were assigned, and
    human-readable descriptions of broken constraints (at most ``limit``
    entries plus a summary line). Checks: only known pending pods on known
    nodes; node capacity (cpu, memory, pods, counting bound pods); the
    workload's constraint (anti-affinity, node affinity, zone spread).
    """
    if isinstance(w, str):
        w = get_workload(w)
    problems: list[str] = []
    n_problems = 0

    def problem(msg: str) -> None:
        nonlocal n_problems
        n_problems += 1
        if len(problems) < limit:
            problems.append(msg)

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
        zones = Counter({z: 0 for z in ZONE_NAMES})
        for node, n in per_node.items():
            zones[node_zone(node_index[node])] += n
        skew = max(zones.values()) - min(zones.values())
        if skew > SPREAD_MAX_SKEW:
            problem(f"zone skew {skew} > maxSkew {SPREAD_MAX_SKEW}: {dict(sorted(zones.items()))}")

    if n_problems > len(problems):
        problems.append(f"... and {n_problems - len(problems)} more")
    return placed, problems


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
            print(f"{w.name:24} {w.nodes:>6} nodes {w.pods:>7} pods  target {tgt:>12}  {w.description}")
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
