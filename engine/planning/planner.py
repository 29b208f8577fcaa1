"""The one planning entry point: a cluster and the policies' rules in, a plan out.

`dry-run`, `explain`, `policy-scheduler test` and the scheduler loop all call `plan_batch`, so a policy test
case, a dry-run and the cluster decide alike. Planning is a pipeline of three stages over one `PlanningContext`
(`pipeline`): `place` (the plan without preemption, `make_plan`), `reserve` (time: reservations for the first
units in line that cannot start now, and the batch planned again beside them, engine.time.timeline), `preempt` (when
some pod left out may evict lower-priority pods, batch preemption, engine.preempt, within the same time limit).
Isolation (engine.planning.isolation) wraps the whole pipeline. The time a batch is planned at, and what the scheduler loop
carries from cycle to cycle, are one input beside the cluster (`TimeInputs`). The cluster must have been built with
the same rules' gangs (`build_cluster(..., gangs=rules.gangs)`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from ..model.cluster import Cluster, Moment, Quota, Reservation
from ..model.ir import Rules
from ..model.view import View
from ..preempt import PREEMPTION_SHARE, PreemptionSettings, lowest_running, may_preempt_any, say_never
from ..preempt import preempt as preempt_for
from ..preempt.reclaim import may_reclaim
from ..quotas.tenants import Usage
from ..time import timeline
from ..time.timed_plan import FutureRoom, placed
from .compile import Deadline
from .isolation import plan_isolated
from .plan import OnPlaced, Plan, make_plan


@dataclass(frozen=True, slots=True)
class Options:
    """How to plan: the time limit for compiling and solving (and preempting), CP-SAT's workers and seed,
    whether to run the one-at-a-time baseline anyway, and whether running pods may be evicted."""

    time_limit: float = 10.0
    workers: int = 2
    seed: int = 0
    baseline: bool = False
    preemption: bool = True
    preference_limit: float | None = None  # seconds for preferences once every pod is placed (None: all left)


@dataclass(frozen=True, slots=True)
class TimeInputs:
    """When the batch is planned, and what the scheduler loop carries from one cycle into the next: handed to the
    planner beside the cluster (dry-run: a now alone; the loop: its carried reservations and last estimates too)."""

    now: float | None = None  # the plan's now (seconds since the epoch; None: no time in the plan)
    # the last cycle's reservations that still hold: the batch is planned beside them, and they are the prior
    # reservations time is worked out against (a promise kept while it holds)
    reservations: tuple[Reservation, ...] = ()
    # whether they are carried as they stand (the scheduler loop): the batch is planned once beside them, its
    # placements are final, and the plan's reservations are the next cycle's; else (dry-run, simulate) reservations
    # are worked out first for every unit in line, then the batch is planned again beside them (backfill)
    carried: bool = False
    # estimates from a recent sweep (the loop's, engine.loop.plan_stage): the waiting pods they name are told these
    # instead of sweeping time again (a sweep is a dozen plans); None: sweep
    estimated: Mapping[str, timeline.Estimate] | None = None
    # whether a carried reservation is asked if capacity could take its unit any earlier (pods that ended before
    # their bounds): the loop asks every EARLIER_EVERY seconds, not every cycle (a look at every running pod's end)
    ask_earlier: bool = True

    def moment(self) -> Moment:
        """The moment the batch is first planned at: now, beside the last cycle's reservations."""
        return Moment(self.now, self.reservations)


@dataclass(frozen=True, slots=True)
class PlanningContext:
    """One batch's planning as every stage reads it: the cluster (the rules' quotas after its own, the policies'
    runtime estimates on its pods), the rules and options, the time inputs, what the caller keeps of the bound pods
    (`view`, `lowest`, `usage`: engine.loop.cache; worked out here otherwise), and when the attempt started (the time
    limit, preemption's deadline included, counts from it)."""

    cluster: Cluster
    rules: Rules
    options: Options
    time_inputs: TimeInputs
    view: View | None  # the bound pods' view (made here when time is in the plan: every plan with time shares it)
    lowest: int | None  # the lowest priority of a running pod (None: nothing runs)
    usage: Usage | None  # what the bound pods use of the quotas (None: worked out by compile)
    progress: Callable[[str], None] | None
    on_placed: OnPlaced | None  # given the first placements as soon as they are final
    started: float  # time.perf_counter() when the attempt started
    timed: bool = False  # whether time is in the plan (engine.time.timeline.timed)
    # whether some pod may evict running pods (preemption or quota reclaim): the preempt stage's share of the time
    # limit is then kept from the plans before it
    hopeful: bool = False

    @classmethod
    def of(cls, cluster: Cluster, rules: Rules, options: Options, time_inputs: TimeInputs,
           progress: Callable[[str], None] | None = None, view: View | None = None, lowest: int | None = None,
           usage: Usage | None = None, on_placed: OnPlaced | None = None) -> PlanningContext:
        """The context of `cluster` as the caller hands it (`view`, `lowest` and `usage` describing it, or None),
        started now: working out what the stages read counts against the time limit."""
        started = time.perf_counter()
        cluster = timeline.with_estimates(with_quotas(cluster, rules.quotas), time_inputs.now, rules.runtimes)
        return cls(cluster, rules, options, time_inputs, view, lowest, usage, progress, on_placed, started).settled()

    @property
    def time_limit(self) -> float:
        return self.options.time_limit

    def narrowed(self, cluster: Cluster, time_limit: float, on_placed: OnPlaced | None) -> PlanningContext:
        """This context for an attempt on `cluster` (this one's: the first attempt, started with the context; or
        engine.planning.isolation's, starting now: some pods left out, some handed on and bound) within `time_limit`; what the
        caller kept of the bound pods is worked out again if they changed."""
        options = replace(self.options, time_limit=time_limit)
        if cluster is self.cluster:
            return replace(self, options=options, on_placed=on_placed)
        attempt = replace(self, options=options, on_placed=on_placed, started=time.perf_counter())
        if cluster.bound is self.cluster.bound:
            return replace(attempt, cluster=cluster).settled()
        return replace(attempt, cluster=cluster, view=None, lowest=None, usage=None).settled()

    def settled(self) -> PlanningContext:
        """With what the stages read of the cluster worked out: the lowest running priority, whether time is in the
        plan (then one view of the bound pods for every plan with time makes) and whether preemption may run."""
        cluster, now = self.cluster, self.time_inputs.now
        lowest = self.lowest if self.lowest is not None else lowest_running(cluster)
        hopeful = self.options.preemption and (may_preempt_any(cluster, lowest) or may_reclaim(cluster, self.usage))
        timed = timeline.timed(cluster, now)
        view = View.of(cluster.nodes, cluster.bound) if timed and self.view is None else self.view
        return replace(self, lowest=lowest, hopeful=hopeful, timed=timed, view=view)

    def plan_now(self, moment: Moment, on_placed: OnPlaced | None) -> Plan:
        """The batch planned at `moment` (compile and solve, engine.planning.plan.make_plan) in the placing stages' share of
        the time limit."""
        options = self.options
        share = 1 - PREEMPTION_SHARE if self.hopeful else 1.0
        return make_plan(self.cluster, self.rules.placement, time_limit=options.time_limit * share,
                         workers=options.workers, seed=options.seed, progress=self.progress, baseline=options.baseline,
                         view=self.view, preference_limit=options.preference_limit, usage=self.usage,
                         on_placed=on_placed, moment=moment)


def plan_batch(cluster: Cluster, rules: Rules = Rules(), options: Options = Options(),
               progress: Callable[[str], None] | None = None, view: View | None = None,
               lowest: int | None = None, usage: Usage | None = None, on_placed: OnPlaced | None = None,
               time_inputs: TimeInputs = TimeInputs()) -> Plan:
    """The plan for the cluster's pending pods at `time_inputs` (none: no time in the plan): placements, reasons
    for the rest, evictions it needs. `view` is the view of the bound pods, `lowest` the lowest priority of a
    running pod and `usage` what they use of the quotas (the cluster's, then the rules') when the caller keeps them
    (the scheduler loop's cache; None: worked out here); they must describe the cluster. Should planning raise, only
    the pods it raises for are refused (engine.planning.isolation; `Plan.details.failures` holds the errors for the caller's
    log). `on_placed` is given the first placements as soon as they are final, before the rest is explained and
    preemption runs (the loop binds them meanwhile); the plan returned lists them too."""
    context = PlanningContext.of(cluster, rules, options, time_inputs, progress, view, lowest, usage, on_placed)
    return plan_isolated(context, pipeline)


def pipeline(context: PlanningContext) -> Plan:
    """Place, then reserve in time, then preempt: each stage reads the context and the plan so far."""
    plan = place(context)
    plan = reserve(context, plan)
    return preempt(context, plan)


def place(context: PlanningContext) -> Plan:
    """The batch planned now, beside the last cycle's reservations. With time in a plan not carried, placements
    are final only once the reservations are known: none are handed on yet."""
    final = not context.timed or context.time_inputs.carried
    return context.plan_now(context.time_inputs.moment(), context.on_placed if final else None)


def reserve(context: PlanningContext, plan: Plan) -> Plan:
    """Time in the plan (engine.time.timeline): the first units in line that cannot start now get reservations at their
    shadow times, and the batch is planned again beside them, pods running past a reservation's start kept out of
    its room (backfill). The plan says where and when the reserved pods start, and when the other waiting pods are
    expected to (engine.time.timeline.estimate). Without time, the plan as it is."""
    if not context.timed:
        return plan
    cluster, inputs = context.cluster, context.time_inputs
    assert inputs.now is not None and context.view is not None
    now, batch = inputs.now, {p.key for p in cluster.pending}
    # planned beside the last cycle's (carried); theirs for units not in the batch are the next cycle's
    kept = tuple(r for r in inputs.reservations if not {key for key, _ in r.pods} & batch) if inputs.carried else ()
    if not plan.unschedulable:  # no one waits: nothing to reserve or estimate
        return replace(plan, reservations=kept)
    rules, options = context.rules, context.options
    room = FutureRoom.of(cluster, now, context.view, rules.placement, options.time_limit * 0.1, options.seed,
                         rules.runtimes)
    if inputs.carried:  # the plan's placements are final: later reservations are made beside them
        prior = tuple(r for r in inputs.reservations if r not in kept)
        begun = placed(plan, cluster)
        pods = {p.key: p for p in cluster.pending}
        held = timeline.reserve(cluster, plan.unschedulable, now, room.with_started(
            [timeline.Begun(pods[k], n, now, begun.claims.get(k, ())) for k, n in begun.where.items()]),
            rules.reserving, kept, plan.assignments, prior, inputs.ask_earlier)
        backfilled = plan
    else:
        # every pod in line, those placed now too: one the reservations then displace keeps its place in line
        held = timeline.reserve(cluster, batch, now, room, rules.reserving, (), plan.assignments, inputs.reservations)
        backfilled = context.plan_now(Moment(now, held), context.on_placed) if held else plan
        held = tuple(r for r in held if not all(key in backfilled.assignments for key, _ in r.pods))  # started now
    return _told_when(context, backfilled, held, room)


def _told_when(context: PlanningContext, plan: Plan, held: tuple[Reservation, ...], room: FutureRoom) -> Plan:
    """`plan` with its reservations `held`, and each waiting pod told when it is expected to start: where it is
    reserved, or its estimate (a sweep of time, or the loop's last)."""
    cluster, inputs, batch = context.cluster, context.time_inputs, {p.key for p in context.cluster.pending}
    assert inputs.now is not None
    waiting = {key: list(why) for key, why in plan.unschedulable.items()}
    for r in held:
        for key, node in r.pods:
            if key in batch:
                waiting.setdefault(key, []).append(
                    f"reserved: expected to start on {node} at {timeline.rfc3339(r.start)}, when enough running "
                    "pods there have ended (their runtime bounds)")
    if inputs.estimated is None:
        errors, before_any_node = _waits_for_objects(plan)
        estimates = timeline.estimate(cluster, set(waiting) - errors, inputs.now, room, held, placed(plan, cluster),
                                      waiting_for=dict.fromkeys(before_any_node, OBJECTS))
    else:
        reserved = {key for r in held for key, _ in r.pods}
        estimates = {k: e for k, e in inputs.estimated.items() if k in waiting and k not in reserved}
    for key, found in estimates.items():
        waiting[key].append(found.why)
    return replace(plan, reservations=held, estimates=estimates, unschedulable=waiting)


def preempt(context: PlanningContext, plan: Plan) -> Plan:
    """Pods that will not preempt told so, then batch preemption (engine.preempt) for the pods left out that may
    evict lower-priority ones, by the deadline the time limit sets from the attempt's start."""
    cluster, options = context.cluster, context.options
    if options.preemption:
        plan = say_never(cluster, plan, context.lowest)
    if not context.hopeful:
        return plan
    settings = PreemptionSettings(context.rules.placement, Deadline(context.started + options.time_limit),
                                  options.workers, options.seed, moment=context.time_inputs.moment())
    return preempt_for(cluster, plan, context.rules.victims, settings, context.started, context.progress)


def with_quotas(cluster: Cluster, quotas: tuple[Quota, ...]) -> Cluster:
    """The cluster with the policies' quotas after its own (a pod's tenant is the first covering it)."""
    return replace(cluster, quotas=[*cluster.quotas, *quotas]) if quotas else cluster


OBJECTS = "not estimated: it waits for the objects it needs (above), not for running pods to end"


def _waits_for_objects(plan: Plan) -> tuple[frozenset[str], set[str]]:
    """The pods left out for an error about an object they need (told the error alone), and those left out before
    any node was looked at (upstream's PreFilter): no time is estimated for either (an estimate would tell them they
    do not fit once running pods have ended)."""
    errors = plan.details.errors
    return errors, {key for key, why in plan.details.explanations.items() if why.before_any_node() and key not in errors}
