"""The pod-spec front end: what a pod's own spec says, as rule IR (kube-scheduler semantics)."""

from __future__ import annotations

from .ir import Constraint, NodeRule, NodeTerms, PodProximity, Source, SpreadRule, Tolerations
from .model import NodeSelectorTerm, Pod, Requirement

NODE_AFFINITY = "spec.affinity.nodeAffinity"


def pod_constraints(pod: Pod) -> tuple[Constraint, ...]:
    """What the pod's own spec asks of its node and its neighbours (its gang is model data: engine.gangs)."""
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
