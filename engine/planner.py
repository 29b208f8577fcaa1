"""The one planning entry point: a cluster and the policies' rules in, a plan out.

`dry-run`, `explain`, `policy-scheduler test` and the scheduler loop all call `plan_batch`, so a policy test
case, a dry-run and the cluster decide alike: the plan without preemption first (`make_plan`), then, when
some pod it left out may evict lower-priority pods, batch preemption (`engine.preempt`) within the same time
limit. The cluster must have been built with the same rules' gangs (`build_cluster(..., gangs=rules.gangs)`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from .index import BoundState
from .ir import Rules
from .model import Cluster
from .plan import Plan, make_plan
from .preempt import PREEMPTION_SHARE, Settings, lowest_running, may_preempt_any, preempt, say_never
from .reclaim import may_reclaim


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


def plan_batch(cluster: Cluster, rules: Rules = Rules(), options: Options = Options(),
               progress: Callable[[str], None] | None = None, index: BoundState | None = None,
               lowest: int | None = None) -> Plan:
    """The plan for the cluster's pending pods: placements, reasons for the rest, evictions it needs. `index` is
    the bound pods' index and `lowest` the lowest priority of a running pod when the caller keeps them (the
    scheduler loop's cache; None: worked out here, cheap when nothing runs); they must describe the cluster."""
    started = time.perf_counter()
    if lowest is None:
        lowest = lowest_running(cluster)
    hopeful = options.preemption and (may_preempt_any(cluster, lowest) or may_reclaim(cluster))
    share = 1 - PREEMPTION_SHARE if hopeful else 1.0
    plan = make_plan(cluster, rules.placement, time_limit=options.time_limit * share, workers=options.workers,
                     seed=options.seed, progress=progress, baseline=options.baseline, index=index,
                     preference_limit=options.preference_limit)
    if options.preemption:
        say_never(cluster, plan, lowest)
    if not hopeful:
        return plan
    settings = Settings(rules.placement, started + options.time_limit, options.workers, options.seed)
    return preempt(cluster, plan, rules.victims, settings, started, progress)
