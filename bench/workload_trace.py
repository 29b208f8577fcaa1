#!/usr/bin/env python3
"""The workloads users already run, arriving as a trace, side by side with kube-scheduler (issue 51's benchmark).

Jobs (indexed, parallelism 4-8), JobSets (a driver and a replicated job of workers), PyTorchJobs (master and workers)
and RayClusters (head and workers) arrive over time onto a cluster that cannot hold them all at once. The trace is
`policy-scheduler simulate`'s format (docs/time.md: nodes, and jobs with name, arrival, runtime, pods, requests,
class) with one key more per job, `owner`, saying which workload makes the pods and its shape:

    nodes: [{count: 60, allocatable: {cpu: "4", memory: 32Gi, pods: "110"}, prefix: node}]
    jobs:
      - {name: job-000, arrival: 0.0, runtime: 41, pods: 6, requests: {cpu: "1", memory: 1Gi}, class: Job,
         owner: {kind: Job, parallelism: 6}}
      - {name: js-001, ..., owner: {kind: JobSet, workers: 3, parallelism: 2}}    # driver 1 + 3 jobs x 2 pods
      - {name: pt-002, ..., owner: {kind: PyTorchJob, workers: 5}}                # master + 5 workers
      - {name: ray-003, ..., owner: {kind: RayCluster, workers: 5}}               # head + 5 workers

It is generated (seeded: `generate`) unless `--trace FILE` gives one, and written to the run's directory either way.
No controller runs (testkit's control plane has none): at its arrival the harness creates the workload object (the
CRDs installed from testkit/workloads.py's pinned manifests) and then its pods as its controller would, with its
labels and an owner reference to the object; `runtime` seconds after the last of them is bound it deletes them, as
if the workload had ended. Every workload here is a distributed job whose pods wait for each other: one that is
partly started holds its room and never ends.

For each scheduler in turn on the same control plane: start it, replay the trace, stop when
every workload ended, or nothing was bound or ended for ``--idle`` seconds with no end due, or after ``--timeout``;
then delete everything for the next. policy-scheduler runs a policy `gang by workload` for all pods
(bench/policies/workload-gangs); kube-scheduler runs as it is (no gang for these kinds: it starts what fits, pod by
pod). The table: workloads started whole, ended, partly started at the end and at most at once (some but not all
pods bound for longer than PARTIAL_GRACE_S), the time from a workload's creation to all its pods bound (p50, p90),
pods bound per second.

    python bench/workload_trace.py                                  # 60 nodes, 60 workloads, both schedulers
    python bench/workload_trace.py --nodes 4 --workloads 8 --runtime 2 4 --idle 12    # a smoke run (idle > 10 s backoff)
    python bench/workload_trace.py --figures RUN_DIR                # a run's table again, from what it saved
    python bench/workload_trace.py --trace /tmp/trace.yaml --kube-version v1.37.2
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (testkit/) and the other bench modules

import compare_cluster as api  # noqa: E402
from compare_measure import percentile  # noqa: E402
from compare_schedulers import SCHEDULERS, Settings, apply_policy_configmap  # noqa: E402
from compare_workloads import PENDING, PENDING_LABEL, NodeSpec  # noqa: E402
from testkit.controlplane import (  # noqa: E402
    LOOPBACK_NO_PROXY,
    build_binaries,
    kube_version,
    start_control_plane,
    supported_versions,
)
from testkit.manifests import PAUSE_IMAGE, created  # noqa: E402
from testkit.scheduling import Kube  # noqa: E402
from testkit.workloads import (  # noqa: E402
    API,
    PLURAL,
    job,
    job_pod,
    jobset,
    jobset_pod,
    pytorch_pod,
    pytorchjob,
    ray_pod,
    raycluster,
    workload_crd,
)

NS = "workloads"
WORKLOAD_LABEL = "bench.policy-scheduler.io/workload"  # every pod and object of one trace job: its name
POLICY_DIR = ROOT / "bench" / "policies" / "workload-gangs"
KINDS = ("Job", "JobSet", "PyTorchJob", "RayCluster")
KIND_WEIGHTS = (4, 2, 2, 2)           # Jobs the most common
PREFIX = {"Job": "job", "JobSet": "js", "PyTorchJob": "pt", "RayCluster": "ray"}
CPU_CHOICES = ("500m", "1", "2")      # per pod, the same for every pod of a workload; 1Gi of memory per cpu
NODE_ALLOCATABLE = {"cpu": "4", "memory": "32Gi", "pods": "110"}
PARTIAL_GRACE_S = 2.0                 # some pods bound, not all, for longer than this: partly started
TRACE_KEYS = {"name", "arrival", "runtime", "pods", "requests", "class", "owner", "priority", "limit"}


# --- the trace ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TraceJob:
    """One workload of the trace: when it arrives, how long it runs once whole, what each pod asks for, its shape."""

    name: str
    arrival: float
    runtime: float
    pods: int
    requests: dict[str, str]
    owner: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.owner["kind"])


def shape_pods(owner: dict[str, Any]) -> int:
    """How many pods the workload's controller makes (and `gang by workload` waits for)."""
    kind = owner.get("kind")
    if kind == "Job":
        return int(owner["parallelism"])
    if kind == "JobSet":
        return 1 + int(owner["workers"]) * int(owner["parallelism"])
    if kind in ("PyTorchJob", "RayCluster"):
        return 1 + int(owner["workers"])
    raise ValueError(f"owner kind {kind!r}: not one of {', '.join(KINDS)}")


def random_owner(kind: str, rng: random.Random) -> dict[str, Any]:
    """A workload of 4-8 pods: an indexed Job of parallelism 4-8; a JobSet's driver and 2-3 worker Jobs of 2 pods;
    a PyTorchJob's master and 3-7 workers; a RayCluster's head and 3-7 workers."""
    if kind == "Job":
        return {"kind": kind, "parallelism": rng.randint(4, 8)}
    if kind == "JobSet":
        return {"kind": kind, "workers": rng.randint(2, 3), "parallelism": 2}
    return {"kind": kind, "workers": rng.randint(3, 7)}


def cpu_m(requests: dict[str, str]) -> int:
    cpu = requests["cpu"]
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def generate(nodes: int, workloads: int, seed: int = 51, load: float = 1.5,
             runtime: tuple[float, float] = (20.0, 60.0)) -> dict[str, Any]:
    """A seeded trace: `workloads` of the four kinds (weights KIND_WEIGHTS), runtimes uniform in `runtime`, arriving
    in a Poisson stream whose mean rate asks for `load` times the cluster's cpu while it lasts (1.5: half as much
    again as the cluster holds, so some wait and room frees as others end)."""
    rng = random.Random(seed)
    jobs = []
    for k in range(workloads):
        kind = rng.choices(KINDS, KIND_WEIGHTS)[0]
        owner = random_owner(kind, rng)
        cpu = rng.choice(CPU_CHOICES)
        requests = {"cpu": cpu, "memory": f"{cpu_m({'cpu': cpu}) * 1024 // 1000}Mi"}
        jobs.append({"name": f"{PREFIX[kind]}-{k:03d}", "arrival": 0.0, "runtime": round(rng.uniform(*runtime), 1),
                     "pods": shape_pods(owner), "requests": requests, "class": kind, "owner": owner})
    work = sum(j["pods"] * cpu_m(j["requests"]) * j["runtime"] for j in jobs)  # cpu-millicore seconds asked for
    span = work / (load * nodes * cpu_m(NODE_ALLOCATABLE))
    at = 0.0
    for j in jobs[1:]:
        at += rng.expovariate(len(jobs) / span)
        j["arrival"] = round(at, 2)
    return {"nodes": [{"count": nodes, "allocatable": dict(NODE_ALLOCATABLE), "prefix": "node"}], "jobs": jobs}


def read_trace(doc: dict[str, Any]) -> tuple[list[NodeSpec], list[TraceJob]]:
    """The nodes and workloads of a trace, in arrival order; a clear error naming the job for what cannot be
    replayed (an unknown key, no owner, pods that are not the owner's shape, a pod larger than a node)."""
    nodes = [NodeSpec(f"{entry.get('prefix', 'node')}-{i:05d}", {k: str(v) for k, v in entry["allocatable"].items()})
             for entry in doc["nodes"] for i in range(int(entry["count"]))]
    jobs = []
    for k, j in enumerate(doc["jobs"]):
        where = f"jobs[{k}] ({j.get('name', '?')})"
        if unknown := set(j) - TRACE_KEYS:
            raise ValueError(f"{where}: unknown key {', '.join(sorted(unknown))}")
        if "owner" not in j:
            raise ValueError(f"{where}: no owner (the workload kind that makes its pods)")
        if (want := shape_pods(j["owner"])) != int(j.get("pods", 1)):
            raise ValueError(f"{where}: pods {j.get('pods', 1)}, but its {j['owner']['kind']} makes {want}")
        if not any(cpu_m(j["requests"]) <= cpu_m(n.allocatable) for n in nodes):
            raise ValueError(f"{where}: a pod asks for more cpu than any node has")
        jobs.append(TraceJob(str(j["name"]), float(j["arrival"]), float(j["runtime"]), want,
                             {k2: str(v) for k2, v in j["requests"].items()}, dict(j["owner"])))
    return nodes, sorted(jobs, key=lambda t: t.arrival)


# --- the objects a controller would make ------------------------------------------------------------------

def workload_object(t: TraceJob) -> dict[str, Any]:
    """The workload object the user creates (testkit/workloads.py's builders, in the benchmark's namespace)."""
    o = t.owner
    if t.kind == "Job":
        obj = job(t.name, parallelism=o["parallelism"], completions=o["parallelism"], ns=NS)
        obj["spec"]["completionMode"] = "Indexed"
    elif t.kind == "JobSet":
        obj = jobset(t.name, [("driver", 1, 1, 1), ("workers", o["workers"], o["parallelism"], o["parallelism"])], ns=NS)
    elif t.kind == "PyTorchJob":
        obj = pytorchjob(t.name, workers=o["workers"], ns=NS)
    else:
        obj = raycluster(t.name, [("workers", o["workers"], 1)], ns=NS)
    obj["metadata"]["labels"] = {WORKLOAD_LABEL: t.name}
    return created(obj)


def workload_pods(t: TraceJob, uid: str, scheduler: str) -> list[dict[str, Any]]:
    """Its pods as its controller makes them (labels, an owner reference to the object or, for a JobSet, to its
    child Job), each a pause container asking for the job's requests (limits the same), for `scheduler`."""
    spec = {"cpu": t.requests["cpu"], "memory": t.requests.get("memory"), "ns": NS, "scheduler": scheduler,
            "limits": dict(t.requests), "container": "pause", "image": PAUSE_IMAGE, "terminationGracePeriodSeconds": 0}
    o = t.owner
    if t.kind == "Job":
        pods = [job_pod(f"{t.name}-{i}", t.name, uid, **spec) for i in range(o["parallelism"])]
        for i, p in enumerate(pods):
            p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(i)
    elif t.kind == "JobSet":
        pods = [jobset_pod(f"{t.name}-driver-0-0", t.name, "driver", 0, **spec)]
        pods += [jobset_pod(f"{t.name}-workers-{j}-{i}", t.name, "workers", j, **spec)
                 for j in range(o["workers"]) for i in range(o["parallelism"])]
    elif t.kind == "PyTorchJob":
        pods = [pytorch_pod(f"{t.name}-master-0", t.name, "master", uid, **spec)]
        pods += [pytorch_pod(f"{t.name}-worker-{i}", t.name, "worker", uid, **spec) for i in range(o["workers"])]
    else:
        pods = [ray_pod(f"{t.name}-head", t.name, uid=uid, **spec)]
        pods += [ray_pod(f"{t.name}-workers-{i}", t.name, "workers", uid, **spec) for i in range(o["workers"])]
    for p in pods:
        p["metadata"]["labels"].update({PENDING_LABEL: PENDING, WORKLOAD_LABEL: t.name})
    return [created(p) for p in pods]


def pod_keys(t: TraceJob) -> list[str]:
    """``namespace/name`` of its pods (the same for every scheduler)."""
    return [f"{NS}/{p['metadata']['name']}" for p in workload_pods(t, "", "")]


# --- what a run saw, and its figures (pure) -----------------------------------------------------------------

@dataclass
class Seen:
    """One scheduler's replay, on the harness's clock (seconds from the trace's start): when each workload was
    created (its object's create returned), when each pod was first seen bound, when each workload ended."""

    scheduler: str
    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    end: float = 0.0
    error: str = ""


@dataclass(frozen=True)
class Figures:
    """The table's row for one scheduler."""

    scheduler: str
    workloads: int
    whole: int                    # started whole: every pod bound at some time
    ended: int                    # ran their runtime and ended
    partial_end: int              # some but not all pods bound when the run ended
    partial_max: int              # the most partly started at one time (each for longer than PARTIAL_GRACE_S)
    partial_ever: int             # partly started for longer than PARTIAL_GRACE_S at some time
    held_cpu_s: float             # cpu seconds bound pods held while their workload was not whole: room for nothing
    pods: int
    pods_bound: int
    wait_p50: float | None        # creation -> all pods bound, over the workloads started whole
    wait_p90: float | None
    pods_per_s: float             # pods bound / (last bind - first creation)
    seconds: float                # the run: first creation -> end
    error: str = ""


def whole_at(keys: list[str], bound: dict[str, float]) -> float | None:
    """When the last of `keys` was bound (None: not all were)."""
    return max(bound[k] for k in keys) if all(k in bound for k in keys) else None


def partial_spans(keys: list[str], bound: dict[str, float], end: float) -> tuple[float, float] | None:
    """When a workload was partly started for longer than the grace: from its first bind plus the grace to its last
    bind (or the run's end); None if never."""
    times = [bound[k] for k in keys if k in bound]
    if not times:
        return None
    stop = max(times) if len(times) == len(keys) else end
    start = min(times) + PARTIAL_GRACE_S
    return (start, stop) if stop > start else None


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one time (an end at the same time as a start closes first)."""
    edges = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def held_cpu_s(t: TraceJob, keys: list[str], bound: dict[str, float], end: float) -> float:
    """The cpu seconds `t`'s bound pods held before the workload was whole (until the run's end if never)."""
    until = whole_at(keys, bound)
    until = end if until is None else until
    return sum(until - bound[k] for k in keys if k in bound) * cpu_m(t.requests) / 1000


def figures(jobs: list[TraceJob], seen: Seen) -> Figures:
    keys = {t.name: pod_keys(t) for t in jobs}
    waits = []
    spans = []
    partial_end = 0
    held = 0.0
    for t in jobs:
        held += held_cpu_s(t, keys[t.name], seen.bound, seen.end)
        done = whole_at(keys[t.name], seen.bound)
        if done is not None and t.name in seen.created:
            waits.append(done - seen.created[t.name])
        if (span := partial_spans(keys[t.name], seen.bound, seen.end)) is not None:
            spans.append(span)
        got = sum(1 for k in keys[t.name] if k in seen.bound)
        partial_end += 0 < got < len(keys[t.name])
    start = min(seen.created.values(), default=0.0)
    last = max(seen.bound.values(), default=start)
    return Figures(seen.scheduler, len(jobs), len(waits), len(seen.ended), partial_end, most_at_once(spans),
                   len(spans), round(held, 1), sum(len(k) for k in keys.values()), len(seen.bound),
                   _round(percentile(waits, 0.5)), _round(percentile(waits, 0.9)),
                   round(len(seen.bound) / (last - start), 2) if last > start else 0.0, round(seen.end - start, 1),
                   seen.error)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def table(rows: list[Figures]) -> str:
    """The Markdown table the script prints."""
    out = ["| scheduler | workloads started whole | ended | partly started at the end | partly started at most "
           "at once (ever) | cpu·s held by partly started | creation → all pods bound p50 / p90 s | pods bound | "
           "pods/s | run s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        wait = f"{_fmt(r.wait_p50)} / {_fmt(r.wait_p90)}"
        err = f" ⚠ {r.error.splitlines()[0][:80]}" if r.error else ""
        out.append(f"| {r.scheduler}{err} | {r.whole}/{r.workloads} | {r.ended} | {r.partial_end} | "
                   f"{r.partial_max} ({r.partial_ever}) | {r.held_cpu_s:.0f} | {wait} | {r.pods_bound}/{r.pods} | "
                   f"{r.pods_per_s:.1f} | {r.seconds:.0f} |")
    return "\n".join(out)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


# --- the replay against a control plane ---------------------------------------------------------------------

def install(kube: Kube, kinds: set[str]) -> None:
    """The CRDs of the trace's kinds (all but Job), from their pinned released manifests, once served."""
    for kind in sorted(kinds - {"Job"}):
        crd = workload_crd(kind)
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        api.ok(kube, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd, allow=(409,))
        served = f"/apis/{crd['spec']['group']}/{version}/{crd['spec']['names']['plural']}"
        deadline = time.monotonic() + 60
        while kube.request("GET", served)[0] != 200:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{served} not served 60 s after creating its CRD")
            time.sleep(0.2)


def collection_of(kind: str) -> str:
    base = "/apis/batch/v1" if kind == "Job" else f"/apis/{API[kind]}"
    return f"{base}/namespaces/{NS}/{PLURAL[kind]}"


@dataclass
class Replay:
    """The trace replayed against one running scheduler: arrivals on time (from a few threads, each workload's
    object, then its pods), ends `runtime` after a workload's last bind."""

    kube: Kube
    jobs: list[TraceJob]
    scheduler: str
    watch: api.BindWatch
    seen: Seen
    t0: float = 0.0
    keys: dict[str, list[str]] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)   # workload -> when it ends (it is whole)
    arrived: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def arrive(self, t: TraceJob) -> None:
        try:
            obj = api.ok(self.kube, "POST", collection_of(t.kind), workload_object(t))
            with self.lock:
                self.seen.created[t.name] = self.now()
            for p in workload_pods(t, obj["metadata"]["uid"], self.scheduler):
                api.ok(self.kube, "POST", f"/api/v1/namespaces/{NS}/pods", p)
        except Exception as exc:  # reported in the table; the run goes on
            with self.lock:
                self.failures.append(f"{t.name}: {type(exc).__name__}: {exc}"[:500])

    def end(self, t: TraceJob) -> None:
        """The workload ended: its pods go (no kubelet to wait for)."""
        api.ok(self.kube, "DELETE", f"/api/v1/namespaces/{NS}/pods", {"gracePeriodSeconds": 0},
               query=[("labelSelector", f"{WORKLOAD_LABEL}={t.name}"), ("gracePeriodSeconds", "0")])
        with self.lock:
            self.seen.ended[t.name] = self.now()

    def run(self, idle_s: float, timeout_s: float) -> None:
        """Until every workload ended; or all arrived and nothing was bound or ended for `idle_s` with no end due;
        or `timeout_s`."""
        self.keys = {t.name: pod_keys(t) for t in self.jobs}
        by_name = {t.name: t for t in self.jobs}
        self.t0 = time.monotonic()
        last_change, seen_bound = 0.0, -1
        with ThreadPoolExecutor(8) as pool:
            while True:
                now = self.now()
                while self.arrived < len(self.jobs) and self.jobs[self.arrived].arrival <= now:
                    pool.submit(self.arrive, self.jobs[self.arrived])
                    self.arrived += 1
                    last_change = now
                bound = {k: b - self.t0 for k, b in dict(self.watch.bound).items()}
                for name, keys in self.keys.items():
                    if name not in self.due and (done := whole_at(keys, bound)) is not None:
                        self.due[name] = done + by_name[name].runtime
                for name, at in list(self.due.items()):
                    if at <= now and name not in self.seen.ended:
                        self.end(by_name[name])
                        last_change = now
                if len(bound) != seen_bound:
                    seen_bound, last_change = len(bound), now
                ended_all = len(self.seen.ended) == len(self.jobs)
                waiting_end = any(name not in self.seen.ended for name in self.due)
                idle = self.arrived == len(self.jobs) and not waiting_end and now - last_change > idle_s
                if ended_all or idle or now > timeout_s:
                    break
                time.sleep(0.05)
        self.seen.bound = {k: b - self.t0 for k, b in dict(self.watch.bound).items()}
        self.seen.end = self.now()
        self.seen.error = "; ".join(self.failures[:3])


def reset(kube: Kube, kinds: set[str]) -> None:
    """Every pod and workload object of the run gone (background propagation: no garbage collector runs here, and
    a Job's default, orphaning, would wait for one), waited for."""
    delete = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Background"}
    api.ok(kube, "DELETE", f"/api/v1/namespaces/{NS}/pods", delete,
           query=[("labelSelector", PENDING_LABEL), ("gracePeriodSeconds", "0")])
    for kind in kinds:
        api.ok(kube, "DELETE", collection_of(kind), delete)
    deadline = time.monotonic() + api.DELETE_TIMEOUT_S
    while api.ok(kube, "GET", f"/api/v1/namespaces/{NS}/pods", query=[("labelSelector", PENDING_LABEL)])["items"] or \
            any(api.ok(kube, "GET", collection_of(kind))["items"] for kind in kinds):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run's pods and workloads still there {api.DELETE_TIMEOUT_S:.0f} s after deleting")
        time.sleep(0.2)


def run_one(cp, kube: Kube, jobs: list[TraceJob], scheduler: str, settings: Settings, logs: Path,
            idle_s: float, timeout_s: float) -> Seen:
    """Start `scheduler`, replay the trace, stop it, clean up."""
    seen = Seen(scheduler)
    watch = api.BindWatch(cp)
    watch.start()
    running = None
    try:
        logs.mkdir(parents=True, exist_ok=True)
        running = SCHEDULERS[scheduler].start(cp, settings, logs, with_policy=True)
        Replay(kube, jobs, scheduler, watch, seen).run(idle_s, timeout_s)
    except Exception as exc:  # a failed run is a row with its error
        seen.error = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        if running is not None:
            running.stop()
        watch.stop()
    reset(kube, {t.kind for t in jobs})
    return seen


def setup(cp, kube: Kube, nodes: list[NodeSpec], jobs: list[TraceJob]) -> None:
    """The namespace, the nodes, the CRDs and policy-scheduler's policies (once for every run)."""
    cp.ensure_namespace(NS)
    install(kube, {t.kind for t in jobs})
    api.in_parallel(lambda n: api.create_node(kube, n), nodes)
    apply_policy_configmap(cp, POLICY_DIR)


# --- command line ---------------------------------------------------------------------------------------------

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--trace", type=Path, help="a trace file (YAML or JSON) instead of a generated one")
    ap.add_argument("--nodes", type=int, default=60, help="generated trace: nodes of 4 cpu (default 60)")
    ap.add_argument("--workloads", type=int, default=60, help="generated trace: workloads (default 60)")
    ap.add_argument("--seed", type=int, default=51)
    ap.add_argument("--load", type=float, default=1.5,
                    help="generated trace: the cpu the arrivals ask for while they last, in clusters (default 1.5)")
    ap.add_argument("--runtime", type=float, nargs=2, default=(20.0, 60.0), metavar=("MIN", "MAX"),
                    help="generated trace: each workload runs this long once whole, uniform (default 20 60 s)")
    ap.add_argument("-s", "--scheduler", action="append", choices=("policy-scheduler", "kube-scheduler"),
                    help="in this order (default: kube-scheduler, then policy-scheduler)")
    ap.add_argument("--kube-version", help="the control plane's and kube-scheduler's release (default: "
                                           "$POLICY_SCHEDULER_KUBE_VERSION or v1.36.3)")
    ap.add_argument("--idle", type=float, default=15.0, help="seconds without a bind or an end that end a run")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a run may take at most")
    ap.add_argument("--figures", type=Path, metavar="RUN_DIR",
                    help="print the table again from a run's directory (its trace.yaml and SCHEDULER-seen.json)")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "policy-scheduler-workload-trace",
                    help="work directory: the trace, every process's logs, results.json")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.figures:
        return print_again(args.figures)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(
        p for p in (os.environ.get("NO_PROXY"), LOOPBACK_NO_PROXY) if p)
    version = args.kube_version or kube_version()
    if version not in supported_versions():
        raise SystemExit(f"--kube-version {version}: not a release built here ({', '.join(supported_versions())})")
    doc = (yaml.safe_load(args.trace.read_text()) if args.trace else
           generate(args.nodes, args.workloads, args.seed, args.load, tuple(args.runtime)))
    try:
        nodes, jobs = read_trace(doc)
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{args.trace or 'generated trace'}: {exc}") from None
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=args.out))
    (workdir / "trace.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
    bin_dir = build_binaries(version)
    settings = Settings(bin_dir / "kube-scheduler", bin_dir / "kube-scheduler", kube_version=version)
    log(f"work directory {workdir}: {len(nodes)} nodes, {len(jobs)} workloads "
        f"({', '.join(f'{sum(t.kind == k for t in jobs)} {k}' for k in KINDS)}), {sum(t.pods for t in jobs)} pods, "
        f"arrivals over {jobs[-1].arrival:.0f} s")
    rows = []
    with start_control_plane(workdir / "control-plane", bin_dir, version=version) as cp:
        kube = Kube(cp.kubeconfig)
        setup(cp, kube, nodes, jobs)
        for scheduler in args.scheduler or ("kube-scheduler", "policy-scheduler"):
            seen = run_one(cp, kube, jobs, scheduler, settings, workdir / scheduler, args.idle, args.timeout)
            rows.append(figures(jobs, seen))
            log(f"  {scheduler}: {rows[-1]}")
            (workdir / f"{scheduler}-seen.json").write_text(json.dumps(asdict(seen)))
            (workdir / "results.json").write_text(json.dumps({"command": command(argv), "kube_version": version,
                                                              "rows": [asdict(r) for r in rows]}, indent=1))
    print(f"`{command(argv)}` (Kubernetes {version}; {len(nodes)} nodes, {len(jobs)} workloads)\n")
    print(table(rows))
    log(f"results in {workdir / 'results.json'}")
    return 1 if any(r.error for r in rows) else 0


def print_again(run: Path) -> int:
    """The table of a run from what it saved (the figures of this code, from the same observations)."""
    _, jobs = read_trace(yaml.safe_load((run / "trace.yaml").read_text()))
    saved = json.loads((run / "results.json").read_text())
    rows = [figures(jobs, Seen(**json.loads((run / f"{r['scheduler']}-seen.json").read_text()))) for r in saved["rows"]]
    print(f"`{saved['command']}` (Kubernetes {saved['kube_version']}; {len(jobs)} workloads)\n")
    print(table(rows))
    return 1 if any(r.error for r in rows) else 0


def command(argv: list[str]) -> str:
    return "python bench/workload_trace.py " + shlex.join(argv)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
