"""`policy-scheduler simulate`: a workload trace replayed through the planner with a virtual clock (issue 29).

A trace is nodes and jobs: each job arrives at a time, asks for `pods` pods of the same requests (more than one:
a gang, all or nothing), runs for `runtime` seconds once started, and may declare a bound (`limit`, what its pods'
`activeDeadlineSeconds` would say; none: unbounded). The replay moves from event to event (an arrival, a pod's
end), or with a period from cycle to cycle; at each it assembles the cluster as the planner reads any snapshot
(running pods bound with their start and bound, waiting ones pending) from pods converted once per job, and places
what it can, three ways:

- `one-at-a-time`: units in queue order (priority, then arrival), each placed alone if it fits whole: the order
  kube-scheduler works in;
- `batch`: the whole waiting batch at once, without time;
- `batch-time`: the batch with time in the plan (reservations, backfill; engine.time.timeline).

GPUs may be DRA devices (issue 52): node labels, a ResourceSlice per node, one DeviceClass, a ResourceClaim per pod
made from its job's `claim`; a started job's allocations (as its plan's Reserve made them) are kept until it ends.

It reports per job class (its `class`, else its size) the waits (p50, p95, max), and the utilisation of the
first resource the nodes share (time-weighted). Pure: the CLI reads the trace file.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import random
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..model.cluster import Cluster, Gang, Pod, PodGroup, Reservation, ResourceClaim
from ..model.view import View
from ..planning.plan import make_plan
from ..planning.planner import Options, TimeInputs, plan_batch
from ..reading.convert.fields import as_int, as_mapping, as_text, required, resource_amounts, show_value
from ..reading.load import build_cluster
from .dra_time import placed_claims
from .timeline import rfc3339

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
    labels: dict[str, str] = field(default_factory=dict)  # besides kubernetes.io/hostname
    devices: tuple[dict[str, Any], ...] = ()  # each node's ResourceSlice devices (driver DRIVER)


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
    claim: dict[str, Any] | None = None  # a ResourceClaim spec: each pod gets a claim of its own made from it
    affinity: dict[str, Any] | None = None  # its pods' spec.affinity

    @property
    def label(self) -> str:
        return self.kind or f"{self.pods} pod(s) × {', '.join(f'{v} {k}' for k, v in sorted(self.requests.items()))}"


@dataclass(frozen=True, slots=True)
class Trace:
    nodes: tuple[NodeShape, ...]
    jobs: tuple[Job, ...]


NODE_KEYS = ("count", "allocatable", "prefix", "labels", "devices")
JOB_KEYS = ("name", "arrival", "runtime", "requests", "pods", "priority", "limit", "class", "claim", "affinity")
DRIVER = "gpu.openb"  # the DRA driver publishing a trace's devices, and the one DeviceClass selecting them
DRA_API = "resource.k8s.io/v1"


def trace_of(doc: Any, where: str = "trace") -> Trace:
    """A trace from its YAML/JSON form: `nodes: [{count, allocatable, prefix?}]`, `jobs: [{name, arrival, runtime,
    requests, pods?, priority?, limit?, class?}]`. Whatever the replay could not honour is refused naming the node
    entry or job: an unknown key, a negative time, a runtime past its limit, a job that fits no empty cluster."""
    if isinstance(doc, dict) and ("kind" in doc or "apiVersion" in doc):
        raise TraceError(f"{where}: a Kubernetes object ({show_value(doc.get('kind'))}), not a trace: " + NOT_A_SNAPSHOT)
    if not isinstance(doc, dict):
        raise TraceError(f"{where}: a mapping with nodes and jobs expected")
    _known_keys(doc, ("nodes", "jobs"), where, "a trace")
    nodes = tuple(_node_shape(n, i, f"{where}: nodes[{i}]") for i, n in enumerate(_entries(doc, "nodes", where)))
    jobs = tuple(_job(j, i, where) for i, j in enumerate(_entries(doc, "jobs", where)))
    if not nodes or not jobs:
        raise TraceError(f"{where}: no nodes or no jobs")
    if len({j.name for j in jobs}) != len(jobs):
        raise TraceError(f"{where}: job names must be unique")
    for job in jobs:
        _fits_the_cluster(job, nodes, where)
    return Trace(nodes, tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))))


NOT_A_SNAPSHOT = ("simulate replays a trace of nodes and jobs (docs/time.md); a cluster snapshot is for dry-run "
                  "and explain")


def trace_of_documents(docs: list[Any], where: str = "trace") -> Trace:
    """A trace from a file's YAML documents: exactly one, the trace (a snapshot's objects are refused as such)."""
    docs = [d for d in docs if d is not None]
    if len(docs) == 1:
        return trace_of(docs[0], where)
    kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, dict) and "kind" in d})
    if kinds:
        raise TraceError(f"{where}: {len(docs)} YAML documents holding Kubernetes objects ({', '.join(kinds[:5])}), "
                         "not a trace: " + NOT_A_SNAPSHOT)
    raise TraceError(f"{where}: {len(docs)} YAML documents; a trace is one (a mapping with nodes and jobs)"
                     if docs else f"{where}: empty; a trace is a mapping with nodes and jobs")


def _entries(doc: dict[str, Any], key: str, where: str) -> list[Any]:
    value = doc.get(key) or []
    if not isinstance(value, list):
        raise TraceError(f"{where}: {key} must be a list, got {show_value(value)}")
    return value


def _known_keys(entry: Any, known: tuple[str, ...], where: str, what: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise TraceError(f"{where}: {what} must be a mapping, got {show_value(entry)}")
    unknown = [str(k) for k in entry if k not in known]
    if unknown:
        raise TraceError(f"{where}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"({what} has {', '.join(known)})")
    return entry


def _node_shape(entry: Any, i: int, where: str) -> NodeShape:
    n = _known_keys(entry, NODE_KEYS, where, "a node entry")
    try:
        count = as_int(required(n, "count", "node"), "count", 1)
        allocatable = {str(k): str(v) for k, v in as_mapping(required(n, "allocatable", "node"), "allocatable").items()}
        resource_amounts(allocatable, "allocatable")
        labels = {str(k): str(v) for k, v in as_mapping(n.get("labels") or {}, "labels").items()}
        devices = n.get("devices") or []
        if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
            raise ValueError(f"devices must be a list of ResourceSlice devices, got {show_value(devices)}")
    except ValueError as exc:
        raise TraceError(f"{where}: {exc}") from None
    return NodeShape(count, allocatable, str(n.get("prefix", f"pool{i}")), labels, tuple(devices))


def _job(entry: Any, i: int, file: str) -> Job:
    named = isinstance(entry, dict) and entry.get("name") not in (None, "")
    where = f"{file}: job {str(entry['name'])!r}" if named else f"{file}: jobs[{i}]"
    j = _known_keys(entry, JOB_KEYS, where, "a job")
    try:
        name = as_text(required(j, "name", "job"), "name")
        arrival, runtime = _seconds(j, "arrival", 0.0), _seconds(j, "runtime", 0.0, positive=True)
        limit = None if j.get("limit") is None else _seconds(j, "limit", 0.0, positive=True)
        requests = {str(k): str(v) for k, v in as_mapping(required(j, "requests", "job"), "requests").items()}
        resource_amounts(requests, "requests")
        claim, affinity = (None if j.get(k) is None else dict(as_mapping(j[k], k)) for k in ("claim", "affinity"))
        job = Job(name, arrival, runtime, requests, as_int(j.get("pods", 1), "pods", 1), as_int(j.get("priority", 0), "priority"),
                  limit, str(j.get("class", "")), claim, affinity)
    except ValueError as exc:
        raise TraceError(f"{where}: {exc}") from None
    if limit is not None and runtime > limit:
        raise TraceError(f"{where}: runtime {runtime:g} is past its limit {limit:g} (the limit is its pods' "
                         "activeDeadlineSeconds: they are stopped there)")
    return job


def _seconds(entry: dict[str, Any], key: str, low: float, positive: bool = False) -> float:
    value = required(entry, key, "job")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number of seconds, got {show_value(value)}")
    if not math.isfinite(value) or value < low or (positive and value <= low):
        raise ValueError(f"{key} must be {'above' if positive else 'at least'} {low:g} seconds, got {value:g}")
    return float(value)


def _fits_the_cluster(job: Job, nodes: tuple[NodeShape, ...], where: str) -> None:
    """Refuse a job whose pods could not all run at once even on the empty cluster: it would wait forever."""
    wants = {"pods": 1, **resource_amounts(job.requests, "requests")}
    room = 0
    for shape in nodes:
        has = {"pods": 110, **resource_amounts(shape.allocatable, "allocatable")}
        room += shape.count * min((has.get(r, 0) // v for r, v in wants.items() if v > 0), default=job.pods)
    if room < job.pods:
        each = ", ".join(f"{v} {k}" for k, v in sorted(job.requests.items()))
        raise TraceError(f"{where}: job {job.name!r}: {job.pods} pod(s) of {each} each do not fit the whole cluster, even "
                         f"empty (room for {room}): it could never start")


# --- synthetic traces -----------------------------------------------------------------------------------------

def kai_starvation(small_jobs: int = 200, nodes: int = 2, gpus: int = 8, seed: int = 1, load: float = 0.9) -> Trace:
    """KAI-scheduler #1969's shape: nodes of 8 GPUs kept busy by a steady stream of 1-GPU jobs (each running 10–40
    minutes, 25 on average, bounded at 40), and one gang asking for every GPU, arriving at t=0 behind the jobs already
    running. `load`: the share of the GPUs the stream asks for (Poisson arrivals; at the default 0.9 and 16 GPUs one
    every 104 s; above 1 the queue grows for as long as the stream lasts). Without time the gang waits for an
    instant when every GPU is free at once, which a busy stream does not leave."""
    rng = random.Random(seed)
    gap = 1500 / (nodes * gpus * load)  # mean seconds between arrivals
    jobs = [Job(f"warm-{k}", 0.0, rng.uniform(600, 2400), {"nvidia.com/gpu": "1"}, limit=2400, kind="1-GPU job")
            for k in range(nodes * gpus)]
    jobs.append(Job("big-gang", 1.0, 3600, {"nvidia.com/gpu": str(gpus)}, pods=min(2, nodes), priority=0,
                    limit=3600, kind="gang"))
    t = 1.0
    for k in range(small_jobs):
        t += rng.expovariate(1 / gap)
        jobs.append(Job(f"small-{k}", t, rng.uniform(600, 2400), {"nvidia.com/gpu": "1"}, limit=2400,
                        kind="1-GPU job"))
    return Trace((NodeShape(nodes, {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}, "gpu"),),
                 tuple(sorted(jobs, key=lambda j: (j.arrival, j.name))))


def mixed(jobs: int = 1000, nodes: int = 50, seed: int = 1, load: float = 1.0) -> Trace:
    """A mixed GPU trace shaped on published cluster studies: most jobs ask for 1 GPU, a few for 2–8, and a small
    tail are multi-node gangs (Philly: Jeon et al., USENIX ATC '19; Helios: Hu et al., SC '21 both report a
    majority of single-GPU jobs and a heavy tail of large ones); durations are log-normal, minutes to hours, with a
    bound (the limit users declare) 1.5× the runtime for 80% of jobs and none for the rest. Parameters are this
    generator's, not fitted to either trace.

    Arrivals are a Poisson stream, one job every 30 s per 50 nodes on average (scaled with `nodes`, and divided by
    `load`), so the offered GPU load is the same share at any size: at `load` 1.0 about 70% of the GPUs (2.3 GPUs
    per job for 3,700 s on average; the stream's start and end, while the cluster fills and drains, are lighter)."""
    rng = random.Random(seed)
    rate = nodes * load / (30 * 50)  # arrivals per second
    out = []
    t = 0.0
    for k in range(jobs):
        t += rng.expovariate(rate)
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
    period: float = 0.0  # the scheduler's cycle (0: it plans at every event)

    def delayed(self) -> list[str]:
        """Jobs that started later than their reservation first promised (backfill must never cause it while every
        pod keeps its bound; a pod without one, or running past it, can). With a period, a job starts at the first
        cycle once its room is free, not at the instant promised."""
        def due(start: float) -> float:  # (a second's slack: times pass through RFC 3339, whole seconds)
            return math.ceil((start + 1.0) / self.period) * self.period if self.period > 0 else start + 1.0
        return sorted(j for j, start in self.promised.items() if self.starts.get(j, math.inf) > due(start))


@dataclass(frozen=True, slots=True)
class _Models:
    """A job's pods as the planner reads them, converted from its manifests once, at arrival (a snapshot would
    convert them again at every event): pending, gang members marked, and its PodGroup and Gang if a gang."""

    job: Job
    pods: tuple[Pod, ...]
    group: PodGroup | None = None
    gang: Gang | None = None
    claims: tuple[ResourceClaim, ...] = ()  # its pods' ResourceClaims, unallocated


@dataclass(frozen=True, slots=True)
class _Running:
    """A started job: its pods' nodes, its start, its pods as a snapshot shows them bound, and how much of the
    reported resource they hold together."""

    job: Job
    nodes: tuple[str, ...]
    start: float
    pods: tuple[Pod, ...] = ()
    use: float = 0.0
    claims: tuple[ResourceClaim, ...] = ()  # its pods' ResourceClaims as their plan allocated them

    @property
    def end(self) -> float:
        return self.start + self.job.runtime


@dataclass(slots=True)
class _World:
    """What the replay keeps between cycles: the nodes (converted once), the jobs waiting (converted at arrival)
    and running (in start order, with a heap of their ends), their pods bound in that order and the planner's
    view of them (engine.model.view: kept as jobs start and end, not worked out again by every plan), and how much of
    the reported resource is in use."""

    base: Cluster  # the nodes alone, as build_cluster reads them
    resource: str
    view: View
    waiting: list[_Models] = field(default_factory=list)
    running: dict[str, _Running] = field(default_factory=dict)  # job name -> what runs
    ends: list[tuple[float, str]] = field(default_factory=list)  # heap: (end, job name)
    bound: list[Pod] = field(default_factory=list)  # the running jobs' pods, in order
    used: float = 0.0
    held: tuple[Reservation, ...] = ()  # batch-time: the last cycle's reservations, its promises (as the loop keeps)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # the running jobs' claims, allocated

    @classmethod
    def of(cls, trace: Trace) -> _World:
        base = build_cluster(_node_docs(trace), SCHEDULER)
        return cls(base, _shared_resource(trace), View.of(base.nodes, []))

    def begin(self, started: Iterable[tuple[_Models, list[str]]], t: float,
              allocated: Mapping[str, tuple[ResourceClaim, ...]] | None = None) -> None:
        """The jobs that start at t, bound after those running (as a snapshot would list them), holding the claims
        their plan allocated (`allocated`: job name -> claims) until they end."""
        runs = [_running(models, tuple(nodes), t, self.resource, (allocated or {}).get(models.job.name, ()))
                for models, nodes in started]
        for run in runs:
            self.running[run.job.name] = run
            heapq.heappush(self.ends, (run.end, run.job.name))
            self.used += run.use
            self.claims.update((c.key, c) for c in run.claims)
        added = tuple(p for run in runs for p in run.pods)
        self.bound += added
        self.view = self.view.moved(added=added).settled() if added else self.view

    def retire(self, t: float) -> list[tuple[float, float]]:
        """Take out the jobs that ended by t; each distinct time they ended, with what was in use from then on
        (what the usage must say between cycles)."""
        gone: list[Pod] = []
        drops: list[tuple[float, float]] = []
        while self.ends and self.ends[0][0] <= t:
            end, name = heapq.heappop(self.ends)
            run = self.running.pop(name)
            self.used -= run.use
            for claim in run.claims:  # its pods are gone: upstream's resourceclaim controller deallocates their claims
                del self.claims[claim.key]
            gone += run.pods
            if not self.ends or self.ends[0][0] > end:
                drops.append((end, self.used))
        if gone:
            self.bound = [p for r in self.running.values() for p in r.pods]
            self.view = self.view.moved(removed=gone).settled()
        return drops

    def cluster(self, waiting: Iterable[_Models], also: Iterable[_Running]) -> Cluster:
        """The cluster with `also` running besides, exactly as build_cluster reads the same manifests
        (`_manifest_cluster`; the tests hold them equal), but assembled from the models."""
        waiting, also = list(waiting), list(also)
        claims = {**self.claims, **{c.key: c for r in also for c in r.claims}, **{c.key: c for m in waiting for c in m.claims}}
        return replace(self.base, bound=[*self.bound, *(p for r in also for p in r.pods)],
                       pending=[p for m in waiting for p in m.pods], notes=[],
                       devices=replace(self.base.devices, claims=claims) if claims else self.base.devices,
                       pod_groups={m.group.key: m.group for m in waiting if m.group is not None},
                       gangs={m.gang.key: m.gang for m in waiting if m.gang is not None})


def replay(trace: Trace, mode: str, horizon: float | None = None, time_limit: float = 2.0, period: float = 0.0,
           prune: bool = True) -> Replay:
    """Replay `trace` in `mode` until every job has started and ended (or `horizon` virtual seconds). With
    `period` > 0 the scheduler plans at most once per period, at multiples of it (a cycle's pace, not an event's):
    what ended meanwhile is gone by then, what arrived waits until then. `prune`: see `_one_at_a_time`."""
    out = Replay(mode, period=period)
    world = _World.of(trace)
    arrivals = collections.deque(trace.jobs)
    names = {j.name for j in trace.jobs}
    total = sum(_amount(s.allocatable.get(world.resource, "0")) * s.count for s in trace.nodes)
    t = 0.0
    while arrivals or world.waiting or world.running:
        event = min(world.ends[0][0] if world.ends else math.inf, arrivals[0].arrival if arrivals else math.inf)
        t = t if event == math.inf else math.ceil(event / period) * period if period > 0 else event
        if horizon is not None and t > horizon:
            break
        for end, used in world.retire(t):  # between cycles the resource is free from each end on, not the next cycle
            if end < t:
                out.usage.append((end, used / total if total else 0.0))
        while arrivals and arrivals[0].arrival <= t:
            world.waiting.append(_models(arrivals.popleft()))
        if world.waiting:
            started, held, allocated = _place(world, t, mode, time_limit, prune)
            out.cycles += 1
            for r in held:  # a gang's holder is its job's name, a pod's is `<job>-0`
                name = r.holder.split("/", 1)[1]
                out.promised.setdefault(name if name in names else name.rsplit("-", 1)[0], r.start - EPOCH)
            out.starts.update((models.job.name, t) for models, _ in started)
            world.begin(started, t, allocated)
            done = {models.job.name for models, _ in started}
            world.waiting = [m for m in world.waiting if m.job.name not in done]
            if not started and not world.running and not arrivals:
                break  # what waits can never start
        out.usage.append((t, world.used / total if total else 0.0))
    return out


Started = list[tuple[_Models, list[str]]]  # jobs that start, each with its pods' nodes
Allocated = dict[str, tuple[ResourceClaim, ...]]  # job name -> its pods' claims as their plan allocated them


def _place(world: _World, t: float, mode: str, time_limit: float,
           prune: bool) -> tuple[Started, tuple[Reservation, ...], Allocated]:
    """The jobs that start at t, each with its pods' nodes, the reservations the plan holds and the claims the
    starting jobs' pods allocated."""
    if mode == "one-at-a-time":
        started, allocated = _one_at_a_time(world, t, time_limit, prune)
        return started, (), allocated
    cluster = world.cluster(world.waiting, ())
    waiting = {p.key for p in cluster.pending}  # the last cycle's reservations of jobs still waiting: kept promises
    kept = tuple(r for r in world.held if all(k in waiting for k, _ in r.pods))
    # the replay reads no waiting pod's estimated start: none are swept for (a sweep is a dozen plans per cycle)
    time_inputs = TimeInputs(EPOCH + t if mode == "batch-time" else None, kept, estimated={})
    plan = plan_batch(cluster, options=Options(time_limit=time_limit, workers=1, preemption=False), view=world.view,
                      time_inputs=time_inputs)
    world.held = plan.reservations
    got = plan.assignments
    started = [(m, [got[p.key] for p in m.pods]) for m in world.waiting if all(p.key in got for p in m.pods)]
    return started, plan.reservations, {m.job.name: _allocated(m, plan.details.reserved) for m, _ in started}


def _allocated(models: _Models, reserved: Mapping[str, Mapping[str, object]]) -> tuple[ResourceClaim, ...]:
    """A started job's claims as its plan's DynamicResources Reserve allocated them (engine.time.dra_time), each
    reserved for the running pod `_running` makes of its pod."""
    if not models.claims:
        return ()
    claims = {c.key: c for c in models.claims}
    return tuple(replace(c, reserved_for=(f"{models.job.name}-r{k}",)) for k, p in enumerate(models.pods)
                 for c in placed_claims(claims, reserved, p))


def _one_at_a_time(world: _World, t: float, time_limit: float, prune: bool) -> tuple[Started, Allocated]:
    """Units in queue order, each planned alone beside those placed before it. Within a cycle room only shrinks,
    so once a job of some requests did not fit, a later one of the same requests and at least as many pods cannot
    either: with `prune` it is not planned."""
    placed: Started = []
    allocated: Allocated = {}
    now: list[_Running] = []
    view = world.view
    failed: dict[tuple[tuple[str, str], ...], int] = {}  # requests -> fewest pods that did not fit this cycle
    for models in sorted(world.waiting, key=lambda m: (-m.job.priority, m.job.arrival, m.job.name)):
        job = models.job
        shape = tuple(sorted(job.requests.items()))
        if prune and failed.get(shape, math.inf) <= job.pods:
            continue
        cluster = world.cluster([models], now)
        plan = make_plan(cluster, time_limit=time_limit, workers=1, view=view)
        got = plan.assignments
        if all(p.key in got for p in models.pods):
            nodes = [got[p.key] for p in models.pods]
            placed.append((models, nodes))
            allocated[job.name] = _allocated(models, plan.details.reserved)
            now.append(_running(models, tuple(nodes), t, world.resource, allocated[job.name]))
            view = view.moved(added=now[-1].pods).settled()
        else:
            failed[shape] = min(job.pods, failed.get(shape, job.pods))
    return placed, allocated


def _models(job: Job) -> _Models:
    """A job's pods converted once: build_cluster over its PodGroup and pods, as every snapshot would."""
    cluster = build_cluster(_job_docs(job), SCHEDULER)
    return _Models(job, tuple(cluster.pending), next(iter(cluster.pod_groups.values()), None),
                   next(iter(cluster.gangs.values()), None), tuple(cluster.devices.claims.values()))


def _running(models: _Models, nodes: tuple[str, ...], t: float, resource: str,
             claims: tuple[ResourceClaim, ...] = ()) -> _Running:
    """A job started at t on `nodes`: its pending pods bound, as a snapshot converts a running pod (named
    `<job>-r<k>`, nodeName and startTime set, phase Running; a gang has no pending member left, so no gang)."""
    started = rfc3339(EPOCH + t)
    pods = tuple(replace(p, name=f"{models.job.name}-r{k}", node_name=node, phase="Running", started=started,
                         gang=None) for k, (p, node) in enumerate(zip(models.pods, nodes, strict=True)))
    return _Running(models.job, nodes, t, pods, _amount(models.job.requests.get(resource, "0")) * models.job.pods,
                    claims)


# --- the manifests: what the models are converted from, and the reference the tests hold them to ---------------

def _manifest_cluster(trace: Trace, waiting: Iterable[Job], running: Iterable[_Running]) -> Cluster:
    """The cluster built from manifests as a snapshot is read: what `_World.cluster` assembles from models converted
    once (the replay used to build this at every event). Running jobs' claims are not written (no status.allocation):
    the equality holds for traces without `claim`."""
    docs = _node_docs(trace)
    for r in running:
        docs += [(f"run[{r.job.name}-{k}]", _pod(r.job, k, f"{r.job.name}-r{k}", node, EPOCH + r.start))
                 for k, node in enumerate(r.nodes)]
    for job in waiting:
        docs += _job_docs(job)
    return build_cluster(docs, SCHEDULER)


def _node_docs(trace: Trace) -> list[tuple[str, dict[str, Any]]]:
    """Each node, with its labels, and with devices its ResourceSlice (one pool a node) and the one DeviceClass."""
    docs = []
    for shape in trace.nodes:
        for i in range(shape.count):
            name = f"{shape.prefix}-{i}"
            docs.append((f"node[{name}]", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
                **shape.labels, "kubernetes.io/hostname": name}}, "status": {"allocatable": dict(shape.allocatable),
                                                                             "capacity": dict(shape.allocatable)}}))
            if shape.devices:
                docs.append((f"node[{name}].devices", _slice(name, shape.devices)))
    if any(shape.devices for shape in trace.nodes):
        docs.append(("deviceclass", {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": DRIVER},
                                     "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}))
    return docs


def _slice(node: str, devices: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {"apiVersion": DRA_API, "kind": "ResourceSlice", "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [dict(d) for d in devices]}}


def _job_docs(job: Job) -> list[tuple[str, dict[str, Any]]]:
    """A waiting job's manifests: its pods, and a PodGroup when it is a gang."""
    docs = [(f"job[{job.name}]", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                  "metadata": {"name": job.name, "namespace": "sim"},
                                  "spec": {"minMember": job.pods}})] if job.pods > 1 else []
    docs += [(f"job[{job.name}-{k}]", _pod(job, k, f"{job.name}-{k}", None, EPOCH + job.arrival))
             for k in range(job.pods)]
    if job.claim is not None:  # each pod's claim, named after the pending pod (`_running` keeps its resourceClaims)
        docs += [(f"job[{job.name}-{k}].claim", {"apiVersion": DRA_API, "kind": "ResourceClaim", "metadata": {
            "name": _claim_name(job, k), "namespace": "sim"}, "spec": job.claim}) for k in range(job.pods)]
    return docs


def _pod(job: Job, k: int, name: str, node: str | None, at: float) -> dict[str, Any]:
    """The job's k-th pod named `name`: pending, or running on `node` since `at`."""
    spec: dict[str, Any] = {"schedulerName": SCHEDULER, "priority": job.priority,
                            "containers": [{"name": "main", "image": "pause",
                                            "resources": {"requests": dict(job.requests)}}]}
    if job.limit is not None:
        spec["activeDeadlineSeconds"] = max(1, int(job.limit))
    if job.affinity is not None:
        spec["affinity"] = job.affinity
    if job.claim is not None:
        spec["containers"][0]["resources"]["claims"] = [{"name": "claim"}]
        spec["resourceClaims"] = [{"name": "claim", "resourceClaimName": _claim_name(job, k)}]
    meta: dict[str, Any] = {"name": name, "namespace": "sim", "creationTimestamp": rfc3339(EPOCH + job.arrival)}
    if job.pods > 1:
        meta["labels"] = {GROUP_LABEL: job.name}
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {"phase": "Running", "startTime": rfc3339(at)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _claim_name(job: Job, k: int) -> str:
    return f"{job.name}-{k}-claim"


def _shared_resource(trace: Trace) -> str:
    """The resource utilisation is reported in: GPUs when the nodes have them, else cpu."""
    names = {r for s in trace.nodes for r in s.allocatable}
    return next((r for r in ("nvidia.com/gpu", "cpu") if r in names), sorted(names)[0])


def _amount(value: str) -> float:
    from ..model.quantity import to_milli
    return to_milli(value) / 1000


# --- the report -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ClassWaits:
    """One job class's waits (seconds from arrival to start) in one replay."""

    kind: str
    jobs: int
    started: int
    p50: float | None
    p95: float | None
    max: float | None

    def to_dict(self) -> dict[str, str | int | float | None]:
        """The report's words (WAIT_WORDS), the same in the JSON and as the table's columns."""
        return dict(zip(WAIT_WORDS, (self.kind, self.jobs, self.started, self.p50, self.p95, self.max), strict=True))


WAIT_WORDS = ("class", "jobs", "started", "p50", "p95", "max")  # a job class's report, as JSON keys and columns


def waits(trace: Trace, run: Replay) -> list[ClassWaits]:
    """Per job class: how many started, and their waits (seconds from arrival to start)."""
    by_kind: dict[str, list[Job]] = {}
    for job in trace.jobs:
        by_kind.setdefault(job.label, []).append(job)
    out = []
    for kind, jobs in sorted(by_kind.items()):
        w = sorted(run.starts[j.name] - j.arrival for j in jobs if j.name in run.starts)
        out.append(ClassWaits(kind, len(jobs), len(w), statistics.median(w) if w else None,
                              p95(w) if w else None, w[-1] if w else None))
    return out


def p95(waits: list[float]) -> float:
    """The 95th percentile of some waits (nearest rank), as the report gives it."""
    w = sorted(waits)
    return w[min(len(w) - 1, math.ceil(0.95 * len(w)) - 1)]


def utilisation(run: Replay, until: float | None = None) -> float:
    """The time-weighted share of the resource in use, from the first event to `until` (default: the last)."""
    points = run.usage
    if len(points) < 2:
        return points[0][1] if points else 0.0
    end = until if until is not None else points[-1][0]
    area = sum(share * (min(nxt, end) - t) for (t, share), (nxt, _) in itertools.pairwise(points) if t < end)
    span = end - points[0][0]
    return area / span if span > 0 else points[-1][1]
