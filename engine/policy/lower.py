"""Lower checked policies to the rule IR: for each pod, the constraints of every policy in scope.

A policy only adds: hard rules add to the pod's own requirements, soft rules add to its preferences,
tolerations add to its own. Policies are applied in load order (the PATH arguments in the order given,
files within a directory sorted by path, policies in file order); where only one can win (the gang a pod
belongs to), the pod's own PodGroup wins, then the first policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..model.cluster import POD_GROUP_LABEL, LabelSelector, Pod, PodAffinityTerm, Quota, Requirement, Toleration
from ..model.ir import (
    WORKLOAD,
    Constraint,
    CountLimit,
    DefaultSpreading,
    EvictionCap,
    FragmentationPreference,
    GangRule,
    GangRules,
    NodeOpening,
    NodeRule,
    NodeScore,
    PlacementRules,
    PodCost,
    PodProximity,
    PodTerm,
    PreemptionRules,
    Protected,
    ReserveRules,
    Rules,
    RuntimeRules,
    Source,
    Tolerations,
    VictimRule,
)
from . import ast as A


@dataclass(frozen=True, slots=True)
class PolicyPods:
    """A policy's `pods where …` set within a topology domain; the policy's stand-in for PodAffinityTerm."""

    expr: A.PodExpr
    topology_key: str

    def matches(self, pod: Pod) -> bool:
        return self.expr.matches(pod)

    def label_keys(self) -> frozenset[str]:
        return pod_label_keys(self.expr)

    @property
    def selector(self) -> str:
        return str(self.expr)


def pod_label_keys(expr: A.PodExpr) -> frozenset[str]:
    """The pod labels a policy's pod expression reads (walked without recursion: expressions can nest deep)."""
    keys: set[str] = set()
    stack: list[A.PodExpr] = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (A.PodAnd, A.PodOr)):
            stack += (e.left, e.right)
        elif isinstance(e, A.PodNot):
            stack.append(e.inner)
        elif (isinstance(e, A.PodField) and e.field == "label") or isinstance(e, A.PodLabelExists):
            keys.add(e.key)
    return frozenset(keys)


def _source(policy: A.Policy, pos: A.Pos) -> Source:
    return Source(f"{pos.file}:{pos.line} (policy {policy.name})", True, pos.file, pos.line)


def _toleration(t: A.TaintPattern) -> Toleration:
    if t.value is None:
        return Toleration(t.key, "Exists", "", t.effect)
    return Toleration(t.key, "Equal", t.value, t.effect)


def lower_statement(policy: A.Policy, s: A.Statement, pod: Pod) -> list[Constraint]:
    src = _source(policy, s.pos)
    if isinstance(s, A.NodeRequirement):
        if s.verb == "require":
            return [NodeRule(s.expr, None, f"node(s) didn't match {s.expr}", src)]
        if s.verb == "forbid":
            return [NodeRule(A.NodeNot(s.expr), None, f"node(s) are excluded by {s.expr}", src)]
        weight = int(s.weight or 0)
        return [NodeRule(s.expr, weight if s.verb == "prefer" else -weight, str(s.expr), src)]
    if isinstance(s, A.Tolerate):
        return [Tolerations(tuple(_toleration(t) for t in s.taints), src)]
    if isinstance(s, A.Minimize):
        return [NodeScore(s.attr, s.key, int(s.weight), src)]
    if isinstance(s, A.MinimizeCost):
        return [PodCost(tuple((p.resource, p.attr, p.key) for p in s.prices), int(s.weight), src)]
    if isinstance(s, A.Proximity):
        term = _term(s.pods, s.domain, pod)
        return [] if term is None else [PodProximity(term, s.anti, None if s.weight is None else int(s.weight), src)]
    if isinstance(s, A.LessFragmentation):
        return [FragmentationPreference(s.device_class, int(s.weight), src)]
    if isinstance(s, A.PackOrSpread):
        return [NodeOpening(int(s.weight) if s.pack else -int(s.weight), src)]
    if isinstance(s, A.AtMost):
        term = _term(s.pods, s.domain, pod)
        return [] if term is None else [CountLimit(term, s.most, src)]
    if isinstance(s, A.DefaultSpreadingRule):
        return [DefaultSpreading(tuple((d.domain.key, d.max_skew) for d in s.spreads), src)]
    return []  # gangs (engine.model.gangs, through `gang_rules`) and preemption rules (`preemption_rules`)


def lower_gang(policy: A.Policy, s: A.GangBy, pod: Pod) -> GangRule | None:
    """A gang statement as seen from `pod`: its label gang, or the domain it adds to the pod's PodGroup gang."""
    src = _source(policy, s.pos)
    within = s.within.key if s.within else None
    prefer = tuple(d.key for d in s.prefer)
    least = (s.least.domain.key, s.least.least) if s.least else None
    device = s.device.name if s.device else None
    if s.workload:  # the pod's workload is its gang (engine.model.workload_gangs), of the size its object says
        return GangRule("", 0, src, pod.namespace, WORKLOAD, "", within, prefer, least, device)
    if not s.label:
        group = pod.scheduling_group or pod.pod_group
        if group is None:
            return None
        # adds its topology to the pod's own PodGroup gang (its minMember comes from the PodGroup)
        return GangRule(f"{pod.namespace}/{group}", 0, src, pod.namespace, POD_GROUP_LABEL, group, within, prefer,
                        least, device)
    value = pod.labels.get(s.label)
    if value is None:
        return None
    return GangRule(f"{pod.namespace}/{s.label}={value}", s.min_member, src, pod.namespace, s.label, value, within,
                    prefer, least, device)


def _term(pods: A.SameLabel | A.PodsWhere, domain: A.Domain, pod: Pod) -> PodTerm | None:
    """The pods a statement talks about, as seen from `pod`; None when 'same label' names a label it lacks."""
    if isinstance(pods, A.SameLabel):
        value = pod.labels.get(pods.key)
        if value is None:
            return None
        selector = LabelSelector((Requirement(pods.key, "In", (value,)),))
        return PodAffinityTerm(selector, frozenset({pod.namespace}), domain.key)
    return PolicyPods(pods.expr, domain.key)


def in_scope(policies: list[A.Policy], pod: Pod) -> Iterator[tuple[A.Policy, A.Statement]]:
    """Every statement of every policy whose `applies to` matches `pod`, in load order."""
    for policy in policies:
        scope = policy.scope
        if scope is not None and scope.expr.matches(pod):
            for statement in policy.statements:
                yield policy, statement


def lower(policies: list[A.Policy]) -> Rules:
    """Checked policies as the engine's three hooks: placement, preemption and gangs."""
    return Rules(policy_rules(policies), preemption_rules(policies), gang_rules(policies), quota_rules(policies),
                 runtime_rules(policies), reserve_rules(policies))


def reserve_rules(policies: list[A.Policy]) -> ReserveRules | None:
    """Time in the plan's hook: the first `reserve` statement in scope of a pod, in load order, named by where it
    is written (the pods it covers share its count)."""
    if not any(isinstance(s, A.Reserve) for policy in policies for s in policy.statements):
        return None

    def reserve(pod: Pod) -> tuple[str, int, int] | None:
        return next(((str(_source(policy, s.pos)), s.most, s.horizon) for policy, s in in_scope(policies, pod)
                     if isinstance(s, A.Reserve)), None)

    return reserve


def runtime_rules(policies: list[A.Policy]) -> RuntimeRules | None:
    """Time in the plan's hook: the first `runtime` statement in scope of a pod, in load order (None: no policy
    has one)."""
    if not any(isinstance(s, A.Runtime) for policy in policies for s in policy.statements):
        return None

    def runtime(pod: Pod) -> int | None:
        return next((s.seconds for _, s in in_scope(policies, pod) if isinstance(s, A.Runtime)), None)

    return runtime


def gang_rules(policies: list[A.Policy]) -> GangRules:
    """The gang identity's hook (engine.model.gangs): a pod's gang statements, in load order."""

    def rules(pod: Pod) -> tuple[GangRule, ...]:
        found = (lower_gang(policy, s, pod) for policy, s in in_scope(policies, pod) if isinstance(s, A.GangBy))
        return tuple(r for r in found if r is not None)

    return rules


def policy_rules(policies: list[A.Policy]) -> PlacementRules:
    """The compile stage's hook: a pod's policy constraints (the pod-spec ones come first)."""

    def rules(pod: Pod) -> tuple[Constraint, ...]:
        return tuple(c for policy, s in in_scope(policies, pod) for c in lower_statement(policy, s, pod))

    return rules


def preemption_rules(policies: list[A.Policy]) -> PreemptionRules:
    """The preemption stage's hook: for a running pod, the `protect` and eviction caps of every policy in scope."""

    def rules(pod: Pod) -> tuple[VictimRule, ...]:
        out: list[VictimRule] = []
        for policy, s in in_scope(policies, pod):
            if isinstance(s, A.Protect):
                out.append(Protected(_source(policy, s.pos)))
            elif isinstance(s, A.EvictionsPerCycle):
                out.append(EvictionCap(s.most, s.per_namespace, _source(policy, s.pos)))
        return tuple(out)

    return rules


def quota_rules(policies: list[A.Policy]) -> tuple[Quota, ...]:
    """Each policy with quota lines as a quota over the pods in its scope: a tenant when it has a min or a
    weight, else a cap only (engine.quotas.tenants)."""
    out = []
    for policy in policies:
        lines = [s for s in policy.statements if isinstance(s, (A.QuotaAmounts, A.QuotaWeight))]
        if not lines or policy.scope is None:
            continue
        amounts = {"min": {}, "max": {}}  # type: dict[str, dict[str, int]]
        weight = None
        for s in lines:
            if isinstance(s, A.QuotaWeight):
                weight = s.weight
            else:
                amounts[s.bound].update((a.resource, a.quantity()) for a in s.amounts)
        source = f"policy {policy.name} ({lines[0].pos.file}:{lines[0].pos.line})"
        out.append(Quota(f"policy/{policy.name}", frozenset(), tuple(sorted(amounts["min"].items())),
                         tuple(sorted(amounts["max"].items())), source, policy.scope.expr, weight or 1.0,
                         bool(amounts["min"]) or weight is not None))
    return tuple(out)
