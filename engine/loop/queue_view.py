"""The queue view (`policy-scheduler queue`): the pending work, by profile, tenant and workload, read off what the
loop publishes — the pods' `PodScheduled` conditions (reason code, expected start: engine.model.reasons), the
scheduling.k8s.io PodGroups' conditions, the PodGroups' and ElasticQuotas' specs and status — never a plan. Pure: the
objects a `kubectl get` lists in, rows out; engine.loop.queue_command lists, watches and prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..model.cluster import POD_GROUP_LABEL, Quota
from ..model.reasons import ExpectedStart, code_of, words_of
from ..model.workload_gangs import KINDS as WORKLOAD_KINDS
from ..model.workload_gangs import workload_named
from ..quotas.tenants import amounts, shown
from ..reading.convert.fields import PROBLEMS, resource_amounts
from ..reading.convert.gang_workloads import gang_workload
from ..reading.convert.groups import elastic_quota
from ..reading.convert.pods import pod_requests
from ..reading.objects import NATIVE_POD_GROUP, is_terminal
from .binder import group_condition_type
from .ports import Obj
from .store import meta, node_of, pod_key

GATED = "SchedulingGated"  # the reason upstream's PodScheduled says of a pod with scheduling gates
COSCHEDULING = "PodGroup"  # the store's names of the two PodGroup kinds (engine.reading.objects)


@dataclass(frozen=True, slots=True)
class WaitingPod:
    """One pod without a node, as its `PodScheduled` condition says: its reason code (else the condition's reason;
    None: not tried yet, no condition), the words, and when it is expected to start (None: the message says no time)."""

    key: str
    reason: str | None
    message: str = ""
    expected: ExpectedStart | None = None


@dataclass(frozen=True, slots=True)
class GangProgress:
    """A gang's members: created (not finished, bound or not) and bound, against the group's minimum (minMember,
    gang.minCount; None: the group object does not exist)."""

    group: str  # "PodGroup ns/name" as the scheduler names it
    created: int
    bound: int
    minimum: int | None

    def words(self) -> str:
        if self.minimum is None:
            return f"{self.created} members created, no {self.group.split(' ')[0]} object"
        return f"{self.created}/{self.minimum} members created" + (f", {self.bound} bound" if self.bound else "")

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "created": self.created, "bound": self.bound, "minimum": self.minimum}


@dataclass(frozen=True, slots=True)
class WorkloadRow:
    """One workload's waiting pods: a gang (its PodGroup), else the pods' controlling owner, else the pod itself."""

    profile: str  # the pods' schedulerName
    tenant: str | None  # the ElasticQuota covering the namespace ("ns/name"; None: none)
    namespace: str
    kind: str
    name: str
    pods: tuple[WaitingPod, ...]
    gang: GangProgress | None = None
    group_reason: str | None = None  # the scheduling.k8s.io group's condition's code, when it has one

    @property
    def reason(self) -> str | None:
        """The dominant reason: the group's condition's code, else the code most of the waiting pods have."""
        if self.group_reason is not None:
            return self.group_reason
        counts = self.reasons()
        return max(counts, key=lambda r: counts[r]) if counts else None

    def reasons(self) -> dict[str, int]:
        return dict(Counter(p.reason for p in self.pods if p.reason is not None))

    def expected(self) -> ExpectedStart | None:
        """When the whole workload is expected to run: its pods' latest expected start, the nodes held for it."""
        known = [p.expected for p in self.pods if p.expected is not None]
        if not known:
            return None
        starts = [e.start for e in known if e.start is not None]
        nodes = " ".join(sorted({e.reserved for e in known if e.reserved}))
        return ExpectedStart(max(starts) if starts else None, nodes, not starts and any(e.next_cycle for e in known))

    def to_dict(self) -> dict[str, Any]:
        expected = self.expected()
        return {"profile": self.profile, "tenant": self.tenant, "namespace": self.namespace,
                "workload": {"kind": self.kind, "name": self.name}, "pending": len(self.pods),
                "gang": None if self.gang is None else {**self.gang.to_dict(), "progress": self.gang.words()},
                "reason": self.reason, "reasons": self.reasons(),
                "estimatedStart": None if expected is None else expected.start_text(),
                "reserved": [] if expected is None or not expected.reserved else expected.reserved.split(" "),
                "pods": [{"name": p.key.split("/", 1)[1], "reason": p.reason, "message": p.message,
                          "estimatedStart": None if p.expected is None else p.expected.start_text(),
                          "reserved": None if p.expected is None else p.expected.reserved or None}
                         for p in self.pods]}


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """A tenant's quota (an ElasticQuota) and what its namespace uses: the object's `status.used` where a controller
    publishes it (scheduler-plugins' does), else the requests of its namespace's bound pods listed (`source`)."""

    tenant: str
    used: dict[str, int]
    minimum: dict[str, int]
    maximum: dict[str, int]
    source: str  # "status" or "pods"
    problem: str = ""  # why its min and max could not be read

    def words(self) -> list[str]:
        """`cpu used 6 / min 4 / max 8` per resource its min or max names, or it uses."""
        quota = Quota(self.tenant, frozenset(), tuple(sorted(self.minimum.items())), tuple(sorted(self.maximum.items())))
        resources = sorted({*self.minimum, *self.maximum} or {r for r in self.used if r != "pods"})
        return [amounts(quota, r, self.used.get(r, 0)) for r in resources]

    def to_dict(self) -> dict[str, Any]:
        def named(amount: dict[str, int]) -> dict[str, str]:
            return {r: shown(r, v) for r, v in sorted(amount.items())}
        return {"tenant": self.tenant, "used": named(self.used), "min": named(self.minimum),
                "max": named(self.maximum), "source": self.source, **({"problem": self.problem} if self.problem else {})}


@dataclass(frozen=True, slots=True)
class QueueView:
    rows: tuple[WorkloadRow, ...]
    quotas: tuple[QuotaUse, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"workloads": [r.to_dict() for r in self.rows], "quotas": [q.to_dict() for q in self.quotas]}


@dataclass(frozen=True, slots=True)
class Listed:
    """What the view reads, as listed: pods, Coscheduling PodGroups, scheduling.k8s.io PodGroups, ElasticQuotas, and
    the workload objects `gang by workload` sizes gangs by (kind, object)."""

    pods: list[Obj]
    groups: list[Obj] = field(default_factory=list)
    native_groups: list[Obj] = field(default_factory=list)
    quotas: list[Obj] = field(default_factory=list)
    workloads: list[tuple[str, Obj]] = field(default_factory=list)


def queue_view(listed: Listed, profiles: frozenset[str] | None = None) -> QueueView:
    """The pending pods of `profiles` (their schedulerName; None: every scheduler's) by profile, tenant and workload,
    sorted so; with the quotas of the tenants shown."""
    tenants = _tenants(listed.quotas)
    groups = {(COSCHEDULING, _ns(g), meta(g).get("name")): g for g in listed.groups}
    groups.update({(NATIVE_POD_GROUP, _ns(g), meta(g).get("name")): g for g in listed.native_groups})
    sizes = _workload_sizes(listed.workloads)
    members = Counter(_workload(p) for p in listed.pods if not is_terminal(p))
    bound = Counter(_workload(p) for p in listed.pods if not is_terminal(p) and node_of(p))
    rows: dict[tuple[str, str, str, str], list[WaitingPod]] = {}
    for pod in listed.pods:
        profile = str((pod.get("spec") or {}).get("schedulerName") or "default-scheduler")
        if not _waiting(pod) or (profiles is not None and profile not in profiles):
            continue
        kind, _, name = _workload(pod)
        rows.setdefault((profile, _ns(pod), kind, name), []).append(_waiting_pod(pod))
    out = []
    for (profile, namespace, kind, name), pods in sorted(rows.items()):
        group = groups.get((kind, namespace, name))
        key, gang = (kind, namespace, name), None
        if kind in (COSCHEDULING, NATIVE_POD_GROUP):
            gang = GangProgress(f"PodGroup {namespace}/{name}", members[key], bound[key], _minimum(group))
        elif kind in WORKLOAD_KINDS:
            gang = GangProgress(f"{kind} {namespace}/{name}", members[key], bound[key],
                                sizes.get((kind, namespace, name.split("/", 1)[0])))
        tenant = tenants.get(namespace)
        out.append(WorkloadRow(profile, tenant[0] if tenant else None, namespace, _shown_kind(kind), name,
                               tuple(sorted(pods, key=lambda p: p.key)), gang, _group_code(group)))
    out.sort(key=lambda r: (r.profile, r.tenant or "", r.namespace, r.kind, r.name))
    shown_tenants = {r.namespace for r in out if r.tenant is not None}
    quotas = tuple(_quota_use(tenants[ns][1], [p for p in listed.pods if _ns(p) == ns]) for ns in sorted(shown_tenants))
    return QueueView(tuple(out), quotas)


def _ns(obj: Obj) -> str:
    return str(meta(obj).get("namespace") or "default")


def _waiting(pod: Obj) -> bool:
    """A pod without a node that may still get one: not finished, not being deleted."""
    return not node_of(pod) and not is_terminal(pod) and not meta(pod).get("deletionTimestamp")


def _group_of(pod: Obj) -> tuple[str, str, str] | None:
    """The PodGroup a pod names: scheduling.k8s.io's (spec.schedulingGroup), else Coscheduling's (its label)."""
    native = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if isinstance(native, str) and native:
        return NATIVE_POD_GROUP, _ns(pod), native
    label = (meta(pod).get("labels") or {}).get(POD_GROUP_LABEL)
    return (COSCHEDULING, _ns(pod), label) if isinstance(label, str) and label else None


def _workload(pod: Obj) -> tuple[str, str, str]:
    """The workload a pod is shown under, (kind, namespace, name): its gang's PodGroup, else the workload its
    controller's labels name (`gang by workload`'s: a JobSet, a LeaderWorkerSet's group as NAME/GROUP, ...), else its
    controlling owner, else itself."""
    if (group := _group_of(pod)) is not None:
        return group
    refs = [o for o in meta(pod).get("ownerReferences") or [] if isinstance(o, dict) and o.get("controller")]
    owner = (str(refs[0].get("kind")), str(refs[0].get("name"))) if refs and refs[0].get("kind") and refs[0].get("name") \
        else None
    labels = {str(k): str(v) for k, v in (meta(pod).get("labels") or {}).items()}
    if (found := workload_named(_ns(pod), labels, owner)) is not None:
        return found.kind, _ns(pod), found.name if found.group is None else f"{found.name}/{found.group[1]}"
    if owner is not None:
        return owner[0], _ns(pod), owner[1]
    return "Pod", _ns(pod), str(meta(pod).get("name"))


def _workload_sizes(workloads: Iterable[tuple[str, Obj]]) -> dict[tuple[str, str, str], int]:
    """(kind, namespace, name) -> its gang's size as the scheduler reads it (a gang per part: their sizes together);
    an object it cannot read has none."""
    out: dict[tuple[str, str, str], int] = {}
    for kind, obj in workloads:
        try:
            found = gang_workload(kind, obj)
        except PROBLEMS:
            continue
        out[(kind, found.namespace, found.name)] = sum(n for _, n in found.parts) if found.split else found.size
    return out


def _shown_kind(kind: str) -> str:
    return "PodGroup.scheduling.k8s.io" if kind == NATIVE_POD_GROUP else kind


def _condition(obj: Obj | None, kind: str) -> dict | None:
    if obj is None:
        return None
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if isinstance(c, dict) and c.get("type") == kind), None)


def _waiting_pod(pod: Obj) -> WaitingPod:
    """What the pod's PodScheduled=False condition says (the loop's code and expected start in its message)."""
    cond = _condition(pod, "PodScheduled")
    key = pod_key(pod)
    if cond is None or cond.get("status") != "False":
        return WaitingPod(key, GATED if (pod.get("spec") or {}).get("schedulingGates") else None)
    message = str(cond.get("message") or "")
    code = code_of(message)
    return WaitingPod(key, code.value if code is not None else str(cond.get("reason") or "") or None,
                      words_of(message), ExpectedStart.parse(message))


def _group_code(group: Obj | None) -> str | None:
    """The code a scheduling.k8s.io group's False scheduling condition opens with (Coscheduling groups have none)."""
    if group is None or group.get("kind") != "PodGroup" or "scheduling.k8s.io/" not in str(group.get("apiVersion")):
        return None
    cond = _condition(group, group_condition_type(group))
    if cond is None or cond.get("status") != "False":
        return None
    code = code_of(str(cond.get("message") or ""))
    return None if code is None else code.value


def _minimum(group: Obj | None) -> int | None:
    """A Coscheduling group's spec.minMember, a scheduling.k8s.io group's gang.minCount (0: a basic group)."""
    if group is None:
        return None
    spec = group.get("spec") or {}
    if "minMember" in spec or "scheduling.k8s.io/" not in str(group.get("apiVersion")):
        return _count(spec.get("minMember"))
    gang = (spec.get("schedulingPolicy") or {}).get("gang")
    return _count(gang.get("minCount")) if isinstance(gang, dict) else 0


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tenants(quotas: Iterable[Obj]) -> dict[str, tuple[str, Obj]]:
    """Namespace -> its ElasticQuota ("ns/name", the object): the first by name, as the scheduler keeps one per
    namespace (engine.reading.load; docs/quotas.md)."""
    out: dict[str, tuple[str, Obj]] = {}
    for q in sorted(quotas, key=lambda q: (_ns(q), str(meta(q).get("name")))):
        out.setdefault(_ns(q), (f"{_ns(q)}/{meta(q).get('name')}", q))
    return out


def _quota_use(quota: Obj, pods: list[Obj]) -> QuotaUse:
    """The quota's min and max (as the scheduler reads them) and its use: status.used, else its bound pods'."""
    tenant = f"{_ns(quota)}/{meta(quota).get('name')}"
    try:
        model = elastic_quota(quota)
        low, high, problem = dict(model.min), dict(model.max), ""
    except (ValueError, TypeError, KeyError) as exc:
        low, high, problem = {}, {}, f"ElasticQuota {tenant}: {exc}"
    used = (quota.get("status") or {}).get("used")
    if isinstance(used, dict) and used:
        try:
            return QuotaUse(tenant, resource_amounts(used, "status.used"), low, high, "status", problem)
        except ValueError:
            pass
    return QuotaUse(tenant, _bound_requests(pods), low, high, "pods", problem)


def _bound_requests(pods: list[Obj]) -> dict[str, int]:
    """What the bound, running pods request together (as the scheduler counts a tenant's use: not terminating)."""
    total: Counter[str] = Counter()
    for pod in pods:
        if node_of(pod) and not is_terminal(pod) and not meta(pod).get("deletionTimestamp"):
            try:
                total.update(pod_requests(pod.get("spec") or {}))
            except (ValueError, TypeError):
                continue  # a pod the scheduler cannot read counts for nothing there either
    return dict(total)
