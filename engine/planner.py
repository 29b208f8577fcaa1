"""The one planning entry point: a cluster and the policies' rules in, a plan out.

`dry-run`, `explain`, `policy-scheduler test` and the scheduler loop all call `plan_batch`, so a policy test
case, a dry-run and the cluster decide alike: the plan without preemption first (`make_plan`), then, when
some pod it left out may evict lower-priority pods, batch preemption (`engine.preempt`) within the same time
limit. The cluster must have been built with the same rules' gangs (`build_cluster(..., gangs=rules.gangs)`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from . import timeline
from .compile import Deadline
from .ir import Rules
from .isolation import plan_isolated
from .model import Cluster, Quota
from .plan import OnPlaced, Plan, make_plan
from .preempt import PREEMPTION_SHARE, PreemptionSettings, lowest_running, may_preempt_any, preempt, say_never
from .reclaim import may_reclaim
from .tenants import Usage
from .timed_plan import Later, placed
from .view import View


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
    # the cluster's reservations are the last cycle's, carried (the scheduler loop): the batch is planned once beside
    # them, and the plan's are the next cycle's; else (dry-run) they are worked out first, then the batch planned
    carried: bool = False
    # estimates from a recent sweep (the loop's, engine.loop.plan_stage): the waiting pods they name are told these
    # instead of sweeping time again (a sweep is a dozen plans); None: sweep
    estimated: Mapping[str, timeline.Estimate] | None = None
    # whether a carried reservation is asked if capacity could take its unit any earlier (pods that ended before
    # their bounds): the loop asks every EARLIER_EVERY seconds, not every cycle (a look at every running pod's end)
    earlier: bool = True


def with_quotas(cluster: Cluster, quotas: tuple[Quota, ...]) -> Cluster:
    """The cluster with the policies' quotas after its own (a pod's tenant is the first covering it)."""
    return replace(cluster, quotas=[*cluster.quotas, *quotas]) if quotas else cluster


def with_reservations(cluster: Cluster, plan: Plan, rules: Rules, options: Options,
                      now_plan: Callable[[Cluster, OnPlaced | None], Plan], on_placed: OnPlaced | None,
                      view: View | None = None) -> Plan:
    """Time in the plan (engine.timeline): the first units in line that cannot start now get reservations at their
    shadow times, and the batch is planned again beside them, pods running past a reservation's start kept out of
    its room (backfill). The plan says where and when the reserved pods start, and when the other waiting pods are
    expected to (engine.timeline.estimate)."""
    assert cluster.now is not None
    now = cluster.now
    batch = {p.key for p in cluster.pending}
    # planned beside the last cycle's (carried); theirs for units not in the batch are the next cycle's
    kept = tuple(r for r in cluster.reservations if not {key for key, _ in r.pods} & batch) if options.carried else ()
    if not plan.unschedulable:  # no one waits: nothing to reserve or estimate
        return replace(plan, reservations=kept)
    base = view if view is not None else View.of(cluster.nodes, cluster.bound)
    room = Later.of(cluster, base, rules.placement, options.time_limit * 0.1, options.seed, rules.runtimes)
    if options.carried:  # the plan's placements are final: later reservations are made beside them
        prior = tuple(r for r in cluster.reservations if r not in kept)
        begun = placed(plan, cluster)
        pods = {p.key: p for p in cluster.pending}
        held = timeline.reserve(cluster, plan.unschedulable, now, room.with_started(
            [timeline.Begun(pods[k], n, now, begun.claims.get(k, ())) for k, n in begun.where.items()]),
            rules.reserving, kept, plan.assignments, prior, options.earlier)
        backfilled = plan
    else:
        # every pod in line, those placed now too: one the reservations then displace keeps its place in line
        held = timeline.reserve(cluster, batch, now, room, rules.reserving, (), plan.assignments, cluster.reservations)
        backfilled = now_plan(replace(cluster, reservations=held), on_placed) if held else plan
        held = tuple(r for r in held if not all(key in backfilled.assignments for key, _ in r.pods))  # started now
    waiting = {key: list(why) for key, why in backfilled.unschedulable.items()}
    for r in held:
        for key, node in r.pods:
            if key in batch:
                waiting.setdefault(key, []).append(
                    f"reserved: expected to start on {node} at {timeline.rfc3339(r.start)}, when enough running "
                    "pods there have ended (their runtime bounds)")
    if options.estimated is None:
        errors, before_any_node = _waits_for_objects(backfilled)
        estimates = timeline.estimate(cluster, set(waiting) - errors, now, room, held, placed(backfilled, cluster),
                                      waiting_for=dict.fromkeys(before_any_node, OBJECTS))
    else:
        reserved = {key for r in held for key, _ in r.pods}
        estimates = {k: e for k, e in options.estimated.items() if k in waiting and k not in reserved}
    for key, found in estimates.items():
        waiting[key].append(found.why)
    return replace(backfilled, reservations=held, estimates=estimates, unschedulable=waiting)


OBJECTS = "not estimated: it waits for the objects it needs (above), not for running pods to end"


def _waits_for_objects(plan: Plan) -> tuple[frozenset[str], set[str]]:
    """The pods left out for an error about an object they need (told the error alone), and those left out before
    any node was looked at (upstream's PreFilter): no time is estimated for either (an estimate would tell them they
    do not fit once running pods have ended)."""
    errors = plan.details.errors
    return errors, {key for key, why in plan.details.explanations.items() if why.before_any_node() and key not in errors}


def plan_batch(cluster: Cluster, rules: Rules = Rules(), options: Options = Options(),
               progress: Callable[[str], None] | None = None, view: View | None = None,
               lowest: int | None = None, usage: Usage | None = None, on_placed: OnPlaced | None = None) -> Plan:
    """The plan for the cluster's pending pods: placements, reasons for the rest, evictions it needs. `view` is
    the view of the bound pods, `lowest` the lowest priority of a running pod and `usage` what they use of the quotas
    (the cluster's, then the rules') when the caller keeps them (the scheduler loop's cache; None: worked out
    here); they must describe the cluster. Should planning raise, only the pods it raises for are refused
    (engine.isolation; `Plan.details.failures` holds the errors for the caller's log). `on_placed` is given the
    first placements as soon as they are final, before the rest is explained and preemption runs (the loop binds
    them meanwhile); the plan returned lists them too."""
    def plan(batch: Cluster, time_limit: float, placed: OnPlaced | None) -> Plan:
        same = batch.bound is cluster.bound  # else placements handed on are bound in `batch`: work the view out again
        return _plan_batch(batch, rules, replace(options, time_limit=time_limit), progress, view if same else None,
                           lowest if same else None, usage if same else None, placed)
    return plan_isolated(cluster, plan, options.time_limit, on_placed)


def _plan_batch(cluster: Cluster, rules: Rules, options: Options, progress: Callable[[str], None] | None,
                view: View | None, lowest: int | None, usage: Usage | None, on_placed: OnPlaced | None) -> Plan:
    started = time.perf_counter()
    cluster = timeline.with_estimates(with_quotas(cluster, rules.quotas), rules.runtimes)
    if lowest is None:
        lowest = lowest_running(cluster)
    hopeful = options.preemption and (may_preempt_any(cluster, lowest) or may_reclaim(cluster, usage))
    share = 1 - PREEMPTION_SHARE if hopeful else 1.0
    timed = timeline.timed(cluster)  # then placements are final only once the reservations are known
    if timed and view is None:  # one view for every plan with time makes (else each plan builds its own)
        view = View.of(cluster.nodes, cluster.bound)

    def now_plan(batch: Cluster, placed: OnPlaced | None) -> Plan:
        return make_plan(batch, rules.placement, time_limit=options.time_limit * share, workers=options.workers,
                         seed=options.seed, progress=progress, baseline=options.baseline, view=view,
                         preference_limit=options.preference_limit, usage=usage, on_placed=placed)
    plan = now_plan(cluster, None if timed and not options.carried else on_placed)
    if timed:
        plan = with_reservations(cluster, plan, rules, options, now_plan, on_placed, view)
    if options.preemption:
        plan = say_never(cluster, plan, lowest)
    if not hopeful:
        return plan
    settings = PreemptionSettings(rules.placement, Deadline(started + options.time_limit), options.workers, options.seed)
    return preempt(cluster, plan, rules.victims, settings, started, progress)
