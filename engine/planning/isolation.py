"""Isolation: a failure nobody foresaw refuses only the pods it concerns, never the whole batch.

Errors about one object that the engine knows how to meet (a claim's CEL that does not compile, a selector
that fails at run time, a quantity it cannot read) are refusals of the pods that depend on the object, made
where the object is read. This is the net under them: when planning a batch raises anyway, the batch is
bisected by units (a gang, or pods sharing a ResourceClaim, stay together) until the units that fail alone
are found; they are refused with the error, and the rest is planned without them in the same call. The
probes run with a time limit shrunk to their share of the batch, so a culprit among 1,000 pods costs about
two plans, not twenty. The caller (the scheduler loop, the CLI) logs the failures' tracebacks: they are bugs.
Isolation wraps the planner's whole pipeline (engine.planning.planner.pipeline): each attempt is the pipeline run on the
planning context narrowed to the attempt's pods and time limit (`Attempt.narrowed`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol, Self, TypeVar

from ..model.cluster import Cluster, Pod
from ..model.reasons import Code, Diagnosis
from .plan import Failure, OnPlaced, Plan, Stats

T = TypeVar("T")


class Attempt(Protocol):
    """What isolation narrows down (engine.planning.planner.PlanningContext): a batch's planning with its cluster, its time
    limit and the caller's `on_placed`."""

    @property
    def cluster(self) -> Cluster: ...

    @property
    def time_limit(self) -> float: ...

    @property
    def on_placed(self) -> OnPlaced | None: ...

    def narrowed(self, cluster: Cluster, time_limit: float, on_placed: OnPlaced | None) -> Self:
        """The same planning for `cluster` (some pods left out, some bound), within `time_limit`, handing on to
        `on_placed`."""
        ...


A = TypeVar("A", bound=Attempt)
MAX_ROUNDS = 3  # failures that only appear together: find culprits again on what is left, at most this often
MIN_PROBE_SECONDS = 0.2


def plan_isolated(context: A, pipeline: Callable[[A], Plan]) -> Plan:
    """`pipeline(context)`, or, when it raises, the plan of the pods that do not make it raise, with the ones that
    do refused (in `unschedulable` and `errors`, and listed in `failures`). Placements handed to the context's
    `on_placed` before an attempt raised are final: later attempts plan around them as bound pods (probes hand
    nothing on), and the plan returned lists them."""
    failures: list[Failure] = []
    handed = PlacementsHandedOn(context.on_placed)
    cluster, time_limit = context.cluster, context.time_limit
    for _ in range(MAX_ROUNDS):
        try:
            attempt = context.narrowed(cluster, time_limit, handed.hand if context.on_placed else None)
            return _with_failures(handed.into(pipeline(attempt)), failures)
        except HandOverFailed as exc:
            raise exc.error from None  # the caller's error, not planning's: the net is not for it
        except Exception as exc:  # the net: anything, narrowed to its culprits below
            cluster = handed.bound_in(cluster)
            if not cluster.pending and not handed.nodes:
                raise  # nothing to narrow down: a bug outside any pod's planning
            if not cluster.pending:
                return handed.into(Plan({}, {}, Stats(pods=0, status="ERROR")))
            found = (culprits(units(cluster.pending), _probe(context, cluster, pipeline), exc)
                     or [(list(cluster.pending), exc)])
            failures += [failure([p.key for p in unit], err) for unit, err in found]
            refused = {p.key for unit, _ in found for p in unit}
            cluster = replace(cluster, pending=[p for p in cluster.pending if p.key not in refused])
    everyone = tuple(p.key for p in cluster.pending)
    failures.append(Failure(everyone, "planning kept failing after refusing the pods that failed alone", ""))
    empty = Plan({}, {}, Stats(pods=len(everyone), status="ERROR"))
    return _with_failures(handed.into(empty), failures)


@dataclass
class PlacementsHandedOn:
    """Placements given on (OnPlaced) before the plan they come from was finished, by pod key."""

    on_placed: OnPlaced | None
    nodes: dict[str, str] = field(default_factory=dict)

    def hand(self, early: Plan) -> None:
        fresh = {key: node for key, node in early.assignments.items() if key not in self.nodes}
        if fresh and self.on_placed is not None:
            try:
                self.on_placed(replace(early, assignments=fresh))
            except Exception as exc:
                raise HandOverFailed(exc) from exc
        self.nodes.update(fresh)

    def bound_in(self, cluster: Cluster) -> Cluster:
        """`cluster` with the pods handed on bound where they were placed."""
        if not any(p.key in self.nodes for p in cluster.pending):
            return cluster
        placed = [replace(p, node_name=self.nodes[p.key]) for p in cluster.pending if p.key in self.nodes]
        return replace(cluster, bound=[*cluster.bound, *placed],
                       pending=[p for p in cluster.pending if p.key not in self.nodes])

    def into(self, plan: Plan) -> Plan:
        """`plan` listing every placement handed on."""
        missing = {key: node for key, node in self.nodes.items() if key not in plan.assignments}
        if not missing:
            return plan
        assignments = {**plan.assignments, **missing}
        unschedulable = {k: v for k, v in plan.unschedulable.items() if k not in missing}
        return replace(plan, assignments=assignments, unschedulable=unschedulable,
                       stats=replace(plan.stats, placed=len(assignments)))


class HandOverFailed(Exception):
    """`on_placed` raised: the caller's `error`, which plan_isolated lets through untouched."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def culprits(units: list[list[T]], attempt: Callable[[list[T]], object],
             failed: Exception) -> list[tuple[list[T], Exception]]:
    """The units that make `attempt` raise on their own, `failed` being what it raised for all of them: halves
    are attempted in turn, a failing half split again, down to single units. Shared with the scheduler loop,
    whose attempts are whole cycles (what succeeds there is scheduled for real)."""
    if len(units) == 1:
        return [(units[0], failed)]
    found: list[tuple[list[T], Exception]] = []
    stack = [units[len(units) // 2:], units[: len(units) // 2]]
    while stack:
        part = stack.pop()
        try:
            attempt([item for unit in part for item in unit])
        except Exception as exc:  # the net: anything, narrowed to its culprits
            if len(part) == 1:
                found.append((part[0], exc))
            else:
                stack += [part[len(part) // 2:], part[: len(part) // 2]]
    return found


def _probe(context: A, cluster: Cluster, pipeline: Callable[[A], Plan]) -> Callable[[list[Pod]], Plan]:
    """Plan only `pods` of the batch (`cluster`'s), with their share of the time limit."""
    def attempt(pods: list[Pod]) -> Plan:
        share = max(MIN_PROBE_SECONDS, context.time_limit * len(pods) / max(1, len(cluster.pending)))
        return pipeline(context.narrowed(replace(cluster, pending=pods), share, None))
    return attempt


def units(pods: list[Pod]) -> list[list[Pod]]:
    """Pods that are planned together: a gang's members, and pods following one shared claim's first pod."""
    together: dict[str, list[Pod]] = {}
    for pod in pods:
        follows = pod.dra.follows if pod.resource_claims else ()
        key = f"gang:{pod.gang}" if pod.gang else (follows[0][1] if follows else pod.key)
        together.setdefault(key, []).append(pod)
    return list(together.values())


def _with_failures(plan: Plan, failures: list[Failure]) -> Plan:
    """`plan` with the pods of `failures` refused, for an error (SchedulerError)."""
    if not failures:
        return plan
    refused = {key: [failure.reason] for failure in failures for key in failure.pods}
    stats = replace(plan.stats, failed=sum(len(f.pods) for f in failures))
    details = replace(plan.details, errors=plan.details.errors.union(refused), failures=tuple(failures))
    reasons = {**plan.reasons, **{key: Diagnosis.one(Code.SCHEDULER_ERROR) for key in refused}}
    return replace(plan, unschedulable={**plan.unschedulable, **refused}, stats=stats, details=details, reasons=reasons)


def failure(pods: list[str], exc: BaseException) -> Failure:
    """The failure of `pods`: the error in one line, and its traceback."""
    return Failure(tuple(pods), _one_line(exc), "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__
