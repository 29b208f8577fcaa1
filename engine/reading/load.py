"""Kubernetes manifests (already parsed) into the typed cluster model: `build_cluster`, the one assembler.

Each object is converted by its family's converter (engine.reading.convert); this module sorts objects into them,
puts every pod in its place (bound, pending, skipped) and resolves what the pods mean together
(engine.reading.resolve). Pure: no files, no YAML. Reading and parsing snapshots is
`engine.reading.manifests`; the scheduler loop hands its watch cache here directly. Every user mistake becomes
an `InputError` naming the object, so the CLI can print one line and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..model.cluster import (
    TERMINAL_PHASES,
    Cluster,
    Node,
    ObjectRef,
    Pod,
    PodGroup,
    Quota,
)
from ..model.gangs import refused_groups
from ..model.ir import GangRules
from ..model.reasons import Code
from .convert.devices import add_dra_object
from .convert.fields import PROBLEMS, InputError, as_text, describe, reason_of, refusal, str_map
from .convert.gang_workloads import gang_workload
from .convert.groups import (
    disruption_budgets,
    elastic_quota,
    pod_group,
    priorities_of,
    priority_class,
)
from .convert.native_groups import composite_group, native_group
from .convert.nodes import has_capacity, node_of_manifest
from .convert.pods import Priorities, namespace_labels, pod_of_manifest, scheduling_gates
from .convert.storage import add_storage_object
from .convert.workloads import add_workload_object
from .objects import check_api_version, kind_of
from .resolve import resolve_cluster

DEFAULT_SCHEDULER = "policy-scheduler"
# where deploy/ and the Helm chart install the scheduler; its Lease and policy ConfigMap live there too
DEFAULT_NAMESPACE = "policy-scheduler"
DEFAULT_POLICY_CONFIGMAP = "policy-scheduler-policies"


@dataclass(slots=True)
class _Sorted:
    """First pass over the objects: the cluster-wide ones converted, pods and budgets kept for the second
    (pods need every PriorityClass and Namespace; budgets need the pods)."""

    cluster: Cluster = field(default_factory=Cluster)
    ignored: dict[str, int] = field(default_factory=dict)
    pods: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    budgets: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    native: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # scheduling.k8s.io PodGroups
    composites: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # their CompositePodGroups
    classes: dict[str, tuple[int, bool, str | None]] = field(default_factory=dict)
    bare_nodes: list[str] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)  # objects left out, in the order they were met
    elastic: list[tuple[str, dict[str, Any], Quota]] = field(default_factory=list)  # ElasticQuotas, with where from
    priorities: Priorities = field(default_factory=lambda: Priorities({}))

    def refuse(self, src: str, kind: Any, meta: dict[str, Any], reason: str) -> None:
        """Leave an object out: its error names the object (`Kind ns/name: reason`)."""
        ref = ObjectRef(str(kind), str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        self.errors.append(InputError(f"{src}: {describe(kind, meta)}: {reason}", src, ref))


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
    seen = {str(o["metadata"].get("namespace") or "default") for _, o in found.pods}
    context = Context(namespace_labels(cluster.namespaces, seen), found.priorities, cluster.native_groups)
    pods, refused = convert_pods(context, found.pods, checked=True)
    cluster, errors, other_scheduler = assemble(cluster, pods, context.priorities, scheduler_name, found.budgets,
                                       [*found.errors, *refused])
    if errors and strict:
        first = errors[0]
        first.more = len(errors) - 1
        raise first
    cluster.notes.extend(_notes(cluster, found.ignored, other_scheduler, scheduler_name, found.bare_nodes))
    affine = any(p.affinity_required or p.affinity_preferred or p.anti_affinity_required or p.anti_affinity_preferred
                 for p in (*cluster.pending, *cluster.bound))
    if not cluster.namespaces and affine and (selecting := sum(1 for _, obj in found.pods if _selects_namespaces(obj))):
        cluster.notes.append(f"{selecting} pod(s) have pod (anti-)affinity with a namespaceSelector but the snapshot "
                             "has no Namespace objects, so it matches only by the kubernetes.io/metadata.name label "
                             "(include them: kubectl get namespaces -o yaml)")
    return resolve_cluster(cluster, gangs)


def node_model(obj: dict[str, Any]) -> Node:
    """One Node manifest in the model (raises what `PROBLEMS` lists for a node the model cannot read)."""
    check_api_version("Node", obj)
    return node_of_manifest(obj)


@dataclass(slots=True)
class Context:
    """What converting one pod reads from the rest of the cluster: namespaces' labels (for namespaceSelector),
    the PriorityClasses, and the scheduling.k8s.io PodGroups (a group's priority is its pods')."""

    ns_labels: dict[str, dict[str, str]]
    priorities: Priorities
    native_groups: dict[str, PodGroup]

    def pod(self, obj: dict[str, Any], checked: bool = False) -> Pod:
        """One pod manifest in the model (raises what `PROBLEMS` lists for a pod the model cannot read); `checked`:
        its apiVersion was checked already (`sort_objects` did)."""
        if not checked:
            check_api_version("Pod", obj)
        pod = pod_of_manifest(obj, self.ns_labels, self.priorities)
        group = self.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}") if pod.scheduling_group else None
        if group is not None and not group.members_match and group.priority is not None and group.priority != pod.priority:
            return replace(pod, priority=group.priority)  # 1.36: the group's priority is what scheduling considers
        return pod


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
        entry = kind_of(obj)
        if entry is None or entry.family is None:
            shown = kind if isinstance(kind, str) else "<none>" if kind is None else "<not a string>"
            found.ignored[shown] = found.ignored.get(shown, 0) + 1
            continue
        kind = entry.manifest_kind
        try:
            ident = (entry.name,  # one scheduling.k8s.io PodGroup at two versions is one object twice
                     as_text(meta.get("namespace") or "", "metadata.namespace"), as_text(meta["name"], "metadata.name"))
        except ValueError as exc:
            found.errors.append(InputError(f"{src}: {kind}: {exc}", src))
            continue
        if ident in seen:
            found.refuse(src, kind, meta, "duplicate object (it appears more than once)")
            continue
        seen.add(ident)
        try:
            check_api_version(kind, obj)
            _FAMILIES[entry.family](found, src, obj, kind, ident[2])
        except PROBLEMS as exc:
            found.refuse(src, kind, meta, reason_of(exc))
    found.priorities = priorities_of(found.classes)
    found.cluster = replace(found.cluster, quotas=_one_quota_per_namespace(found))
    groups: tuple[tuple[list, Callable[..., Any], dict[str, Any], str], ...] = (
        (found.native, native_group, found.cluster.native_groups, "PodGroup"),
        (found.composites, composite_group, found.cluster.composite_groups, "CompositePodGroup"))
    for objects, convert, into, kind in groups:  # once PriorityClasses are known
        for src, obj in objects:
            try:
                group = convert(obj, found.priorities)
                into[group.key] = group
            except PROBLEMS as exc:
                found.refuse(src, kind, obj["metadata"], reason_of(exc))
    return found


def _node(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.cluster.nodes.append(node_of_manifest(obj))
    if not has_capacity(obj):
        found.bare_nodes.append(name)


def _namespace(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.cluster.namespaces[name] = str_map(obj["metadata"].get("labels"), "metadata.labels")


def _native_group(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.native.append((src, obj))  # converted once PriorityClasses are known


def _composite_group(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.composites.append((src, obj))  # converted once PriorityClasses are known


def _pod_group(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    group = pod_group(obj)
    found.cluster.pod_groups[group.key] = group


def _priority_class(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.classes[name] = priority_class(obj)


def _budget(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.budgets.append((src, obj))  # converted once the pods are known


def _quota(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.elastic.append((src, obj["metadata"], elastic_quota(obj)))


def _pod(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    found.pods.append((src, obj))  # converted once PriorityClasses, Namespaces and PodGroups are known


def _gang_workload(found: _Sorted, src: str, obj: dict[str, Any], kind: str, name: str) -> None:
    workload = gang_workload(kind, obj)
    found.cluster.gang_workloads[workload.key] = workload


_Sort = Callable[[_Sorted, str, dict[str, Any], str, str], None]


# each converter family (engine.reading.objects' `family`) and how an object of it joins the cluster being assembled
_FAMILIES: dict[str, _Sort] = {
    "node": _node, "namespace": _namespace, "native_group": _native_group, "pod_group": _pod_group,
    "composite_group": _composite_group,
    "priority_class": _priority_class, "budget": _budget, "quota": _quota, "pod": _pod,
    "storage": lambda found, src, obj, kind, name: add_storage_object(found.cluster.storage, kind, obj),
    "workload": lambda found, src, obj, kind, name: add_workload_object(found.cluster.workloads, kind, obj),
    "gang_workload": _gang_workload,
    "device": lambda found, src, obj, kind, name: add_dra_object(found.cluster.devices, kind, obj),
}


def convert_pods(context: Context, docs: Iterable[tuple[str, dict[str, Any]]],
                 checked: bool = False) -> tuple[list[tuple[dict[str, Any], Pod]], list[InputError]]:
    """Pod manifests in the model, each beside its manifest, and the ones the model cannot read (`checked`: their
    apiVersions were checked already)."""
    pods, errors = [], []
    for src, obj in docs:
        try:
            pods.append((obj, context.pod(obj, checked)))
        except PROBLEMS as exc:
            errors.append(refusal(src, "Pod", obj, exc))
    return pods, errors


def assemble(cluster: Cluster, pods: list[tuple[dict[str, Any], Pod]], priorities: Priorities, scheduler_name: str,
             budgets: list[tuple[str, dict[str, Any]]], errors: list[InputError]
             ) -> tuple[Cluster, list[InputError], int]:
    """What `build_cluster` and the loop's cache both do once the objects are converted: every pod in its place
    (bound, pending, skipped with a reason), the budgets counted over the bound pods, and every object left out
    recorded in `cluster.refused`. Returns the cluster so assembled, those refusals and how many pending pods are
    another scheduler's. `resolve.resolve_cluster` then derives what the pods mean together."""
    groups = refused_groups([*(pod for _, pod in pods), *cluster.bound], cluster.native_groups,
                            scheduler_name) if cluster.native_groups else {}
    places = [place_pod(cluster, obj, pod, priorities, scheduler_name, groups) for obj, pod in pods]
    kept, refused = disruption_budgets(budgets, cluster.bound)
    errors = [*errors, *refused]
    cluster = replace(cluster, refused_groups=groups, budgets=kept, refused=[e.refusal() for e in errors])
    return cluster, errors, places.count(OTHER_SCHEDULER)


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
        if not _set_aside(obj):  # it waits for an object that is missing or refused
            cluster.skipped_codes[pod.key] = Code.INVALID_OBJECT
        return SKIPPED
    cluster.pending.append(pod)
    return PENDING


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
                   "(include storage: kubectl get pvc,pv,storageclasses,csinodes,csidrivers,csistoragecapacities -A -o yaml)")
    if dra := _dra_missing(cluster):
        out.append(dra)
    if bare_nodes:
        out.append(f"{len(bare_nodes)} Node(s) without status.allocatable or status.capacity have 0 allocatable "
                   f"(only pods requesting nothing fit): {', '.join(('Node ' + n) for n in bare_nodes[:5])}")
    return out


def _selects_namespaces(obj: dict[str, Any]) -> bool:
    """Whether a pod manifest has a pod (anti-)affinity term with a non-empty namespaceSelector (read leniently:
    a malformed pod is refused elsewhere, and must not make this raise)."""
    def mapping(value: Any) -> dict[str, Any]:
        return value if isinstance(value, dict) else {}

    def items(value: Any) -> list[Any]:
        return value if isinstance(value, list) else []

    affinity = mapping(mapping(obj.get("spec")).get("affinity"))
    for section in (mapping(affinity.get("podAffinity")), mapping(affinity.get("podAntiAffinity"))):
        terms = items(section.get("requiredDuringSchedulingIgnoredDuringExecution"))
        preferred = items(section.get("preferredDuringSchedulingIgnoredDuringExecution"))
        terms += [mapping(t).get("podAffinityTerm") for t in preferred]
        if any(isinstance(t, dict) and isinstance(t.get("namespaceSelector"), dict) and
               (t["namespaceSelector"].get("matchLabels") or t["namespaceSelector"].get("matchExpressions"))
               for t in terms):
            return True
    return False


def _dra_missing(cluster: Cluster) -> str | None:
    """A snapshot whose pending pods use ResourceClaims but that lacks the DRA kinds they need: ResourceClaims (a pod
    names one and the snapshot has none), ResourceSlices and DeviceClasses (a claim the snapshot lacks or has
    unallocated needs devices). Its pods wait, each told the upstream reason (`resourceclaim ... not found`), which
    alone reads as a cluster fault rather than an export that left the kinds out."""
    devices = cluster.devices
    wanting = [p for p in cluster.pending if any(name for _, name in p.resource_claims)]
    found = [devices.claims.get(f"{p.namespace}/{name}") for p in wanting for _, name in p.resource_claims if name]
    allocating = any(claim is None or claim.allocated is None for claim in found)
    missing = [kind for kind, lacks in (("ResourceClaims", bool(wanting) and not devices.claims),
                                        ("ResourceSlices", allocating and not devices.pools),
                                        ("DeviceClasses", allocating and not devices.classes)) if lacks]
    if not missing:
        return None
    return (f"{len(wanting)} pending pod(s) use ResourceClaims but the snapshot has no {_or(missing)}, so they wait "
            f"(include them: kubectl get {','.join(k.lower() for k in missing)} -A -o yaml)")


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _set_aside(obj: dict[str, Any]) -> bool:
    """Gated or terminating: skipped by its own spec, not for an object it names (no reason code)."""
    return bool(scheduling_gates(obj.get("spec") or {}) or obj["metadata"].get("deletionTimestamp"))


def _skip_reason(obj: dict[str, Any], pod: Pod, cluster: Cluster, priorities: Priorities) -> str | None:
    """Why a pod of this scheduler without a node is not pending at all (None: it is pending).

    Upstream keeps gated pods out of the active queue, never schedules a pod being deleted, admission rejects
    a pod whose PriorityClass does not exist, Coscheduling rejects a pod whose PodGroup is missing, and
    GangScheduling holds a pod whose scheduling.k8s.io PodGroup does not exist yet.
    """
    spec = obj.get("spec") or {}
    gates = scheduling_gates(spec)
    if gates:
        return f"gated by scheduling gate(s): {', '.join(gates)}"
    if obj["metadata"].get("deletionTimestamp"):
        return "terminating (metadata.deletionTimestamp is set)"
    if priorities.of(spec) is None:
        return f"PriorityClass {spec.get('priorityClassName')!r} not found (admission would reject the pod)"
    native = pod.scheduling_group
    if native is not None and f"{pod.namespace}/{native}" not in cluster.native_groups:
        return f"waiting for the pod's pod group {native!r} (scheduling.k8s.io) to appear"
    if native is not None and (why := _composite_problem(cluster, cluster.native_groups[f"{pod.namespace}/{native}"])):
        return why
    group = pod.pod_group
    if native is None and group is not None and f"{pod.namespace}/{group}" not in cluster.pod_groups:
        return f"PodGroup {pod.namespace}/{group} not found"
    return None


def _composite_problem(cluster: Cluster, group: PodGroup) -> str | None:
    """Why a pod of `group` waits for its CompositePodGroup: it does not exist yet (upstream's hierarchy tracker finds
    no root, so the pod is not ready), or it has a parent of its own (nesting, not planned here yet)."""
    if group.parent is None:
        return None
    composite = cluster.composite_groups.get(f"{group.namespace}/{group.parent}")
    if composite is None:
        return f"waiting for the pod group's composite pod group {group.parent!r} (scheduling.k8s.io) to appear"
    if composite.parent is not None:
        return (f"composite pod group {composite.key} is nested in {composite.parent!r}: nested CompositePodGroups "
                "are not planned yet (one level, PodGroups in a CompositePodGroup, is)")
    return None


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
