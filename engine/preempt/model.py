"""The batch model (DCM's "the same model + a NULL node"): victims for the whole batch chosen in one solve.

The running pods the preemptors may evict on the nodes they could use become pending pods *pinned* to their node,
planned beside the preemptors by the ordinary compile → solve path (`make_plan`, on the session's view without them),
so one solve decides placements and evictions together: the pinned pods the plan leaves out are the victims.

A pinned pod may go only on its own node (required node affinity on the field `metadata.name`, as a DaemonSet pod's),
grouped by class and node as pending pods are. It keeps what others see of it (labels, requests, host ports, volumes)
and its required anti-affinity, which still repels other pods (upstream checks a running pod's anti-affinity against
incoming ones); it drops what upstream checks only when a pod is scheduled (IgnoredDuringExecution: its nodeSelector
and node affinity, its required pod affinity, its topology spread, its policies' rules) and tolerates every taint
(a running pod stays on a node tainted or cordoned since). The running members of a PodGroup-mode group
(`disruptionMode: PodGroup`) are one gang: kept whole or evicted whole. It is marked `Pod.running_on`.

The objective is compile's tier 1, lexicographic by level (`ClassInfo.level`, `classes.priority_weights`): every
preemptor outweighs every running pod, a higher priority every lower one. Disruption budgets are rows of the same
tier (the protection kind's Keep rows, each pod a budget could not spare costing just below the lowest preemptor and
above every running pod), so the plan places the preemptors by priority, then breaks the fewest budgets, then keeps
the most important running pods — upstream's candidate order for the batch. Who may evict whom stays upstream's: a
preemptor is a candidate only on its feasible nodes (those where it passes every filter with the pods it may evict
gone, and none else), and uses only the room of pods of a lower priority (the resources kind's room by priority).
Quotas and eviction caps are not rows: under quotas the quota reclaim strategy decides; victims over a cap, or a model
too large for the time left, hand the stage to the per-node search (`stats.preemption` says which).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ..model.cluster import Cluster, Gang, Moment, NodeSelectorTerm, Pod, Requirement, Toleration
from ..model.view import View
from ..planning.compile import PolicyRules
from ..planning.plan import NodeUsage, Plan, PlanDetails, make_plan
from .session import Candidate, Chosen, FeasibleClass, FeasibleNodes, PreemptionSettings, Session, Unserved, left

VARS_PER_SECOND = 20_000  # model variables compiled and built per second (engine.solve measures the same)
MAX_VARS = 100_000  # beyond this the model is not tried at all: the search alone decides
MODEL_SHARE = 0.3  # of the time left, what building the model may take; the rest solves it and confirms its victims
EVERY_TAINT = Toleration(operator="Exists")
UNIT_GANG = "preemption unit "  # the gang key prefix of a PodGroup-mode group's running members


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """The batch's plan: its preemptors' part (a plan of the preemptors alone, as a re-plan's), which running pods it
    leaves out, how it was solved."""

    plan: Plan
    victims: frozenset[str]
    status: str


@dataclass(frozen=True, slots=True)
class BatchModel:
    """The strategy: the batch's victims in one solve (see the module's doc). `choose` answers None, with why, when
    the model declines (quotas, a preemptor's nodes not known in time, a model too large for the time left, victims
    over an eviction cap): the stage then hands the batch to the per-node search."""

    name: str = "batch model"

    def declines(self, session: Session, preemptors: list[Pod], feasible: FeasibleNodes,
                 settings: PreemptionSettings) -> str | None:
        """Why the model is not tried (None: it is)."""
        if session.reclaim is not None or session.cluster.quotas:
            return "tenant quotas: the quota reclaim strategy decides"
        classes = feasible.classes(preemptors)
        if any(c.nodes is None for c in classes):
            return "not every preemptor's nodes were known in time"
        running = optional(session, classes)
        if not running:
            return "no running pod it may evict on the preemptors' nodes"
        if over := _overcommitted(session, {n for c in classes for n in c.nodes or ()} | {r.node for r in running}):
            return f"node {over} runs more than it has room for (pinned there, its pods could not all be weighed)"
        size = sum(len(c.nodes or ()) for c in classes)
        if settings.deadline.passed() or not fits(len(running), size, left(settings.deadline)):
            return f"{len(running)} running pods on {size} preemptor nodes do not fit the time left"
        return None

    def choose(self, session: Session, unserved: Unserved, preemptors: list[Pod], feasible: FeasibleNodes,
               settings: PreemptionSettings) -> Chosen:
        """The model's victims as a ledger, with its plan of the preemptors and what became of it (no ledger: it
        declined, was cut short or went over a cap)."""
        if (why := self.declines(session, preemptors, feasible, settings)) is not None:
            return Chosen(None, f"skipped: {why}")
        classes = feasible.classes(preemptors)
        running = optional(session, classes)
        on = {p.key: nodes for c in classes for nodes in (frozenset(c.nodes or ()),) for p in c.pods}  # a set per class
        pending = [replace(p, preempts_on=on[p.key]) for p in preemptors]
        outcome = plan_together(session.cluster, session.view, pending, running, settings.policy, left(settings.deadline) / 2,
                                settings.workers, settings.seed, session.moment)
        if outcome is None:
            return Chosen(None, "cut short: its compile reached the time limit")
        ledger = session.fresh_ledger()
        candidates = {c.key: c for cs in session.by_node.values() for c in cs}
        victims = sorted((candidates[k] for k in outcome.victims), key=lambda c: (-c.pod.priority, c.key))
        cap = ledger.cap_reached(victims)
        if cap is not None:
            return Chosen(None, f"its {len(victims)} victims go over the eviction cap of {cap.source}")
        for c in victims:
            ledger.evict(session, c)
        return Chosen(ledger, f"{len(running)} running pods weighed, {len(victims)} left out, {outcome.status}",
                      outcome.plan)


def fits(running: int, preemptor_nodes: int, seconds: float) -> bool:
    """Whether a model of `running` pinned pods and preemptors with `preemptor_nodes` candidate nodes in all (about
    one variable each) can be built within its share of `seconds`."""
    size = running + preemptor_nodes
    return size <= MAX_VARS and size <= VARS_PER_SECOND * MODEL_SHARE * seconds


def optional(session: Session, classes: list[FeasibleClass]) -> list[Candidate]:
    """The running pods the model may leave out: on some preemptor's feasible nodes, lower than it (a PodGroup-mode
    group whole with them). A group stays that holds a pod with device claims, its own or the one DRA made for its
    extended resources (the model does not reallocate devices); extended resources a node advertises itself (a
    device plugin's nvidia.com/gpu) are room like cpu."""
    chosen: dict[str, Candidate] = {}
    seen: set[tuple[int, str]] = set()
    for feasible in classes:  # a class's pods ask alike: its first asks for all
        p = feasible.pods[0]
        for node in feasible.nodes or ():
            if (p.priority, node) in seen:
                continue
            seen.add((p.priority, node))
            for c in session.by_node.get(node, ()):
                if c.key not in chosen and session.may_evict(p, c.pod):
                    chosen.update((m.key, m) for m in session.unit_of(c))
    by_devices = {(c.namespace, c.extended_owner) for c in session.cluster.devices.claims.values() if c.extended_owner}
    held = {c.unit or c.key for c in chosen.values()
            if c.pod.resource_claims or (c.pod.extended and (c.pod.namespace, c.pod.name) in by_devices)}
    return [c for c in chosen.values() if (c.unit or c.key) not in held]


def _overcommitted(session: Session, nodes: set[str]) -> str | None:
    """The first of `nodes` whose running pods ask more than it has (None: none)."""
    view, where = session.view, session.node_order
    return next((n for n in sorted(nodes) if any(view.free(where[n], r) < 0 for r in view.nodes[where[n]].allocatable)),
                None)


def plan_together(cluster: Cluster, view: View, preemptors: list[Pod], running: list[Candidate],
                  policy: PolicyRules | None, time_limit: float, workers: int, seed: int,
                  moment: Moment = Moment()) -> BatchOutcome | None:
    """Plan the preemptors (each marked with its feasible nodes, `Pod.preempts_on`) and the running pods pinned to
    their nodes at once, on `cluster` (its view `view`) without those running pods; None when compile could not check
    every class in `time_limit`."""
    keys = frozenset(r.pod.key for r in running)
    mine = {p.key for p in preemptors}
    pending = [*preemptors, *(pinned(r) for r in running)]
    members = Counter(r.unit for r in running if r.unit is not None)
    namespace = {r.unit: r.pod.namespace for r in running}
    gangs = {UNIT_GANG + u: Gang(UNIT_GANG + u, namespace[u], n, f"PodGroup {u} (disruptionMode: PodGroup)")
             for u, n in members.items()}
    batch = replace(cluster, bound=[b for b in cluster.bound if b.key not in keys], pending=pending,
                    gangs=cluster.gangs | gangs, notes=[], skipped={})
    plan = make_plan(batch, _unpinned(policy, keys), time_limit=time_limit, workers=workers, seed=seed,
                     view=view.moved(removed=[r.pod for r in running]).settled(), moment=moment)
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
                usage_of=lambda: _usage(plan, mine), details=details)


def _usage(plan: Plan, mine: set[str]) -> list[NodeUsage]:
    """Per node after the batch's plan, its running pods kept not counted as placed (they were bound before)."""
    kept = Counter(node for key, node in plan.assignments.items() if key not in mine)
    return [replace(u, placed=u.placed - kept.get(u.node, 0)) for u in plan.usage]


def pinned(r: Candidate) -> Pod:
    """`r`'s pod as a pending pod that may go only on its node (see the module's doc), weighed below every preemptor
    (`ClassInfo.level`: it is marked `running_on`)."""
    term = NodeSelectorTerm(fields=(Requirement("metadata.name", "In", (r.node,)),))
    return replace(r.pod, node_name=None, phase="Pending", node_selector=(),
                   required_node_terms=(term,), preferred_node_terms=(), tolerations=(EVERY_TAINT,),
                   affinity_required=(), affinity_preferred=(), anti_affinity_preferred=(), spread=(),
                   default_spread=None, gang=None if r.unit is None else UNIT_GANG + r.unit, scheduling_group=None,
                   running_on=r.node)


def _unpinned(policy: PolicyRules | None, pinned_keys: frozenset[str]) -> PolicyRules | None:
    """The policies' rules for the preemptors alone: a running pod's were checked when it was scheduled."""
    if policy is None:
        return None
    return lambda pod: () if pod.key in pinned_keys else policy(pod)
