"""Sweeps of the FGD paper's protocol (issue 52, points 2 and 5): a grid of runs (schedulers × seeds × inflation
levels × arrival settings × policies) over one openb trace, on any `concurrent.futures.Executor`, as one JSON
document.

Schedulers are found by name in `SCHEDULERS`, each a factory `(seed, shapes, policy_text) -> BatchPlacer`; a job
names its scheduler and its trace's files, so it pickles small and the placer is built in the worker. Here, not in
engine/sharing, because a factory may build the planner (`policy-scheduler`), which engine/sharing must not import.
"""
from __future__ import annotations

import functools
import importlib
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import asdict, dataclass
from typing import Any

from ..sharing.fragmentation import TaskShape, typical_shapes
from ..sharing.gpus import GpuNode
from ..sharing.policies import POLICY_NAMES, make_policy
from ..sharing.protocol import Arrival, Arrivals, BatchPlacer, OneAtATime, Prefill, capacity_milli, inflate, run
from . import openb

Factory = Callable[[int, tuple[TaskShape, ...], "str | None"], BatchPlacer]


class SweepError(ValueError):
    """A sweep that cannot run as asked: says which scheduler, file or setting."""


@dataclass(frozen=True)
class Registered:
    """A registered scheduler: its factory, and whether it reads a policy (only those run once per policy)."""

    factory: Factory
    takes_policy: bool = False


SCHEDULERS: dict[str, Registered] = {}


def register(name: str, factory: Factory, takes_policy: bool = False) -> None:
    """Make `name` a scheduler sweeps can run (the planner's placer registers itself here as `policy-scheduler`).
    A factory refuses a policy it cannot use with a SweepError (the command prints it as one line, exit 2)."""
    SCHEDULERS[name] = Registered(factory, takes_policy)


def _one_at_a_time(name: str) -> Factory:
    return lambda seed, shapes, _policy: OneAtATime(make_policy(name, seed=seed, shapes=shapes))


for _name in POLICY_NAMES:
    register(_name, _one_at_a_time(_name))


def _planner(seed: int, shapes: tuple[TaskShape, ...], policy: str | None) -> BatchPlacer:
    """The batch planner itself (engine.time.gpu_planner), with the policy given (none: no policy); imported only
    when a sweep runs it."""
    from ..policy.parse import PolicyError
    from .gpu_planner import PlannerPlacer

    try:
        return PlannerPlacer(policy=policy or "", seed=seed, shapes=shapes)
    except PolicyError as exc:
        raise SweepError(f"policy-scheduler: {exc}") from None


def _planner_frag(seed: int, shapes: tuple[TaskShape, ...], _policy: str | None) -> BatchPlacer:
    """The batch planner with `prefer less fragmentation` (weight 100: FGD's own integers) over the trace's shapes."""
    from .gpu_planner import policy_scheduler_frag

    return policy_scheduler_frag(seed, shapes)


register("policy-scheduler", _planner, takes_policy=True)
register("policy-scheduler-frag", _planner_frag)
BASELINES = POLICY_NAMES  # a sweep's default: the planner's runs take minutes each on openb, so they are asked for


# --- the trace ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """A trace in the harness's terms: the empty cluster and the tasks in the file's order."""

    nodes: tuple[GpuNode, ...]
    arrivals: tuple[Arrival, ...]

    @property
    def shapes(self) -> tuple[TaskShape, ...]:
        """The trace's typical task shapes (FGD's and the fragmentation measure's), from the tasks as given."""
        return typical_shapes(a.task for a in self.arrivals)


@dataclass(frozen=True)
class OpenbFiles:
    """An openb trace by its files (what a job carries to a worker)."""

    nodes_csv: str
    tasks_csv: str


@functools.lru_cache(maxsize=4)
def read_openb(nodes_csv: str, tasks_csv: str) -> Workload:
    """The openb CSVs as a Workload (once per process), or an openb.OpenbError naming the file and line."""
    nodes = tuple(r.gpu_node for r in openb.read_nodes(nodes_csv))
    arrivals = tuple(Arrival(r.name, r.gpu_task, r.creation, r.deletion) for r in openb.read_tasks(tasks_csv))
    return Workload(nodes, arrivals)


def workload_of(source: OpenbFiles | Workload) -> Workload:
    return read_openb(source.nodes_csv, source.tasks_csv) if isinstance(source, OpenbFiles) else source


# --- jobs ---------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepJob:
    """One run of a sweep; everything in it pickles (names, numbers, text, file paths or a small Workload)."""

    scheduler: str
    seed: int
    inflation: float
    arrivals: Arrivals
    source: OpenbFiles | Workload
    policy: str | None = None  # the policy's text, for a scheduler that takes one
    policy_name: str | None = None  # how the results name it (its file)
    prefill: tuple[str, float] | None = None  # (a registered scheduler, a share): it fills the cluster first

    def parameters(self) -> dict[str, Any]:
        trace = asdict(self.source) if isinstance(self.source, OpenbFiles) else {"nodes": len(self.source.nodes),
                                                                              "tasks": len(self.source.arrivals)}
        return {"scheduler": self.scheduler, "seed": self.seed, "inflation": self.inflation,
                "batch": self.arrivals.batch, "batch_seconds": self.arrivals.seconds,
                "departures": self.arrivals.departures, "policy": self.policy_name,
                "prefill": None if self.prefill is None else f"{self.prefill[0]}:{self.prefill[1]:g}", "trace": trace}


def grid(source: OpenbFiles | Workload, schedulers: Sequence[str], seeds: Sequence[int], inflations: Sequence[float],
         settings: Sequence[Arrivals], policies: Sequence[tuple[str, str]] = (),
         prefill: tuple[str, float] | None = None) -> list[SweepJob]:
    """Every combination, schedulers outermost; `policies` ((name, text) pairs) multiply only the schedulers that
    take one (the others run once), which without any run with none; `prefill` (a scheduler, a share) fills the
    cluster first in every run. A SweepError names an unknown scheduler or a prefill a timed protocol cannot take."""
    unknown = [s for s in [*schedulers, *([prefill[0]] if prefill else [])] if s not in SCHEDULERS]
    if unknown:
        raise SweepError(f"unknown scheduler {unknown[0]!r}: one of {', '.join(SCHEDULERS)}")
    jobs = []
    for name in schedulers:
        texts: Sequence[tuple[str | None, str | None]] = (
            policies if policies and SCHEDULERS[name].takes_policy else [(None, None)])
        for policy_name, text in texts:
            jobs += [SweepJob(name, seed, inflation, how, source, text, policy_name, prefill)
                     for inflation in inflations for how in settings for seed in seeds]
    if prefill is not None and any(how.is_timed for how in settings):
        raise SweepError("--prefill cannot be used with --batch-seconds or --departures (a prefilled run is not timed)")
    return jobs


def check_policies(jobs: Sequence[SweepJob]) -> None:
    """Build each (scheduler, policy) that reads a policy once, here, so that a policy its factory refuses (with a
    SweepError saying why) stops the sweep before any run rather than in a worker halfway through."""
    seen: set[tuple[str, str | None]] = set()
    for job in jobs:
        if SCHEDULERS[job.scheduler].takes_policy and (job.scheduler, job.policy) not in seen:
            seen.add((job.scheduler, job.policy))
            SCHEDULERS[job.scheduler].factory(job.seed, workload_of(job.source).shapes, job.policy)


def run_job(job: SweepJob) -> dict[str, Any]:
    """One run, in whatever process the executor chose: the workload inflated with the job's seed (shuffled,
    unless the protocol is timed), the placer built from the registry, the measures."""
    started = time.perf_counter()
    workload = workload_of(job.source)
    shapes = workload.shapes
    arrivals = inflate(workload.arrivals, capacity_milli(workload.nodes), job.inflation, job.seed,
                       shuffle=not job.arrivals.is_timed)
    placer = SCHEDULERS[job.scheduler].factory(job.seed, shapes, job.policy)
    prefill = None if job.prefill is None else Prefill(SCHEDULERS[job.prefill[0]].factory(job.seed, shapes, None),
                                                       job.prefill[1])
    result = run(workload.nodes, arrivals, placer, shapes, job.inflation, job.arrivals, prefill)
    return {"parameters": job.parameters(), "summary": result.summary(), "series": result.series.to_dict(),
            "seconds": round(time.perf_counter() - started, 3)}


def sweep(jobs: Sequence[SweepJob], executor: Executor | None = None) -> dict[str, Any]:
    """Every job's result, in the jobs' order, as one JSON-ready document; serially in this process without an
    executor."""
    started = time.perf_counter()
    if executor is None:
        runs = [run_job(job) for job in jobs]
    else:
        futures = [executor.submit(run_job, job) for job in jobs]
        runs = [f.result() for f in futures]
    return {"runs": runs, "summary": summarise(runs), "seconds": round(time.perf_counter() - started, 3)}


def _setting(parameters: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(parameters.get(k) for k in SETTING)  # (documents from before a setting existed lack it)


SETTING = ("scheduler", "policy", "inflation", "batch", "batch_seconds", "departures", "prefill")


def summarise(runs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting (scheduler, policy, inflation, arrivals), over its seeds: mean and standard deviation of the
    unallocated GPUs at 100% arrived and of the area under the curve, and the tasks refused on average."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(_setting(r["parameters"]), []).append(r)
    out = []
    for key, members in groups.items():
        row = dict(zip(SETTING, key, strict=True))
        row["seeds"] = [m["parameters"]["seed"] for m in members]
        for measure in ("unallocated_at_full", "auc", "refused"):
            values = [m["summary"][measure] for m in members if m["summary"][measure] is not None]
            row[measure] = _spread(values)
        out.append(row)
    return out


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "stdev": None}
    return {"mean": round(statistics.fmean(values), 3),
            "stdev": round(statistics.stdev(values), 3) if len(values) > 1 else 0.0}


def load_executor(spec: str) -> Executor:
    """`module:callable` — the callable, called with no arguments, returns the Executor to run the sweep on (a
    Dask `Client(...).get_executor()`, a Ray-backed one, …). A SweepError says what is wrong with it."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise SweepError(f"--executor {spec!r}: give MODULE:CALLABLE (a callable returning a concurrent.futures.Executor)")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except ImportError as exc:
        raise SweepError(f"--executor {spec!r}: cannot import {module_name}: {exc}") from None
    except AttributeError:
        raise SweepError(f"--executor {spec!r}: {module_name} has no {attr}") from None
    try:
        made = factory()
    except Exception as exc:  # the user's code: whatever it raises is one line, not a traceback
        raise SweepError(f"--executor {spec!r}: {attr}() failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(made, "submit", None)):
        raise SweepError(f"--executor {spec!r}: {attr}() returned {type(made).__name__}, not an Executor (no submit)")
    return made
