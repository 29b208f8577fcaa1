"""The engine on a snapshot of manifests (build them with testkit.manifests)."""

from __future__ import annotations

from typing import Any

from engine.planning.plan import Plan, make_plan
from engine.reading.load import build_cluster
from testkit.manifests import SCHEDULER_NAME


def run(docs: list[dict], time_limit: float = 5.0, scheduler: str = SCHEDULER_NAME, **kw: Any) -> Plan:
    """Plan the snapshot with a reproducible solver (one worker, fixed seed)."""
    cluster = build_cluster([("test", d) for d in docs], scheduler)
    return make_plan(cluster, time_limit=time_limit, workers=1, seed=0, **kw)
