"""Victims chosen for the whole batch in the same model (issue 26, point 2; DCM's "the same model + a NULL node").

engine.preempt's search serves the preemptors one at a time, highest priority first, as upstream's DefaultPreemption
does: one pod's best node can cost the next pod a more important victim, or more of them. Here the running pods the
preemptors may evict on the nodes they could use become pending pods *pinned* to their node, planned beside the
preemptors by the ordinary compile → solve path (`make_plan`, on the stage's view without them), so one
solve decides placements and evictions together: the pinned pods the plan leaves out are the victims.

A pinned pod may go only on its own node (required node affinity on the field `metadata.name`, as a DaemonSet pod's),
grouped by class and node as pending pods are. It keeps what others see of it (labels, requests, host ports, volumes)
and its required anti-affinity, which still repels other pods (upstream checks a running pod's anti-affinity against
incoming ones); it drops what upstream checks only when a pod is scheduled (IgnoredDuringExecution: its nodeSelector
and node affinity, its required pod affinity, its topology spread, its policies' rules) and tolerates every taint
(a running pod stays on a node tainted or cordoned since). The running members of a PodGroup-mode group
(`disruptionMode: PodGroup`) are one gang: kept whole or evicted whole.

The objective is compile's tier 1: pods placed weighed lexicographically by priority (`classes.priority_weights`: a
pod of a higher priority outweighs every pod of all lower ones). Priorities are doubled, plus one for a pinned pod: a
running pod outweighs the pending pods of its own priority (a preemptor never evicts its equal) and is outweighed by
every pod of a higher one (the pods that may evict it). So the plan places the preemptors by priority, then keeps the
most important running pods: the lowest highest victim priority first, then the fewest victims at each priority from
the top. Disruption budgets and eviction caps are no rows of the model: engine.preempt weighs the outcome against
the search's in upstream's order and keeps the better, and when budgets break it asks again with the pods they cannot
spare held in place, then weighed above every pod no budget covers (`Running.weigh_as`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .compile import PolicyRules
from .model import Cluster, Gang, NodeSelectorTerm, Pod, Requirement, Toleration
from .plan import Plan, PlanDetails, make_plan
from .view import View

VARS_PER_SECOND = 20_000  # model variables compiled and built per second (engine.solve measures the same)
MAX_VARS = 100_000  # beyond this the model is not tried at all: the search alone decides
MODEL_SHARE = 0.3  # of the time left, what building the model may take; the rest solves it and settles its victims
EVERY_TAINT = Toleration(operator="Exists")
UNIT_GANG = "preemption unit "  # the gang key prefix of a PodGroup-mode group's running members


@dataclass(frozen=True, slots=True)
class Running:
    """A running pod the batch may evict, on its node; `unit`: the PodGroup it goes or stays with; `weigh_as`: weighed
    just below the pending pods of this priority instead of just above its own (a pod a disruption budget cannot
    spare: keeping it outweighs keeping any pod of a lower priority than that)."""

    pod: Pod
    node: str
    unit: str | None = None
    weigh_as: int | None = None


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """The batch's plan: its preemptors' part (a plan of the preemptors alone, as a re-plan's), which running pods it
    leaves out, how it was solved."""

    plan: Plan
    victims: frozenset[str]
    status: str


def fits(running: int, preemptor_nodes: int, seconds: float) -> bool:
    """Whether a model of `running` pinned pods and preemptors with `preemptor_nodes` candidate nodes in all (about
    one variable each) can be built within its share of `seconds`."""
    size = running + preemptor_nodes
    return size <= MAX_VARS and size <= VARS_PER_SECOND * MODEL_SHARE * seconds


def plan_together(cluster: Cluster, view: View, preemptors: list[Pod], running: list[Running],
                  policy: PolicyRules | None, time_limit: float, workers: int, seed: int) -> BatchOutcome | None:
    """Plan the preemptors and the running pods pinned to their nodes at once, on `cluster` (its view `view`)
    without those running pods; None when compile could not check every class in `time_limit`."""
    keys = frozenset(r.pod.key for r in running)
    mine = {p.key for p in preemptors}
    pending = [replace(p, priority=2 * p.priority) for p in preemptors] + [pinned(r) for r in running]
    gangs = dict(cluster.gangs)
    for r in running:
        if r.unit is not None:
            members = sum(1 for o in running if o.unit == r.unit)
            gangs.setdefault(UNIT_GANG + r.unit, Gang(UNIT_GANG + r.unit, r.pod.namespace, members,
                                                      f"PodGroup {r.unit} (disruptionMode: PodGroup)"))
    batch = replace(cluster, bound=[b for b in cluster.bound if b.key not in keys], pending=pending, gangs=gangs,
                    notes=[], skipped={})
    plan = make_plan(batch, _unpinned(policy, keys), time_limit=time_limit, workers=workers, seed=seed,
                     view=view.moved(removed=[r.pod for r in running]).settled())
    if plan.details.compiled is None or plan.details.compiled.problem.unchecked:
        return None
    return BatchOutcome(_theirs(plan, mine), keys - set(plan.assignments), plan.stats.status or "")


def _theirs(plan: Plan, mine: set[str]) -> Plan:
    """The preemptors' part of the batch's plan: what a re-plan of the preemptors alone on the cluster without the
    victims would say, if it chose the same nodes."""
    details = PlanDetails(gangs={k: g for k, g in plan.details.gangs.items() if k in mine},
                          reserved={k: r for k, r in plan.details.reserved.items() if k in mine},
                          compiled=plan.details.compiled)
    return Plan({k: n for k, n in plan.assignments.items() if k in mine},
                {k: why for k, why in plan.unschedulable.items() if k in mine}, plan.stats,
                usage_of=lambda: plan.usage, details=details)


def pinned(r: Running) -> Pod:
    """`r`'s pod as a pending pod that may go only on its node (see the module's doc), a half step above the pending
    pods of its priority."""
    term = NodeSelectorTerm(fields=(Requirement("metadata.name", "In", (r.node,)),))
    priority = 2 * r.pod.priority + 1 if r.weigh_as is None else 2 * r.weigh_as - 1
    return replace(r.pod, node_name=None, phase="Pending", priority=priority, node_selector=(),
                   required_node_terms=(term,), preferred_node_terms=(), tolerations=(EVERY_TAINT,),
                   affinity_required=(), affinity_preferred=(), anti_affinity_preferred=(), spread=(),
                   default_spread=None, gang=None if r.unit is None else UNIT_GANG + r.unit, scheduling_group=None)


def _unpinned(policy: PolicyRules | None, pinned_keys: frozenset[str]) -> PolicyRules | None:
    """The policies' rules for the preemptors alone: a running pod's were checked when it was scheduled."""
    if policy is None:
        return None
    rules = policy
    return lambda pod: () if pod.key in pinned_keys else rules(pod)
