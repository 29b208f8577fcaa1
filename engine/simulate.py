"""`policy-scheduler simulate`: a workload trace replayed through the planner with a virtual clock (issue 29).

A trace is nodes and jobs: each job arrives at a time, asks for `pods` pods of the same requests (more than one:
a gang, all or nothing), runs for `runtime` seconds once started, and may declare a bound (`limit`, what its pods'
`activeDeadlineSeconds` would say; none: unbounded). The replay moves from event to event (an arrival, a pod's
end); at each it builds the cluster as the planner reads any snapshot (running pods bound with their start and
bound, waiting ones pending) and places what it can, three ways:

- `one-at-a-time`: units in queue order (priority, then arrival), each placed alone if it fits whole: the order
  kube-scheduler works in;
- `batch`: the whole waiting batch at once, without time;
- `batch-time`: the batch with time in the plan (reservations, backfill; engine.timeline).

It reports per job class (its `class`, else its size) the waits (p50, p95, max), and the utilisation of the
first resource the nodes share (time-weighted). Pure but for reading the trace file.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from .load import build_cluster
from .model import Cluster, Reservation
from .plan import make_plan
from .planner import Options, plan_batch

MODES = ("one-at-a-time", "batch", "batch-time")
EPOCH = 1_800_000_000.0  # the virtual clock's zero, in seconds since the epoch (any fixed time serves)
SCHEDULER = "policy-scheduler"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class TraceError(ValueError):
    """A trace the replay cannot read: says where."""


@dataclass(frozen=True, slots=True)
class NodeShape:
    count: int
    allocatable: dict[str, str]
    prefix: str = "node"


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    arrival: float
    runtime: float
    requests: dict[str, str]
    pods: int = 1
    priority: int = 0
    limit: float | None = None  # the declared bound (activeDeadlineSeconds); None: unbounded
    kind: str = ""  # the job class it is reported under (default: its size)

    @property
    def label(self) -> str:
        return self.kind or f"{self.pods} pod(s) × {', '.join(f'{v} {k}' for k, v in sorted(self.requests.items()))}"


@dataclass(frozen=True, slots=True)
class Trace:
    nodes: tuple[NodeShape, ...]
    jobs: tuple[Job, ...]


def trace_of(doc: Any, where: str = "trace") -> Trace:
    """A trace from its YAML/JSON form: `nodes: [{count, allocatable, prefix?}]`, `jobs: [{name, arrival, runtime,
    requests, pods?, priority?, limit?, class?}]`."""
    if not isinstance(doc, dict):
        raise TraceError(f"{where}: a mapping with nodes and jobs expected")
    try:
        nodes = tuple(NodeShape(int(n["count"]), {k: str(v) for k, v in n["allocatable"].items()},
                                str(n.get("prefix", f"pool{i}"))) for i, n in enumerate(doc.get("nodes") or ()))
        jobs = tuple(Job(str(j["name"]), float(j["arrival"]), float(j["runtime"]),
                         {k: str(v) for k, v in j["requests"].items()}, int(j.get("pods", 1)), int(j.get("priority", 0)),
                         None if j.get("limit") is None else float(j["limit"]), str(j.get("class", "")))
                     for j in doc.get("jobs") or ())
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceError(f"{where}: {type(exc).__name__}: {exc} (nodes need count and allocatable; jobs need name, "
                         "arrival, runtime and requests)") from None
    if not nodes or not jobs:
        raise TraceError(f"{where}: no nodes or no jobs")
    if len({j.name for j in jobs}) != len(jobs):
        raise TraceError(f"{where}: job names must be unique")
    return Trace(nodes, tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))))


# --- synthetic traces -----------------------------------------------------------------------------------------

def kai_starvation(small_jobs: int = 200, nodes: int = 2, gpus: int = 8, seed: int = 1) -> Trace:
    """KAI-scheduler #1969's shape: nodes of 8 GPUs kept busy by a steady stream of 1-GPU jobs (a new one every
    minute or so, each running 10–40 minutes with a declared bound), and one gang asking for every GPU, arriving at
    t=0 behind the jobs already running. Without time the gang waits for an instant when every GPU is free at
    once, which the stream never leaves."""
    rng = random.Random(seed)
    jobs = [Job(f"warm-{k}", 0.0, rng.uniform(600, 2400), {"nvidia.com/gpu": "1"}, limit=2400, kind="1-GPU job")
            for k in range(nodes * gpus)]
    jobs.append(Job("big-gang", 1.0, 3600, {"nvidia.com/gpu": str(gpus)}, pods=nodes, priority=0, limit=3600,
                    kind="gang"))
    t = 1.0
    for k in range(small_jobs):
        t += rng.expovariate(1 / 60)
        jobs.append(Job(f"small-{k}", t, rng.uniform(600, 2400), {"nvidia.com/gpu": "1"}, limit=2400,
                        kind="1-GPU job"))
    return Trace((NodeShape(nodes, {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}, "gpu"),),
                 tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))))


def mixed(jobs: int = 1000, nodes: int = 50, seed: int = 1) -> Trace:
    """A mixed GPU trace shaped on published cluster studies: most jobs ask for 1 GPU, a few for 2–8, and a small
    tail are multi-node gangs (Philly: Jeon et al., USENIX ATC '19; Helios: Hu et al., SC '21 both report a
    majority of single-GPU jobs and a heavy tail of large ones); durations are log-normal, minutes to hours, with a
    bound (the limit users declare) 1.5× the runtime for 80% of jobs and none for the rest. Parameters are this
    generator's, not fitted to either trace."""
    rng = random.Random(seed)
    out = []
    t = 0.0
    for k in range(jobs):
        t += rng.expovariate(1 / 30)
        size = rng.choices([1, 2, 4, 8, 16], weights=[70, 12, 8, 7, 3])[0]
        pods, per_pod = (size // 8, 8) if size > 8 else (1, size)
        runtime = min(48 * 3600, math.exp(rng.gauss(math.log(1800), 1.2)))
        limit = runtime * 1.5 if rng.random() < 0.8 else None
        out.append(Job(f"job-{k}", t, runtime, {"nvidia.com/gpu": str(per_pod)}, pods, limit=limit,
                       kind=f"{size} GPU"))
    return Trace((NodeShape(nodes, {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}, "gpu"),), tuple(out))


GENERATORS: dict[str, Callable[..., Trace]] = {"kai": kai_starvation, "mixed": mixed}


# --- the replay -----------------------------------------------------------------------------------------------

@dataclass(slots=True)
class Replay:
    """What one mode did with a trace: each job's start (virtual seconds; absent: never started within the
    replay), and the share of the first resource in use after each event."""

    mode: str
    starts: dict[str, float] = field(default_factory=dict)
    usage: list[tuple[float, float]] = field(default_factory=list)  # (t, share in use)
    cycles: int = 0
    promised: dict[str, float] = field(default_factory=dict)  # batch-time: a job's start when first reserved

    def delayed(self) -> list[str]:
        """Jobs that started later than their reservation first promised (backfill must never cause it while every
        pod keeps its bound; a pod without one, or running past it, can)."""
        late = [j for j, start in self.promised.items() if self.starts.get(j, math.inf) > start + 1.0]
        return sorted(late)  # (a second's slack: times pass through RFC 3339, whole seconds)


@dataclass(slots=True)
class _Running:
    job: Job
    node: str
    start: float


def replay(trace: Trace, mode: str, horizon: float | None = None, time_limit: float = 2.0) -> Replay:
    """Replay `trace` in `mode` until every job has started and ended (or `horizon` virtual seconds)."""
    out = Replay(mode)
    arrivals = list(trace.jobs)
    waiting: list[Job] = []
    running: dict[str, _Running] = {}  # pod key -> what runs
    resource = _shared_resource(trace)
    names = {j.name for j in trace.jobs}
    total = sum(_amount(s.allocatable.get(resource, "0")) * s.count for s in trace.nodes)
    t = 0.0
    while arrivals or waiting or running:
        ends = [r.start + r.job.runtime for r in running.values()]
        t = min([*ends, *(a.arrival for a in arrivals[:1])], default=t)
        if horizon is not None and t > horizon:
            break
        running = {k: r for k, r in running.items() if r.start + r.job.runtime > t}
        while arrivals and arrivals[0].arrival <= t:
            waiting.append(arrivals.pop(0))
        if waiting:
            started, held = _place(trace, waiting, running, t, mode, time_limit)
            out.cycles += 1
            for r in held:  # a gang's holder is its job's name, a pod's is `<job>-0`
                name = r.holder.split("/", 1)[1]
                out.promised.setdefault(name if name in names else name.rsplit("-", 1)[0], r.start - EPOCH)
            for job, nodes in started:
                out.starts[job.name] = t
                for k, node in enumerate(nodes):
                    running[f"{job.name}/{k}"] = _Running(job, node, t)
            done = {job.name for job, _ in started}
            waiting = [j for j in waiting if j.name not in done]
            if not started and not running and not arrivals:
                break  # what waits can never start
        used = sum(_amount(r.job.requests.get(resource, "0")) for r in running.values())
        out.usage.append((t, used / total if total else 0.0))
    return out


def _place(trace: Trace, waiting: list[Job], running: dict[str, _Running], t: float, mode: str,
           time_limit: float) -> tuple[list[tuple[Job, list[str]]], tuple[Reservation, ...]]:
    """The jobs that start at t, each with its pods' nodes, and the reservations the plan holds."""
    options = Options(time_limit=time_limit, workers=1, preemption=False)
    if mode == "one-at-a-time":
        placed: list[tuple[Job, list[str]]] = []
        now = dict(running)
        for job in sorted(waiting, key=lambda j: (-j.priority, j.arrival, j.name)):
            cluster = _cluster(trace, [job], now, t, timed=False)
            got = make_plan(cluster, time_limit=time_limit, workers=1).assignments
            if len(got) == job.pods:
                nodes = [got[f"sim/{job.name}-{k}"] for k in range(job.pods)]
                placed.append((job, nodes))
                now.update({f"{job.name}/{k}": _Running(job, n, t) for k, n in enumerate(nodes)})
        return placed, ()
    cluster = _cluster(trace, waiting, running, t, timed=mode == "batch-time")
    plan = plan_batch(cluster, options=options)
    got = plan.assignments
    return [(job, [got[f"sim/{job.name}-{k}"] for k in range(job.pods)]) for job in waiting
            if all(f"sim/{job.name}-{k}" in got for k in range(job.pods))], plan.reservations


def _cluster(trace: Trace, waiting: Iterable[Job], running: dict[str, _Running], t: float, timed: bool) -> Cluster:
    """The cluster at virtual time t as a snapshot would show it."""
    docs: list[dict[str, Any]] = []
    for shape in trace.nodes:
        for i in range(shape.count):
            name = f"{shape.prefix}-{i}"
            docs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name}}, "status": {"allocatable": dict(shape.allocatable),
                                                             "capacity": dict(shape.allocatable)}})
    for key, r in running.items():
        docs.append(_pod(r.job, key.replace("/", "-r"), r.node, EPOCH + r.start))
    for job in waiting:
        if job.pods > 1:
            docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                         "metadata": {"name": job.name, "namespace": "sim"}, "spec": {"minMember": job.pods}})
        docs += [_pod(job, f"{job.name}-{k}", None, EPOCH + job.arrival) for k in range(job.pods)]
    cluster = build_cluster([(f"trace[{i}]", d) for i, d in enumerate(docs)], SCHEDULER)
    return replace(cluster, now=EPOCH + t) if timed else cluster


def _pod(job: Job, name: str, node: str | None, at: float) -> dict[str, Any]:
    from .timeline import rfc3339

    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "priority": job.priority,
                            "containers": [{"name": "main", "image": "pause",
                                            "resources": {"requests": dict(job.requests)}}]}
    if job.limit is not None:
        spec["activeDeadlineSeconds"] = max(1, int(job.limit))
    meta: dict[str, Any] = {"name": name, "namespace": "sim", "creationTimestamp": rfc3339(EPOCH + job.arrival)}
    if job.pods > 1:
        meta["labels"] = {GROUP_LABEL: job.name}
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": rfc3339(at)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _shared_resource(trace: Trace) -> str:
    """The resource utilisation is reported in: GPUs when the nodes have them, else cpu."""
    names = {r for s in trace.nodes for r in s.allocatable}
    return next((r for r in ("nvidia.com/gpu", "cpu") if r in names), sorted(names)[0])


def _amount(value: str) -> float:
    from .quantity import to_milli
    return to_milli(value) / 1000


# --- the report -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ClassWaits:
    kind: str
    jobs: int
    started: int
    p50: float | None
    p95: float | None
    most: float | None


def waits(trace: Trace, run: Replay) -> list[ClassWaits]:
    """Per job class: how many started, and their waits (seconds from arrival to start)."""
    by_kind: dict[str, list[Job]] = {}
    for job in trace.jobs:
        by_kind.setdefault(job.label, []).append(job)
    out = []
    for kind, jobs in sorted(by_kind.items()):
        w = sorted(run.starts[j.name] - j.arrival for j in jobs if j.name in run.starts)
        out.append(ClassWaits(kind, len(jobs), len(w), statistics.median(w) if w else None,
                              w[min(len(w) - 1, math.ceil(0.95 * len(w)) - 1)] if w else None, w[-1] if w else None))
    return out


def utilisation(run: Replay, until: float | None = None) -> float:
    """The time-weighted share of the resource in use, from the first event to `until` (default: the last)."""
    points = run.usage
    if len(points) < 2:
        return points[0][1] if points else 0.0
    end = until if until is not None else points[-1][0]
    area = sum(share * (min(nxt, end) - t) for (t, share), (nxt, _) in itertools.pairwise(points) if t < end)
    span = end - points[0][0]
    return area / span if span > 0 else points[-1][1]
