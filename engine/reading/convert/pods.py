"""Pod manifests into `model.Pod`: requests, affinity, spread, ports, claims, priority as admission sets it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...model.cluster import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_CLAIM_ANNOTATION,
    NEVER_PREEMPT,
    PREEMPT_LOWER,
    ExtendedRequest,
    HostPort,
    Pod,
    SpreadConstraint,
)
from .features import required_features
from .fields import (
    MAX_QUANTITY,
    PROBLEMS,
    as_int,
    as_list,
    as_mapping,
    as_text,
    choice,
    required,
    resource_amounts,
    scalar_text,
    show_value,
    str_map,
    timestamp,
)
from .selectors import TermScope, label_selector, node_affinity, tolerations, with_label_keys

PREEMPTION_POLICIES = (PREEMPT_LOWER, NEVER_PREEMPT)


@dataclass(frozen=True, slots=True)
class Priorities:
    """PriorityClass values by name (built-ins included) and the globalDefault value, as admission resolves them."""

    values: dict[str, int]
    default: int = 0
    preemption: dict[str, str] = field(default_factory=dict)  # class name -> preemptionPolicy, when set

    def preemption_policy(self, spec: dict[str, Any]) -> str:
        """spec.preemptionPolicy (admission copies it from the class), else the class's, else PreemptLowerPriority."""
        value = spec.get("preemptionPolicy")
        if value is None:
            value = self.preemption.get(str(spec.get("priorityClassName") or ""), PREEMPT_LOWER)
        return choice(value, "spec.preemptionPolicy", PREEMPTION_POLICIES)

    def of(self, spec: dict[str, Any]) -> int | None:
        """spec.priority when set, else the named class's value, else the default; None for an unknown class."""
        if spec.get("priority") is not None:
            return as_int(spec["priority"], "spec.priority")
        name = spec.get("priorityClassName")
        if name is None or name == "":
            return self.default
        return self.values.get(as_text(name, "spec.priorityClassName"))


def namespace_labels(namespaces: dict[str, dict[str, str]], seen: Iterable[str]) -> dict[str, dict[str, str]]:
    """Every namespace's labels as a namespaceSelector reads them: the Namespace objects', plus the
    kubernetes.io/metadata.name label the apiserver sets, also for namespaces only pods name (`seen`)."""
    return {ns: {"kubernetes.io/metadata.name": ns, **namespaces.get(ns, {})} for ns in set(namespaces) | set(seen)}


def pod_identity(obj: dict[str, Any]) -> Pod:
    """One pod manifest as the model sees it, without the rest of the cluster (spec.priority as admission set
    it, no namespace labels): what gang identity and policy scopes read, for the scheduler loop's queue
    before any cycle. A pod the model refuses keeps its namespace, name and labels."""
    try:
        return pod_of_manifest(obj, {}, Priorities({}))
    except PROBLEMS:
        raw = obj.get("metadata")
        meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
        found = meta.get("labels")
        labels = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        return Pod(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), labels)


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests exactly as kube-scheduler computes them (resourcehelper.PodRequests).

    Regular containers are summed; init containers run one at a time so they take the max, except
    restartable (sidecar) init containers, which keep running and so add to everything after them.
    Pod-level requests then replace the sum where set, and the RuntimeClass overhead adds to it.
    """
    containers = as_list(spec.get("containers"), "spec.containers")
    if not containers:
        raise ValueError("pod has no containers (spec.containers is empty)")
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        reqs = _container_requests(c, "spec.containers", i)  # a new dict: the first is the sum so far
        total = _add(total, reqs) if total else reqs
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(as_list(spec.get("initContainers"), "spec.initContainers")):
        c = as_mapping(c, f"spec.initContainers[{i}]")
        reqs = _container_requests(c, "spec.initContainers", i)
        if c.get("restartPolicy") == "Always":
            total = _add(total, reqs)
            sidecars = _add(sidecars, reqs)
            reqs = sidecars
        else:
            reqs = _add(reqs, sidecars)
        for k, v in reqs.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    if spec.get("resources"):
        total.update(_pod_level_requests(spec, total))
    if spec.get("overhead") is not None:
        total = _add(total, resource_amounts(spec["overhead"], "spec.overhead"))
    total = {k: v for k, v in total.items() if v > 0}
    for k, v in total.items():
        if v > MAX_QUANTITY:
            raise ValueError(f"the pod's total {k} request is too large (more than 2^53)")
    total["pods"] = 1
    return total


def _container_requests(c: Any, field: str, i: int) -> dict[str, int]:
    """`field[i]`'s requests; API defaulting makes a limit without a request also the request. The field names
    of messages are only spelled out for a message."""
    if type(c) is not dict:
        c = as_mapping(c, f"{field}[{i}]")
    res = c.get("resources")
    if res is None:
        return {}
    if type(res) is not dict:
        res = as_mapping(res, f"{field}[{i}].resources")
    limits, requests = res.get("limits"), res.get("requests")
    out = {} if limits is None else resource_amounts(limits, f"{field}[{i}].resources.limits")
    if requests is not None:
        out.update(resource_amounts(requests, f"{field}[{i}].resources.requests"))
    return out


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def _pod_level(resource: str) -> bool:
    """Resources pod-level `spec.resources` may set (resourcehelper.IsSupportedPodLevelResource)."""
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def _pod_level_requests(spec: dict[str, Any], containers: dict[str, int]) -> dict[str, int]:
    """Pod-level `spec.resources` (PodLevelResources, on by default since 1.34): its requests replace the
    containers' sum for cpu, memory and hugepages (resourcehelper.PodRequests). A manifest that is not yet
    API-defaulted gets the defaulting first (core/v1 defaultPodRequests): with pod-level limits, a resource
    without a pod-level request takes the containers' request if they make one (cpu and memory only: hugepages
    cannot be overcommitted), else the pod-level limit."""
    if not spec.get("resources"):
        return {}
    res = as_mapping(spec["resources"], "spec.resources")
    requests = {k: v for k, v in resource_amounts(res.get("requests"), "spec.resources.requests").items() if _pod_level(k)}
    limits = resource_amounts(res.get("limits"), "spec.resources.limits")
    for k, limit in limits.items():
        if not _pod_level(k) or k in requests:
            continue
        overcommit = not k.startswith("hugepages-")
        requests[k] = containers[k] if overcommit and k in containers else limit
    return requests


def pod_of_manifest(obj: dict[str, Any], ns_labels: dict[str, dict[str, str]], priorities: Priorities) -> Pod:
    meta = obj["metadata"]
    spec = as_mapping(obj.get("spec"), "spec")
    status = as_mapping(obj.get("status"), "status")
    ns = as_text(meta.get("namespace") or "default", "metadata.namespace")
    labels = str_map(meta.get("labels"), "metadata.labels")
    affinity = as_mapping(spec.get("affinity"), "spec.affinity")
    node_aff = as_mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_aff = as_mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_aff = as_mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    scheduling_gates(spec)

    required_terms, preferred_terms = node_affinity(node_aff)
    scope = TermScope(ns, ns_labels, labels) if pod_aff or anti_aff else None

    priority = priorities.of(spec)  # None (an unknown class) makes the pod skipped; see _skip_reason
    requests = pod_requests(spec)
    return Pod(
        namespace=ns,
        name=as_text(meta["name"], "metadata.name"),
        labels=labels,
        annotations=str_map(meta.get("annotations"), "metadata.annotations"),
        requests=requests,
        node_name=as_text(spec["nodeName"], "spec.nodeName") if spec.get("nodeName") else None,
        scheduler_name=as_text(spec.get("schedulerName") or "default-scheduler", "spec.schedulerName"),
        phase=as_text(status.get("phase") or "Pending", "status.phase"),
        priority=priority or 0,
        node_selector=tuple(sorted(str_map(spec.get("nodeSelector"), "spec.nodeSelector").items())),
        required_node_terms=required_terms,
        preferred_node_terms=preferred_terms,
        tolerations=tolerations(spec),
        affinity_required=scope.required(pod_aff, "podAffinity") if scope else (),
        affinity_preferred=scope.preferred(pod_aff, "podAffinity") if scope else (),
        anti_affinity_required=scope.required(anti_aff, "podAntiAffinity") if scope else (),
        anti_affinity_preferred=scope.preferred(anti_aff, "podAntiAffinity") if scope else (),
        spread=_spread(spec, labels),
        host_ports=_host_ports(spec),
        owner=_owner(meta),
        created=timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        preemption_policy=priorities.preemption_policy(spec),
        terminating=bool(meta.get("deletionTimestamp")),
        claims=_claims(spec, as_text(meta["name"], "metadata.name")),
        scheduling_group=_scheduling_group(spec),
        resource_claims=_pod_resource_claims(spec, status),
        extended=_extended_requests(spec) if "/" in "".join(requests) else (),  # a resource name with a "/"
        required_features=required_features(spec),
        runtime=as_int(spec["activeDeadlineSeconds"], "spec.activeDeadlineSeconds", 1, 2**63 - 1)
        if spec.get("activeDeadlineSeconds") is not None else None,
        started=timestamp(status.get("startTime"), "status.startTime") if status.get("startTime") else "",
    )


def _scheduling_group(spec: dict[str, Any]) -> str | None:
    group = as_mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    name = group.get("podGroupName")
    return None if name is None else as_text(name, "spec.schedulingGroup.podGroupName")


def _claims(spec: dict[str, Any], pod_name: str) -> tuple[str, ...]:
    """The PersistentVolumeClaims a pod mounts: named ones, and a generic ephemeral volume's `<pod>-<volume>`."""
    if spec.get("volumes") is None:
        return ()
    out = []
    for i, vol in enumerate(as_list(spec.get("volumes"), "spec.volumes")):
        vol = as_mapping(vol, f"spec.volumes[{i}]")
        if vol.get("persistentVolumeClaim") is not None:
            pvc = as_mapping(vol["persistentVolumeClaim"], f"spec.volumes[{i}].persistentVolumeClaim")
            out.append(as_text(required(pvc, "claimName", f"spec.volumes[{i}].persistentVolumeClaim"),
                             f"spec.volumes[{i}].persistentVolumeClaim.claimName"))
        elif vol.get("ephemeral") is not None:
            out.append(f"{pod_name}-{as_text(required(vol, 'name', f'spec.volumes[{i}]'), f'spec.volumes[{i}].name')}")
    return tuple(dict.fromkeys(out))


def scheduling_gates(spec: dict[str, Any]) -> tuple[str, ...]:
    if spec.get("schedulingGates") is None:
        return ()
    what = "spec.schedulingGates"
    return tuple(as_text(required(as_mapping(g, f"{what}[{i}]"), "name", f"{what}[{i}]"), f"{what}[{i}].name")
                 for i, g in enumerate(as_list(spec.get("schedulingGates"), what)))


def _spread(spec: dict[str, Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    if spec.get("topologySpreadConstraints") is None:
        return ()
    out = []
    for i, item in enumerate(as_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        what = f"spec.topologySpreadConstraints[{i}]"
        c = as_mapping(item, what)
        when = c.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ValueError(f"{what}: unknown whenUnsatisfiable {show_value(when)}")
        skew = as_int(c.get("maxSkew", 0), f"{what}.maxSkew")
        if skew < 1 or not c.get("topologyKey"):
            raise ValueError(f"{what}: maxSkew must be ≥ 1 and topologyKey set")
        min_domains = as_int(c.get("minDomains") or 1, f"{what}.minDomains", 1)
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=as_text(c["topologyKey"], f"{what}.topologyKey"),
                hard=when == "DoNotSchedule",
                selector=with_label_keys(label_selector(c.get("labelSelector"), f"{what}.labelSelector"), labels,
                                          c.get("matchLabelKeys"), None, what),
                min_domains=min_domains,
                honor_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(out)


def _host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for i, c in enumerate(as_list(spec.get("containers"), "spec.containers")):
        found = (c if type(c) is dict else as_mapping(c, f"spec.containers[{i}]")).get("ports")
        if found is None:
            continue
        where = f"spec.containers[{i}].ports"
        for j, item in enumerate(as_list(found, where)):
            if type(item) is dict and not item.get("hostPort"):
                continue  # a container port only (the common case): no host port to hold
            p = as_mapping(item, f"{where}[{j}]")
            port = as_int(p.get("hostPort") or 0, f"{where}[{j}].hostPort", 0, 65535)
            if port > 0:
                ports.append(HostPort(scalar_text(p.get("protocol"), f"{where}[{j}].protocol") or "TCP", port,
                                      scalar_text(p.get("hostIP"), f"{where}[{j}].hostIP")))
    return tuple(ports)


def _owner(meta: dict[str, Any]) -> tuple[str, str] | None:
    for i, item in enumerate(as_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        o = item if type(item) is dict else as_mapping(item, f"metadata.ownerReferences[{i}]")
        if o.get("controller"):
            kind, name = o.get("kind"), o.get("name")
            if type(kind) is str and type(name) is str:
                return kind, name
            return (scalar_text(kind, f"metadata.ownerReferences[{i}].kind"),
                    scalar_text(name, f"metadata.ownerReferences[{i}].name"))
    return None


def extended_owner(meta: dict[str, Any]) -> str | None:
    """The pod a claim serves extended resources for: upstream's special claim carries the annotation and the
    pod as its controlling owner."""
    if (meta.get("annotations") or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
        return None
    return next((str(o.get("name")) for o in meta.get("ownerReferences") or []
                 if isinstance(o, dict) and o.get("kind") == "Pod" and o.get("controller")), None)


def _extended_requests(spec: dict[str, Any]) -> tuple[ExtendedRequest, ...]:
    """Extended resources the long-lived containers (regular ones and sidecars) request, each with the name
    upstream's DRAExtendedResource gives its device request (container index, the resource's place among the
    container's sorted requests). Short-lived init containers reuse what these get (not modelled)."""
    out: list[ExtendedRequest] = []
    inits = as_list(spec.get("initContainers"), "spec.initContainers")
    for i, c in enumerate([*inits, *as_list(spec.get("containers"), "spec.containers")]):
        c = as_mapping(c, "container")
        if i < len(inits) and c.get("restartPolicy") != "Always":
            continue
        res = as_mapping(c.get("resources"), "resources")
        requests = {**resource_amounts(res.get("limits"), "resources.limits"),
                    **resource_amounts(res.get("requests"), "resources.requests")}
        names = sorted(requests)
        out += [ExtendedRequest(i, str(c.get("name") or ""), r, n, names.index(r)) for r, n in sorted(requests.items())
                if n > 0 and _extended(r)]
    return tuple(out)


def _extended(resource: str) -> bool:
    """An extended resource name (upstream's IsExtendedResourceName), or a DeviceClass's implicit one."""
    if resource.startswith(DEVICE_CLASS_PREFIX):
        return True
    return "/" in resource and not resource.startswith(("kubernetes.io/", "requests.")) \
        and not resource.split("/", 1)[0].endswith(".kubernetes.io")


def _pod_resource_claims(spec: dict[str, Any], status: dict[str, Any]) -> tuple[tuple[str, str | None], ...]:
    """(spec.resourceClaims name, the claim's name): named directly, or generated from a template and recorded
    in status.resourceClaimStatuses (None: not created yet; "": intentionally not created)."""
    if spec.get("resourceClaims") is None and status.get("resourceClaimStatuses") is None:
        return ()
    generated = {str(s.get("name")): s.get("resourceClaimName") for s in
                 (as_mapping(x, "status.resourceClaimStatuses[]") for x in
                  as_list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"))}
    out: list[tuple[str, str | None]] = []
    for i, raw in enumerate(as_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        what = f"spec.resourceClaims[{i}]"
        c = as_mapping(raw, what)
        name = as_text(required(c, "name", what), f"{what}.name")
        if c.get("resourceClaimName"):
            out.append((name, as_text(c["resourceClaimName"], f"{what}.resourceClaimName")))
        elif c.get("resourceClaimTemplateName"):
            out.append((name, (generated[name] or "") if name in generated else None))
        else:
            raise ValueError(f"{what}: one of resourceClaimName and resourceClaimTemplateName is required")
    return tuple(out)
