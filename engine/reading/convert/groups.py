"""Coscheduling PodGroups, PriorityClasses, ElasticQuotas and PodDisruptionBudgets (scheduling.k8s.io's own
PodGroups: engine.reading.convert.native_groups)."""

from __future__ import annotations

from typing import Any

from ...model.cluster import (
    DisruptionBudget,
    Pod,
    PodGroup,
    Quota,
)
from .fields import (
    PROBLEMS,
    InputError,
    as_int,
    as_mapping,
    as_text,
    choice,
    int_or_percent,
    refusal,
    resource_amounts,
    show_value,
    timestamp,
)
from .pods import PREEMPTION_POLICIES, Priorities
from .selectors import label_selector

BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def disruption_budgets(raw: list[tuple[str, dict[str, Any]]], bound: list[Pod]) -> tuple[list[DisruptionBudget],
                                                                                         list[InputError]]:
    """PodDisruptionBudgets (a budget without status counts the healthy `bound` pods it covers), and the ones
    the model cannot read."""
    budgets, errors = [], []
    for src, obj in raw:
        try:
            budgets.append(_budget(obj, bound))
        except PROBLEMS as exc:
            errors.append(refusal(src, "PodDisruptionBudget", obj, exc))
    return budgets, errors


def priority_class(obj: dict[str, Any]) -> tuple[int, bool, str | None]:
    """(value, globalDefault, preemptionPolicy) of a scheduling.k8s.io PriorityClass."""
    if "value" not in obj:
        raise ValueError("value is required")
    value = as_int(obj["value"], "value")
    default = obj.get("globalDefault")
    if default is not None and not isinstance(default, bool):
        raise ValueError(f"globalDefault must be true or false, got {show_value(default)}")
    policy = obj.get("preemptionPolicy")
    return value, bool(default), None if policy is None else choice(policy, "preemptionPolicy", PREEMPTION_POLICIES)


def priorities_of(classes: dict[str, tuple[int, bool, str | None]]) -> Priorities:
    defaults = [value for value, default, _ in classes.values() if default]
    values = {**BUILTIN_PRIORITY_CLASSES, **{name: value for name, (value, _, _) in classes.items()}}
    preemption = {name: policy for name, (_, _, policy) in classes.items() if policy is not None}
    return Priorities(values, max(defaults) if defaults else 0, preemption)


def _budget(obj: dict[str, Any], bound: list[Pod]) -> DisruptionBudget:
    """A PodDisruptionBudget; disruptionsAllowed from its status, else computed from the spec as the
    disruption controller would with every matching running pod healthy (a snapshot made without that
    controller, or a test cluster, has no status)."""
    meta = obj["metadata"]
    namespace = as_text(meta.get("namespace") or "default", "metadata.namespace")
    spec = as_mapping(obj.get("spec"), "spec")
    selector = label_selector(spec.get("selector"), "spec.selector")
    status = as_mapping(obj.get("status"), "status")
    if status.get("disruptionsAllowed") is not None:
        allowed = as_int(status["disruptionsAllowed"], "status.disruptionsAllowed", 0)
    else:
        budget = DisruptionBudget(namespace, "", selector, 0)
        healthy = sum(1 for p in bound if not p.terminating and budget.covers(p))
        allowed = _allowed_by_spec(spec, healthy)
    return DisruptionBudget(namespace, as_text(meta["name"], "metadata.name"), selector, allowed)


def _allowed_by_spec(spec: dict[str, Any], healthy: int) -> int:
    """minAvailable / maxUnavailable (a count or a percentage, rounded up) with `healthy` pods expected;
    a budget with neither allows no disruption."""
    if spec.get("minAvailable") is not None:
        return max(0, healthy - int_or_percent(spec["minAvailable"], healthy, "spec.minAvailable"))
    if spec.get("maxUnavailable") is not None:
        return max(0, int_or_percent(spec["maxUnavailable"], healthy, "spec.maxUnavailable"))
    return 0


def pod_group(obj: dict[str, Any]) -> PodGroup:
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    min_member = as_int(spec.get("minMember") or 0, "spec.minMember")
    if min_member < 0:
        raise ValueError("spec.minMember must not be negative")
    timeout = spec.get("scheduleTimeoutSeconds")
    room = resource_amounts(spec["minResources"], "spec.minResources") if spec.get("minResources") is not None else {}
    return PodGroup(as_text(meta.get("namespace") or "default", "metadata.namespace"), as_text(meta["name"], "metadata.name"),
                    min_member, as_int(timeout, "spec.scheduleTimeoutSeconds") if timeout is not None else None,
                    tuple(sorted(room.items())), timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def elastic_quota(obj: dict[str, Any]) -> Quota:
    """scheduler-plugins' ElasticQuota (CapacityScheduling): `spec.min` and `spec.max` for the pods of its own
    namespace."""
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    namespace = as_text(meta.get("namespace") or "default", "metadata.namespace")
    name = as_text(meta["name"], "metadata.name")
    low = resource_amounts(spec.get("min"), "spec.min", clamp=True) if spec.get("min") is not None else {}
    high = resource_amounts(spec.get("max"), "spec.max", clamp=True) if spec.get("max") is not None else {}
    for r, v in low.items():
        if r in high and v > high[r]:
            raise ValueError(f"spec.min.{r} ({v}) is above spec.max.{r} ({high[r]})")
    return Quota(f"{namespace}/{name}", frozenset({namespace}), tuple(sorted(low.items())), tuple(sorted(high.items())),
                 f"ElasticQuota {namespace}/{name}")
