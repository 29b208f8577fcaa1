"""Kubernetes manifests (already parsed) into the typed cluster model: `build_cluster`.

Pure: no files, no YAML. Reading and parsing snapshots is `engine.manifests`; the scheduler loop hands
its watch cache here directly. Every user mistake becomes an `InputError` naming the object, so the CLI
can print one line and exit 2.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .ir import GangRules
from .model import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_CLAIM_ANNOTATION,
    NEVER_PREEMPT,
    PREEMPT_LOWER,
    TERMINAL_PHASES,
    Claim,
    Cluster,
    Device,
    DeviceClass,
    DeviceRequest,
    Devices,
    DisruptionBudget,
    ExtendedRequest,
    HostPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    ObjectRef,
    Pod,
    PodAffinityTerm,
    PodGroup,
    Quota,
    Refusal,
    Requirement,
    ResourceClaim,
    SpreadConstraint,
    Storage,
    StorageClass,
    SubRequest,
    Taint,
    Toleration,
    Version,
    Volume,
    Workloads,
)
from .quantity import QuantityError, to_int, to_milli
from .resolve import resolve_cluster

POD_GROUP_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
# KEP-4671's PodGroup: v1alpha2 in 1.36, v1beta1 planned for 1.37 (the same fields)
NATIVE_GROUP_APIS = ("scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1")
DEFAULT_SCHEDULER = "policy-scheduler"
# where deploy/ and the Helm chart install the scheduler; its Lease and policy ConfigMap live there too
DEFAULT_NAMESPACE = "policy-scheduler"
DEFAULT_POLICY_CONFIGMAP = "policy-scheduler-policies"


class InputError(Exception):
    """A problem with user input; its message is the whole one-line explanation. `source` is where the object
    came from (a file, or the loop's 'Pod ns/name'), `ref` which object it is (None: it has no name, or the
    problem is not one object's); `more` counts further objects refused in the same pass."""

    def __init__(self, message: str, source: str = "", ref: ObjectRef | None = None, more: int = 0):
        super().__init__(message)
        self.source, self.ref, self.more = source, ref, more

    def refusal(self) -> Refusal:
        return Refusal(self.source, str(self), self.ref)


MAX_QUANTITY = 2**53  # per resource, in its unit (millicores, bytes); no real node has more
INT32 = 2**31


QUOTA_APIS = ("scheduling.x-k8s.io/v1alpha1", "scheduling.sigs.k8s.io/v1alpha1")
DRA_APIS = ("resource.k8s.io/v1", "resource.k8s.io/v1beta2")  # the same shapes (v1beta1's requests differ)
# Every kind the model reads, with the group/versions it is read at: what the apiserver serves it at (Kubernetes
# 1.35-1.37, scheduler-plugins' CRDs), less versions whose fields differ. An object at any other apiVersion (a
# Pod at `v2`, a PodDisruptionBudget at the removed `policy/v1beta1`) is refused: the apiserver would not hold it.
API_VERSIONS: dict[str, tuple[str, ...]] = {
    "Node": ("v1",), "Pod": ("v1",), "Namespace": ("v1",),
    "PodGroup": (*POD_GROUP_APIS, *NATIVE_GROUP_APIS),
    "PriorityClass": ("scheduling.k8s.io/v1",), "PodDisruptionBudget": ("policy/v1",),
    "PersistentVolumeClaim": ("v1",), "PersistentVolume": ("v1",),
    "StorageClass": ("storage.k8s.io/v1",), "CSINode": ("storage.k8s.io/v1",),
    "Service": ("v1",), "ReplicationController": ("v1",), "ReplicaSet": ("apps/v1",), "StatefulSet": ("apps/v1",),
    "ResourceSlice": DRA_APIS, "DeviceClass": DRA_APIS, "ResourceClaim": DRA_APIS, "ResourceClaimTemplate": DRA_APIS,
    "DeviceTaintRule": (*DRA_APIS, "resource.k8s.io/v1alpha3"),
    "ElasticQuota": QUOTA_APIS,
}
KINDS = tuple(API_VERSIONS)
PREEMPTION_POLICIES = (PREEMPT_LOWER, NEVER_PREEMPT)
BUILTIN_PRIORITY_CLASSES = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
_PROBLEMS = (QuantityError, ValueError, TypeError, KeyError, AttributeError)
PROBLEMS = _PROBLEMS  # what converting an object the model cannot read raises


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
        return _choice(value, "spec.preemptionPolicy", PREEMPTION_POLICIES)

    def of(self, spec: dict[str, Any]) -> int | None:
        """spec.priority when set, else the named class's value, else the default; None for an unknown class."""
        if spec.get("priority") is not None:
            return _int(spec["priority"], "spec.priority")
        name = spec.get("priorityClassName")
        if name is None or name == "":
            return self.default
        return self.values.get(_text(name, "spec.priorityClassName"))


@dataclass(slots=True)
class _Sorted:
    """First pass over the objects: the cluster-wide ones converted, pods and budgets kept for the second
    (pods need every PriorityClass and Namespace; budgets need the pods)."""

    cluster: Cluster = field(default_factory=Cluster)
    ignored: dict[str, int] = field(default_factory=dict)
    pods: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    budgets: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    native: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # scheduling.k8s.io PodGroups
    classes: dict[str, tuple[int, bool, str | None]] = field(default_factory=dict)
    bare_nodes: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)  # objects left out, in the order they were met
    elastic: list[tuple[str, dict[str, Any], Quota]] = field(default_factory=list)  # ElasticQuotas, with where from
    priorities: Priorities = field(default_factory=lambda: Priorities({}))

    def refuse(self, src: str, kind: Any, meta: dict[str, Any], reason: str) -> None:
        """Leave an object out: its error names the object (`Kind ns/name: reason`)."""
        ref = ObjectRef(str(kind), str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.errors.append(InputError(f"{src}: {_describe(kind, meta)}: {reason}", src, ref))


def build_cluster(docs: Iterable[tuple[str, dict[str, Any]]], scheduler_name: str = DEFAULT_SCHEDULER,
                  gangs: GangRules | None = None, strict: bool = True) -> Cluster:
    """Turn (source name, raw object) pairs into the typed model, decide which pods are pending, and which
    gang each belongs to (its PodGroup, or a policy's `gang by label` from `gangs`).

    One pass: an object the model cannot read is left out and the rest converted without it — cluster-wide
    objects first, so a pod naming a refused PriorityClass or PodGroup is skipped as naming a missing one,
    then pods, then budgets. `strict` (the CLI) raises the first such error (with `more` set); otherwise the
    refusals are in `cluster.refused` (the scheduler loop schedules everyone else)."""
    found = sort_objects(docs)
    cluster = found.cluster
    other_scheduler = _add_pods(found, scheduler_name)
    cluster.budgets, refused = disruption_budgets(found.budgets, cluster.bound)
    found.errors.extend(refused)
    if found.errors and strict:
        first = found.errors[0]
        first.more = len(found.errors) - 1
        raise first
    cluster.refused = [e.refusal() for e in found.errors]
    cluster.notes.extend(_notes(cluster, found.ignored, other_scheduler, scheduler_name, found.bare_nodes))
    affine = any(p.affinity_required or p.affinity_preferred or p.anti_affinity_required or p.anti_affinity_preferred
                 for p in (*cluster.pending, *cluster.bound))
    if not cluster.namespaces and affine and (selecting := sum(1 for _, obj in found.pods if _selects_namespaces(obj))):
        cluster.notes.append(f"{selecting} pod(s) have pod (anti-)affinity with a namespaceSelector but the snapshot "
                             "has no Namespace objects, so it matches only by the kubernetes.io/metadata.name label "
                             "(include them: kubectl get namespaces -o yaml)")
    return resolve_cluster(cluster, gangs)


def disruption_budgets(raw: list[tuple[str, dict[str, Any]]], bound: list[Pod]) -> tuple[list[DisruptionBudget],
                                                                                         list[InputError]]:
    """PodDisruptionBudgets (a budget without status counts the healthy `bound` pods it covers), and the ones
    the model cannot read."""
    budgets, errors = [], []
    for src, obj in raw:
        try:
            budgets.append(_budget(obj, bound))
        except _PROBLEMS as exc:
            errors.append(refusal(src, "PodDisruptionBudget", obj, exc))
    return budgets, errors


def refusal(src: str, kind: str, obj: dict[str, Any], exc: Exception) -> InputError:
    """The error for an object the model cannot read: `source: Kind ns/name: reason`."""
    meta = obj.get("metadata") or {}
    ref = ObjectRef(kind, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    return InputError(f"{src}: {_describe(kind, meta)}: {_reason(exc)}", src, ref)


def node_model(obj: dict[str, Any]) -> Node:
    """One Node manifest in the model (raises what `PROBLEMS` lists for a node the model cannot read)."""
    check_api_version("Node", obj)
    return _node(obj)


def check_api_version(kind: str, obj: dict[str, Any]) -> None:
    """Raise ValueError when `obj` is not at an apiVersion `API_VERSIONS` accepts for `kind`."""
    found, accepted = obj.get("apiVersion"), API_VERSIONS[kind]
    if found not in accepted:
        want = accepted[0] if len(accepted) == 1 else f"one of {', '.join(accepted)}"
        problem = "missing" if found is None else f"{kind} is not served at {show_value(found)}"
        raise ValueError(f"apiVersion: {problem} (want {want})")


@dataclass(slots=True)
class Context:
    """What converting one pod reads from the rest of the cluster: namespaces' labels (for namespaceSelector),
    the PriorityClasses, and the scheduling.k8s.io PodGroups (a group's priority is its pods')."""

    ns_labels: dict[str, dict[str, str]]
    priorities: Priorities
    native_groups: dict[str, PodGroup]

    def pod(self, obj: dict[str, Any]) -> Pod:
        """One pod manifest in the model (raises what `_PROBLEMS` lists for a pod the model cannot read)."""
        check_api_version("Pod", obj)
        pod = _pod(obj, self.ns_labels, self.priorities)
        group = self.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}") if pod.scheduling_group else None
        if group is not None and group.priority is not None and group.priority != pod.priority:
            return replace(pod, priority=group.priority)  # the group's priority is what scheduling considers
        return pod


def namespace_labels(namespaces: dict[str, dict[str, str]], seen: Iterable[str]) -> dict[str, dict[str, str]]:
    """Every namespace's labels as a namespaceSelector reads them: the Namespace objects', plus the
    kubernetes.io/metadata.name label the apiserver sets, also for namespaces only pods name (`seen`)."""
    return {ns: {"kubernetes.io/metadata.name": ns, **namespaces.get(ns, {})} for ns in set(namespaces) | set(seen)}


def sort_objects(docs: Iterable[tuple[str, dict[str, Any]]]) -> _Sorted:
    """Check identity (named, no duplicates), convert nodes, namespaces, PodGroups and PriorityClasses (then the
    scheduling.k8s.io PodGroups, which name PriorityClasses); pods and budgets are kept for later. What fails is
    refused (a later duplicate: the first stays)."""
    found = _Sorted()
    seen: set[tuple[str, str, str]] = set()
    for src, obj in docs:
        kind, meta = obj.get("kind"), obj.get("metadata")
        if not isinstance(meta, dict) or not meta.get("name"):
            what = kind if isinstance(kind, str) and kind else "object"
            found.errors.append(InputError(f"{src}: {what} without metadata.name", src))
            continue
        if kind not in KINDS:
            shown = kind if isinstance(kind, str) else "<none>" if kind is None else "<not a string>"
            found.ignored[shown] = found.ignored.get(shown, 0) + 1
            continue
        try:
            ident = (f"{kind} {obj.get('apiVersion')}" if kind == "PodGroup" else kind,
                     _text(meta.get("namespace") or "", "metadata.namespace"), _text(meta["name"], "metadata.name"))
        except ValueError as exc:
            found.errors.append(InputError(f"{src}: {kind}: {exc}", src))
            continue
        if ident in seen:
            found.refuse(src, kind, meta, "duplicate object (it appears more than once)")
            continue
        seen.add(ident)
        try:
            check_api_version(kind, obj)
            _sort_one(found, src, obj, kind, ident[2])
        except _PROBLEMS as exc:
            found.refuse(src, kind, meta, _reason(exc))
    found.priorities = _priorities(found.classes)
    found.cluster.quotas = _one_quota_per_namespace(found)
    for src, obj in found.native:
        try:
            group = _native_group(obj, found.priorities)
            found.cluster.native_groups[group.key] = group
        except _PROBLEMS as exc:
            found.refuse(src, "PodGroup", obj["metadata"], _reason(exc))
    return found


def _sort_one(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    cluster = found.cluster
    if kind == "Node":
        cluster.nodes.append(_node(obj))
        if not _has_capacity(obj):
            found.bare_nodes.append(cluster.nodes[-1].name)
    elif kind == "Namespace":
        cluster.namespaces[name] = _str_map(obj["metadata"].get("labels"), "metadata.labels")
    elif kind == "PodGroup" and obj.get("apiVersion") in NATIVE_GROUP_APIS:
        found.native.append((src, obj))  # converted once PriorityClasses are known
    elif kind == "PodGroup":
        group = _pod_group(obj)
        cluster.pod_groups[group.key] = group
    elif kind == "PriorityClass":
        found.classes[name] = _priority_class(obj)
    elif kind == "PodDisruptionBudget":
        found.budgets.append((src, obj))
    elif kind in STORAGE_KINDS:
        _storage_object(cluster.storage, kind, obj)
    elif kind in WORKLOAD_KINDS:
        _workload_object(cluster.workloads, kind, obj)
    elif kind in DRA_KINDS:
        _dra_object(cluster.devices, kind, obj)
    elif kind == "ElasticQuota":
        found.elastic.append((src, obj["metadata"], _elastic_quota(obj)))
    else:
        found.pods.append((src, obj))


def _add_pods(found: _Sorted, scheduler_name: str) -> int:
    """Bound, pending or skipped: every pod in its place (or refused). Returns how many pending pods are another
    scheduler's."""
    cluster, raw_pods = found.cluster, found.pods
    seen = {str(o["metadata"].get("namespace") or "default") for _, o in raw_pods}
    context = Context(namespace_labels(cluster.namespaces, seen), found.priorities, cluster.native_groups)
    pods = []
    for src, obj in raw_pods:
        try:
            pods.append((obj, context.pod(obj)))
        except _PROBLEMS as exc:
            found.refuse(src, "Pod", obj["metadata"], _reason(exc))
    mixed = mixed_groups([pod for _, pod in pods])
    places = [place_pod(cluster, obj, pod, found.priorities, scheduler_name, mixed) for obj, pod in pods]
    return places.count(OTHER_SCHEDULER)


BOUND, PENDING, SKIPPED, OTHER_SCHEDULER, GONE = "bound", "pending", "skipped", "other scheduler", "gone"


def place_pod(cluster: Cluster, obj: dict[str, Any], pod: Pod, priorities: Priorities, scheduler_name: str,
              mixed: dict[str, str]) -> str:
    """Put one converted pod where it belongs in `cluster` (bound, pending, skipped with a reason) and say where
    (terminal pods and other schedulers' pending pods go nowhere)."""
    if pod.phase in TERMINAL_PHASES:
        return GONE
    if pod.node_name:
        cluster.bound.append(pod)  # a terminating bound pod still holds its node until it is gone
        return BOUND
    if pod.scheduler_name != scheduler_name:
        return OTHER_SCHEDULER
    if reason := _skip_reason(obj, pod, cluster, priorities) or mixed.get(f"{pod.namespace}/{pod.scheduling_group}"):
        cluster.skipped[pod.key] = reason
        return SKIPPED
    cluster.pending.append(pod)
    return PENDING


def mixed_groups(pods: list[Pod]) -> dict[str, str]:
    """Native pod groups whose unbound pods name different schedulers, with upstream's reason: it schedules a
    group with one profile and rejects such a group."""
    names: dict[str, set[str]] = {}
    for pod in pods:
        if pod.scheduling_group and not pod.node_name and pod.phase not in TERMINAL_PHASES:
            names.setdefault(f"{pod.namespace}/{pod.scheduling_group}", set()).add(pod.scheduler_name)
    return {key: ("all pods in a single pod group should have the same .spec.schedulerName set, got: "
                  + " and ".join(repr(n) for n in sorted(found))) for key, found in names.items() if len(found) > 1}


def _notes(cluster: Cluster, ignored: dict[str, int], other_scheduler: int, scheduler_name: str,
           bare_nodes: list[str]) -> list[str]:
    """Warnings about the snapshot as a whole: what was left out, and what looks like a broken export."""
    out = [f"ignored {n} object(s) of kind {kind}" for kind, n in sorted(ignored.items())]
    if other_scheduler:
        out.append(f"ignored {other_scheduler} pending pod(s) for other schedulers (not {scheduler_name!r})")
    known = {n.name for n in cluster.nodes}
    unknown = sorted({p.node_name for p in cluster.bound if p.node_name and p.node_name not in known})
    if unknown:
        out.append(f"{len(unknown)} node(s) named by bound pods are not in the snapshot: {', '.join(unknown[:5])}")
    if not cluster.nodes and (cluster.pending or cluster.skipped or cluster.bound):
        out.append("the snapshot has pods but no Nodes, so nothing can be placed "
                   "(include nodes: kubectl get nodes,pods,podgroups -A -o yaml)")
    mounting = sum(1 for p in cluster.pending if p.claims)
    if mounting and not cluster.storage.claims:
        out.append(f"{mounting} pending pod(s) mount PersistentVolumeClaims but the snapshot has none, so they wait "
                   "(include storage: kubectl get pvc,pv,storageclasses,csinodes -A -o yaml)")
    if bare_nodes:
        out.append(f"{len(bare_nodes)} Node(s) without status.allocatable or status.capacity have 0 allocatable "
                   f"(only pods requesting nothing fit): {', '.join(('Node ' + n) for n in bare_nodes[:5])}")
    return out


def _selects_namespaces(obj: dict[str, Any]) -> bool:
    """Whether a pod manifest has a pod (anti-)affinity term with a non-empty namespaceSelector (read leniently:
    a malformed pod is refused elsewhere)."""
    affinity = (obj.get("spec") or {}).get("affinity") or {}
    for section in (affinity.get("podAffinity") or {}, affinity.get("podAntiAffinity") or {}):
        terms = list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [(t or {}).get("podAffinityTerm") for t in section.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        if any(isinstance(t, dict) and isinstance(t.get("namespaceSelector"), dict) and
               (t["namespaceSelector"].get("matchLabels") or t["namespaceSelector"].get("matchExpressions"))
               for t in terms):
            return True
    return False


def _skip_reason(obj: dict[str, Any], pod: Pod, cluster: Cluster, priorities: Priorities) -> str | None:
    """Why a pod of this scheduler without a node is not pending at all (None: it is pending).

    Upstream keeps gated pods out of the active queue, never schedules a pod being deleted, admission rejects
    a pod whose PriorityClass does not exist, Coscheduling rejects a pod whose PodGroup is missing, and
    GangScheduling holds a pod whose scheduling.k8s.io PodGroup does not exist yet.
    """
    spec = obj.get("spec") or {}
    gates = _scheduling_gates(spec)
    if gates:
        return f"gated by scheduling gate(s): {', '.join(gates)}"
    if obj["metadata"].get("deletionTimestamp"):
        return "terminating (metadata.deletionTimestamp is set)"
    if priorities.of(spec) is None:
        return f"PriorityClass {spec.get('priorityClassName')!r} not found (admission would reject the pod)"
    native = pod.scheduling_group
    if native is not None and f"{pod.namespace}/{native}" not in cluster.native_groups:
        return f"waiting for the pod's pod group {native!r} (scheduling.k8s.io) to appear"
    group = pod.pod_group
    if native is None and group is not None and f"{pod.namespace}/{group}" not in cluster.pod_groups:
        return f"PodGroup {pod.namespace}/{group} not found"
    return None


def pod_identity(obj: dict[str, Any]) -> Pod:
    """One pod manifest as the model sees it, without the rest of the cluster (spec.priority as admission set
    it, no namespace labels): what gang identity and policy scopes read, for the scheduler loop's queue
    before any cycle. A pod the model refuses keeps its namespace, name and labels."""
    try:
        return _pod(obj, {}, Priorities({}))
    except _PROBLEMS:
        raw = obj.get("metadata")
        meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
        found = meta.get("labels")
        labels = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
        return Pod(str(meta.get("namespace") or "default"), str(meta.get("name") or ""), labels)


def _has_capacity(obj: dict[str, Any]) -> bool:
    status = obj.get("status") or {}
    return status.get("allocatable") is not None or status.get("capacity") is not None


def _priority_class(obj: dict[str, Any]) -> tuple[int, bool, str | None]:
    """(value, globalDefault, preemptionPolicy) of a scheduling.k8s.io PriorityClass."""
    if "value" not in obj:
        raise ValueError("value is required")
    value = _int(obj["value"], "value")
    default = obj.get("globalDefault")
    if default is not None and not isinstance(default, bool):
        raise ValueError(f"globalDefault must be true or false, got {show_value(default)}")
    policy = obj.get("preemptionPolicy")
    return value, bool(default), None if policy is None else _choice(policy, "preemptionPolicy", PREEMPTION_POLICIES)


def _priorities(classes: dict[str, tuple[int, bool, str | None]]) -> Priorities:
    defaults = [value for value, default, _ in classes.values() if default]
    values = {**BUILTIN_PRIORITY_CLASSES, **{name: value for name, (value, _, _) in classes.items()}}
    preemption = {name: policy for name, (_, _, policy) in classes.items() if policy is not None}
    return Priorities(values, max(defaults) if defaults else 0, preemption)


def _choice(value: Any, what: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {show_value(value)}")
    return value


def _budget(obj: dict[str, Any], bound: list[Pod]) -> DisruptionBudget:
    """A PodDisruptionBudget; disruptionsAllowed from its status, else computed from the spec as the
    disruption controller would with every matching running pod healthy (a snapshot made without that
    controller, or a test cluster, has no status)."""
    meta = obj["metadata"]
    namespace = _text(meta.get("namespace") or "default", "metadata.namespace")
    spec = _mapping(obj.get("spec"), "spec")
    selector = label_selector(spec.get("selector"), "spec.selector")
    status = _mapping(obj.get("status"), "status")
    if status.get("disruptionsAllowed") is not None:
        allowed = _int(status["disruptionsAllowed"], "status.disruptionsAllowed", 0)
    else:
        budget = DisruptionBudget(namespace, "", selector, 0)
        healthy = sum(1 for p in bound if not p.terminating and budget.covers(p))
        allowed = _allowed_by_spec(spec, healthy)
    return DisruptionBudget(namespace, _text(meta["name"], "metadata.name"), selector, allowed)


def _allowed_by_spec(spec: dict[str, Any], healthy: int) -> int:
    """minAvailable / maxUnavailable (a count or a percentage, rounded up) with `healthy` pods expected;
    a budget with neither allows no disruption."""
    if spec.get("minAvailable") is not None:
        return max(0, healthy - _int_or_percent(spec["minAvailable"], healthy, "spec.minAvailable"))
    if spec.get("maxUnavailable") is not None:
        return max(0, _int_or_percent(spec["maxUnavailable"], healthy, "spec.maxUnavailable"))
    return 0


def _int_or_percent(value: Any, total: int, what: str) -> int:
    if isinstance(value, str) and value.endswith("%"):
        percent = _int(value[:-1], what, 0, 100)
        return -(-percent * total // 100)
    return _int(value, what, 0)


def _describe(kind: Any, meta: dict[str, Any]) -> str:
    ns = meta.get("namespace")
    return f"{kind} {ns}/{meta.get('name')}" if ns else f"{kind} {meta.get('name')}"


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]}"
    return str(exc) or type(exc).__name__


def show_value(value: Any) -> str:
    """A value in a message: short, and never the repr of a whole (possibly huge) structure."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _mapping(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a mapping, got {show_value(value)}")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} must be a list, got {show_value(value)}")
    return value


def _text(value: Any, what: str) -> str:
    """A string field; numbers are read as their text (as a hand-written YAML often has them), nothing else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a string, got {show_value(value)}")
    return str(value)


def _required(mapping: dict[str, Any], key: str, what: str) -> Any:
    if mapping.get(key) is None:
        raise ValueError(f"{what}.{key}: missing field {key!r}")
    return mapping[key]


def _int(value: Any, what: str, low: int = -INT32, high: int = INT32 - 1) -> int:
    """An int32 field (priority, maxSkew, hostPort, minMember, weight): whole numbers only, as the API has them."""
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif ((isinstance(value, float) and value.is_integer())
          or (isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,10}", value))):
        number = int(value)
    else:
        number = None
    if number is None:
        raise ValueError(f"{what} must be an integer, got {show_value(value)}")
    if not low <= number <= high:
        raise ValueError(f"{what} must be in {low}..{high}, got {number}")
    return number


def _scalar_text(value: Any, what: str) -> str:
    """A label-like value: strings, and scalars a hand-written YAML leaves unquoted (`true`, `3`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _text(value, what)


def _str_map(value: Any, what: str) -> dict[str, str]:
    return {_text(k, f"{what} key"): _scalar_text(v, f"{what}.{k}") for k, v in _mapping(value, what).items()}


def _resources(value: Any, what: str, clamp: bool = False) -> dict[str, int]:
    """Quantities by resource name, in the model's units. Above 2^53 a quantity is refused, or with `clamp` (a
    limit, where "more than any cluster has" means no limit) taken as 2^53."""
    out: dict[str, int] = {}
    for name, qty in _mapping(value, what).items():
        name = _text(name, f"{what} key")
        try:
            amount = to_milli(qty) if name == "cpu" else to_int(qty)
        except QuantityError as exc:
            raise ValueError(f"{what}.{name}: {exc}") from None
        if amount < 0:
            raise ValueError(f"{what}.{name}: quantity {qty!r} must not be negative")
        if amount > MAX_QUANTITY and clamp:
            amount = MAX_QUANTITY
        elif amount > MAX_QUANTITY:
            unit = "millicores" if name == "cpu" else "units"
            raise ValueError(f"{what}.{name}: quantity {show_value(qty)} is too large (more than 2^53 {unit})")
        out[name] = amount
    return out


def _node(obj: dict[str, Any]) -> Node:
    meta, spec, status = obj["metadata"], _mapping(obj.get("spec"), "spec"), _mapping(obj.get("status"), "status")
    alloc = status.get("allocatable")
    what = "status.allocatable"
    if alloc is None:
        alloc, what = status.get("capacity"), "status.capacity"
    allocatable = _resources(alloc, what)
    allocatable.setdefault("pods", 110)
    taints = tuple(_taint(t, f"spec.taints[{i}]") for i, t in enumerate(_list(spec.get("taints"), "spec.taints")))
    return Node(
        name=_text(meta["name"], "metadata.name"),
        labels=_str_map(meta.get("labels"), "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        allocatable=allocatable,
        taints=taints,
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable"),
    )


def _taint(value: Any, what: str) -> Taint:
    t = _mapping(value, what)
    return Taint(_text(_required(t, "key", what), f"{what}.key"), _scalar_text(t.get("value"), f"{what}.value"),
                 _effect(t.get("effect"), what))


def _bool(value: Any, what: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, got {show_value(value)}")
    return value


def _effect(value: Any, what: str, allow_empty: bool = False) -> str:
    effect = _scalar_text(value, f"{what}.effect")
    if effect in ("NoSchedule", "PreferNoSchedule", "NoExecute") or (allow_empty and not effect):
        return effect
    raise ValueError(f"{what}: unknown taint effect {effect!r} (NoSchedule, PreferNoSchedule or NoExecute)")


def _pod_group(obj: dict[str, Any]) -> PodGroup:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    min_member = _int(spec.get("minMember") or 0, "spec.minMember")
    if min_member < 0:
        raise ValueError("spec.minMember must not be negative")
    timeout = spec.get("scheduleTimeoutSeconds")
    room = _resources(spec["minResources"], "spec.minResources") if spec.get("minResources") is not None else {}
    return PodGroup(_text(meta.get("namespace") or "default", "metadata.namespace"), _text(meta["name"], "metadata.name"),
                    min_member, _int(timeout, "spec.scheduleTimeoutSeconds") if timeout is not None else None,
                    tuple(sorted(room.items())), _timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def _native_group(obj: dict[str, Any], priorities: Priorities) -> PodGroup:
    """A scheduling.k8s.io PodGroup: `gang.minCount` (all or nothing) or `basic` (plain pods), the first topology
    constraint's key (the whole group in one domain), its priority and disruption mode."""
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    policy = _mapping(_required(spec, "schedulingPolicy", "spec"), "spec.schedulingPolicy")
    if (policy.get("gang") is None) == (policy.get("basic") is None):
        raise ValueError("spec.schedulingPolicy must set exactly one of basic and gang")
    gang = _mapping(policy.get("gang"), "spec.schedulingPolicy.gang")
    min_count = _int(_required(gang, "minCount", "spec.schedulingPolicy.gang"), "spec.schedulingPolicy.gang.minCount",
                     1) if policy.get("gang") is not None else 0
    constraints = _mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    topology = _list(constraints.get("topology"), "spec.schedulingConstraints.topology")
    where = "spec.schedulingConstraints.topology[0]"
    key = _text(_required(_mapping(topology[0], where), "key", where), f"{where}.key") if topology else None
    priority = None
    if spec.get("priority") is not None or spec.get("priorityClassName"):
        priority = priorities.of(spec)
        if priority is None:
            raise ValueError(f"PriorityClass {spec.get('priorityClassName')!r} not found")
    return PodGroup(_text(meta.get("namespace") or "default", "metadata.namespace"), _text(meta["name"], "metadata.name"),
                    min_count, created=_timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
                    native=True, topology_key=key, priority=priority,
                    disruption_mode=_choice(spec.get("disruptionMode") or "Pod", "spec.disruptionMode",
                                            ("Pod", "PodGroup")))


def pod_requests(spec: dict[str, Any]) -> dict[str, int]:
    """Effective requests exactly as kube-scheduler computes them (resourcehelper.PodRequests).

    Regular containers are summed; init containers run one at a time so they take the max, except
    restartable (sidecar) init containers, which keep running and so add to everything after them.
    Pod-level requests then replace the sum where set, and the RuntimeClass overhead adds to it.
    """

    def container_requests(c: dict[str, Any], where: str) -> dict[str, int]:
        res = _mapping(c.get("resources"), f"{where}.resources")
        limits = _resources(res.get("limits"), f"{where}.resources.limits")
        requests = _resources(res.get("requests"), f"{where}.resources.requests")
        return {**limits, **requests}  # API defaulting: a limit without a request is also the request

    def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + v
        return out

    containers = _list(spec.get("containers"), "spec.containers")
    if not containers:
        raise ValueError("pod has no containers (spec.containers is empty)")
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        total = add(total, container_requests(_mapping(c, f"spec.containers[{i}]"), f"spec.containers[{i}]"))
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        c = _mapping(c, f"spec.initContainers[{i}]")
        reqs = container_requests(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            total = add(total, reqs)
            sidecars = add(sidecars, reqs)
            reqs = sidecars
        else:
            reqs = add(reqs, sidecars)
        for k, v in reqs.items():
            init_max[k] = max(init_max.get(k, 0), v)
    for k, v in init_max.items():
        total[k] = max(total.get(k, 0), v)
    total.update(_pod_level_requests(spec, total))
    total = add(total, _resources(spec.get("overhead"), "spec.overhead"))
    total = {k: v for k, v in total.items() if v > 0}
    for k, v in total.items():
        if v > MAX_QUANTITY:
            raise ValueError(f"the pod's total {k} request is too large (more than 2^53)")
    total["pods"] = 1
    return total


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
    res = _mapping(spec["resources"], "spec.resources")
    requests = {k: v for k, v in _resources(res.get("requests"), "spec.resources.requests").items() if _pod_level(k)}
    limits = _resources(res.get("limits"), "spec.resources.limits")
    for k, limit in limits.items():
        if not _pod_level(k) or k in requests:
            continue
        overcommit = not k.startswith("hugepages-")
        requests[k] = containers[k] if overcommit and k in containers else limit
    return requests


def _requirements(items: Any, what: str, ops: tuple[str, ...]) -> tuple[Requirement, ...]:
    """Selector requirements, validated as the apiserver validates them."""
    out = []
    for i, item in enumerate(_list(items, what)):
        where = f"{what}[{i}]"
        e = _mapping(item, where)
        key = _text(_required(e, "key", where), f"{where}.key")
        op = e.get("operator")
        if op not in ops:
            raise ValueError(f"{where}: unknown operator {show_value(op)} (one of {', '.join(ops)})")
        values = tuple(_scalar_text(v, f"{where}.values[{j}]") for j, v in enumerate(_list(e.get("values"), f"{where}.values")))
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"{where}: operator {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"{where}.values: must be empty for operator {op}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ValueError(f"{where}: operator {op} needs exactly one value")
            if not re.fullmatch(r"[+-]?[0-9]{1,18}", values[0]):
                raise ValueError(f"{where}.values: operator {op} needs an integer value, got {values[0]!r}")
        out.append(Requirement(key, op, values))
    return tuple(out)


def label_selector(value: Any, what: str) -> LabelSelector:
    """metav1.LabelSelector; null matches nothing, {} matches everything."""
    if value is None:
        return LabelSelector(nothing=True)
    sel = _mapping(value, what)
    reqs = tuple(Requirement(k, "In", (v,)) for k, v in _str_map(sel.get("matchLabels"), f"{what}.matchLabels").items())
    reqs += _requirements(sel.get("matchExpressions"), f"{what}.matchExpressions", ("In", "NotIn", "Exists", "DoesNotExist"))
    return LabelSelector(reqs)


def _node_term(term: Any, what: str) -> NodeSelectorTerm:
    term = _mapping(term, what)
    ops = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
    fields = _requirements(term.get("matchFields"), f"{what}.matchFields", ("In", "NotIn"))
    for f in fields:
        if f.key != "metadata.name":
            raise ValueError(f"{what}.matchFields: unsupported field {f.key!r} (only metadata.name)")
    return NodeSelectorTerm(_requirements(term.get("matchExpressions"), f"{what}.matchExpressions", ops), fields)


def _label_keys(value: Any, what: str) -> list[str]:
    return [_text(k, f"{what}[{i}]") for i, k in enumerate(_list(value, what))]


def _with_label_keys(selector: LabelSelector, labels: dict[str, str], match: Any, mismatch: Any, what: str) -> LabelSelector:
    """matchLabelKeys / mismatchLabelKeys: the incoming pod's own values join the selector (In / NotIn).

    Upstream ignores keys the pod does not carry, and a null selector stays null.
    """
    extra = tuple(Requirement(k, "In", (labels[k],)) for k in _label_keys(match, f"{what}.matchLabelKeys") if k in labels)
    extra += tuple(Requirement(k, "NotIn", (labels[k],)) for k in _label_keys(mismatch, f"{what}.mismatchLabelKeys")
                   if k in labels)
    if not extra or selector.nothing:
        return selector
    return LabelSelector(selector.requirements + extra)


def _pod_term(term: Any, pod_ns: str, ns_labels: dict[str, dict[str, str]], what: str,
              labels: dict[str, str] | None = None) -> PodAffinityTerm:
    term = _mapping(term, what)
    key = term.get("topologyKey")
    if not key:
        raise ValueError(f"{what}: topologyKey is required")
    key = _text(key, f"{what}.topologyKey")
    names = {_text(n, f"{what}.namespaces[{i}]") for i, n in enumerate(_list(term.get("namespaces"), f"{what}.namespaces"))}
    ns_sel = term.get("namespaceSelector")
    sel = label_selector(ns_sel, f"{what}.namespaceSelector") if ns_sel is not None else None
    namespaces: frozenset[str] | None
    if sel is not None and not sel.requirements:
        namespaces = None  # an empty namespaceSelector selects every namespace
    else:
        if sel is not None:
            names |= {ns for ns, ns_label in ns_labels.items() if sel.matches(ns_label)}
        elif not names:
            names = {pod_ns}
        namespaces = frozenset(names)
    return PodAffinityTerm(_term_selector(term, labels, what), namespaces, key)


def _term_selector(term: dict[str, Any], labels: dict[str, str] | None, what: str) -> LabelSelector:
    return _with_label_keys(label_selector(term.get("labelSelector"), f"{what}.labelSelector"), labels or {},
                            term.get("matchLabelKeys"), term.get("mismatchLabelKeys"), what)


def _node_affinity(node_aff: dict[str, Any]) -> tuple[tuple[NodeSelectorTerm, ...] | None,
                                                      tuple[tuple[int, NodeSelectorTerm], ...]]:
    """Required node affinity (None: not set) and the weighted preferred terms."""
    required_terms = None
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        terms = _list(_mapping(req, base).get("nodeSelectorTerms"), f"{base}.nodeSelectorTerms")
        required_terms = tuple(_node_term(t, f"{base}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms))
    pref = "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
    preferred_terms = tuple(
        (_weight(p, f"{pref}[{i}]"), _node_term(_required(p, "preference", f"{pref}[{i}]"), f"{pref}[{i}].preference"))
        for i, p in enumerate(_list(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution"), pref))
    )
    return required_terms, preferred_terms


@dataclass(frozen=True, slots=True)
class _TermScope:
    """What a pod's (anti-)affinity terms are read against: its namespace, the namespaces' labels (for
    namespaceSelector) and its own labels (for matchLabelKeys)."""

    namespace: str
    ns_labels: dict[str, dict[str, str]]
    labels: dict[str, str]

    def required(self, section: dict[str, Any], name: str) -> tuple[PodAffinityTerm, ...]:
        what = f"spec.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            _pod_term(t, self.namespace, self.ns_labels, f"{what}[{i}]", self.labels)
            for i, t in enumerate(_list(section.get("requiredDuringSchedulingIgnoredDuringExecution"), what))
        )

    def preferred(self, section: dict[str, Any], name: str) -> tuple[tuple[int, PodAffinityTerm], ...]:
        what = f"spec.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution"
        return tuple(
            (_weight(p, f"{what}[{i}]"),
             _pod_term(_required(p, "podAffinityTerm", f"{what}[{i}]"), self.namespace, self.ns_labels,
                       f"{what}[{i}].podAffinityTerm", self.labels))
            for i, p in enumerate(_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"), what))
        )


def _pod(obj: dict[str, Any], ns_labels: dict[str, dict[str, str]], priorities: Priorities) -> Pod:
    meta = obj["metadata"]
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    ns = _text(meta.get("namespace") or "default", "metadata.namespace")
    labels = _str_map(meta.get("labels"), "metadata.labels")
    affinity = _mapping(spec.get("affinity"), "spec.affinity")
    node_aff = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    pod_aff = _mapping(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    anti_aff = _mapping(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    _scheduling_gates(spec)

    required_terms, preferred_terms = _node_affinity(node_aff)
    scope = _TermScope(ns, ns_labels, labels)

    priority = priorities.of(spec)  # None (an unknown class) makes the pod skipped; see _skip_reason
    requests = pod_requests(spec)
    return Pod(
        namespace=ns,
        name=_text(meta["name"], "metadata.name"),
        labels=labels,
        annotations=_str_map(meta.get("annotations"), "metadata.annotations"),
        requests=requests,
        node_name=_text(spec["nodeName"], "spec.nodeName") if spec.get("nodeName") else None,
        scheduler_name=_text(spec.get("schedulerName") or "default-scheduler", "spec.schedulerName"),
        phase=_text(status.get("phase") or "Pending", "status.phase"),
        priority=priority or 0,
        node_selector=tuple(sorted(_str_map(spec.get("nodeSelector"), "spec.nodeSelector").items())),
        required_node_terms=required_terms,
        preferred_node_terms=preferred_terms,
        tolerations=_tolerations(spec),
        affinity_required=scope.required(pod_aff, "podAffinity"),
        affinity_preferred=scope.preferred(pod_aff, "podAffinity"),
        anti_affinity_required=scope.required(anti_aff, "podAntiAffinity"),
        anti_affinity_preferred=scope.preferred(anti_aff, "podAntiAffinity"),
        spread=_spread(spec, labels),
        host_ports=_host_ports(spec),
        owner=_owner(meta),
        created=_timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        preemption_policy=priorities.preemption_policy(spec),
        terminating=bool(meta.get("deletionTimestamp")),
        claims=_claims(spec, _text(meta["name"], "metadata.name")),
        scheduling_group=_scheduling_group(spec),
        resource_claims=_pod_resource_claims(spec, status),
        extended=_extended_requests(spec) if any("/" in r for r in requests) else (),
    )


def _scheduling_group(spec: dict[str, Any]) -> str | None:
    group = _mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
    name = group.get("podGroupName")
    return None if name is None else _text(name, "spec.schedulingGroup.podGroupName")


def _claims(spec: dict[str, Any], pod_name: str) -> tuple[str, ...]:
    """The PersistentVolumeClaims a pod mounts: named ones, and a generic ephemeral volume's `<pod>-<volume>`."""
    out = []
    for i, vol in enumerate(_list(spec.get("volumes"), "spec.volumes")):
        vol = _mapping(vol, f"spec.volumes[{i}]")
        if vol.get("persistentVolumeClaim") is not None:
            pvc = _mapping(vol["persistentVolumeClaim"], f"spec.volumes[{i}].persistentVolumeClaim")
            out.append(_text(_required(pvc, "claimName", f"spec.volumes[{i}].persistentVolumeClaim"),
                             f"spec.volumes[{i}].persistentVolumeClaim.claimName"))
        elif vol.get("ephemeral") is not None:
            out.append(f"{pod_name}-{_text(_required(vol, 'name', f'spec.volumes[{i}]'), f'spec.volumes[{i}].name')}")
    return tuple(dict.fromkeys(out))


# -- Services and controllers (system-default spreading: engine.workloads) ------------------------------

WORKLOAD_KINDS = ("Service", "ReplicaSet", "StatefulSet", "ReplicationController")


def _elastic_quota(obj: dict[str, Any]) -> Quota:
    """scheduler-plugins' ElasticQuota (CapacityScheduling): `spec.min` and `spec.max` for the pods of its own
    namespace."""
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    namespace = _text(meta.get("namespace") or "default", "metadata.namespace")
    name = _text(meta["name"], "metadata.name")
    low = _resources(spec.get("min"), "spec.min", clamp=True) if spec.get("min") is not None else {}
    high = _resources(spec.get("max"), "spec.max", clamp=True) if spec.get("max") is not None else {}
    for r, v in low.items():
        if r in high and v > high[r]:
            raise ValueError(f"spec.min.{r} ({v}) is above spec.max.{r} ({high[r]})")
    return Quota(f"{namespace}/{name}", frozenset({namespace}), tuple(sorted(low.items())), tuple(sorted(high.items())),
                 f"ElasticQuota {namespace}/{name}")



def _one_quota_per_namespace(found: _Sorted) -> list[Quota]:
    """The ElasticQuotas kept, in the order met: one per namespace, the first by name; the others are refused naming
    it. CapacityScheduling keys its quotas by namespace and leaves a second one undefined (the first its informer
    adds stays until either is updated, which replaces it, or deleted, which drops both), so none is guessed at."""
    kept: dict[frozenset[str], Quota] = {}
    for src, meta, quota in sorted(found.elastic, key=lambda e: e[2].name):
        first = kept.setdefault(quota.namespaces, quota)
        if first is not quota:
            found.refuse(src, "ElasticQuota", meta, f"a second ElasticQuota in namespace {meta.get('namespace') or 'default'}: "
                         f"{first.source} is its quota (the first by name; CapacityScheduling reads one per namespace)")
    return [quota for _, _, quota in found.elastic if kept[quota.namespaces] is quota]


def _workload_object(workloads: Workloads, kind: str, obj: dict[str, Any]) -> None:
    """A Service's selector map, or a controller's selector (a ReplicationController's is a plain map)."""
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    ns = _text(meta.get("namespace") or "default", "metadata.namespace")
    if kind == "Service":
        selector = _str_map(spec.get("selector"), "spec.selector")
        if selector:  # a Service without a selector selects no pods of its own
            workloads.services.setdefault(ns, []).append(selector)
        return
    if kind == "ReplicationController":
        rc = _str_map(spec.get("selector"), "spec.selector")
        found = LabelSelector(tuple(Requirement(k, "In", (v,)) for k, v in sorted(rc.items())))
    else:
        found = label_selector(spec.get("selector"), "spec.selector")
    workloads.controllers[(kind, ns, _text(meta["name"], "metadata.name"))] = found


# -- storage objects ------------------------------------------------------------------------------------

STORAGE_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def _storage_object(storage: Storage, kind: str, obj: dict[str, Any]) -> None:
    meta = obj["metadata"]
    name = _text(meta["name"], "metadata.name")
    if kind == "PersistentVolumeClaim":
        claim = _claim(obj)
        storage.claims[claim.key] = claim
    elif kind == "PersistentVolume":
        storage.volumes[name] = _volume(obj)
    elif kind == "StorageClass":
        storage.classes[name] = _storage_class(obj)
    else:
        storage.limits[name] = _csi_limits(obj)


def _claim(obj: dict[str, Any]) -> Claim:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    requests = _resources(_mapping(spec.get("resources"), "spec.resources").get("requests"), "spec.resources.requests")
    volume_name = _text(spec.get("volumeName") or "", "spec.volumeName")
    phase = _text(status.get("phase") or "Pending", "status.phase")
    return Claim(
        namespace=_text(meta.get("namespace") or "default", "metadata.namespace"),
        name=_text(meta["name"], "metadata.name"),
        uid=_text(meta.get("uid") or "", "metadata.uid"),
        storage_class=_claim_class(spec, annotations),
        request=requests.get("storage", 0),
        modes=_access_modes(spec),
        block=_choice(spec.get("volumeMode") or "Filesystem", "spec.volumeMode", ("Filesystem", "Block")) == "Block",
        volume_name=volume_name,
        bound=bool(volume_name) and (BIND_COMPLETED in annotations or phase == "Bound"),
        lost=phase == "Lost",
        deleting=bool(meta.get("deletionTimestamp")),
        selector=label_selector(spec["selector"], "spec.selector") if spec.get("selector") is not None else None,
    )


def _claim_class(spec: dict[str, Any], annotations: dict[str, str]) -> str:
    """GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName."""
    beta = annotations.get("volume.beta.kubernetes.io/storage-class")
    return beta if beta is not None else _text(spec.get("storageClassName") or "", "spec.storageClassName")


def _access_modes(spec: dict[str, Any]) -> frozenset[str]:
    modes = _list(spec.get("accessModes"), "spec.accessModes")
    return frozenset(_choice(m, f"spec.accessModes[{i}]", ACCESS_MODES) for i, m in enumerate(modes))


def _volume(obj: dict[str, Any]) -> Volume:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    annotations = _str_map(meta.get("annotations"), "metadata.annotations")
    required = _mapping(_mapping(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required"),
                        "spec.nodeAffinity.required")
    terms = _list(required.get("nodeSelectorTerms"), "spec.nodeAffinity.required.nodeSelectorTerms")
    ref = _mapping(spec.get("claimRef"), "spec.claimRef")
    csi = _mapping(spec.get("csi"), "spec.csi")
    beta = annotations.get("volume.beta.kubernetes.io/storage-class")
    return Volume(
        name=_text(meta["name"], "metadata.name"),
        storage_class=beta if beta is not None else _text(spec.get("storageClassName") or "", "spec.storageClassName"),
        capacity=_resources(spec.get("capacity"), "spec.capacity").get("storage", 0),
        modes=_access_modes(spec),
        block=_choice(spec.get("volumeMode") or "Filesystem", "spec.volumeMode", ("Filesystem", "Block")) == "Block",
        node_terms=tuple(_node_term(t, f"spec.nodeAffinity.required.nodeSelectorTerms[{i}]")
                         for i, t in enumerate(terms)) if "nodeSelectorTerms" in required else None,
        claim=(_text(ref.get("namespace") or "default", "spec.claimRef.namespace"),
               _text(ref.get("name") or "", "spec.claimRef.name")) if ref else None,
        available=_text(status.get("phase") or "Pending", "status.phase") == "Available",
        pending=(status.get("phase") or "Pending") == "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        labels=tuple(sorted(_str_map(meta.get("labels"), "metadata.labels").items())),
        driver=_text(csi.get("driver") or "", "spec.csi.driver"),
        handle=_text(csi.get("volumeHandle") or "", "spec.csi.volumeHandle"),
    )


def _storage_class(obj: dict[str, Any]) -> StorageClass:
    mode = _choice(obj.get("volumeBindingMode") or "Immediate", "volumeBindingMode", ("Immediate", "WaitForFirstConsumer"))
    topologies = _list(obj.get("allowedTopologies"), "allowedTopologies")
    terms = [_topology_term(t, f"allowedTopologies[{i}]") for i, t in enumerate(topologies)]
    return StorageClass(name=_text(obj["metadata"]["name"], "metadata.name"),
                        provisioner=_text(_required(obj, "provisioner", "StorageClass"), "provisioner"),
                        wait_for_consumer=mode == "WaitForFirstConsumer",
                        topology=tuple(terms) if terms else None)


def _topology_term(term: Any, what: str) -> NodeSelectorTerm:
    """A TopologySelectorTerm: each label expression's key must have one of its values (In)."""
    what = f"{what}.matchLabelExpressions"
    reqs = []
    for j, e in enumerate(_list(_mapping(term, what).get("matchLabelExpressions"), what)):
        e = _mapping(e, f"{what}[{j}]")
        values = _list(e.get("values"), f"{what}[{j}].values")
        reqs.append(Requirement(_text(_required(e, "key", f"{what}[{j}]"), f"{what}[{j}].key"), "In",
                                tuple(_scalar_text(v, f"{what}[{j}].values[{k}]") for k, v in enumerate(values))))
    return NodeSelectorTerm(tuple(reqs))


def _csi_limits(obj: dict[str, Any]) -> dict[str, int]:
    """CSINode: each driver's allocatable.count (drivers without one have no limit)."""
    out = {}
    for i, d in enumerate(_list(_mapping(obj.get("spec"), "spec").get("drivers"), "spec.drivers")):
        d = _mapping(d, f"spec.drivers[{i}]")
        count = _mapping(d.get("allocatable"), f"spec.drivers[{i}].allocatable").get("count")
        if count is not None:
            out[_text(_required(d, "name", f"spec.drivers[{i}]"), f"spec.drivers[{i}].name")] = _int(
                count, f"spec.drivers[{i}].allocatable.count", 0)
    return out


def _timestamp(value: Any, what: str) -> str:
    """An RFC 3339 time as text; an unquoted one in hand-written YAML arrives as a datetime."""
    if isinstance(value, datetime.datetime):
        value = value.astimezone(datetime.UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, datetime.date):
        return value.strftime("%Y-%m-%dT00:00:00Z")
    return _scalar_text(value, what)


def _scheduling_gates(spec: dict[str, Any]) -> tuple[str, ...]:
    what = "spec.schedulingGates"
    return tuple(_text(_required(_mapping(g, f"{what}[{i}]"), "name", f"{what}[{i}]"), f"{what}[{i}].name")
                 for i, g in enumerate(_list(spec.get("schedulingGates"), what)))


def _tolerations(spec: dict[str, Any]) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(_list(spec.get("tolerations"), "spec.tolerations")):
        what = f"spec.tolerations[{i}]"
        t = _mapping(item, what)
        op = _scalar_text(t.get("operator"), f"{what}.operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ValueError(f"{what}: unknown operator {op!r} (Equal or Exists)")
        out.append(Toleration(_scalar_text(t.get("key"), f"{what}.key"), op, _scalar_text(t.get("value"), f"{what}.value"),
                              _effect(t.get("effect"), what, True)))
    return tuple(out)


def _spread(spec: dict[str, Any], labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, item in enumerate(_list(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        what = f"spec.topologySpreadConstraints[{i}]"
        c = _mapping(item, what)
        when = c.get("whenUnsatisfiable", "DoNotSchedule")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise ValueError(f"{what}: unknown whenUnsatisfiable {show_value(when)}")
        skew = _int(c.get("maxSkew", 0), f"{what}.maxSkew")
        if skew < 1 or not c.get("topologyKey"):
            raise ValueError(f"{what}: maxSkew must be ≥ 1 and topologyKey set")
        min_domains = _int(c.get("minDomains") or 1, f"{what}.minDomains", 1)
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=_text(c["topologyKey"], f"{what}.topologyKey"),
                hard=when == "DoNotSchedule",
                selector=_with_label_keys(label_selector(c.get("labelSelector"), f"{what}.labelSelector"), labels,
                                          c.get("matchLabelKeys"), None, what),
                min_domains=min_domains,
                honor_affinity=c.get("nodeAffinityPolicy", "Honor") != "Ignore",
                honor_taints=c.get("nodeTaintsPolicy", "Ignore") == "Honor",
            )
        )
    return tuple(out)


def _host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    ports = []
    for i, c in enumerate(_list(spec.get("containers"), "spec.containers")):
        where = f"spec.containers[{i}].ports"
        for j, item in enumerate(_list(_mapping(c, f"spec.containers[{i}]").get("ports"), where)):
            p = _mapping(item, f"{where}[{j}]")
            port = _int(p.get("hostPort") or 0, f"{where}[{j}].hostPort", 0, 65535)
            if port > 0:
                ports.append(HostPort(_scalar_text(p.get("protocol"), f"{where}[{j}].protocol") or "TCP", port,
                                      _scalar_text(p.get("hostIP"), f"{where}[{j}].hostIP")))
    return tuple(ports)


def _owner(meta: dict[str, Any]) -> tuple[str, str] | None:
    for i, item in enumerate(_list(meta.get("ownerReferences"), "metadata.ownerReferences")):
        o = _mapping(item, f"metadata.ownerReferences[{i}]")
        if o.get("controller"):
            return (_scalar_text(o.get("kind"), f"metadata.ownerReferences[{i}].kind"),
                    _scalar_text(o.get("name"), f"metadata.ownerReferences[{i}].name"))
    return None


def _weight(item: Any, what: str) -> int:
    return _int(_mapping(item, what).get("weight", 0), f"{what}.weight", 1, 100)


# -- Dynamic Resource Allocation (resource.k8s.io/v1; engine.dra) ----------------------------------------

DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule")


def _dra_object(devices: Devices, kind: str, obj: dict[str, Any]) -> None:
    meta, spec = obj["metadata"], _mapping(obj.get("spec"), "spec")
    name = _text(meta["name"], "metadata.name")
    ns = _text(meta.get("namespace") or "default", "metadata.namespace")
    if kind == "ResourceSlice":
        devices.devices.extend(_slice_devices(spec))
    elif kind == "DeviceClass":
        devices.classes[name] = DeviceClass(name, _cel_selectors(spec.get("selectors"), "spec.selectors"),
                                            spec.get("extendedResourceName"),
                                            tuple(_device_config(c, f"spec.config[{i}]")[1]
                                                  for i, c in enumerate(_list(spec.get("config"), "spec.config"))),
                                            _timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))
    elif kind == "ResourceClaimTemplate":
        devices.templates.add(f"{ns}/{name}")
    elif kind == "DeviceTaintRule":
        selector = _mapping(spec.get("deviceSelector"), "spec.deviceSelector")
        driver, pool, device = (_optional_text(selector.get(k), f"spec.deviceSelector.{k}") for k in ("driver", "pool", "device"))
        devices.taint_rules.append(((driver, pool, device), _device_taint(_required(spec, "taint", "spec"), "spec.taint")))
    else:
        claim = _resource_claim(obj, ns, name)
        devices.claims[claim.key] = claim


def _slice_devices(spec: dict[str, Any]) -> list[Device]:
    """A ResourceSlice's devices, each with where it is reachable (the slice's nodeName, nodeSelector or
    allNodes, or per device with perDeviceNodeSelection)."""
    driver = _text(_required(spec, "driver", "spec"), "spec.driver")
    pool = _text(_required(_mapping(spec.get("pool"), "spec.pool"), "name", "spec.pool"), "spec.pool.name")
    out = []
    for i, raw in enumerate(_list(spec.get("devices"), "spec.devices")):
        what = f"spec.devices[{i}]"
        d = _mapping(raw, what)
        where = d if spec.get("perDeviceNodeSelection") else spec
        node = _text(where["nodeName"], f"{what}.nodeName") if where.get("nodeName") else None
        selector = _mapping(where.get("nodeSelector"), f"{what}.nodeSelector")
        terms = tuple(_node_term(t, f"{what}.nodeSelector.nodeSelectorTerms[{j}]")
                      for j, t in enumerate(_list(selector.get("nodeSelectorTerms"), f"{what}.nodeSelector"))) \
            if where.get("nodeSelector") else None
        out.append(Device(driver, pool, _text(_required(d, "name", what), f"{what}.name"),
                          _device_attributes(d, driver, what), _device_capacity(d, driver, what), node, terms,
                          tuple(_device_taint(t, f"{what}.taints[{j}]")
                                for j, t in enumerate(_list(d.get("taints"), f"{what}.taints")))))
    return out


def _device_taint(raw: Any, what: str) -> Taint:
    """A DeviceTaint: key, value, effect (None, NoSchedule, NoExecute; an unknown effect is kept and ignored)."""
    t = _mapping(raw, what)
    return Taint(_text(_required(t, "key", what), f"{what}.key"), _scalar_text(t.get("value"), f"{what}.value"),
                 _scalar_text(t.get("effect"), f"{what}.effect"))


def _device_tolerations(value: Any, what: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(_list(value, what)):
        t = _mapping(item, f"{what}[{i}]")
        op = _scalar_text(t.get("operator"), f"{what}[{i}].operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ValueError(f"{what}[{i}]: unknown operator {op!r} (Equal or Exists)")
        out.append(Toleration(_scalar_text(t.get("key"), f"{what}[{i}].key"), op,
                              _scalar_text(t.get("value"), f"{what}[{i}].value"),
                              _scalar_text(t.get("effect"), f"{what}[{i}].effect")))
    return tuple(out)


def _optional_text(value: Any, what: str) -> str | None:
    return None if value is None else _text(value, what)


def _qualified(key: str, driver: str) -> tuple[str, str]:
    domain, _, name = key.rpartition("/")
    return (domain or driver), name


def _device_attributes(d: dict[str, Any], driver: str, what: str) -> tuple[tuple[str, str, object], ...]:
    out: list[tuple[str, str, object]] = []
    for key, raw in _mapping(d.get("attributes"), f"{what}.attributes").items():
        value = _mapping(raw, f"{what}.attributes.{key}")
        found: object
        if "int" in value:
            found = _int(value["int"], f"{what}.attributes.{key}.int", -(2**63), 2**63 - 1)
        elif "bool" in value:
            found = _bool(value["bool"], f"{what}.attributes.{key}.bool")
        elif "version" in value:
            found = Version(_text(value["version"], f"{what}.attributes.{key}.version"))
        else:
            found = _text(value.get("string", ""), f"{what}.attributes.{key}.string")
        out.append((*_qualified(_text(key, f"{what}.attributes key"), driver), found))
    return tuple(sorted(out, key=lambda a: (a[0], a[1])))


def _device_capacity(d: dict[str, Any], driver: str, what: str) -> tuple[tuple[str, str, int], ...]:
    out = []
    for key, raw in _mapping(d.get("capacity"), f"{what}.capacity").items():
        value = _required(_mapping(raw, f"{what}.capacity.{key}"), "value", f"{what}.capacity.{key}")
        try:
            milli = to_milli(value)
        except QuantityError as exc:
            raise ValueError(f"{what}.capacity.{key}.value: {exc}") from None
        out.append((*_qualified(_text(key, f"{what}.capacity key"), driver), milli))
    return tuple(sorted(out))


def _cel_selectors(value: Any, what: str) -> tuple[str, ...]:
    out = []
    for i, item in enumerate(_list(value, what)):
        cel = _mapping(_required(_mapping(item, f"{what}[{i}]"), "cel", f"{what}[{i}]"), f"{what}[{i}].cel")
        out.append(_text(_required(cel, "expression", f"{what}[{i}].cel"), f"{what}[{i}].cel.expression"))
    return tuple(out)


def _sub_request(raw: dict[str, Any], name: str, what: str) -> SubRequest:
    mode = _choice(raw.get("allocationMode") or "ExactCount", f"{what}.allocationMode", ("ExactCount", "All"))
    count = _int(raw.get("count") or 1, f"{what}.count", 1)
    return SubRequest(name, _text(_required(raw, "deviceClassName", what), f"{what}.deviceClassName"),
                      _cel_selectors(raw.get("selectors"), f"{what}.selectors"), count, mode == "All",
                      _device_tolerations(raw.get("tolerations"), f"{what}.tolerations"))


def _device_config(raw: Any, what: str) -> tuple[tuple[str, ...], str]:
    """A DeviceClassConfiguration or DeviceClaimConfiguration: (the requests it names, its DeviceConfiguration
    (`opaque` driver parameters, passed through as they are) as JSON)."""
    c = _mapping(raw, what)
    requests = tuple(_text(r, f"{what}.requests") for r in _list(c.get("requests"), f"{what}.requests"))
    return requests, json.dumps({k: v for k, v in c.items() if k != "requests"}, sort_keys=True)


def _resource_claim(obj: dict[str, Any], ns: str, name: str) -> ResourceClaim:
    spec, status = _mapping(obj.get("spec"), "spec"), _mapping(obj.get("status"), "status")
    devices = _mapping(spec.get("devices"), "spec.devices")
    requests = []
    for i, raw in enumerate(_list(devices.get("requests"), "spec.devices.requests")):
        what = f"spec.devices.requests[{i}]"
        r = _mapping(raw, what)
        rname = _text(_required(r, "name", what), f"{what}.name")
        if r.get("exactly") is not None:
            alternatives: tuple[SubRequest, ...] = (_sub_request(_mapping(r["exactly"], f"{what}.exactly"), rname,
                                                                 f"{what}.exactly"),)
        else:
            subs = _list(r.get("firstAvailable"), f"{what}.firstAvailable")
            if not subs:
                raise ValueError(f"{what}: one of exactly and firstAvailable is required")
            alternatives = tuple(_sub_request(_mapping(s, f"{what}.firstAvailable[{j}]"),
                                              f"{rname}/{_text(_mapping(s, what).get('name', j), what)}",
                                              f"{what}.firstAvailable[{j}]") for j, s in enumerate(subs))
        requests.append(DeviceRequest(rname, alternatives))
    constraints = []
    for i, raw in enumerate(_list(devices.get("constraints"), "spec.devices.constraints")):
        c = _mapping(raw, f"spec.devices.constraints[{i}]")
        if c.get("matchAttribute"):
            names = tuple(_text(n, "request") for n in _list(c.get("requests"), f"spec.devices.constraints[{i}].requests"))
            constraints.append((names, _text(c["matchAttribute"], f"spec.devices.constraints[{i}].matchAttribute")))
    allocation = _mapping(status.get("allocation"), "status.allocation")
    results = _list(_mapping(allocation.get("devices"), "status.allocation.devices").get("results"),
                    "status.allocation.devices.results")
    selector = _mapping(allocation.get("nodeSelector"), "status.allocation.nodeSelector")
    return ResourceClaim(
        ns, name, tuple(requests), tuple(constraints),
        tuple(f"{r['driver']}/{r['pool']}/{r['device']}" for r in (_mapping(x, "result") for x in results))
        if status.get("allocation") is not None else None,
        tuple(_node_term(t, "status.allocation.nodeSelector.nodeSelectorTerms") for t in
              _list(selector.get("nodeSelectorTerms"), "status.allocation.nodeSelector")) if selector else None,
        tuple(str(_mapping(r, "reservedFor").get("name")) for r in _list(status.get("reservedFor"), "status.reservedFor")),
        bool(obj["metadata"].get("deletionTimestamp")),
        tuple(_device_config(c, f"spec.devices.config[{i}]") for i, c in enumerate(_list(devices.get("config"),
                                                                                        "spec.devices.config"))),
        _extended_owner(obj["metadata"]))


def _extended_owner(meta: dict[str, Any]) -> str | None:
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
    inits = _list(spec.get("initContainers"), "spec.initContainers")
    for i, c in enumerate([*inits, *_list(spec.get("containers"), "spec.containers")]):
        c = _mapping(c, "container")
        if i < len(inits) and c.get("restartPolicy") != "Always":
            continue
        res = _mapping(c.get("resources"), "resources")
        requests = {**_resources(res.get("limits"), "resources.limits"), **_resources(res.get("requests"), "resources.requests")}
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
    generated = {str(s.get("name")): s.get("resourceClaimName") for s in
                 (_mapping(x, "status.resourceClaimStatuses[]") for x in
                  _list(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"))}
    out: list[tuple[str, str | None]] = []
    for i, raw in enumerate(_list(spec.get("resourceClaims"), "spec.resourceClaims")):
        what = f"spec.resourceClaims[{i}]"
        c = _mapping(raw, what)
        name = _text(_required(c, "name", what), f"{what}.name")
        if c.get("resourceClaimName"):
            out.append((name, _text(c["resourceClaimName"], f"{what}.resourceClaimName")))
        elif c.get("resourceClaimTemplateName"):
            out.append((name, (generated[name] or "") if name in generated else None))
        else:
            raise ValueError(f"{what}: one of resourceClaimName and resourceClaimTemplateName is required")
    return tuple(out)
