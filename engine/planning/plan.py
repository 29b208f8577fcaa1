"""The plan: which pod goes where, why the rest could not go anywhere, and how the solve went.

This is the end of the core pipeline (load → compile → solve → plan); printing and binding read it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import cached_property
from typing import Any

from ..kinds import RESERVES, GangSpan, gang_spans
from ..model.cluster import Cluster, Moment, Pod, Reservation
from ..model.reasons import Code, Diagnosis, Ref
from ..model.view import View
from ..quotas.tenants import Usage
from ..solve import solve
from ..solve.problem import Solution
from ..time.timeline import Estimate, Now, rfc3339
from .compile import Compiled, Deadline, PolicyRules, compile_cluster
from .diagnose import diagnose
from .explain import Alike, Explanation, explain_unplaced, late_explanation, replay

# how long past a plan's time limit its left-out classes are still explained node by node: half the limit, at
# least a second (the rest are explained by the static filters alone: `explain.late_explanation`)
EXPLAIN_GRACE, EXPLAIN_GRACE_MIN = 0.5, 1.0


@dataclass(slots=True)
class NodeUsage:
    node: str
    pods: int
    requested: dict[str, int]  # after the plan: bound + placed
    allocatable: dict[str, int]
    placed: int
    # rows counted beside the allocatable (devices, volumes): free on the node before the plan, None for no limit
    # (devices or volumes several nodes reach); `requested` has what the plan's pods take of them
    counted: dict[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Eviction:
    """A running pod evicted so that a higher-priority pod fits on its node."""

    pod: str
    node: str
    priority: int
    over_budget: tuple[str, ...] = ()  # PodDisruptionBudgets this eviction goes over (namespace/name)
    within_budget: tuple[str, ...] = ()  # budgets covering the pod that still allowed it
    group: str | None = None  # the PodGroup (disruptionMode: PodGroup) evicted whole with it
    quota: str | None = None  # reclaim: the quota whose borrowed room (use beyond its min) the pod ran on
    why: str | None = None  # what its staying would leave the preemptor: the rejecting kind and its reason

    def to_dict(self) -> dict[str, Any]:
        if self.over_budget:
            budget = "violates " + ", ".join(f"PodDisruptionBudget {b}" for b in self.over_budget)
        elif self.within_budget:
            budget = "within " + ", ".join(f"PodDisruptionBudget {b}" for b in self.within_budget)
        else:
            budget = "no PodDisruptionBudget covers it"
        out: dict[str, Any] = {"pod": self.pod, "priority": self.priority, "budget": budget}
        if self.group is not None:
            out["podGroup"] = self.group
        if self.quota is not None:
            out["reclaimedFrom"] = self.quota
        if self.why is not None:
            out["why"] = self.why
        return out


@dataclass(slots=True)
class Preemption:
    """A pod placed only after evictions: its node, and the victims there it outranks (or, reclaiming its
    quota's min, that other tenants run beyond theirs)."""

    node: str
    priority: int
    victims: list[Eviction] = field(default_factory=list)
    reclaim: str | None = None  # the quota whose min it reclaims from other tenants' borrowed room

    def to_dict(self) -> dict[str, Any]:
        out = {"node": self.node, "priority": self.priority, "victims": [v.to_dict() for v in self.victims]}
        return out if self.reclaim is None else {**out, "reclaims": self.reclaim}


@dataclass(frozen=True, slots=True)
class Failure:
    """Pods refused because planning them raised: the error in one line, and its traceback for the log."""

    pods: tuple[str, ...]
    error: str
    trace: str

    @property
    def reason(self) -> str:
        return (f"the scheduler failed on this pod ({self.error}); this is a bug in policy-scheduler, the pod is "
                "retried after a backoff")


def _json(record: Any) -> dict[str, Any]:
    """A stats record as the dry-run prints it: its fields in order, those left None absent, records within too."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if value is not None:
            out[f.name] = (value.to_dict() if hasattr(value, "to_dict") else _json(value) if is_dataclass(value)
                           else value)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Timings:
    """Seconds per phase of making the plan: reading the snapshot (the CLI's, when it is known), compiling, the
    starting plans, building and solving the CP-SAT model."""

    load: float | None = None
    compile: float
    start: float
    model: float
    solve: float

    def to_dict(self) -> dict[str, float]:
        return _json(self)


@dataclass(frozen=True, slots=True)
class Objective:
    """What the solve achieved: the weighted count of pods placed, and the preferences' points."""

    placed: int
    preferences: int


@dataclass(frozen=True, slots=True)
class PreemptionStats:
    """What batch preemption did: preemptors placed, victims, budgets broken, its seconds, the strategy that chose
    the victims (engine.preempt: "batch model", "per-node search", "quota reclaim"; "none" when every one declined)
    and what became of it and of those before it, in words."""

    preemptors: int
    victims: int
    budget_violations: int
    seconds: float
    strategy: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Stats:
    """How the plan went: the dry-run's `stats` (DESIGN.md §6). A field left None is absent from the JSON (a plan
    of a batch whose planning failed has only `pods`, `status` and `failed`); `to_dict` keeps the fields' order."""

    pods: int | None = None
    nodes: int | None = None
    placed: int | None = None
    unschedulable: int | None = None
    skipped: int | None = None
    classes: int | None = None
    status: str | None = None
    strategy: str | None = None
    gap: float | None = None
    objective: Objective | None = None
    solver_seconds: float | None = None
    seconds: float | None = None
    phases: Timings | None = None
    sequential_placed: int | None = None  # pods the one-at-a-time baseline placed, when it ran
    preemption: PreemptionStats | None = None
    failed: int | None = None  # pods refused because planning them raised (engine.planning.isolation)
    now: Now | None = None  # the plan's now and where it came from, when the caller knows it (the dry-run's)

    def to_dict(self) -> dict[str, Any]:
        return _json(self)


@dataclass(frozen=True)
class PlanDetails:
    """What the plan carries beside the dry-run's contract, for the binder, the loop's reports, preemption and
    `explain`: each pending pod's gang, the facts behind each unschedulable pod, what Reserve recorded, the batch
    as compiled, the pods refused for an error (upstream's SchedulerError) rather than for room, and the failures
    behind them (engine.planning.isolation)."""

    gangs: dict[str, str] = field(default_factory=dict)  # pending pod -> its gang's key (model.Gang), for the binder
    explanations: dict[str, Explanation] = field(default_factory=dict, repr=False)  # unschedulable: the facts
    reserved: dict[str, dict[str, object]] = field(default_factory=dict, repr=False)  # pod -> kind -> what it holds
    compiled: Compiled | None = field(default=None, repr=False, compare=False)  # the batch it was made from
    errors: frozenset[str] = frozenset()  # unschedulable for an error, not for room
    failures: tuple[Failure, ...] = ()  # planning raised for these pods (engine.planning.isolation)
    # placed by the solve, then taken out by Reserve (their devices could not be allocated after all): the next
    # cycle may place them on what the others leave
    dropped: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Plan:
    """A batch's plan. `to_dict` is the dry-run's JSON contract and reads only the fields before `notes`; the
    notes go to stderr, the per-node usage (`usage`) to the table, the rest (`details`) to the loop."""

    assignments: dict[str, str]
    unschedulable: dict[str, list[str]]
    stats: Stats
    skipped: dict[str, str] = field(default_factory=dict)  # not pending at all (gated, terminating, ...): reason
    preemptions: dict[str, Preemption] = field(default_factory=dict)  # preemptor -> its node and victims
    reservations: tuple[Reservation, ...] = ()  # room held for pods that start later (engine.time.timeline)
    estimates: dict[str, Estimate] = field(default_factory=dict)  # waiting pod -> when it is expected to start
    topology: dict[str, GangSpan] = field(default_factory=dict)  # started gang with levels -> the domains it spans
    # waiting pod -> its reason codes (engine.model.reasons): every unschedulable pod's, and each preemptor's
    # (PreemptionPending); an entry for a pod no longer waiting is not read (`waiting_reasons`)
    reasons: dict[str, Diagnosis] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # per node after the plan, made when first read (`usage`: a cycle of the loop never reads it, 5,000 dicts)
    usage_of: Callable[[], list[NodeUsage]] = field(default=list, repr=False, compare=False)
    details: PlanDetails = field(default_factory=PlanDetails)

    @cached_property
    def usage(self) -> list[NodeUsage]:
        return self.usage_of()

    @property
    def evictions(self) -> list[Eviction]:
        return [v for p in self.preemptions.values() for v in p.victims]

    def waiting_reasons(self) -> dict[str, Diagnosis]:
        """Each waiting pod's reason codes: the unschedulable ones' and the skipped ones' that wait for an object, then
        the preemptors' (waiting for their victims to go), by pod key."""
        out = {key: self.reasons[key] for key in sorted({*self.unschedulable, *self.skipped}) if key in self.reasons}
        for key, preemption in sorted(self.preemptions.items()):
            victims = tuple(Ref.namespaced("Pod", v.pod) for v in preemption.victims)
            out[key] = Diagnosis.one(Code.PREEMPTION_PENDING, (Ref("Node", preemption.node), *victims))
        return out

    def group_reasons(self) -> dict[str, Diagnosis]:
        """Each gang with a waiting member: the reason most of its waiting members share (the first member's, by key,
        of that code), by gang key."""
        members: dict[str, list[Diagnosis]] = {}
        for key, diagnosis in self.waiting_reasons().items():
            if (gang := self.details.gangs.get(key)) is not None:
                members.setdefault(gang, []).append(diagnosis)
        out = {}
        for gang, found in sorted(members.items()):
            codes = [d.code for d in found]
            out[gang] = next(d for d in found if d.code == max(codes, key=codes.count))
        return out

    def to_dict(self) -> dict[str, Any]:
        """The dry-run JSON contract (DESIGN.md §6)."""
        reasons, groups = self.waiting_reasons(), self.group_reasons()
        return {
            "assignments": dict(sorted(self.assignments.items())),
            "unschedulable": dict(sorted(self.unschedulable.items())),
            "skipped": dict(sorted(self.skipped.items())),
            "preemptions": {k: v.to_dict() for k, v in sorted(self.preemptions.items())},
            **({"reservations": {key: {"node": node, "start": rfc3339(r.start), "for": r.holder}
                                 for r in self.reservations for key, node in r.pods}} if self.reservations else {}),
            **({"estimates": {key: {"start": rfc3339(e.start)} if e.start is not None else {"unknown": e.why}
                              for key, e in sorted(self.estimates.items())}} if self.estimates else {}),
            **({"topology": {k: v.to_dict() for k, v in sorted(self.topology.items())}} if self.topology else {}),
            **({"reasons": {key: d.to_dict() for key, d in reasons.items()}} if reasons else {}),
            **({"groupReasons": {key: d.to_dict() for key, d in groups.items()}} if groups else {}),
            "stats": self.stats.to_dict(),
        }


OnPlaced = Callable[[Plan], None]  # given a batch's placements (`placed_plan`) as soon as they are final


def make_plan(
    cluster: Cluster,
    policy: PolicyRules | None = None,
    time_limit: float = 10.0,
    workers: int = 2,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    baseline: bool = False,
    view: View | None = None,
    preference_limit: float | None = None,
    usage: Usage | None = None,
    on_placed: OnPlaced | None = None,
    moment: Moment = Moment(),
) -> Plan:
    """Compile and solve within `time_limit` seconds in all (compiling counts against it), at `moment` (the plan's
    now and the reservations it is planned beside; none: no time). `on_placed` is given
    the placements (`placed_plan`) before the pods left out are explained. The cyclic collector is the process's
    owner's to pause, not planning's (engine.cli for a one-shot command, engine.loop.runtime per cycle)."""
    return _make_plan(cluster, policy, time_limit, workers, seed, progress, baseline, view, preference_limit, usage,
                      on_placed, moment)


def _make_plan(cluster: Cluster, policy: PolicyRules | None, time_limit: float, workers: int, seed: int,
               progress: Callable[[str], None] | None, baseline: bool, view: View | None,
               preference_limit: float | None, usage: Usage | None, on_placed: OnPlaced | None,
               moment: Moment) -> Plan:
    start = time.perf_counter()
    compiled = compile_cluster(cluster, policy, Deadline.after(time_limit), view, usage, moment)
    compile_seconds = time.perf_counter() - start
    if progress:
        progress(
            f"compiled {len(cluster.pending)} pending pods into {len(compiled.classes)} classes "
            f"over {len(cluster.nodes)} nodes in {compile_seconds:.2f}s"
        )
    solution = solve(compiled.problem, time_limit=max(0.0, time_limit - compile_seconds), workers=workers,
                     preference_limit=preference_limit,
                     seed=seed, progress=progress, baseline=baseline)
    solution, dropped, reserved, dropped_by = reserve(compiled, solution)
    if on_placed is not None:
        on_placed(placed_plan(compiled, solution, dropped, reserved))
    explain_by = Deadline(start + time_limit + max(EXPLAIN_GRACE_MIN, EXPLAIN_GRACE * time_limit))
    plan = plan_from_solution(compiled, solution, time.perf_counter() - start, compile_seconds, dropped, explain_by)
    reasons = {**plan.reasons, **{key: Diagnosis.one(code) for key, code in dropped_by.items()}}
    return replace(plan, reasons=reasons, details=replace(plan.details, reserved=reserved, dropped=frozenset(dropped)))


def _targets(solution: Solution) -> dict[int, list[int]]:
    """Per class, the node of each placed pod, in node order: a class's pods take them in queue order."""
    targets: dict[int, list[int]] = {}
    for (c, n), k in sorted(solution.placed.items()):
        targets.setdefault(c, []).extend([n] * k)
    return targets


def _placements(compiled: Compiled, solution: Solution) -> list[tuple[Pod, int, int]]:
    """(pod, class, node index) for every placed pod, paired as `plan_from_solution` pairs them."""
    targets = _targets(solution)
    return [(pod, c, n) for c, info in enumerate(compiled.classes) for pod, n in zip(info.pods, targets.get(c, []))]


def reserve(compiled: Compiled, solution: Solution
            ) -> tuple[Solution, dict[str, str], dict[str, dict[str, object]], dict[str, Code]]:
    """Every kind's Reserve over the placements, in plan order (kinds.base.Reserve). A pod a kind cannot
    serve after all is taken out of the solution, with the other placed members of its gang (all or nothing); each
    with why and the code of the kind that could not serve it (or its gang's member)."""
    reserved: dict[str, dict[str, object]] = {}
    dropped: dict[str, str] = {}
    codes: dict[str, Code] = {}
    reserving = [kind for kind in RESERVES if kind.reserving(compiled)]
    if not reserving:
        return solution, dropped, reserved, codes
    placements = _placements(compiled, solution)
    nodes = compiled.cluster.nodes
    for kind in reserving:
        said = kind.reserve(compiled, [(p, nodes[n]) for p, _, n in placements if p.key not in dropped], reserved)
        dropped.update(said)
        codes.update(dict.fromkeys(said, kind.code))
    if not dropped:
        return solution, dropped, reserved, codes
    gangs = {p.gang: codes[p.key] for p, _, _ in placements if p.key in dropped and p.gang is not None}
    for pod, _, _ in placements:
        if pod.gang in gangs and pod.key not in dropped:
            dropped[pod.key] = f"gang {pod.gang} could not be completed: a member could not be served after all"
            codes[pod.key] = gangs[pod.gang]
    placed = dict(solution.placed)
    for pod, c, n in placements:
        if pod.key in dropped:
            placed[(c, n)] -= 1
            reserved.pop(pod.key, None)
    kept = {key: k for key, k in placed.items() if k > 0}
    return replace(solution, placed=kept, placed_value=compiled.problem.value(kept)), dropped, reserved, codes


def placed_plan(compiled: Compiled, solution: Solution, dropped: dict[str, str],
                reserved: dict[str, dict[str, object]]) -> Plan:
    """The placements of a solution after Reserve, without a word yet on the pods left out. They are final:
    explaining the rest and preemption never move a placed pod (preemption plans around them as bound), so the
    scheduler loop binds them while the rest is explained (issue 30: an overloaded batch's first bind waited for
    seconds of explanations)."""
    assignments = _assignments(compiled, _targets(solution), dropped)
    stats = Stats(pods=len(compiled.cluster.pending), placed=len(assignments), status=solution.status.value)
    return Plan(assignments, {}, stats, details=PlanDetails(_gangs(compiled), {}, compiled=compiled, reserved=reserved))


def _assignments(compiled: Compiled, placed_on: dict[int, list[int]], dropped: dict[str, str]) -> dict[str, str]:
    """Pod key -> node name of every placed pod but those Reserve dropped (a class's pods take its nodes in
    queue order)."""
    nodes = compiled.cluster.nodes
    out: dict[str, str] = {}
    for c, info in enumerate(compiled.classes):
        pods = [p for p in info.pods if p.key not in dropped]
        for pod, n in zip(pods, placed_on.get(c, [])):
            out[pod.key] = nodes[n].name
    return out


def _gangs(compiled: Compiled) -> dict[str, str]:
    return {pod.key: pod.gang for info in compiled.classes for pod in info.pods if pod.gang is not None}


def plan_from_solution(compiled: Compiled, solution: Solution, seconds: float, compile_seconds: float = 0.0,
                       dropped: dict[str, str] | None = None, explain_by: Deadline | None = None) -> Plan:
    """`dropped`: pods Reserve took out of the solution, with why (the rest pair with the solution's nodes as
    before, so what Reserve recorded per pod still holds). Classes left out are explained node by node until
    `explain_by`, then only by the static filters (`explain.late_explanation`)."""
    nodes = compiled.cluster.nodes
    dropped = dropped or {}
    placed_on = _targets(solution)
    assignments = _assignments(compiled, placed_on, dropped)
    unschedulable: dict[str, list[str]] = {key: [why] for key, why in dropped.items()}
    explanations: dict[str, Explanation] = {}
    reasons: dict[str, Diagnosis] = {}
    errors: set[str] = set()
    state = None  # the plan replayed, built once if some pod needs explaining
    alike = Alike(solution.class_counts())  # classes of one shape are explained node by node once
    for c, info in enumerate(compiled.classes):
        pods = [p for p in info.pods if p.key not in dropped]
        left = pods[len(placed_on.get(c, [])):]
        if not left or all(p.running_on for p in left):  # preemption's running pods, pinned: left out is evicted
            continue
        if explain_by is not None and explain_by.passed():
            explanation = late_explanation(compiled, c)
        else:
            state = state or replay(compiled, solution)
            explanation = explain_unplaced(compiled, solution, c, state, alike)
        lines, diagnosis = explanation.lines(), diagnose(compiled, c, explanation)
        for pod in left:
            unschedulable[pod.key] = lines
            explanations[pod.key] = explanation
            reasons[pod.key] = diagnosis
            if info.rejected.erred:
                errors.add(pod.key)
    stats = Stats(
        pods=len(compiled.cluster.pending), nodes=len(nodes), placed=len(assignments), unschedulable=len(unschedulable),
        skipped=len(compiled.cluster.skipped), classes=len(compiled.classes), status=solution.status.value,
        strategy=solution.strategy, gap=round(solution.gap, 6),
        objective=Objective(solution.placed_value, solution.soft_value), solver_seconds=round(solution.seconds, 3),
        seconds=round(seconds, 3),
        phases=Timings(compile=round(compile_seconds, 3), start=round(solution.phases.start, 3),
                       model=round(solution.phases.model, 3), solve=round(solution.phases.solve, 3)),
        sequential_placed=solution.sequential_placed)
    skipped = compiled.cluster.skipped_codes
    reasons.update((key, Diagnosis.one(code)) for key, code in skipped.items() if key in compiled.cluster.skipped)
    return Plan(assignments, unschedulable, stats, dict(compiled.cluster.skipped), reasons=reasons,
                topology=gang_spans(compiled, solution) if compiled.gangs else {},
                notes=compiled.cluster.notes + compiled.notes + solution.notes,
                usage_of=lambda: _usage(compiled, solution),
                details=PlanDetails(_gangs(compiled), explanations, compiled=compiled, errors=frozenset(errors)))


def _usage(compiled: Compiled, solution: Solution) -> list[NodeUsage]:
    out = []
    extra: dict[int, dict[str, int]] = {}
    placed: dict[int, int] = {}
    resources = compiled.problem.resources[:len(compiled.problem.resources) - compiled.problem.guards]
    for (c, n), k in solution.placed.items():
        demand = compiled.problem.classes[c].demand
        row = extra.setdefault(n, {})
        for r, d in zip(resources, demand):
            row[r] = row.get(r, 0) + d * k
        placed[n] = placed.get(n, 0) + k
    rows = [(r, resources.index(r), unlimited) for r, unlimited in compiled.problem.counted.items()]
    for i, node in enumerate(compiled.cluster.nodes):
        used = compiled.view.used_on(i)
        for r, v in extra.get(i, {}).items():
            used[r] = used.get(r, 0) + v
        counted = {r: None if unlimited[i] else compiled.problem.free[i][k] for r, k, unlimited in rows}
        out.append(NodeUsage(node.name, used.get("pods", 0), used, node.allocatable, placed.get(i, 0), counted))
    return out
