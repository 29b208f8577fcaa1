"""The pod-spec front end: what a pod's own spec says, as rule IR (kube-scheduler semantics)."""

from __future__ import annotations

from .cluster import NodeSelectorTerm, Pod, Requirement, SpreadConstraint
from .ir import Constraint, DefaultSpreading, NodeRule, NodeTerms, PodProximity, Source, SpreadRule, Tolerations

NODE_AFFINITY = "spec.affinity.nodeAffinity"
# upstream's PodTopologySpread systemDefaultConstraints: (topology key, maxSkew), both ScheduleAnyway
SYSTEM_DEFAULT_SPREADS = (("kubernetes.io/hostname", 3), ("topology.kubernetes.io/zone", 5))
SYSTEM_DEFAULT_SOURCE = Source("system default spreading (PodTopologySpread defaults)")


def pod_constraints(pod: Pod) -> tuple[Constraint, ...]:
    """What the pod's own spec asks of its node and its neighbours (its gang is model data: engine.model.gangs)."""
    out: list[Constraint] = [Tolerations(pod.tolerations, Source("spec.tolerations"))]
    if pod.node_selector:
        term = NodeSelectorTerm(tuple(Requirement(k, "In", (v,)) for k, v in pod.node_selector))
        out.append(NodeRule(NodeTerms((term,)), None, "", Source("spec.nodeSelector")))
    if pod.required_node_terms is not None:
        out.append(
            NodeRule(NodeTerms(pod.required_node_terms), None, "",
                     Source(f"{NODE_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"))
        )
    for i, (weight, term) in enumerate(pod.preferred_node_terms):
        out.append(NodeRule(NodeTerms((term,)), weight, "",
                            Source(f"{NODE_AFFINITY}.preferredDuringSchedulingIgnoredDuringExecution[{i}]")))
    for anti, required, preferred, field in (
        (False, pod.affinity_required, pod.affinity_preferred, "podAffinity"),
        (True, pod.anti_affinity_required, pod.anti_affinity_preferred, "podAntiAffinity"),
    ):
        base = f"spec.affinity.{field}"
        for i, pod_term in enumerate(required):
            out.append(PodProximity(pod_term, anti, None,
                                    Source(f"{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")))
        for i, (weight, pod_term) in enumerate(preferred):
            out.append(PodProximity(pod_term, anti, weight,
                                    Source(f"{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]")))
    for i, spread in enumerate(pod.spread):
        out.append(SpreadRule(spread, Source(f"spec.topologySpreadConstraints[{i}]")))
    return tuple(out)


def with_default_spreading(pod: Pod, constraints: tuple[Constraint, ...]) -> tuple[Constraint, ...]:
    """The pod's constraints with system-default spreading settled: upstream's two soft spreads over the pods its
    Services and controller select (`Pod.default_spread`, engine.reading.workloads), or the first in-scope policy's
    `default spreading` instead; none when nothing selects the pod or it has spread constraints of its own."""
    policy = [c for c in constraints if isinstance(c, DefaultSpreading)]
    rest = tuple(c for c in constraints if not isinstance(c, DefaultSpreading))
    selector = pod.default_spread
    if selector is None or any(isinstance(c, SpreadRule) for c in rest):
        return rest
    spreads, source = (policy[0].spreads, policy[0].source) if policy else (SYSTEM_DEFAULT_SPREADS,
                                                                             SYSTEM_DEFAULT_SOURCE)
    return rest + tuple(SpreadRule(SpreadConstraint(skew, key, False, selector), source) for key, skew in spreads)
