"""Preemption run on a snapshot with a chosen set of victim strategies, on the same first plan: what the property
tests and the strategies' own tests share. The deadline never passes (a stopped clock): what the stage decides, not
how fast this machine decides it."""
from __future__ import annotations

import time
from dataclasses import replace

from clocks import StoppedClock
from engine.model.ir import Rules
from engine.planning.compile import Deadline
from engine.planning.plan import Plan, make_plan
from engine.policy.lower import lower
from engine.policy.sources import check_sources
from engine.preempt import PreemptionSettings, preempt
from engine.reading.load import build_cluster

# the victim strategies a test may ask for alone (engine.preempt.STRATEGIES), and the stage's default: the batch model,
# the per-node search when it declines
MODEL, SEARCH, DEFAULT = "batch model", "per-node search", "default"
STRATEGIES = (MODEL, SEARCH, DEFAULT)


def preempted(docs: list[dict], strategy: str = DEFAULT, policy: str = "", seconds: float = 10.0) -> Plan:
    """The plan after preemption by `strategy` alone (MODEL, SEARCH), or by the stage's default order."""
    rules = lower(check_sources({"test.policy": policy})) if policy else Rules()
    cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)], gangs=rules.gangs)
    first = make_plan(cluster, rules.placement, time_limit=5, workers=1)
    clock = StoppedClock()
    deadline = Deadline(clock.now + seconds, clock)
    settings = PreemptionSettings(rules.placement, deadline, 1, 0)
    if strategy != DEFAULT:
        settings = replace(settings, strategies=(strategy,))
    return preempt(cluster, first, rules.victims, settings, time.perf_counter())
