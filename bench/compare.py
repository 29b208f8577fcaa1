#!/usr/bin/env python3
"""policy-scheduler side by side with the real kube-scheduler, Coscheduling and CapacityScheduling, same control plane,
same run.

For each workload and node count: a fresh etcd + kube-apiserver (testkit/controlplane.py), the nodes,
PriorityClasses and running pods; then, for each scheduler in turn (order rotated per repeat): PodGroups, start
the scheduler, create the pending pods (or, for batch-arrival workloads, create them first), wait until all are
bound or no binding came for ``--idle`` seconds, read the figures (policy-scheduler's cycles from its /metrics),
stop the scheduler, delete the pending pods. The report (Markdown tables, PNG plots) is written between the
markers of ``--report`` (BENCHMARKS.md by default), leaving the rest of the file alone.

    python bench/compare.py --mode quick                 # ~100 nodes, every workload, 1 repeat (minutes)
    python bench/compare.py --mode medium                # 500 and 1,000 nodes
    python bench/compare.py --mode full                  # 100 .. 5,000 nodes, 3 repeats (hours)
    python bench/compare.py --nodes 20 -w basic -w gangs --report /tmp/r.md --plots /tmp   # a smoke run
    python bench/compare.py --kube-version v1.37.2 ...  # control plane and kube-scheduler of that release

The release (``--kube-version``, default $POLICY_SCHEDULER_KUBE_VERSION or v1.36.3) is the control plane's and
kube-scheduler's (both built by tests/e2e/controlplane/build.sh and cached); native-gang workloads write their
PodGroups in the API that release serves (scheduling.k8s.io v1alpha2 on 1.36, v1beta1 on 1.37).
"""
from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (testkit/) and the other bench modules

import compare_cluster as api  # noqa: E402
import compare_report as report  # noqa: E402
from compare_measure import (  # noqa: E402
    RunResult,
    bound_curve,
    eviction_outcome,
    gang_members,
    gc_marks,
    gc_split,
    outcome,
    tenant_outcome,
    timing,
    waits_of,
)
from compare_schedulers import (  # noqa: E402
    SCHEDULERS,
    SchedulerKind,
    Settings,
    apply_policy_configmap,
    cpu_seconds,
)
from compare_workloads import WORKLOADS, Scenario, Workload  # noqa: E402
from testkit.controlplane import (  # noqa: E402
    DEFAULT_KUBE_VERSION,
    LOOPBACK_NO_PROXY,
    ControlPlane,
    build_binaries,
    build_coscheduling,
    controllers,
    http_get,
    kube_version,
    start_control_plane,
    supported_versions,
    verifying_context,
)
from testkit.scheduling import Kube  # noqa: E402


@dataclass(frozen=True)
class Mode:
    """Sizes and patience of a benchmark run."""

    nodes: tuple[int, ...]
    repeats: int
    idle_s: float          # no new binding for this long (after all pods exist): the scheduler is done
    timeout_s: float       # per scheduler run, whatever happens


MODES = {
    "quick": Mode((100,), 1, 8.0, 240.0),
    "medium": Mode((500, 1000), 1, 12.0, 600.0),
    "full": Mode((100, 500, 1000, 2000, 5000), 3, 15.0, 1200.0),
}


@dataclass(frozen=True)
class Plan:
    workloads: tuple[Workload, ...]
    schedulers: tuple[SchedulerKind, ...]
    mode: Mode
    settings: Settings
    crd_file: Path
    quota_crd_file: Path
    workdir: Path
    revision: str          # the policy-scheduler code measured
    arrival: str | None = None  # every workload's arrival instead of its own (stream or batch)
    rate: float | None = None   # stream arrival: pods created per second (None: as fast as the clients go)
    named: bool = False         # the schedulers were asked for by name: each runs every workload
    kube_version: str = DEFAULT_KUBE_VERSION  # the control plane's and kube-scheduler's release
    gc_trace: bool = False      # --apiserver-gc: split each run's waits by the apiserver's GC marks
    profile_s: float = 0.0      # --apiserver-profile: seconds of the apiserver's CPU profile from the first create

    def schedulers_for(self, workload: Workload) -> tuple[SchedulerKind, ...]:
        """The contenders of one workload: a scheduler meant for some workloads only (capacity-scheduling) runs
        the others only when asked for by name."""
        return tuple(k for k in self.schedulers if self.named or k.workloads is None or workload.name in k.workloads)


# --- one scheduler, one workload --------------------------------------------------------------------------

def run_one(plan: Plan, cp, kube: Kube, scenario: Scenario, workload: Workload, kind: SchedulerKind,
            repeat: int) -> RunResult:
    """Start ``kind``, give it the pending pods, wait until it is done, measure, stop it, clean up."""
    arrival = plan.arrival or workload.arrival
    result = RunResult(workload.name, len_nodes(scenario), kind.name, repeat, arrival, len(scenario.pending),
                       rate=plan.rate if arrival == "stream" else None)
    pods = api.pending_for(scenario, kind.name)
    provisioner = prepare(kube, scenario)
    watch = api.BindWatch(cp)
    watch.start()
    reaper = api.Reaper(cp, kube=Kube(cp.kubeconfig)) if scenario.quotas or scenario.preset else None
    if reaper is not None:
        reaper.start()
    running, t0 = None, 0.0
    created: dict[str, float] = {}
    api_cpu, (requests_before, seconds_before) = apiserver_cpu_s(cp), api_requests(cp)
    etcd_cpu = cpu_seconds(cp.etcd)
    try:
        batch = arrival == "batch"
        create_s = 0.0
        if batch:
            created, create_s = timed_create(kube, pods)
        logs = plan.workdir / f"{scenario.workload}-{result.nodes}-{repeat}"
        logs.mkdir(parents=True, exist_ok=True)
        running = kind.start(cp, plan.settings, logs, with_policy=scenario.policy_dir is not None,
                             native=workload.native, preemption=workload.preemption)
        result.startup_s = running.ready_at - running.started_at
        t0 = running.ready_at
        profiler = apiserver_profile(cp, plan.profile_s, logs / f"{kind.name}-apiserver.pprof")
        if not batch:
            t0 = time.monotonic()
            created, create_s = timed_create(kube, pods, plan.rate)
        result.create_s = create_s
        wait_done(watch, running, len(pods), plan.mode)
        if api_cpu is not None:  # until the last bind, before the scheduler is stopped
            result.apiserver_cpu_bound_s = _round((apiserver_cpu_s(cp) or 0.0) - api_cpu)
        if batch and watch.bound:
            first = min(watch.bound.values())
            result.first_bind_s = round(first - running.started_at, 3)
            result.seen_bind_s = round(first - running.ready_at, 3)
            result.bound_curve = bound_curve(list(watch.bound.values()), running.ready_at)
            t0 = min(t0, first)
        result.rss_mib = running.peak_rss_mib()
        if profiler is not None:
            profiler.join(plan.profile_s + 60)
        members = frozenset(gang_members(scenario))
        timing(result, created, dict(watch.bound), t0, batch, members)
        if plan.gc_trace and cp.apiserver.started_at is not None:
            marks = gc_marks(cp.apiserver.log_path.read_text(errors="replace"), cp.apiserver.started_at)
            gc_split(result, created, dict(watch.bound), t0, batch, marks, members)
        waits = waits_of(created, dict(watch.bound), t0, batch)  # per pod, beside the logs, for a closer look
        times = {key: {"wait": round(w, 4), "created": created.get(key), "bound": watch.bound.get(key)}
                 for key, w in sorted(waits.items(), key=lambda kv: -kv[1])}  # time.monotonic(): one clock per machine
        (logs / f"{kind.name}-waits.json").write_text(json.dumps(times))
        cycles = running.cycles(bound=len(watch.bound))
        if cycles is not None:
            result.batches, result.batch_pods = cycles.count, int(cycles.sizes.sum)
            result.solve_s, result.solve_max_s = round(cycles.solve.sum, 3), cycles.solve.at_most()
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        if running is not None:
            result.scheduler_cpu_s = _round(running.cpu_s())
            running.stop()
        result.apiserver_cpu_s = _round(None if api_cpu is None else (apiserver_cpu_s(cp) or 0.0) - api_cpu)
        result.etcd_cpu_s = _round(None if etcd_cpu is None else (cpu_seconds(cp.etcd) or 0.0) - etcd_cpu)
        after, seconds_after = api_requests(cp)
        result.api_requests = {k: n - requests_before.get(k, 0) for k, n in sorted(after.items())
                               if n > requests_before.get(k, 0)}
        result.api_seconds = {k: round(s - seconds_before.get(k, 0.0), 4) for k, s in sorted(seconds_after.items())
                              if k in result.api_requests}
        watch.stop()
        if reaper is not None:
            reaper.stop()
    waits = waits_of(created, dict(watch.bound), t0, arrival == "batch")
    finish(result, kube, scenario, reaper.victims if reaper is not None else set(), waits, provisioner)
    return result


def apiserver_profile(cp: ControlPlane, seconds: float, out: Path) -> threading.Thread | None:
    """The apiserver's Go CPU profile (its /debug/pprof, on by default) over the next `seconds`, written to `out` by a
    thread (`go tool pprof -top OUT` reads it): where the apiserver's CPU goes while a scheduler runs."""
    if seconds <= 0:
        return None

    def capture() -> None:
        status, body = http_get(f"{cp.server}/debug/pprof/profile?seconds={seconds:.0f}", token=cp.token,
                                context=verifying_context(cp.ca_file), timeout=seconds + 30)
        out.write_bytes(body if status == 200 else f"{status}: {body[:300]!r}".encode())
    thread = threading.Thread(target=capture, name="apiserver-profile", daemon=True)
    thread.start()
    return thread


def apiserver_cpu_s(cp: ControlPlane) -> float | None:
    """CPU seconds kube-apiserver and etcd used so far (None if either cannot be read)."""
    both = [cpu_seconds(cp.apiserver), cpu_seconds(cp.etcd)]
    return None if None in both else sum(both)


def api_requests(cp: ControlPlane) -> tuple[dict[str, int], dict[str, float]]:
    """Requests the apiserver has served so far by "VERB resource[/subresource]", from its own
    apiserver_request_total (every client's: the harness's creates and watches as well as the scheduler's; the
    same for every scheduler of a workload, so the difference between two runs is the schedulers'), and the seconds
    it spent serving them (apiserver_request_duration_seconds_sum: from the request's arrival to its answer, so a
    scheduler whose binds wait longer than another's on the apiserver's side shows it). Empty if /metrics cannot
    be read."""
    try:
        status, body = cp.get("/metrics", token=cp.token)
    except OSError:
        return {}, {}
    if status != 200:
        return {}, {}
    counts: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for line in body.decode().splitlines():
        if line.startswith("apiserver_request_total{"):
            key = _request_key(line)
            counts[key] = counts.get(key, 0) + int(float(line.rsplit(" ", 1)[1]))
        elif line.startswith("apiserver_request_duration_seconds_sum{"):
            key = _request_key(line)
            seconds[key] = seconds.get(key, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts, seconds


def _request_key(line: str) -> str:
    """"VERB resource[/subresource]" of one apiserver metric line."""
    labels = dict(part.split("=", 1) for part in line[line.index("{") + 1:line.rindex("}")].split(",") if "=" in part)
    label = {k: v.strip('"') for k, v in labels.items()}
    return f"{label.get('verb')} {label.get('resource')}" + (f"/{label['subresource']}" if label.get("subresource") else "")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def prepare(kube: Kube, scenario: Scenario) -> api.Provisioner | None:
    """What every run gets afresh before its scheduler starts: PodGroups, volumes, claims, the pods created bound;
    the harness's provisioner, started, if the workload has one."""
    api.create_pod_groups(kube, scenario)
    api.create_volumes(kube, scenario)
    api.create_claims(kube, scenario)
    api.create_preset(kube, scenario)
    provisioner = api.Provisioner(kube, scenario.provisioner) if scenario.provisioner else None
    if provisioner is not None:
        provisioner.start()
    return provisioner


def finish(result: RunResult, kube: Kube, scenario: Scenario, victims: set[str], waits: dict[str, float],
           provisioner: api.Provisioner | None) -> None:
    """The figures read from the cluster once the scheduler stopped (placement, claims, devices, tenants), then the
    reset for the next scheduler."""
    where = api.placement(kube)
    outcome(result, scenario, where)
    result.unplaced_why = api.unplaced_reasons(kube, scenario, {k for k, node in where.items() if not node}) or None
    if scenario.volumes:
        result.claims = sum(1 for v in scenario.volumes if v["kind"] == "PersistentVolumeClaim")
        result.claims_bound = api.claims_bound(kube, result.placed)  # one claim per pod in the stateful workload
    if scenario.claims:
        result.devices_used = api.devices_used(kube)
        result.devices_overcommitted = api.devices_overcommitted(kube)
    if scenario.quotas:
        tenant_outcome(result, scenario, where, api.preset_left(kube), victims, waits)
    elif scenario.preset:
        eviction_outcome(result, scenario, victims)
    if provisioner is not None:
        provisioner.stop()
    api.reset(kube, scenario)
    api.delete_volumes(kube, scenario)
    api.delete_claims(kube, scenario)


def len_nodes(scenario: Scenario) -> int:
    """The size the workload was asked for (gangs adds two small nodes of its own)."""
    return sum(1 for n in scenario.nodes if not n.name.startswith("small-"))


def timed_create(kube: Kube, pods: list[dict], rate: float | None = None) -> tuple[dict[str, float], float]:
    start = time.monotonic()
    created = api.create_pods(kube, pods, rate)
    return created, time.monotonic() - start


def wait_done(watch: api.BindWatch, running, expected: int, mode: Mode) -> None:
    """Until every pod is bound, or nothing was bound for ``idle_s`` (for policy-scheduler: since its first
    cycle ended, which in a fresh virtualenv may wait seconds for ortools to be compiled and imported), or
    ``timeout_s`` is over; a scheduler that exits is an error."""
    start = last_change = time.monotonic()
    seen = -1
    while len(watch.bound) < expected:
        now = time.monotonic()
        if len(watch.bound) != seen:
            seen, last_change = len(watch.bound), now
        if now - start > mode.timeout_s:
            return
        if now - last_change > mode.idle_s and _cycled(running):
            return
        if not running.process.running():
            raise RuntimeError(f"{running.name} exited:\n{running.process.log_tail()}")
        time.sleep(0.1)


def _cycled(running) -> bool:
    """Has the scheduler finished a cycle? (Always true for those without metrics: they are judged by binds.)"""
    cycles = running.cycles(patience=0.0)
    return cycles is None or cycles.count >= 1


# --- one workload at one size -----------------------------------------------------------------------------

def run_workload(plan: Plan, workload: Workload, nodes: int, repeat: int, bin_dir: Path) -> list[RunResult]:
    """A fresh control plane for the workload; every scheduler in turn on the same nodes and pods."""
    scenario = workload.scenario(nodes, plan.kube_version)
    cpdir = Path(tempfile.mkdtemp(prefix=f"cp-{workload.name}-{nodes}-", dir=plan.workdir))
    results = []
    gc_env = {"GODEBUG": "gctrace=1"} if plan.gc_trace else None
    with start_control_plane(cpdir, bin_dir, version=plan.kube_version, apiserver_env=gc_env,
                             profiling=plan.profile_s > 0) as cp:
        kube = Kube(cp.kubeconfig)
        started = time.monotonic()
        api.populate(cp, kube, scenario, plan.crd_file, plan.quota_crd_file)
        if scenario.policy_dir is not None:
            apply_policy_configmap(cp, scenario.policy_dir)
        log(f"{workload.name} x {nodes} nodes (repeat {repeat + 1}): {len(scenario.nodes)} nodes, "
            f"{len(scenario.running)} running pods in {time.monotonic() - started:.1f} s")
        order = rotate(plan.schedulers_for(workload), repeat)
        with contextlib.ExitStack() as stack:
            if scenario.controllers:
                stack.enter_context(controllers(cp, scenario.controllers, cpdir / "controllers"))
            for kind in order:
                result = run_one(plan, cp, kube, scenario, workload, kind, repeat)
                log(summary(result))
                results.append(result)
    return results


def rotate(items: tuple, k: int) -> tuple:
    """Who goes first changes per repeat, so a warm-up or a noisy minute does not favour one scheduler."""
    k %= len(items)
    return items[k:] + items[:k]


def summary(r: RunResult) -> str:
    gangs = f" gangs {r.gangs_complete}/{r.gangs} ({r.gangs_partial} partial)" if r.gangs else ""
    gangs += (f" in one domain {r.gangs_one_domain}, domains per gang mean {fmt(r.domains_mean)} max {r.domains_max}"
              if r.gangs_one_domain is not None else "")
    gangs += (f" victims {r.preemptions} (groups evicted whole {r.groups_evicted}, half-evicted {r.groups_half_evicted})"
              if r.groups_evicted is not None else "")
    gangs += f" devices {r.devices_used}" if r.devices_used is not None else ""
    gangs += f" overcommitted {r.devices_overcommitted}" if r.devices_overcommitted is not None else ""
    err = f" ERROR {r.error.splitlines()[0]}" if r.error else ""
    return (f"  {r.scheduler:17s} placed {r.placed}/{r.pending} in {r.seconds:.1f} s = {r.pods_per_s:.0f} pods/s, "
            f"p50 {fmt(r.latency_p50)} p99 {fmt(r.latency_p99)}"
            f"{'' if r.latency_p99_solo is None else f' (no gang {fmt(r.latency_p99_solo)})'}"
            f"{'' if r.gc_marks is None else gc_line(r)}, "
            f"start to ready {fmt(r.startup_s)} to first bind {fmt(r.first_bind_s)} (ready to first bind {fmt(r.seen_bind_s)}), "
            f"nodes {r.nodes_used}{gangs}, "
            f"rss {fmt(r.rss_mib, 0)} MiB, cpu s apiserver+etcd {fmt(r.apiserver_cpu_s)} "
            f"(etcd {fmt(r.etcd_cpu_s)}, to the last bind {fmt(r.apiserver_cpu_bound_s)}) "
            f"scheduler {fmt(r.scheduler_cpu_s)}{err}")


def gc_line(r: RunResult) -> str:
    return (f" (apiserver GC marking {r.gc_marks}× {fmt(r.gc_mark_s)} s: p99 {fmt(r.latency_p99_in_gc, 3)} of "
            f"{r.pods_in_gc} pods waiting across one, {fmt(r.latency_p99_clear, 3)} of the others)")


def fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- command line ------------------------------------------------------------------------------------------

def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--mode", choices=sorted(MODES), default="quick")
    ap.add_argument("--nodes", type=int, action="append", help="node counts (repeatable; default: the mode's)")
    ap.add_argument("-w", "--workload", action="append", choices=list(WORKLOADS), help="default: all")
    ap.add_argument("-s", "--scheduler", action="append", choices=list(SCHEDULERS), help="default: all")
    ap.add_argument("-n", "--repeats", type=int, help="default: the mode's")
    ap.add_argument("--kube-version", help="Kubernetes release of the control plane and kube-scheduler, e.g. v1.37.2 "
                                           "(default: $POLICY_SCHEDULER_KUBE_VERSION or v1.36.3)")
    ap.add_argument("--arrival", choices=["stream", "batch"], help="every workload's arrival (default: its own)")
    ap.add_argument("--rate", type=float, help="stream arrival: create pods at this many per second (default: as "
                                               "fast as 16 clients go)")
    ap.add_argument("--idle", type=float, help="seconds without a binding that end a run (default: the mode's)")
    ap.add_argument("--apiserver-profile", type=float, default=0.0, metavar="SECONDS",
                    help="capture the apiserver's CPU profile for SECONDS from each run's first create "
                         "(<logs>/<scheduler>-apiserver.pprof)")
    ap.add_argument("--apiserver-gc", action="store_true",
                    help="run the apiserver with GODEBUG=gctrace=1 and split each run's waits by its garbage "
                         "collector's mark phases: p99 of the pods waiting across one, and of the others")
    ap.add_argument("--ours-arg", action="append", default=[],
                    help="extra flag for `policy-scheduler run`, e.g. --ours-arg=--batch-window=0.5")
    ap.add_argument("--report", type=Path, default=ROOT / "BENCHMARKS.md",
                    help="Markdown file whose compare section is (re)written")
    ap.add_argument("--plots", type=Path, default=ROOT / "bench", help="directory of the PNG plots")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "policy-scheduler-compare",
                    help="work directory: logs of every process, results.json")
    return ap.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    base = MODES[args.mode]
    mode = Mode(tuple(args.nodes or base.nodes), args.repeats or base.repeats, args.idle or base.idle_s,
                base.timeout_s)
    version = args.kube_version or kube_version()
    if version not in supported_versions():
        raise SystemExit(f"--kube-version {version}: not a release built here (supported: "
                         f"{', '.join(supported_versions())})")
    plugins_dir = build_coscheduling()
    args.out.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=time.strftime("run-%Y%m%d-%H%M%S-"), dir=args.out))
    workloads = tuple(WORKLOADS[w] for w in args.workload or WORKLOADS)
    schedulers = tuple(SCHEDULERS[s] for s in args.scheduler or SCHEDULERS)
    if not args.scheduler:  # those meant for some workloads only, if none of them runs: not at all
        schedulers = tuple(k for k in schedulers if k.workloads is None or k.workloads & {w.name for w in workloads})
    return Plan(workloads, schedulers, mode,
                Settings(build_binaries(version) / "kube-scheduler", plugins_dir / "kube-scheduler", tuple(args.ours_arg),
                         kube_version=version),
                plugins_dir / "podgroups-crd.yaml", plugins_dir / "elasticquotas-crd.yaml", workdir, revision(),
                args.arrival, args.rate, named=bool(args.scheduler), kube_version=version, gc_trace=args.apiserver_gc,
                profile_s=args.apiserver_profile)


def revision() -> str:
    """The commit of the engine that runs (``python -m engine`` from this tree), marked when engine/ or
    grammar/ differ from it: figures are only comparable for the same code."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "engine", "grammar")
    return f"{commit} + uncommitted changes" if dirty else commit


def compile_engine() -> None:
    """The engine's bytecode, as `pip install` writes it for an installed scheduler: a scheduler started from this
    tree would otherwise compile every module again at each start where PYTHONDONTWRITEBYTECODE is set (~0.2 s
    of its start → ready that a deployed one does not pay)."""
    compileall.compile_dir(str(ROOT / "engine"), quiet=1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    command = "python bench/compare.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = ",".join(
        p for p in (os.environ.get("NO_PROXY"), LOOPBACK_NO_PROXY) if p)
    plan = make_plan(args)
    log(f"work directory {plan.workdir}")
    compile_engine()
    started, load_start = time.monotonic(), os.getloadavg()[0]
    results: list[RunResult] = []
    raw: list[dict] = []
    for nodes in plan.mode.nodes:
        for workload in plan.workloads:
            for repeat in range(plan.mode.repeats):
                results += run_workload(plan, workload, nodes, repeat, plan.settings.kube_bin.parent)
                raw = [r.as_dict() for r in results]  # after every run: an interrupted run keeps what it measured
                (plan.workdir / "results.json").write_text(json.dumps(raw, indent=1))
    report.write(raw, plan, command, args.report, args.plots, time.monotonic() - started, load_start)
    log(f"report in {args.report}, plots in {args.plots}, results in {plan.workdir / 'results.json'}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
