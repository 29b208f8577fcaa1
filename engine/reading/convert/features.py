"""Node declared features (KEP-5328, NodeDeclaredFeatures: beta and on in 1.36, GA in 1.37): which features a pod
needs of its node's kubelet, inferred from its spec as upstream's registry infers them for scheduling
(k8s.io/component-helpers/nodedeclaredfeatures, InferForScheduling), and what a node declares
(`status.declaredFeatures`).

The registry's other features (in-place resize, DRA node operations, websockets) matter only for pod updates or
are checked elsewhere; their InferForScheduling is false, so they are not listed here.
"""

from __future__ import annotations

from typing import Any

from .fields import as_bool, as_list, as_mapping, as_text

RESTART_ALL_CONTAINERS = "RestartAllContainersOnContainerExits"
USER_NAMESPACES_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
VOLUME_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"  # the field is 1.37's: a 1.36 apiserver never returns it


def required_features(spec: dict[str, Any]) -> tuple[str, ...]:
    """The features a pod with this spec needs its node to declare, sorted (empty for almost every pod)."""
    rules, mounts = _may_name(spec)
    found = []
    if rules and _restarts_all_containers(spec):
        found.append(RESTART_ALL_CONTAINERS)
    if (as_bool(spec.get("hostNetwork"), "spec.hostNetwork") and spec.get("hostUsers") is not None
            and not as_bool(spec.get("hostUsers"), "spec.hostUsers")):
        found.append(USER_NAMESPACES_HOST_NETWORK)
    if mounts and _bind_mount_options(spec):
        found.append(VOLUME_BIND_MOUNT_OPTIONS)
    return tuple(sorted(found))


def _may_name(spec: dict[str, Any]) -> tuple[bool, bool]:
    """Whether some container (of any kind) may have restartPolicyRules, and a volume mount bindMountOptions: one
    scan without the checks (the fields are on almost no pod; reading every container checked, with its field
    paths, cost a 25,000-pod batch 0.03 s). A field not of the shape this scan reads says yes, so that the checked
    reading runs and says what is wrong."""
    rules = mounts = False
    for field in ("containers", "initContainers", "ephemeralContainers"):
        containers = spec.get(field)
        if containers is None:
            continue
        if not isinstance(containers, list):
            return True, True
        for c in containers:
            if not isinstance(c, dict):
                return True, True
            rules = rules or "restartPolicyRules" in c
            items = c.get("volumeMounts")
            if items is not None and not mounts:
                mounts = not isinstance(items, list) or any(not isinstance(i, dict) or "bindMountOptions" in i
                                                            for i in items)
    return rules, mounts


def declared_features(status: dict[str, Any]) -> tuple[str, ...]:
    """A node's `status.declaredFeatures`, sorted and without repeats (none: an older kubelet declares nothing)."""
    what = "status.declaredFeatures"
    return tuple(sorted({as_text(f, f"{what}[{i}]") for i, f in enumerate(as_list(status.get("declaredFeatures"), what))}))


def _containers(spec: dict[str, Any], fields: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    return [(f"spec.{field}[{i}]", as_mapping(c, f"spec.{field}[{i}]"))
            for field in fields for i, c in enumerate(as_list(spec.get(field), f"spec.{field}"))]


def _restarts_all_containers(spec: dict[str, Any]) -> bool:
    """A container's (or init container's) restartPolicyRules has a rule with action RestartAllContainers."""
    for where, container in _containers(spec, ("containers", "initContainers")):
        rules = as_list(container.get("restartPolicyRules"), f"{where}.restartPolicyRules")
        for j, rule in enumerate(rules):
            action = as_mapping(rule, f"{where}.restartPolicyRules[{j}]").get("action")
            if action is not None and as_text(action, f"{where}.restartPolicyRules[{j}].action") == "RestartAllContainers":
                return True
    return False


def _bind_mount_options(spec: dict[str, Any]) -> bool:
    """A volume mount of any container (init and ephemeral ones too) sets bindMountOptions."""
    for where, container in _containers(spec, ("containers", "initContainers", "ephemeralContainers")):
        for j, mount in enumerate(as_list(container.get("volumeMounts"), f"{where}.volumeMounts")):
            what = f"{where}.volumeMounts[{j}]"
            if as_list(as_mapping(mount, what).get("bindMountOptions"), f"{what}.bindMountOptions"):
                return True
    return False
