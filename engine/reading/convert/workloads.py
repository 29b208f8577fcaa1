"""Services and workload controllers (what system-default spreading reads) into `model.Workloads`."""

from __future__ import annotations

from typing import Any

from ...model.cluster import (
    LabelSelector,
    Requirement,
    Workloads,
)
from .fields import as_mapping, as_text, str_map
from .selectors import label_selector


def add_workload_object(workloads: Workloads, kind: str, obj: dict[str, Any]) -> None:
    """A Service's selector map, or a controller's selector (a ReplicationController's is a plain map)."""
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    ns = as_text(meta.get("namespace") or "default", "metadata.namespace")
    if kind == "Service":
        selector = str_map(spec.get("selector"), "spec.selector")
        if selector:  # a Service without a selector selects no pods of its own
            workloads.services.setdefault(ns, []).append(selector)
        return
    if kind == "ReplicationController":
        rc = str_map(spec.get("selector"), "spec.selector")
        found = LabelSelector(tuple(Requirement(k, "In", (v,)) for k, v in sorted(rc.items())))
    else:
        found = label_selector(spec.get("selector"), "spec.selector")
    workloads.controllers[(kind, ns, as_text(meta["name"], "metadata.name"))] = found
