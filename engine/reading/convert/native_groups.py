"""Kubernetes' own PodGroups (KEP-4671, scheduling.k8s.io) into `model.PodGroup`, at either API version.

1.36 serves them at `v1alpha2`, 1.37 at `v1beta1` (`v1alpha3`, behind its alpha gate, has v1beta1's shape). The
versions differ in what a reader sees:

| field | v1alpha2 (1.36) | v1beta1 (1.37) |
|---|---|---|
| `disruptionMode` | `Pod` / `PodGroup` (default `Pod`) | `{single: {}}` / `{all: {}}` (default `single`) |
| the template it came from (optional) | `podGroupTemplateRef.workload` | `workloadRef` |
| … its names (both required) | `workloadName`, `podGroupTemplateName` | `workloadName`, `templateName` |
| `preemptionPolicy` | — | `Never` / `PreemptLowerPriority` (PodGroupPreemptionPolicy gate) |
| pods vs group | the group's priority is its pods' | members must agree with it (below) |

From v1beta1 on, a member whose priority, schedulerName or preemptionPolicy disagrees with its group's refuses the
whole group (engine.model.gangs.refused_groups). Both become one model: `disruption_mode` Pod or PodGroup,
`members_match` for the 1.37 rule.
"""

from __future__ import annotations

from typing import Any

from ...model.cluster import CompositeGroup, PodGroup
from .fields import as_int, as_list, as_mapping, as_text, choice, name_problem, required, show_value, timestamp
from .pods import PREEMPTION_POLICIES, Priorities

LEGACY_API = "scheduling.k8s.io/v1alpha2"  # 1.36: string disruptionMode, podGroupTemplateRef, PodGroupScheduled
LEGACY_MODES = ("Pod", "PodGroup")
MODES = {"single": "Pod", "all": "PodGroup"}  # v1beta1's disruptionMode members -> the model's mode


def is_legacy(api_version: Any) -> bool:
    """Whether a scheduling.k8s.io PodGroup is at 1.36's v1alpha2 (else: 1.37's v1beta1 shape)."""
    return api_version == LEGACY_API


def native_group(obj: dict[str, Any], priorities: Priorities) -> PodGroup:
    """A scheduling.k8s.io PodGroup: `gang.minCount` (all or nothing) or `basic` (plain pods), the first topology
    constraint's key (the whole group in one domain), its priority, disruption mode and preemption policy."""
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    legacy = is_legacy(obj.get("apiVersion"))
    return PodGroup(as_text(meta.get("namespace") or "default", "metadata.namespace"),
                    as_text(meta["name"], "metadata.name"), _min_count(spec),
                    created=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
                    native=True, topology_key=_topology_key(spec), priority=_priority(spec, priorities, legacy),
                    disruption_mode=_legacy_mode(spec) if legacy else _mode(spec),
                    members_match=not legacy, preemption_policy=None if legacy else _preemption_policy(spec),
                    workload=_workload(spec, legacy), parent=None if legacy else _parent(spec))


def composite_group(obj: dict[str, Any], priorities: Priorities) -> CompositeGroup:
    """A scheduling.k8s.io CompositePodGroup (1.37's v1alpha3 behind its alpha gate, 1.38's v1beta1; one shape):
    `gang.minGroupCount` child groups all or nothing, or `basic`; its topology key above its children's."""
    meta, spec = obj["metadata"], as_mapping(obj.get("spec"), "spec")
    policy = as_mapping(required(spec, "schedulingPolicy", "spec"), "spec.schedulingPolicy")
    if (policy.get("gang") is None) == (policy.get("basic") is None):
        raise ValueError("spec.schedulingPolicy must set exactly one of basic and gang")
    minimum = 0
    if policy.get("gang") is not None:
        gang = as_mapping(policy["gang"], "spec.schedulingPolicy.gang")
        minimum = as_int(required(gang, "minGroupCount", "spec.schedulingPolicy.gang"),
                         "spec.schedulingPolicy.gang.minGroupCount", 1)
    if spec.get("workloadRef") is None:
        raise ValueError("spec.workloadRef: required (a CompositePodGroup is made from a Workload's template)")
    _workload(spec, legacy=False)
    return CompositeGroup(as_text(meta.get("namespace") or "default", "metadata.namespace"),
                          as_text(meta["name"], "metadata.name"), minimum, _topology_key(spec), _parent(spec),
                          _priority(spec, priorities, legacy=False), _mode(spec),
                          timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def _parent(spec: dict[str, Any]) -> str | None:
    parent = spec.get("parentCompositePodGroupName")
    if parent is None:
        return None
    name = as_text(parent, "spec.parentCompositePodGroupName")
    if problem := name_problem(name, False):
        raise ValueError(f"spec.parentCompositePodGroupName: {show_value(name)} {problem}")
    return name


def _min_count(spec: dict[str, Any]) -> int:
    """`gang.minCount` (at least 1), or 0 for a `basic` group."""
    policy = as_mapping(required(spec, "schedulingPolicy", "spec"), "spec.schedulingPolicy")
    if (policy.get("gang") is None) == (policy.get("basic") is None):
        raise ValueError("spec.schedulingPolicy must set exactly one of basic and gang")
    if policy.get("gang") is None:
        return 0
    gang = as_mapping(policy["gang"], "spec.schedulingPolicy.gang")
    return as_int(required(gang, "minCount", "spec.schedulingPolicy.gang"), "spec.schedulingPolicy.gang.minCount", 1)


def _topology_key(spec: dict[str, Any]) -> str | None:
    constraints = as_mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    topology = as_list(constraints.get("topology"), "spec.schedulingConstraints.topology")
    where = "spec.schedulingConstraints.topology[0]"
    return as_text(required(as_mapping(topology[0], where), "key", where), f"{where}.key") if topology else None


def _priority(spec: dict[str, Any], priorities: Priorities, legacy: bool) -> int | None:
    """v1beta1: resolved as admission resolves it (spec.priority, else the class's, else the global default).
    v1alpha2: only when the group names one (None: its pods keep their own)."""
    if legacy and spec.get("priority") is None and not spec.get("priorityClassName"):
        return None
    priority = priorities.of(spec)
    if priority is None:
        raise ValueError(f"PriorityClass {spec.get('priorityClassName')!r} not found")
    return priority


def _legacy_mode(spec: dict[str, Any]) -> str:
    mode = spec.get("disruptionMode")
    if isinstance(mode, dict):
        raise ValueError(f"spec.disruptionMode must be one of {', '.join(LEGACY_MODES)} in {LEGACY_API}, got a "
                         "mapping (`{single: {}}` / `{all: {}}` are scheduling.k8s.io/v1beta1's)")
    return choice(mode or "Pod", "spec.disruptionMode", LEGACY_MODES)


def _mode(spec: dict[str, Any]) -> str:
    """v1beta1's union: exactly one of `single` (the default) and `all`."""
    mode = spec.get("disruptionMode")
    if mode is None:
        return "Pod"
    if not isinstance(mode, dict):
        raise ValueError("spec.disruptionMode must be a mapping with one of single, all (`{single: {}}` or "
                         f"`{{all: {{}}}}`), got {show_value(mode)}")
    found = [k for k in MODES if mode.get(k) is not None]
    unknown = sorted(str(k) for k in mode if k not in MODES)
    if len(found) != 1 or unknown:
        extra = f" (unknown: {', '.join(unknown)})" if unknown else ""
        raise ValueError(f"spec.disruptionMode must set exactly one of single, all{extra}")
    as_mapping(mode[found[0]], f"spec.disruptionMode.{found[0]}")
    return MODES[found[0]]


def _preemption_policy(spec: dict[str, Any]) -> str | None:
    policy = spec.get("preemptionPolicy")
    return None if policy is None else choice(policy, "spec.preemptionPolicy", PREEMPTION_POLICIES)


# where each version names the Workload template a group was made from, and its two fields: required, the Workload's
# name a DNS subdomain and the template's a DNS label (k8s.io/api scheduling v1alpha2, v1beta1: `+k8s:required`,
# `+k8s:format=k8s-long-name` / `k8s-short-name`)
_REFERENCES = {True: ("spec.podGroupTemplateRef.workload", "workloadName", "podGroupTemplateName"),
               False: ("spec.workloadRef", "workloadName", "templateName")}


def _workload(spec: dict[str, Any], legacy: bool) -> str | None:
    """The Workload the group was made from: optional in both versions; where given, with both names the apiserver
    requires (a group it would not hold is refused)."""
    where, workload, template = _REFERENCES[legacy]
    if legacy:
        outer = spec.get("podGroupTemplateRef")
        if outer is None:
            return None
        ref = as_mapping(outer, "spec.podGroupTemplateRef").get("workload")
        if ref is None:
            raise ValueError("spec.podGroupTemplateRef: must specify one of: `workload`")
    else:
        ref = spec.get("workloadRef")
        if ref is None:
            if spec.get("parentCompositePodGroupName") is not None:
                raise ValueError(f"{where}: must be set when parentCompositePodGroupName is set")
            return None
    ref = as_mapping(ref, where)
    name = _reference_name(ref, where, workload, label=False)
    _reference_name(ref, where, template, label=True)
    return name


def _reference_name(ref: dict[str, Any], where: str, key: str, label: bool) -> str:
    value = ref.get(key)
    if value is None or value == "":
        raise ValueError(f"{where}: missing field {key!r} (the apiserver requires it)")
    name = as_text(value, f"{where}.{key}")
    if problem := name_problem(name, label):
        raise ValueError(f"{where}.{key}: {show_value(name)} {problem}")
    return name
