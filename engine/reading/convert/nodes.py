"""Node manifests into `model.Node`."""

from __future__ import annotations

from typing import Any

from ...model.cluster import (
    Node,
)
from .features import declared_features
from .fields import as_bool, as_list, as_mapping, as_text, resource_amounts, str_map
from .selectors import taint


def has_capacity(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("allocatable") is not None or status.get("capacity") is not None


def node_of_manifest(obj: dict[str, Any]) -> Node:
    meta, spec, status = obj["metadata"], as_mapping(obj.get("spec"), "spec"), as_mapping(obj.get("status"), "status")
    alloc = status.get("allocatable")
    what = "status.allocatable"
    if alloc is None:
        alloc, what = status.get("capacity"), "status.capacity"
    allocatable = resource_amounts(alloc, what)
    allocatable.setdefault("pods", 110)
    found = spec.get("taints")
    taints = () if found is None else tuple(taint(t, f"spec.taints[{i}]") for i, t in enumerate(as_list(found, "spec.taints")))
    return Node(
        name=as_text(meta["name"], "metadata.name"),
        labels=str_map(meta.get("labels"), "metadata.labels"),
        annotations=str_map(meta.get("annotations"), "metadata.annotations"),
        allocatable=allocatable,
        taints=taints,
        unschedulable=as_bool(spec.get("unschedulable"), "spec.unschedulable"),
        declared_features=declared_features(status),
    )
