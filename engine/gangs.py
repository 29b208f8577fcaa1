"""Gang identity, decided once: which all-or-nothing group each pod belongs to.

A pod's native PodGroup (spec.schedulingGroup naming a scheduling.k8s.io PodGroup whose policy is `gang`) comes
first, then its own Coscheduling PodGroup (label scheduling.x-k8s.io/pod-group, minMember > 0), then the first
policy `gang by label` in load order; a policy's `gang by podgroup within …` adds its
domain to the pod's PodGroup gang. The snapshot's resolver (engine.resolve) calls `find_gangs` once; compile, preemption, the
scheduler loop's queue (`gang_key`) and its binder read the result instead of working it out again.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import GangRule, GangRules
from .model import POD_GROUP_LABEL, SCHEDULING_GROUP, Cluster, Gang, Pod, PodGroup


def gang_key(pod: Pod, rules: GangRules | None = None) -> str | None:
    """The key of the gang a pod would belong to, from its labels and the policies alone (no PodGroup
    object needed): what the scheduler loop's queue groups pods by before any cycle has built the cluster."""
    group = pod.scheduling_group or pod.pod_group
    if group is not None:
        return f"{pod.namespace}/{group}"
    label = next((r for r in rules(pod) if r.label != POD_GROUP_LABEL), None) if rules else None
    return None if label is None else label.group


@dataclass(frozen=True, slots=True)
class GangMembers:
    """The gangs of one snapshot: those with a pending member, by key, and which gang each pending and each bound
    member belongs to (pod key -> gang key)."""

    gangs: dict[str, Gang]
    pending: dict[str, str]
    bound: dict[str, str]


def find_gangs(cluster: Cluster, rules: GangRules | None = None) -> GangMembers:
    """Which gang every pending pod that belongs to one is in, and the bound members of those gangs. The first
    pending member (in snapshot order) states the gang's domain."""
    gangs: dict[str, Gang] = {}
    pending: dict[str, str] = {}
    for pod in cluster.pending:
        gang = _gang_of(pod, cluster, rules(pod) if rules else ())
        if gang is not None:
            pending[pod.key] = gangs.setdefault(gang.key, gang).key
    if not gangs:
        return GangMembers(gangs, pending, {})
    wanted = {(g.namespace, g.label, g.value): g.key for g in gangs.values()}
    labels = {g.label for g in gangs.values()}
    bound: dict[str, str] = {}
    for pod in cluster.bound:  # bound members count towards minMember, found by the label's value
        for label in labels:
            value = pod.scheduling_group if label == SCHEDULING_GROUP else pod.labels.get(label)
            key = None if value is None else wanted.get((pod.namespace, label, value))
            if key is not None:
                bound[pod.key] = key
                break
    return GangMembers(gangs, pending, bound)


def _gang_of(pod: Pod, cluster: Cluster, rules: tuple[GangRule, ...]) -> Gang | None:
    native = cluster.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}") if pod.scheduling_group else None
    if native is not None and native.min_member > 0:
        return _native_gang(native, rules)
    group = pod.pod_group if pod.scheduling_group is None else None
    own = cluster.pod_groups.get(f"{pod.namespace}/{group}") if group is not None else None
    if own is not None and own.min_member > 0:
        within = next((r.within for r in rules if r.label == POD_GROUP_LABEL and r.value == own.name and r.within),
                      None)
        return Gang(own.key, own.namespace, own.min_member, f"PodGroup {own.key}", POD_GROUP_LABEL, own.name, within,
                    own.min_resources, own.created)
    rule = next((r for r in rules if r.label != POD_GROUP_LABEL), None)
    if rule is None:
        return None
    return Gang(rule.group, rule.namespace, rule.min_member, str(rule.source), rule.label, rule.value, rule.within)


def _native_gang(group: PodGroup, rules: tuple[GangRule, ...]) -> Gang:
    """A scheduling.k8s.io PodGroup's gang: `gang.minCount` all or nothing, in one domain of its topology
    constraint's key (else of a policy's `gang by podgroup within`)."""
    within = group.topology_key or next((r.within for r in rules if r.label == POD_GROUP_LABEL and r.value == group.name
                                         and r.within), None)
    return Gang(group.key, group.namespace, group.min_member, f"PodGroup {group.key} (scheduling.k8s.io)",
                SCHEDULING_GROUP, group.name, within, (), group.created)


def disruption_unit(pod: Pod, cluster: Cluster) -> str | None:
    """The scheduling.k8s.io PodGroup a running pod is evicted with, whole or not at all (its group's
    `disruptionMode: PodGroup`, upstream's workload-aware preemption); None: the pod is evicted alone."""
    if pod.scheduling_group is None:
        return None
    group = cluster.native_groups.get(f"{pod.namespace}/{pod.scheduling_group}")
    return group.key if group is not None and group.disruption_mode == "PodGroup" else None
