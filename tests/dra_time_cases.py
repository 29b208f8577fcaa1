"""Issue 47's snapshots for time with DRA, as real manifests: the same cluster served by a device plugin's extended
resource (`nvidia.com/gpu`) or by DRA devices (resource.k8s.io/v1 ResourceSlices, a DeviceClass, ResourceClaims
allocated to the running pods and reserved for them), so a test can ask both and expect the same plan.

Shapes of device: `plain` (one device a GPU), `partitionable` (each GPU a set of shared counters in its node's pool,
offered whole or as two halves: a whole needs both halves free) and `consumable` (each GPU one device allowing
multiple allocations, 40Gi of memory: a claim takes all of it or a 20Gi share)."""
from __future__ import annotations

from typing import Any

from engine.time.timeline import seconds
from testkit.manifests import (
    DRA_API,
    GPU_DRIVER,
    NATIVE_V1BETA1,
    counter_slice,
    device_class,
    in_group,
    native_group,
    node,
    partition,
    pod,
    resource_slice,
)

GPU = "nvidia.com/gpu"
NOON = "2026-11-25T12:00:00Z"
SHAPES = ("extended", "plain", "partitionable", "consumable")
WHOLE = 'device.attributes["gpu.example.com"].part == "whole"'
HALF = 'device.attributes["gpu.example.com"].part == "half"'


def at(hh: int, mm: int) -> str:
    return f"2026-11-25T{hh:02d}:{mm:02d}:00Z"


def nodes(count: int, gpus: int, shape: str) -> list[dict]:
    """`count` nodes of `gpus` GPUs each, `n0`, `n1`, …, and what publishes their GPUs."""
    docs: list[dict] = []
    for i in range(count):
        name = f"n{i}"
        docs.append(node(name, cpu="64", **({GPU: str(gpus)} if shape == "extended" else {})))
        if shape == "plain":
            docs.append(resource_slice(name, [{"name": f"gpu-{k}"} for k in range(gpus)]))
        elif shape == "partitionable":
            docs.append(counter_slice(name, {f"gpu-{k}": {"memory": "40Gi"} for k in range(gpus)}, node=name))
            docs.append(resource_slice(name, [part for k in range(gpus) for part in (
                partition(f"gpu-{k}-whole", f"gpu-{k}", "40Gi", part="whole"),
                partition(f"gpu-{k}-half-0", f"gpu-{k}", "20Gi", part="half"),
                partition(f"gpu-{k}-half-1", f"gpu-{k}", "20Gi", part="half"))], pool=name, slices=2))
        elif shape == "consumable":
            docs.append(resource_slice(name, [{"name": f"gpu-{k}", "allowMultipleAllocations": True,
                                               "capacity": {"memory": {"value": "40Gi"}}} for k in range(gpus)]))
    if shape != "extended":
        docs.append(device_class())
    return docs


def request(count: int, shape: str, half: bool = False) -> dict:
    """A claim's request for `count` GPUs, or halves of them (partitionable: a whole device or a half, by selector;
    consumable: a 40Gi or a 20Gi share)."""
    exactly: dict[str, Any] = {"deviceClassName": "gpu", "count": count}
    if shape == "partitionable":
        exactly["selectors"] = [{"cel": {"expression": HALF if half else WHOLE}}]
    if shape == "consumable":
        exactly["capacity"] = {"requests": {"memory": "20Gi" if half else "40Gi"}}
    return {"name": "gpu", "exactly": exactly}


def claim(name: str, count: int, shape: str, half: bool = False) -> dict:
    return {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [request(count, shape, half)]}}}


def running(name: str, where: str, gpu: int, ends_at: str, shape: str, started: str = at(11, 0),
            half: int | None = None) -> list[dict]:
    """A 1-GPU pod bound to `where`, started at `started`, whose activeDeadlineSeconds ends it at `ends_at`; with DRA,
    its claim allocated GPU `gpu` there (or its `half`: a partition, a 20Gi share) and reserved for it."""
    doc = pod(name, cpu="100m", node_name=where, requests={GPU: "1"} if shape == "extended" else None,
              activeDeadlineSeconds=int(seconds(ends_at) - seconds(started)))
    doc["metadata"].update(uid=f"uid-{name}", creationTimestamp=started)
    doc["status"]["startTime"] = started
    if shape == "extended":
        return [doc]
    doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    result: dict[str, Any] = {"request": "gpu", "driver": GPU_DRIVER, "pool": where, "device": f"gpu-{gpu}"}
    if shape == "partitionable":
        result["device"] = f"gpu-{gpu}-{'whole' if half is None else f'half-{half}'}"
    if shape == "consumable":
        result.update(shareID=f"{half or 0:08d}-0000-4000-8000-{gpu:012d}",
                      consumedCapacity={"memory": "40Gi" if half is None else "20Gi"})
    held = claim(f"{name}-gpu", 1, shape, half is not None)
    held["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    held["status"] = {
        "allocation": {"devices": {"results": [result]}, "nodeSelector": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [where]}]}]}},
        "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}
    return [doc, held]


def waiting(name: str, gpus: int, shape: str, deadline: int | None, created: str, half: bool = False,
            **extra: Any) -> list[dict]:
    """A pending pod asking for `gpus` GPUs (with DRA: through a claim of its own; `half`: halves of them), bounded by
    `deadline`."""
    doc = pod(name, cpu="100m", requests={GPU: str(gpus)} if shape == "extended" else None, **extra)
    doc["metadata"]["creationTimestamp"] = created
    if deadline is not None:
        doc["spec"]["activeDeadlineSeconds"] = deadline
    if shape == "extended":
        return [doc]
    doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]
    return [doc, claim(f"{name}-gpu", gpus, shape, half)]


def half_and_half(shape: str, half: bool) -> list[dict]:
    """One GPU in two halves (a partition, a 20Gi share), held by pods ending at 12:30 and 13:00; a pod waiting for
    a half (free at 12:30) or for the whole GPU (13:00)."""
    return [*nodes(1, 1, shape), *running("a", "n0", 0, at(12, 30), shape, half=0),
            *running("b", "n0", 0, at(13, 0), shape, half=1), *waiting("eval", 1, shape, 600, at(11, 50), half)]


def two_devices(shape: str) -> list[dict]:
    """Point 1's first case: one node, two GPUs, each held by a pod started 11:30 with activeDeadlineSeconds 3600;
    a pending pod asking for one (10 minutes)."""
    return [*nodes(1, 2, shape), *running("train-0", "n0", 0, at(12, 30), shape, started=at(11, 30)),
            *running("train-1", "n0", 1, at(12, 30), shape, started=at(11, 30)),
            *waiting("eval", 1, shape, 600, at(11, 50))]


def gang_on_busy_nodes(shape: str, small: int = 4) -> list[dict]:
    """Point 1's second case and point 2's: 8 nodes × 8 GPUs, each running a pod that ends at 12:30, one at 13:00 and
    six at 16:00; pending, an old scheduling.k8s.io/v1beta1 gang of 8 pods × 2 GPUs and `small` 10-minute 1-GPU pods.
    The gang fits once two GPUs a node are free: 13:00. The 10-minute pods fit at 12:30 and end before 13:00."""
    docs = nodes(8, 8, shape)
    for i in range(8):
        ends = [at(12, 30), at(13, 0), *[at(16, 0)] * 6]
        for k, end in enumerate(ends):
            docs += running(f"run-{i}-{k}", f"n{i}", k, end, shape)
    group = native_group("train", 8, api_version=NATIVE_V1BETA1)
    group["spec"]["disruptionMode"] = {"single": {}}
    docs.append(group)
    for k in range(8):
        docs += waiting(f"train-{k}", 2, shape, 3600, at(9, 0), schedulingGroup=in_group("train"))
    for k in range(small):
        docs += waiting(f"quick-{k}", 1, shape, 600, at(11, 50))
    return docs


def three_for_two(shape: str) -> list[dict]:
    """Point 2's first case: one node, two free GPUs, three pending 30-minute 1-GPU pods: two start now; the third
    fits again at 12:30, when they end (nothing frees before: it was told "the next cycle")."""
    docs = nodes(1, 2, shape)
    for k in range(3):
        docs += waiting(f"job-{k}", 1, shape, 1800, at(11, 40 + k))
    return docs
