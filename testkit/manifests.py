"""Kubernetes manifests as plain dicts, the way `kubectl get -o yaml` prints them (or a client creates them).

One builder per kind, for the unit tests (snapshots handed to `build_cluster` and to the checker), the loop's
in-memory API, the e2e tests and the benchmarks alike. Defaults are small and neutral; a caller that needs
other defaults passes them (or binds them once with `functools.partial`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

SCHEDULER_NAME = "policy-scheduler"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
HOSTNAME_KEY = "kubernetes.io/hostname"
ZONE_KEY = "topology.kubernetes.io/zone"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
POD_GROUP_API = "scheduling.x-k8s.io/v1alpha1"
SERVER_SET = ("uid", "creationTimestamp", "resourceVersion")  # metadata a client does not send


# --- nodes -------------------------------------------------------------------------------------------------

def node(name: str, cpu: str = "4", memory: str = "16Gi", pods: int | str = 110, labels: dict | None = None,
         taints: list[dict] | None = None, unschedulable: bool = False, status: dict | None = None,
         **extra: str) -> dict:
    """A Node labelled with its hostname, allocatable = capacity = cpu, memory, pods and `extra` resources
    (`**{"nvidia.com/gpu": "4"}`). `status` replaces the whole status (e.g. capacity alone)."""
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods), **extra}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME_KEY: name, **(labels or {})}},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc)} if status is None else status}


def ready_node(name: str, resources: dict[str, str], labels: dict | None = None, taints: list[dict] | None = None,
               annotations: dict | None = None, message: str = "a Node without a kubelet") -> tuple[dict, dict]:
    """A Node for a real apiserver without kubelets: (what to create, the status to write through the status
    subresource, which a create ignores): Ready, capacity = allocatable = `resources`."""
    meta: dict[str, Any] = {"name": name, "labels": {HOSTNAME_KEY: name, **(labels or {})}}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {"status": {
        "capacity": resources, "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": message,
                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
        "addresses": [{"type": "Hostname", "address": name}],
    }}
    return {"metadata": meta, "spec": {"taints": list(taints or [])}}, status


# --- pods --------------------------------------------------------------------------------------------------

def pod(name: str, cpu: str | None = "100m", memory: str | None = None, ns: str = "default",
        labels: dict | None = None, node_name: str | None = None, scheduler: str | None = SCHEDULER_NAME,
        priority: int | None = None, phase: str | None = None, requests: dict | None = None,
        limits: dict | None = None, resources: dict | None = None, ports: list[dict] | None = None,
        container: str = "main", image: str = PAUSE_IMAGE, **spec_extra: Any) -> dict:
    """A Pod of one container requesting `cpu`, `memory` and `requests`; `limits` too if given, or exactly
    `resources`. Bound (and Running) when `node_name` is set; `scheduler=None` leaves schedulerName out
    (the API's default-scheduler). Anything else goes into the spec as it is (`affinity=`, `tolerations=`,
    `nodeSelector=`, `initContainers=`...)."""
    if resources is None:
        req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        req.update(requests or {})
        resources = {"requests": req} if limits is None else {"requests": req, "limits": dict(limits)}
    main: dict[str, Any] = {"name": container, "image": image, "resources": resources}
    if ports is not None:
        main["ports"] = ports
    spec: dict[str, Any] = {"schedulerName": scheduler} if scheduler else {}
    spec.update({"containers": [main], **spec_extra})
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})},
            "spec": spec, "status": {"phase": phase or ("Running" if node_name else "Pending")}}


def api_pod(name: str, ns: str, scheduler: str = SCHEDULER_NAME, cpu: str = "100m", labels: dict | None = None,
            **spec: Any) -> dict:
    """A pod as a client creates it (no status) in namespace `ns`: what the e2e tests and benchmarks POST."""
    return created(pod(name, cpu=cpu, ns=ns, labels=labels, scheduler=scheduler, **spec))


def created(obj: dict) -> dict:
    """`obj` as a client would create it: without status and the metadata the server sets."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_SET}
    return {k: v for k, v in obj.items() if k != "status"} | {"metadata": meta}


# --- other kinds -------------------------------------------------------------------------------------------

def podgroup(name: str, min_member: int, ns: str = "default", timeout_s: int | None = None) -> dict:
    """A scheduler-plugins PodGroup (Coscheduling's gang)."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_s is not None:
        spec["scheduleTimeoutSeconds"] = timeout_s
    return {"apiVersion": POD_GROUP_API, "kind": "PodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def namespace(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def priority_class(name: str, value: int, global_default: bool = False, preemption_policy: str | None = None) -> dict:
    out: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                           "metadata": {"name": name}, "value": value}
    if global_default:
        out["globalDefault"] = True
    if preemption_policy is not None:
        out["preemptionPolicy"] = preemption_policy
    return out


def budget(name: str, selector: dict, min_available: int | None = None, allowed: int | None = None,
           ns: str = "default") -> dict:
    """A PodDisruptionBudget over `selector` (matchLabels); `allowed` writes status.disruptionsAllowed."""
    spec: dict[str, Any] = {"selector": {"matchLabels": selector}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    out: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": name, "namespace": ns}, "spec": spec}
    if allowed is not None:
        out["status"] = {"disruptionsAllowed": allowed}
    return out


# --- pieces of a pod spec ----------------------------------------------------------------------------------

def term(labels: dict, key: str = HOSTNAME_KEY, **extra: Any) -> dict:
    """A pod (anti-)affinity term selecting `labels` within topology `key`."""
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key, **extra}


def anti(*terms: dict) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def affinity(*terms: dict) -> dict:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def node_affinity(*terms: list[dict], fields: list[dict] | None = None) -> dict:
    """Required node affinity: one nodeSelectorTerm per list of expressions (ORed), `fields` as one more."""
    node_terms = [{"matchExpressions": t} for t in terms]
    if fields is not None:
        node_terms.append({"matchFields": fields})
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": node_terms}}}


def expr(key: str, op: str, *values: str) -> dict:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def spread(labels: dict, key: str = ZONE_KEY, skew: int = 1, hard: bool = True, **extra: Any) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels}, **extra}


# --- storage -----------------------------------------------------------------------------------------------

def storage_class(name: str, provisioner: str = "kubernetes.io/no-provisioner", wait: bool = True,
                  zones: list[str] | None = None) -> dict:
    """A StorageClass; WaitForFirstConsumer unless `wait=False`; `zones` become its allowedTopologies."""
    obj: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner,
                           "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate"}
    if zones:
        obj["allowedTopologies"] = [{"matchLabelExpressions": [{"key": ZONE_KEY, "values": list(zones)}]}]
    return obj


def claim(name: str, size: str = "1Gi", storage_class: str | None = "local", ns: str = "default",
          modes: tuple[str, ...] = ("ReadWriteOnce",), volume: str | None = None) -> dict:
    """A PersistentVolumeClaim; bound to PersistentVolume `volume` (as the PV controller leaves it) if given."""
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    status = {"phase": "Pending"}
    if volume:
        spec["volumeName"] = volume
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        status = {"phase": "Bound"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec, "status": status}


def volume(name: str, size: str = "1Gi", storage_class: str = "local", node: str | None = None,
           zone: str | None = None, modes: tuple[str, ...] = ("ReadWriteOnce",), claim_ref: tuple[str, str] | None = None,
           csi: tuple[str, str] | None = None, labels: dict | None = None) -> dict:
    """A PersistentVolume: a local one pinned to `node`, or a zonal one (`zone`), Available unless `claim_ref`
    (namespace, name) binds it; `csi` = (driver, volumeHandle)."""
    spec: dict[str, Any] = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": storage_class,
                            "persistentVolumeReclaimPolicy": "Delete"}
    where = [expr(HOSTNAME_KEY, "In", node)] if node else [expr(ZONE_KEY, "In", zone)] if zone else None
    if where:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": where}]}}
    if csi:
        spec["csi"] = {"driver": csi[0], "volumeHandle": csi[1]}
    else:
        spec["local"] = {"path": f"/mnt/disks/{name}"}
    if claim_ref:
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": claim_ref[0], "name": claim_ref[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": {"phase": "Bound" if claim_ref else "Available"}}


def csinode(name: str, limits: dict[str, int]) -> dict:
    """A CSINode: each driver with its attach limit (allocatable.count)."""
    drivers = [{"name": d, "nodeID": name, "topologyKeys": None, "allocatable": {"count": n}} for d, n in limits.items()]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}}


def csi_driver(name: str, storage_capacity: bool = True) -> dict:
    """A CSIDriver; `storage_capacity`: the scheduler checks its CSIStorageCapacity reports."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": name},
            "spec": {"storageCapacity": storage_capacity, "attachRequired": False}}


def storage_capacity(name: str, storage_class: str, capacity: str | None, node: str | None = None,
                     maximum_volume_size: str | None = None, ns: str = "default") -> dict:
    """A CSIStorageCapacity of `storage_class` on the node named `node` (None: no nodeTopology, so no node)."""
    obj: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                           "metadata": {"name": name, "namespace": ns}, "storageClassName": storage_class}
    if node is not None:
        obj["nodeTopology"] = {"matchLabels": {HOSTNAME_KEY: node}}
    if capacity is not None:
        obj["capacity"] = capacity
    if maximum_volume_size is not None:
        obj["maximumVolumeSize"] = maximum_volume_size
    return obj


def mounts(*claims: str) -> list[dict]:
    """A pod's spec.volumes mounting these claims (pass as `volumes=`)."""
    return [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]


# --- workloads (what system-default spreading reads) -------------------------------------------------------

def service(name: str, selector: dict, ns: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": dict(selector), "ports": [{"port": 80}]}}


def replica_set(name: str, labels: dict, replicas: int = 1, ns: str = "default", cpu: str = "100m") -> dict:
    """A ReplicaSet selecting (and templating) `labels`, scheduled by policy-scheduler."""
    template = pod("template", cpu=cpu, labels=labels)
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": template["spec"]}}}


def stateful_set(name: str, labels: dict, replicas: int = 1, ns: str = "default", **spec: Any) -> dict:
    """A StatefulSet selecting `labels` (its template as `replica_set`'s; `volumeClaimTemplates=` etc. go into
    the spec)."""
    rs = replica_set(name, labels, replicas, ns)
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": rs["metadata"],
            "spec": {**rs["spec"], "serviceName": name, **spec}}


def owned(doc: dict, kind: str, name: str, api_version: str = "apps/v1") -> dict:
    """`doc` with a controller ownerReference to `kind` `name`."""
    doc["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name,
                                           "uid": f"uid-{kind.lower()}-{name}", "controller": True}]
    return doc


NATIVE_V1ALPHA2, NATIVE_V1BETA1 = "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1"  # 1.36, 1.37


def native_group(name: str, min_count: int | None = None, ns: str = "default", topology: str | None = None,
                 priority: int | None = None, api_version: str = NATIVE_V1ALPHA2,
                 disruption: str | None = None, preemption: str | None = None, parent: str | None = None) -> dict:
    """A scheduling.k8s.io PodGroup (KEP-4671): a gang of `min_count`, or a basic group when None. `disruption`
    Pod or PodGroup, written as `api_version` spells it (v1beta1 on: `{single: {}}` / `{all: {}}`); `preemption`
    the group's preemptionPolicy (v1beta1 on); `parent` its CompositePodGroup (v1alpha3 / v1beta1, with the
    workloadRef the apiserver then requires)."""
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if parent:
        spec["parentCompositePodGroupName"] = parent
        spec["workloadRef"] = {"workloadName": parent, "templateName": "worker"}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    if priority is not None:
        spec["priority"] = priority
    if disruption:
        modes = {"PodGroup": "all", "Pod": "single"}
        spec["disruptionMode"] = disruption if api_version == NATIVE_V1ALPHA2 else {modes[disruption]: {}}
    if preemption:
        spec["preemptionPolicy"] = preemption
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def composite_group(name: str, min_groups: int | None = None, ns: str = "default", topology: str | None = None,
                    api_version: str = "scheduling.k8s.io/v1beta1") -> dict:
    """A scheduling.k8s.io CompositePodGroup (1.38's v1beta1; 1.37's v1alpha3 has the same shape): `min_groups`
    child groups all or nothing (`gang.minGroupCount`), or basic when None; `topology` its key."""
    policy = {"gang": {"minGroupCount": min_groups}} if min_groups is not None else {"basic": {}}
    spec: dict[str, Any] = {"schedulingPolicy": policy, "workloadRef": {"workloadName": name, "templateName": "job"}}
    if topology:
        spec["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": api_version, "kind": "CompositePodGroup", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def in_group(group: str) -> dict:
    """A pod's spec.schedulingGroup naming a scheduling.k8s.io PodGroup (pass as `schedulingGroup=`)."""
    return {"podGroupName": group}


# --- Dynamic Resource Allocation (resource.k8s.io/v1) ---------------------------------------------------------

DRA_API = "resource.k8s.io/v1"
GPU_DRIVER = "gpu.example.com"


def gpu(name: str, model: str = "a100", memory: str = "40Gi", **attributes: Any) -> dict:
    """One device of a ResourceSlice: `model` and extra attributes (int, bool, str) under the driver's domain,
    `memory` capacity."""
    attrs = {"model": {"string": model}}
    for key, value in attributes.items():
        kind = "bool" if isinstance(value, bool) else "int" if isinstance(value, int) else "string"
        attrs[key] = {kind: value}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": memory}}}


def resource_slice(node: str | None, devices: list[dict], driver: str = GPU_DRIVER, pool: str | None = None,
                   slices: int = 1) -> dict:
    """A ResourceSlice publishing `devices` on `node` (None: reachable from every node), one of `slices` of its pool."""
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool or node or "shared", "generation": 1,
                                                      "resourceSliceCount": slices}, "devices": devices}
    if node:
        spec["nodeName"] = node
    else:
        spec["allNodes"] = True
    return {"apiVersion": DRA_API, "kind": "ResourceSlice",
            "metadata": {"name": f"{node or 'shared'}-{driver}-{pool or 'pool'}"}, "spec": spec}


def counter_slice(pool: str, counters: dict[str, dict[str, str]], driver: str = GPU_DRIVER, node: str | None = None) -> dict:
    """A ResourceSlice holding a pool's shared counters only (partitionable devices): counter set -> counter ->
    value; its devices are published in another slice of the pool."""
    spec: dict[str, Any] = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
                            "sharedCounters": [{"name": name, "counters": {c: {"value": v} for c, v in values.items()}}
                                               for name, values in counters.items()]}
    spec.update({"nodeName": node} if node else {"allNodes": True})
    return {"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": f"{pool}-{driver}-counters"},
            "spec": spec}


def partition(name: str, counter_set: str, memory: str, **attributes: Any) -> dict:
    """A device of a partitionable GPU: it consumes `memory` of the counter set's `memory` counter."""
    device = gpu(name, memory=memory, **attributes)
    device["consumesCounters"] = [{"counterSet": counter_set, "counters": {"memory": {"value": memory}}}]
    return device


def device_class(name: str = "gpu", driver: str = GPU_DRIVER, *selectors: str) -> dict:
    exprs = [f'device.driver == "{driver}"', *selectors]
    return {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}


def device_request(name: str = "gpu", device_class_name: str = "gpu", count: int = 1, selectors: tuple[str, ...] = (),
                   all_devices: bool = False) -> dict:
    exactly: dict[str, Any] = {"deviceClassName": device_class_name}
    if all_devices:
        exactly["allocationMode"] = "All"
    else:
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def resource_claim(name: str, *requests: dict, ns: str = "default", match_attribute: str | None = None,
                   allocated: list[tuple[str, str]] | None = None, node: str | None = None,
                   reserved_for: list[str] | None = None) -> dict:
    """A ResourceClaim with `requests`; `allocated` = [(pool, device)] of the GPU driver, usable on `node`, in use by
    the pods named in `reserved_for` (status.reservedFor)."""
    devices: dict[str, Any] = {"requests": list(requests) or [device_request()]}
    if match_attribute:
        devices["constraints"] = [{"matchAttribute": match_attribute}]
    obj: dict[str, Any] = {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": ns},
                           "spec": {"devices": devices}}
    if allocated is not None:
        selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        obj["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": GPU_DRIVER, "pool": p, "device": d} for p, d in allocated]},
            **({"nodeSelector": selector} if node else {})}}
        if reserved_for:
            obj["status"]["reservedFor"] = [{"resource": "pods", "name": n, "uid": f"uid-{n}"} for n in reserved_for]
    return obj


def claim_template(name: str, *requests: dict, ns: str = "default") -> dict:
    """A ResourceClaimTemplate: the resource-claim controller makes each pod naming it a claim of `requests`."""
    return {"apiVersion": DRA_API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": list(requests) or [device_request()]}}}}


def claims(*names: str) -> list[dict]:
    """A pod's spec.resourceClaims naming these ResourceClaims (pass as `resourceClaims=`)."""
    return [{"name": f"c{i}", "resourceClaimName": n} for i, n in enumerate(names)]
