"""PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes, CSIDrivers and CSIStorageCapacities into
`model.Storage`."""

from __future__ import annotations

from typing import Any

from ...model.cluster import (
    CapacityReport,
    Claim,
    Storage,
    StorageClass,
    Volume,
)
from ...model.quantity import QuantityError, to_int
from .fields import MAX_QUANTITY, as_bool, as_int, as_list, as_mapping, as_text, choice, required, resource_amounts, str_map
from .selectors import label_selector, node_term, topology_term

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def add_storage_object(storage: Storage, kind: str, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    name = as_text(meta["name"], "metadata.name")
    if kind == "PersistentVolumeClaim":
        claim = _claim(obj)
        storage.claims[claim.key] = claim
    elif kind == "PersistentVolume":
        storage.volumes[name] = _volume(obj)
    elif kind == "StorageClass":
        storage.classes[name] = _storage_class(obj)
    elif kind == "CSIDriver":
        storage.tracked[name] = as_bool(as_mapping(obj.get("spec"), "spec").get("storageCapacity"), "spec.storageCapacity")
    elif kind == "CSIStorageCapacity":
        report = _capacity_report(obj)
        storage.capacities[report.name] = report
    else:
        storage.limits[name] = _csi_limits(obj)


def _claim(obj: dict[str, Any]) -> Claim:
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    annotations = str_map(meta.get("annotations"), "metadata.annotations")
    requests = resource_amounts(as_mapping(spec.get("resources"), "spec.resources").get("requests"), "spec.resources.requests")
    volume_name = as_text(spec.get("volumeName") or "", "spec.volumeName")
    phase = as_text(status.get("phase") or "Pending", "status.phase")
    return Claim(
        namespace=as_text(meta.get("namespace") or "default", "metadata.namespace"),
        name=as_text(meta["name"], "metadata.name"),
        uid=as_text(meta.get("uid") or "", "metadata.uid"),
        storage_class=_claim_class(spec, annotations),
        request=requests.get("storage", 0),
        modes=_access_modes(spec),
        block=choice(spec.get("volumeMode") or "Filesystem", "spec.volumeMode", ("Filesystem", "Block")) == "Block",
        volume_name=volume_name,
        bound=bool(volume_name) and (BIND_COMPLETED in annotations or phase == "Bound"),
        lost=phase == "Lost",
        deleting=bool(meta.get("deletionTimestamp")),
        selector=label_selector(spec["selector"], "spec.selector") if spec.get("selector") is not None else None,
    )


def _claim_class(spec: dict[str, Any], annotations: dict[str, str]) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName."""
    beta = annotations.get("volume.beta.kubernetes.io/storage-class")
    return beta if beta is not None else as_text(spec.get("storageClassName") or "", "spec.storageClassName")


def _access_modes(spec: dict[str, Any]) -> frozenset[str]:
    modes = as_list(spec.get("accessModes"), "spec.accessModes")
    return frozenset(choice(m, f"spec.accessModes[{i}]", ACCESS_MODES) for i, m in enumerate(modes))


def _volume(obj: dict[str, Any]) -> Volume:
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    annotations = str_map(meta.get("annotations"), "metadata.annotations")
    required = as_mapping(as_mapping(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required"),
                        "spec.nodeAffinity.required")
    terms = as_list(required.get("nodeSelectorTerms"), "spec.nodeAffinity.required.nodeSelectorTerms")
    ref = as_mapping(spec.get("claimRef"), "spec.claimRef")
    csi = as_mapping(spec.get("csi"), "spec.csi")
    beta = annotations.get("volume.beta.kubernetes.io/storage-class")
    return Volume(
        name=as_text(meta["name"], "metadata.name"),
        storage_class=beta if beta is not None else as_text(spec.get("storageClassName") or "", "spec.storageClassName"),
        capacity=resource_amounts(spec.get("capacity"), "spec.capacity").get("storage", 0),
        modes=_access_modes(spec),
        block=choice(spec.get("volumeMode") or "Filesystem", "spec.volumeMode", ("Filesystem", "Block")) == "Block",
        node_terms=tuple(node_term(t, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]")
                         for i, t in enumerate(terms)) if "nodeSelectorTerms" in required else None,
        claim=(as_text(ref.get("namespace") or "default", "spec.claimRef.namespace"),
               as_text(ref.get("name") or "", "spec.claimRef.name")) if ref else None,
        available=as_text(status.get("phase") or "Pending", "status.phase") == "Available",
        pending=(status.get("phase") or "Pending") == "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        labels=tuple(sorted(str_map(meta.get("labels"), "metadata.labels").items())),
        driver=as_text(csi.get("driver") or "", "spec.csi.driver"),
        handle=as_text(csi.get("volumeHandle") or "", "spec.csi.volumeHandle"),
    )


def _storage_class(obj: dict[str, Any]) -> StorageClass:
    mode = choice(obj.get("volumeBindingMode") or "Immediate", "volumeBindingMode", ("Immediate", "WaitForFirstConsumer"))
    topologies = as_list(obj.get("allowedTopologies"), "allowedTopologies")
    terms = [topology_term(t, f"allowedTopologies[{i}]") for i, t in enumerate(topologies)]
    return StorageClass(name=as_text(obj["metadata"]["name"], "metadata.name"),
                        provisioner=as_text(required(obj, "provisioner", "StorageClass"), "provisioner"),
                        wait_for_consumer=mode == "WaitForFirstConsumer",
                        topology=tuple(terms) if terms else None)


def _csi_limits(obj: dict[str, Any]) -> dict[str, int]:
    """CSINode: each driver's allocatable.count (drivers without one have no limit)."""
    out = {}
    for i, d in enumerate(as_list(as_mapping(obj.get("spec"), "spec").get("drivers"), "spec.drivers")):
        d = as_mapping(d, f"spec.drivers[{i}]")
        count = as_mapping(d.get("allocatable"), f"spec.drivers[{i}].allocatable").get("count")
        if count is not None:
            out[as_text(required(d, "name", f"spec.drivers[{i}]"), f"spec.drivers[{i}].name")] = as_int(
                count, f"spec.drivers[{i}].allocatable.count", 0)
    return out


def _capacity_report(obj: dict[str, Any]) -> CapacityReport:
    """CSIStorageCapacity (storage.k8s.io/v1): its fields sit at the top level, beside metadata."""
    meta = obj["metadata"]
    amounts = {k: _bytes(obj[k], k) for k in ("capacity", "maximumVolumeSize") if obj.get(k) is not None}
    return CapacityReport(
        name=f"{as_text(meta.get('namespace') or 'default', 'metadata.namespace')}/{as_text(meta['name'], 'metadata.name')}",
        storage_class=as_text(required(obj, "storageClassName", "CSIStorageCapacity"), "storageClassName"),
        nodes=label_selector(obj.get("nodeTopology"), "nodeTopology"),
        capacity=amounts.get("capacity"),
        maximum_volume_size=amounts.get("maximumVolumeSize"),
    )


def _bytes(value: Any, what: str) -> int:
    """A quantity of bytes (above 2^53: as much as any cluster has)."""
    try:
        amount = to_int(value)
    except QuantityError as exc:
        raise ValueError(f"{what}: {exc}") from None
    if amount < 0:
        raise ValueError(f"{what}: quantity {value!r} must not be negative")
    return min(amount, MAX_QUANTITY)
