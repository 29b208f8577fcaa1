#!/usr/bin/env python3
"""Preemption side by side (issues 10 and 26): policy-scheduler vs kube-scheduler with DefaultPreemption, same
control plane build, same run, a fresh etcd + kube-apiserver per run.

Low-priority running pods (created bound, as if scheduled long ago, then marked Running and Ready with start times
a second apart in creation order, or all in one second with --same-start-time; some under a PodDisruptionBudget),
then high-priority pending pods. Workloads: full nodes (resources), and from issue 26 pods kept out by a running
pod's or their own required podAntiAffinity, by a zone topology spread, and two preemptors whose victims must share
one budget (`--list` says what each holds and the fewest victims possible). No kubelet runs, so the benchmark plays
its part: every pod a scheduler deletes (it then has a deletionTimestamp) is force-deleted at once. When a workload
has budgets, kube-controller-manager's disruption controller runs, so both schedulers read a live
status.disruptionsAllowed (the run starts once it is written). Measured per run: high-priority pods placed, victims
(running pods gone or going at the end), budget violations (victims beyond what a budget allowed at the start),
placements the independent checker (testkit/checker.py) finds invalid in the final state, gangs complete / partial,
seconds from the first pending pod to the last bind.

    python bench/preemption.py                       # every workload, 3 repeats, prints a Markdown table
    python bench/preemption.py -w gangs -n 1 --nodes 8
    python bench/preemption.py -w anti-affinity-existing -w anti-affinity-own -w zone-spread -w budgets-batch
    python bench/preemption.py --list                # the workloads, what they hold, the fewest victims
"""
from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (testkit/) and the other bench modules

from compare_schedulers import SchedulerKind, Settings, default_profile, launch_kube, launch_ours  # noqa: E402
from testkit.checker import check_plan  # noqa: E402
from testkit.controlplane import ControlPlane, build_binaries, controllers, start_control_plane  # noqa: E402
from testkit.manifests import (  # noqa: E402
    POD_GROUP_LABEL,
    ZONE_KEY,
    anti,
    api_pod,
    budget,
    podgroup,
    priority_class,
    spread,
    term,
)
from testkit.scheduling import Kube, install_podgroup_crd  # noqa: E402

NS = "bench"
PRIORITIES = {"bench-low": 0, "bench-mid": 100, "bench-high": 1000}
IDLE_S = 20.0  # no new bind for this long: the run is over
SETTLE_S = 1.0  # after the last bind, before the victims are counted: deletions still on their way land
BUDGET_STATUS_S = 60.0  # the disruption controller's first status, at most
CLIENTS = 16
RESERVED_TAINT = {"key": "bench/reserved", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class PodShape:
    """One pod of a workload: cpu request, priority class, labels and any more of its spec (affinity, ...)."""

    cpu: str
    priority_class: str
    labels: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)


def low(cpu: str, labels: dict | None = None, cls: str = "bench-low", **spec: Any) -> PodShape:
    return PodShape(cpu, cls, dict(labels or {}), spec)


def high(cpu: str, labels: dict | None = None, **spec: Any) -> PodShape:
    return PodShape(cpu, "bench-high", dict(labels or {}), spec)


@dataclass(frozen=True)
class Workload:
    """Nodes (cpu, labels, taints), running pods per node, pending pods, budgets, gangs. Sizes follow --nodes
    unless `fixed_nodes` says otherwise."""

    name: str
    description: str
    node_cpu: str
    running: Callable[[int, int], list[PodShape]]  # (node index, nodes) -> the pods running there
    pending: Callable[[int], list[PodShape]]  # nodes -> the high-priority pods created
    node: Callable[[int, int], tuple[dict, list[dict]]] = lambda i, nodes: ({}, [])  # -> (labels, taints)
    budgets: tuple[tuple[str, dict, int], ...] = ()  # (name, matchLabels, minAvailable)
    gangs: Callable[[int], dict[str, int]] = lambda nodes: {}  # podgroup -> minMember
    fixed_nodes: int | None = None
    min_nodes: int = 1
    # nodes -> the fewest victims that place every pending pod (gangs: as many whole gangs as there is room for)
    fewest_victims: Callable[[int], int] | None = None

    def size(self, nodes: int) -> int:
        return self.fixed_nodes or nodes


def _mixed_running(i: int, nodes: int) -> list[PodShape]:
    cls = "bench-mid" if i % 3 == 0 else "bench-low"
    return [low("1", {"app": "db" if i % 4 == 0 else "batch"}, cls), low("1", {"app": "batch"}),
            low("2", {"app": "batch"}, cls)]


def _zone_node(i: int, nodes: int) -> tuple[dict, list[dict]]:
    """The first half of the nodes (rounded down) in zone-b, reserved (tainted); the rest in zone-a."""
    return ({ZONE_KEY: "zone-b"}, [RESERVED_TAINT]) if i < nodes // 2 else ({ZONE_KEY: "zone-a"}, [])


def _zone_running(i: int, nodes: int) -> list[PodShape]:
    """One app=spread replica per zone-b node; one more in zone-a than in zone-b, round robin over its nodes."""
    b = nodes // 2
    a = nodes - b
    count = 1 if i < b else (b + 1) // a + (1 if i - b < (b + 1) % a else 0)
    tolerate = [{"key": RESERVED_TAINT["key"], "operator": "Exists", "effect": "NoSchedule"}]
    return [low("1", {"app": "spread"}, tolerations=tolerate) for _ in range(count)]


WEB_ROOM = 8  # cpu of the anti-affinity workloads' nodes: one eviction makes room for 8 one-cpu pods

WORKLOADS = {w.name: w for w in (
    Workload("full-cluster", "4-cpu nodes full of 1- and 2-cpu pods (priorities 0 and 100, every 4th node's db pod "
             "under a budget allowing none); half as many 2-cpu high-priority pods as nodes",
             "4", _mixed_running, lambda n: [high("2") for _ in range(n // 2)],
             budgets=(("db", {"app": "db"}, 10_000),), fewest_victims=lambda n: n // 2),
    Workload("mixed-sizes", "the same full nodes; 1- and 3-cpu high-priority pods alternating (as many as nodes)",
             "4", _mixed_running, lambda n: [high("1" if k % 2 else "3") for k in range(n)],
             fewest_victims=lambda n: 2 * math.ceil(n / 2) + math.ceil(n // 2 / 2)),
    Workload("shared-room", "4-cpu nodes, each full with one 4-cpu low-priority pod; twice as many 1-cpu "
             "high-priority pods as nodes (one eviction makes room for four)",
             "4", lambda i, n: [low("4", {"app": "batch"})], lambda n: [high("1") for _ in range(2 * n)],
             fewest_victims=lambda n: math.ceil(2 * n / 4)),
    Workload("gangs", "2-cpu nodes, each full with one low-priority pod; gangs of 4 high-priority 2-cpu pods, "
             "members created interleaved (jobs submitted together), room after evictions for half of them",
             "2", lambda i, n: [low("2", {"app": "batch"})],
             lambda n: [high("2", {POD_GROUP_LABEL: f"g{k % (n // 2)}"}) for k in range(2 * n)],
             gangs=lambda n: {f"g{k}": 4 for k in range(n // 2)}, min_nodes=2, fewest_victims=lambda n: 4 * (n // 4)),
    Workload("anti-affinity-existing", f"{WEB_ROOM}-cpu nodes, each running one 1-cpu low-priority pod with a required "
             "podAntiAffinity (hostname) against app=web; as many 1-cpu high-priority app=web pods as nodes (cpu "
             f"is no obstacle; one eviction makes room for {WEB_ROOM})",
             str(WEB_ROOM), lambda i, n: [low("1", {"app": "batch"}, affinity=anti(term({"app": "web"})))],
             lambda n: [high("1", {"app": "web"}) for _ in range(n)],
             fewest_victims=lambda n: math.ceil(n / WEB_ROOM)),
    Workload("anti-affinity-own", f"{WEB_ROOM}-cpu nodes, each running one 1-cpu low-priority app=batch pod; as many "
             "1-cpu high-priority pods as nodes, each with a required podAntiAffinity (hostname) against app=batch "
             f"(cpu is no obstacle; one eviction makes room for {WEB_ROOM})",
             str(WEB_ROOM), lambda i, n: [low("1", {"app": "batch"})],
             lambda n: [high("1", {"app": "api"}, affinity=anti(term({"app": "batch"}))) for _ in range(n)],
             fewest_victims=lambda n: math.ceil(n / WEB_ROOM)),
    Workload("zone-spread", "8-cpu nodes in two zones, zone-b (half the nodes, rounded down) tainted, which no "
             "pending pod tolerates; 1-cpu low-priority app=spread replicas: one per zone-b node, one more in "
             "zone-a; as many 1-cpu high-priority app=spread pods as zone-a nodes, each with a DoNotSchedule "
             "topologySpreadConstraint maxSkew 1 over the zone for app=spread (the tainted zone counts, "
             "nodeTaintsPolicy Ignore): each needs one zone-a replica evicted",
             "8", _zone_running,
             lambda n: [high("1", {"app": "spread"}, topologySpreadConstraints=[spread({"app": "spread"})])
                        for _ in range(n - n // 2)],
             node=_zone_node, min_nodes=2, fewest_victims=lambda n: n - n // 2),
    Workload("budgets-batch", "2 nodes of 1675m cpu, each running two 600m low-priority app=db pods (a budget "
             "over the 4 with minAvailable 2: 2 disruptions in all) and one 400m pod under no budget; two 1-cpu "
             "high-priority pods: evicting one db pod and the 400m pod on each node breaks no budget",
             "1675m", lambda i, n: [low("600m", {"app": "db"}), low("600m", {"app": "db"}),
                                    low("400m", {"app": "cache"})],
             lambda n: [high("1"), high("1")], budgets=(("db", {"app": "db"}, 2),), fixed_nodes=2,
             fewest_victims=lambda n: 4),
)}


@dataclass
class Kubelet:
    """Plays the kubelet: pods being deleted are force-deleted at once (and remembered)."""

    kube: Kube
    victims: dict[str, dict] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for name, p in self.kube.pods(NS).items():
                if p["metadata"].get("deletionTimestamp") and name not in self.victims:
                    self.victims[name] = p
                    self.kube.request("DELETE", f"/api/v1/namespaces/{NS}/pods/{name}",
                                      {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})


def setup(cp: ControlPlane, kube: Kube, w: Workload, nodes: int, same_start: bool = False) -> dict[str, dict]:
    """Priority classes, nodes, running pods (bound already, then Running and Ready, started a second apart in
    creation order, or all in the same second), budgets, PodGroups. Returns the running pods created, by name."""
    cp.ensure_namespace(NS)
    for name, value in PRIORITIES.items():
        kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
    for i in range(nodes):
        labels, taints = w.node(i, nodes)
        cp.create_ready_node(node_name(i), cpu=w.node_cpu, memory="16Gi", labels=labels, taints=taints)
    running = running_pods(w, nodes)
    start, step = datetime.now(UTC) - timedelta(hours=1), 0 if same_start else 1
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(kube.create, running.values()))
        list(pool.map(lambda k_name: _run_pod(kube, k_name[1], start + timedelta(seconds=step * k_name[0])),
                      enumerate(running)))
    for name, selector, min_available in w.budgets:
        kube.create(budget(name, selector, min_available=min_available, ns=NS))
    groups = w.gangs(nodes)
    if groups:
        install_podgroup_crd(kube)
        for name, members in groups.items():
            kube.create(podgroup(name, members, NS))
    return running


def node_name(i: int) -> str:
    return f"node-{i:04d}"


def running_pods(w: Workload, nodes: int) -> dict[str, dict]:
    """The running pods as created (bound to their node), by name: run-NODE-J."""
    return {f"run-{i:04d}-{j}": api_pod(f"run-{i:04d}-{j}", NS, cpu=s.cpu, labels=s.labels, nodeName=node_name(i),
                                        priorityClassName=s.priority_class, **s.spec)
            for i in range(nodes) for j, s in enumerate(w.running(i, nodes))}


def pending_pods(w: Workload, nodes: int, scheduler: str) -> list[dict]:
    """The high-priority pods as created, for `scheduler`: high-K."""
    return [api_pod(f"high-{k:04d}", NS, scheduler=scheduler, cpu=s.cpu, labels=s.labels,
                    priorityClassName=s.priority_class, **s.spec) for k, s in enumerate(w.pending(nodes))]


def _run_pod(kube: Kube, name: str, started: datetime) -> None:
    """What the kubelet would report of a pod it started at `started`: Running, Ready (budgets count Ready pods
    healthy; kube-scheduler's preemption spares the earliest started first among equals)."""
    at = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": t, "status": "True", "lastTransitionTime": at}
                  for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    kube.ok("PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status",
            {"status": {"phase": "Running", "startTime": at, "conditions": conditions}},
            content_type="application/merge-patch+json")


def _wait_budgets(kube: Kube, w: Workload, nodes: int) -> None:
    """Until the disruption controller has written every budget's status as the workload expects it."""
    deadline = time.monotonic() + BUDGET_STATUS_S
    while True:
        items = kube.ok("GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets")["items"]
        seen = {b["metadata"]["name"]: b for b in items}
        ready = all(name in seen and _budget_ready(seen[name], _covered(w, name, nodes), _allowed(w, name, nodes))
                    for name, _, _ in w.budgets)
        if ready:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"budget status not written in {BUDGET_STATUS_S:.0f} s: "
                               f"{[b.get('status') for b in items]}")
        time.sleep(0.2)


def _budget_ready(pdb: dict, covered: int, allowed: int) -> bool:
    status = pdb.get("status") or {}
    return (status.get("observedGeneration") == pdb["metadata"].get("generation")
            and status.get("currentHealthy") == covered and status.get("disruptionsAllowed") == allowed)


def run_one(w: Workload, nodes: int, kind: SchedulerKind, settings: Settings,
            same_start: bool = False) -> dict[str, Any]:
    nodes = w.size(nodes)
    with (tempfile.TemporaryDirectory() as tmp, start_control_plane(Path(tmp) / "cp") as cp,
          contextlib.ExitStack() as stack):
        kube = Kube(cp.kubeconfig)
        running_pods = setup(cp, kube, w, nodes, same_start)
        if w.budgets:  # a live status.disruptionsAllowed, as in a cluster
            stack.enter_context(controllers(cp, ("disruption-controller",), Path(tmp) / "kcm"))
            _wait_budgets(kube, w, nodes)
        kubelet = Kubelet(kube)
        kubelet.start()
        stack.callback(kubelet.stop)
        running = kind.start(cp, settings, Path(tmp), False)
        stack.callback(running.stop)
        pending = pending_pods(w, nodes, kind.name)
        t0 = time.monotonic()
        with ThreadPoolExecutor(CLIENTS) as pool:  # as a controller creates a job's pods: all at once
            list(pool.map(kube.create, pending))
        last, placed = _wait(kube, len(pending), t0)
        time.sleep(SETTLE_S)
        row = _figures(w, kube, running_pods, nodes, kind.name, placed, last - t0)
        cycles = running.cycles()
        row["batches"] = cycles.count if cycles is not None and cycles.count else None
        return row


def _wait(kube: Kube, expected: int, t0: float) -> tuple[float, int]:
    """Until every pending pod is bound or nothing new was bound for IDLE_S; (last bind time, bound)."""
    last, placed = t0, 0
    while time.monotonic() - last < IDLE_S:
        now = sum(1 for n, p in kube.pods(NS).items() if n.startswith("high-") and p["spec"].get("nodeName"))
        if now > placed:
            last, placed = time.monotonic(), now
        if placed >= expected:
            break
        time.sleep(0.25)
    return last, placed


def _figures(w: Workload, kube: Kube, running: dict[str, dict], nodes: int, scheduler: str, placed: int,
             seconds: float) -> dict[str, Any]:
    pods = kube.pods(NS)
    # a victim: a running pod gone or going at the end (whatever the grace period, however fast it went)
    victims = {name: p for name, p in running.items()
               if name not in pods or pods[name]["metadata"].get("deletionTimestamp")}
    over = 0
    for name, selector, _ in w.budgets:
        hit = sum(1 for v in victims.values() if _selects(selector, v["metadata"].get("labels") or {}))
        over += max(0, hit - _allowed(w, name, nodes))
    bound = Counter((p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL) for n, p in pods.items()
                    if n.startswith("high-") and p["spec"].get("nodeName"))
    groups = w.gangs(nodes)
    complete = sum(1 for g, need in groups.items() if bound.get(g, 0) >= need)
    partial = [g for g, need in groups.items() if 0 < bound.get(g, 0) < need]
    invalid = _invalid(kube, pods, scheduler)
    for line in invalid[:10]:
        print(f"{w.name} {scheduler}: invalid: {line}", file=sys.stderr)
    return {"workload": w.name, "nodes": nodes, "scheduler": scheduler, "pending": len(w.pending(nodes)),
            "placed": placed, "victims": len(victims),
            "fewest_victims": w.fewest_victims(nodes) if w.fewest_victims else None,
            "budget_violations": over, "invalid": len(invalid), "seconds": round(seconds, 2) if placed else None,
            "gangs_complete": complete if groups else None, "gangs_partial": len(partial) if groups else None,
            "pods_in_partial_gangs": sum(bound[g] for g in partial) if groups else None,
            "victims_by_app": dict(Counter((v["metadata"].get("labels") or {}).get("app") for v in victims.values()))}


def _invalid(kube: Kube, pods: dict[str, dict], scheduler: str) -> list[str]:
    """The independent checker's violations of the final state: the high-priority pods bound, as the
    assignments of pending pods, beside the running pods left."""
    docs: list[dict] = [{**n, "kind": "Node"} for n in kube.ok("GET", "/api/v1/nodes")["items"]]
    docs += [{**c, "kind": "PriorityClass"}
             for c in kube.ok("GET", "/apis/scheduling.k8s.io/v1/priorityclasses")["items"]]
    assignments = {}
    for name, p in pods.items():
        if p["metadata"].get("deletionTimestamp"):
            continue
        node = p["spec"].get("nodeName")
        if name.startswith("high-") and node:
            assignments[f"{NS}/{name}"] = node
            p = {**p, "spec": {k: v for k, v in p["spec"].items() if k != "nodeName"}}
        docs.append({**p, "kind": "Pod"})
    return check_plan(docs, assignments, scheduler_name=scheduler)


def _selects(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _covered(w: Workload, name: str, nodes: int) -> int:
    """Running pods the budget selects at the start."""
    _, selector, _ = next(b for b in w.budgets if b[0] == name)
    return sum(1 for i in range(nodes) for s in w.running(i, nodes) if _selects(selector, s.labels))


def _allowed(w: Workload, name: str, nodes: int) -> int:
    """Disruptions the budget allows at the start: matching running pods minus minAvailable (at least 0)."""
    _, _, min_available = next(b for b in w.budgets if b[0] == name)
    covered = _covered(w, name, nodes)
    return max(0, covered - min(min_available, covered))


def schedulers(settings: Settings) -> list[SchedulerKind]:
    return [SchedulerKind("policy-scheduler", "policy-scheduler run (batch preemption)", True, launch_ours),
            SchedulerKind("kube-scheduler", "kube-scheduler v1.36.3, default plugins with DefaultPreemption", False,
                          launch_kube(lambda s: s.kube_bin, default_profile, preemption=True))]


def table(rows: list[dict[str, Any]]) -> str:
    """Medians over repeats, one row per workload and scheduler."""
    keys = ["placed", "victims", "fewest_victims", "budget_violations", "invalid", "seconds", "gangs_complete",
            "gangs_partial", "pods_in_partial_gangs"]
    out = ["| workload | nodes | scheduler | pending | runs | high placed | victims | fewest victims | "
           "budget violations | invalid placements | seconds to last bind | gangs complete | gangs partial | "
           "pods in partial gangs |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["nodes"], r["scheduler"]), []).append(r)
    for (workload, nodes, scheduler), runs in groups.items():
        cells = []
        for k in keys:
            values = [r[k] for r in runs if r[k] is not None]
            cells.append(f"{statistics.median(values):g}" if values else "–")
        out.append(f"| {workload} | {nodes} | {scheduler} | {runs[0]['pending']} | {len(runs)} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def listing(nodes: int) -> str:
    """The workloads at `nodes` nodes: size, pending pods, the fewest victims, what they hold."""
    out = []
    for w in WORKLOADS.values():
        size = w.size(nodes)
        fewest = w.fewest_victims(size) if w.fewest_victims else "?"
        out.append(f"{w.name}: {size} nodes, {len(w.pending(size))} pending, fewest victims {fewest}\n"
                   f"    {w.description}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-w", "--workload", action="append", choices=list(WORKLOADS),
                    help="a workload to run (repeatable; default: all)")
    ap.add_argument("-n", "--repeat", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=20,
                    help="nodes of every workload but those of a fixed size (budgets-batch: 2)")
    ap.add_argument("--same-start-time", action="store_true",
                    help="every running pod started in the same second (default: a second apart, in creation "
                         "order); kube-scheduler then breaks ties between equal candidate nodes by its map order")
    ap.add_argument("--list", action="store_true", help="print the workloads at --nodes and exit")
    args = ap.parse_args()
    if args.list:
        print(listing(args.nodes))
        return
    names = args.workload or list(WORKLOADS)
    for name in names:
        if WORKLOADS[name].size(args.nodes) < WORKLOADS[name].min_nodes:
            ap.error(f"{name} needs at least {WORKLOADS[name].min_nodes} nodes")
    bin_dir = build_binaries()
    settings = Settings(kube_bin=bin_dir / "kube-scheduler", plugins_bin=bin_dir / "kube-scheduler")
    rows = []
    for name in names:
        for repeat in range(args.repeat):
            kinds = schedulers(settings)
            for kind in kinds[repeat % 2:] + kinds[:repeat % 2]:  # alternate who goes first
                row = run_one(WORKLOADS[name], args.nodes, kind, settings, args.same_start_time)
                print(row, file=sys.stderr, flush=True)
                rows.append(row)
    print(table(rows))


if __name__ == "__main__":
    main()
