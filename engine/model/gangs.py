"""Gang identity, decided once: which all-or-nothing group each pod belongs to.

A pod's native PodGroup (spec.schedulingGroup naming a scheduling.k8s.io PodGroup whose policy is `gang`) comes
first, then its own Coscheduling PodGroup (label scheduling.x-k8s.io/pod-group, minMember > 0), then its workload
when a policy's `gang by workload` covers it (engine.model.workload_gangs), then the first policy `gang by label` in
load order; a policy's `gang by podgroup within …` adds its
domain to the pod's PodGroup gang. The snapshot's resolver (engine.reading.resolve) calls `find_gangs` once;
compile, preemption, the scheduler loop's queue (`gang_key`) and its binder read the result instead of working it out again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .cluster import POD_GROUP_LABEL, PREEMPT_LOWER, SCHEDULING_GROUP, TERMINAL_PHASES, Cluster, Gang, Pod, PodGroup
from .ir import WORKLOAD, GangRule, GangRules, Source
from .workload_gangs import workload_gang, workload_of

SAME = "all pods in a single pod group should have the same"  # upstream's words (validatePodGroup)


def gang_key(pod: Pod, rules: GangRules | None = None) -> str | None:
    """The key of the gang a pod would belong to, from its labels and the policies alone (no PodGroup
    object needed): what the scheduler loop's queue groups pods by before any cycle has built the cluster. A
    workload's pods: the workload (a LeaderWorkerSet's group), whatever its object says, so a JobSet started
    InOrder or an MPIJob whose launcher waits is one unit of the queue though its gang is a part of it."""
    group = pod.scheduling_group or pod.pod_group
    if group is not None:
        return f"{pod.namespace}/{group}"
    found = rules(pod) if rules else ()
    if any(r.label == WORKLOAD for r in found) and (workload := workload_of(pod)) is not None:
        return workload.key
    label = next((r for r in found if r.label not in _NOT_LABELS), None)
    return None if label is None else label.group


_NOT_LABELS = (POD_GROUP_LABEL, WORKLOAD)  # rules that are not `gang by label`


@dataclass(frozen=True, slots=True)
class GangMembers:
    """The gangs of one snapshot: those with a pending member, by key, and which gang each pending and each bound
    member belongs to (pod key -> gang key); `waiting`: pending pods whose workload object the snapshot lacks (a
    `gang by workload` covers them), with why (they wait for it, as for a missing PodGroup)."""

    gangs: dict[str, Gang]
    pending: dict[str, str]
    bound: dict[str, str]
    waiting: dict[str, str] = field(default_factory=dict)


def find_gangs(cluster: Cluster, rules: GangRules | None = None) -> GangMembers:
    """Which gang every pending pod that belongs to one is in, and the bound members of those gangs. The first
    pending member (in snapshot order) states the gang's domain."""
    gangs: dict[str, Gang] = {}
    pending: dict[str, str] = {}
    waiting: dict[str, str] = {}
    for pod in cluster.pending:
        gang = _gang_of(pod, cluster, rules(pod) if rules else ())
        if isinstance(gang, str):
            waiting[pod.key] = gang
        elif gang is not None:
            pending[pod.key] = gangs.setdefault(gang.key, gang).key
    if not gangs:
        return GangMembers(gangs, pending, {}, waiting)
    return GangMembers(gangs, pending, _bound_members(cluster, gangs), waiting)


def _bound_members(cluster: Cluster, gangs: dict[str, Gang]) -> dict[str, str]:
    """The bound members of `gangs` (they count towards minMember), found by the label's value (and their part's)."""
    wanted: dict[tuple[str, str, str], list[Gang]] = {}
    for g in gangs.values():
        wanted.setdefault((g.namespace, g.label, g.value), []).append(g)
    labels = {g.label for g in gangs.values()}
    bound: dict[str, str] = {}
    for pod in cluster.bound:
        for label in labels:
            value = pod.scheduling_group if label == SCHEDULING_GROUP else pod.labels.get(label)
            found = None if value is None else wanted.get((pod.namespace, label, value))
            key = next((g.key for g in found if g.part is None or g.member(pod)), None) if found else None
            if key is not None:
                bound[pod.key] = key
                break
    return bound


def _gang_of(pod: Pod, cluster: Cluster, rules: tuple[GangRule, ...]) -> Gang | str | None:
    """The pod's gang (None: it has none), or why it waits (its workload object is missing)."""
    native = cluster.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}") if pod.scheduling_group else None
    if native is not None and native.min_member > 0:
        return _native_gang(native, rules)
    group = pod.pod_group if pod.scheduling_group is None else None
    own = cluster.pod_groups.get(f"{pod.namespace}/{group}") if group is not None else None
    if own is not None and own.min_member > 0:
        rule = _topology_rule(rules, own.name)
        return _with_device(Gang(own.key, own.namespace, own.min_member, f"PodGroup {own.key}", POD_GROUP_LABEL,
                                 own.name, rule.within, own.min_resources, own.created, rule.prefer, rule.least), rules)
    workload = next((r for r in rules if r.label == WORKLOAD), None)
    if workload is not None and (found := _workload_gang(pod, cluster, workload)) is not None:
        return found
    label = next((r for r in rules if r.label not in _NOT_LABELS), None)
    if label is None:
        return None
    return Gang(label.group, label.namespace, label.min_member, str(label.source), label.label, label.value,
                label.within, prefer=label.prefer, least=label.least, device_within=label.device_within,
                device_source=str(label.source) if label.device_within else "")


def _workload_gang(pod: Pod, cluster: Cluster, rule: GangRule) -> Gang | str | None:
    """A `gang by workload` gang: the pod's workload's, with the rule's topology (None: the pod is of no workload
    read, or alone in its part); a pod whose workload object is missing waits for it."""
    found = workload_of(pod)
    if found is None:
        return None
    workload = cluster.gang_workloads.get(found.workload_key)
    if workload is None:
        return (f"waiting for its {found.kind} {found.namespace}/{found.name} to appear: its gang's size "
                f"(gang by workload, {rule.source})")
    gang = workload_gang(pod, found, workload)
    if gang is None:
        return None
    return replace(gang, within=rule.within, prefer=rule.prefer, least=rule.least, device_within=rule.device_within,
                   device_source=str(rule.source) if rule.device_within else "")


def _topology_rule(rules: tuple[GangRule, ...], group: str) -> GangRule:
    """The first policy `gang by podgroup …` that adds a topology to the PodGroup `group` (an empty one if none)."""
    return next((r for r in rules if r.label == POD_GROUP_LABEL and r.value == group), _NO_RULE)


_NO_RULE = GangRule("", 0, Source(""))


def _with_device(gang: Gang, rules: tuple[GangRule, ...]) -> Gang:
    """A PodGroup gang with the device attribute a policy's `gang by podgroup within device attribute` gives it."""
    rule = next((r for r in rules if r.label == POD_GROUP_LABEL and r.value == gang.value and r.device_within), None)
    return gang if rule is None else replace(gang, device_within=rule.device_within, device_source=str(rule.source))


def _native_gang(group: PodGroup, rules: tuple[GangRule, ...]) -> Gang:
    """A scheduling.k8s.io PodGroup's gang: `gang.minCount` all or nothing, in one domain of its topology
    constraint's key (else of a policy's `gang by podgroup within`), with a policy's preferred levels."""
    rule = _topology_rule(rules, group.name)
    return _with_device(Gang(group.key, group.namespace, group.min_member, f"PodGroup {group.key} (scheduling.k8s.io)",
                             SCHEDULING_GROUP, group.name, group.topology_key or rule.within, (), group.created,
                             rule.prefer, rule.least, None if group.parent is None else f"{group.namespace}/{group.parent}"),
                        rules)


def disruption_unit(pod: Pod, cluster: Cluster) -> str | None:
    """The scheduling.k8s.io PodGroup a running pod is evicted with, whole or not at all (its group's
    `disruptionMode: PodGroup`, upstream's workload-aware preemption); None: the pod is evicted alone."""
    if pod.scheduling_group is None:
        return None
    group = cluster.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}")
    return group.key if group is not None and group.disruption_mode == "PodGroup" else None


def refused_groups(pods: list[Pod], groups: dict[str, PodGroup], scheduler_name: str) -> dict[str, str]:
    """The scheduling.k8s.io PodGroups with a waiting pod of `scheduler_name` that upstream refuses as a whole,
    with its reason (`pods`: the snapshot's pods, bound and not; groups that do not exist yet are not judged).

    Every group: its waiting pods name one scheduler (upstream schedules a group with one profile). From v1beta1
    on (`members_match`, 1.37's validatePodGroup) also its running pods, and every member has the group's
    priority and its preemptionPolicy (the group's when it sets one, else one policy for all members)."""
    members: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.scheduling_group and pod.phase not in TERMINAL_PHASES:
            members.setdefault(f"{pod.namespace}/{pod.scheduling_group}", []).append(pod)
    out: dict[str, str] = {}
    for key, found in members.items():
        waiting = [p for p in found if not p.node_name]
        group = groups.get(key)
        if group is None or not any(p.scheduler_name == scheduler_name for p in waiting):
            continue
        if reason := _disagreement(group, found if group.members_match else waiting):
            out[key] = reason
    return out


def _disagreement(group: PodGroup, pods: list[Pod]) -> str | None:
    """Upstream's reason for refusing `group` with these members (None: they agree)."""
    names = sorted({p.scheduler_name for p in pods})
    if len(names) > 1:
        return f"{SAME} .spec.schedulerName set, got: " + " and ".join(repr(n) for n in names)
    if not group.members_match:
        return None
    want = group.priority or 0
    if (odd := next((p for p in pods if p.priority != want), None)) is not None:
        return f"{SAME} priority as the pod group's priority, got {odd.priority} and {want}"
    if group.preemption_policy is not None:
        if (odd := next((p for p in pods if p.preemption_policy != group.preemption_policy), None)) is not None:
            return (f"{SAME} preemption policy as the pod group's preemption policy, got {odd.preemption_policy} "
                    f"and {group.preemption_policy}")
        return None
    policies = sorted({p.preemption_policy for p in pods}, key=lambda x: x != PREEMPT_LOWER)
    return f"{SAME} preemption policy, got {policies[1]} and {policies[0]}" if len(policies) > 1 else None
