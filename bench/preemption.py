#!/usr/bin/env python3
"""Preemption side by side (issue 10): policy-scheduler vs kube-scheduler with DefaultPreemption, same control
plane build, same run, a fresh etcd + kube-apiserver per run.

A full cluster of low-priority running pods (created bound, as if scheduled long ago; some under a
PodDisruptionBudget that allows no disruption), then high-priority pending pods. No kubelet runs, so the
benchmark plays its part: every pod a scheduler deletes (it then has a deletionTimestamp) is force-deleted at
once and counted as a victim. Measured per run: high-priority pods placed, victims, budget violations (victims
a budget did not allow), gangs complete / partial, seconds from the first pending pod to the last bind.

    python bench/preemption.py                       # every workload, 3 repeats, prints a Markdown table
    python bench/preemption.py -w gangs -n 1 --nodes 8
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # the test kit (testkit/) and the other bench modules

from compare_schedulers import SchedulerKind, Settings, default_profile, launch_kube, launch_ours  # noqa: E402
from testkit.controlplane import ControlPlane, build_binaries, start_control_plane  # noqa: E402
from testkit.manifests import POD_GROUP_LABEL, api_pod, budget, podgroup, priority_class  # noqa: E402
from testkit.scheduling import Kube, install_podgroup_crd  # noqa: E402

NS = "bench"
PRIORITIES = {"bench-low": 0, "bench-mid": 100, "bench-high": 1000}
IDLE_S = 20.0  # no new bind for this long: the run is over
CLIENTS = 16


@dataclass(frozen=True)
class Workload:
    """Running pods per node (cpu, priority class, labels), pending pods, budgets, gangs."""

    name: str
    description: str
    node_cpu: int
    running: Callable[[int], list[tuple[str, str, dict]]]  # node index -> [(cpu, class, labels)]
    pending: Callable[[int], list[tuple[str, dict]]]  # nodes -> [(cpu, labels)]
    budgets: tuple[tuple[str, dict, int], ...] = ()  # (name, matchLabels, minAvailable)
    gangs: Callable[[int], dict[str, int]] = lambda nodes: {}  # podgroup -> minMember


def _mixed_running(i: int) -> list[tuple[str, str, dict]]:
    cls = "bench-mid" if i % 3 == 0 else "bench-low"
    return [("1", cls, {"app": "db" if i % 4 == 0 else "batch"}), ("1", "bench-low", {"app": "batch"}),
            ("2", cls, {"app": "batch"})]


WORKLOADS = {w.name: w for w in (
    Workload("full-cluster", "4-cpu nodes full of 1- and 2-cpu pods (priorities 0 and 100, every 4th node's db pod "
             "under a budget allowing none); half as many 2-cpu high-priority pods as nodes",
             4, _mixed_running, lambda n: [("2", {}) for _ in range(n // 2)],
             budgets=(("db", {"app": "db"}, 10_000),)),
    Workload("mixed-sizes", "the same full nodes; 1- and 3-cpu high-priority pods alternating (as many as nodes)",
             4, _mixed_running, lambda n: [("1" if k % 2 else "3", {}) for k in range(n)]),
    Workload("shared-room", "4-cpu nodes, each full with one 4-cpu low-priority pod; twice as many 1-cpu "
             "high-priority pods as nodes (one eviction makes room for four)",
             4, lambda i: [("4", "bench-low", {"app": "batch"})], lambda n: [("1", {}) for _ in range(2 * n)]),
    Workload("gangs", "2-cpu nodes, each full with one low-priority pod; gangs of 4 high-priority 2-cpu pods, "
             "members created interleaved (jobs submitted together), room after evictions for half of them",
             2, lambda i: [("2", "bench-low", {"app": "batch"})],
             lambda n: [("2", {POD_GROUP_LABEL: f"g{k % (n // 2)}"}) for k in range(2 * n)],
             gangs=lambda n: {f"g{k}": 4 for k in range(n // 2)}),
)}


@dataclass
class Kubelet:
    """Plays the kubelet: pods being deleted are force-deleted at once, and remembered as victims."""

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


def setup(cp: ControlPlane, kube: Kube, w: Workload, nodes: int) -> None:
    """Priority classes, nodes, running pods (bound already), budgets, PodGroups."""
    cp.ensure_namespace(NS)
    for name, value in PRIORITIES.items():
        kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
    for i in range(nodes):
        cp.create_ready_node(f"node-{i:04d}", cpu=str(w.node_cpu), memory="16Gi")
        for j, (cpu, cls, labels) in enumerate(w.running(i)):
            kube.create(api_pod(f"run-{i:04d}-{j}", NS, cpu=cpu, labels=labels, nodeName=f"node-{i:04d}",
                                priorityClassName=cls))
    for name, selector, min_available in w.budgets:
        kube.create(budget(name, selector, min_available=min_available, ns=NS))
    groups = w.gangs(nodes)
    if groups:
        install_podgroup_crd(kube)
        for name, members in groups.items():
            kube.create(podgroup(name, members, NS))


def run_one(w: Workload, nodes: int, kind: SchedulerKind, settings: Settings) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, start_control_plane(Path(tmp) / "cp") as cp:
        kube = Kube(cp.kubeconfig)
        setup(cp, kube, w, nodes)
        kubelet = Kubelet(kube)
        kubelet.start()
        running = kind.start(cp, settings, Path(tmp), False)
        try:
            pending = w.pending(nodes)
            t0 = time.monotonic()
            with ThreadPoolExecutor(CLIENTS) as pool:  # as a controller creates a job's pods: all at once
                list(pool.map(lambda k: kube.create(api_pod(f"high-{k:04d}", NS, scheduler=kind.name,
                                                            cpu=pending[k][0], labels=pending[k][1],
                                                            priorityClassName="bench-high")),
                              range(len(pending))))
            last, placed = _wait(kube, len(pending), t0)
            row = _figures(w, kube, kubelet, nodes, kind.name, placed, last - t0)
            cycles = running.cycles()
            row["batches"] = cycles.count if cycles is not None and cycles.count else None
            return row
        finally:
            running.stop()
            kubelet.stop()


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


def _figures(w: Workload, kube: Kube, kubelet: Kubelet, nodes: int, scheduler: str, placed: int,
             seconds: float) -> dict[str, Any]:
    victims = kubelet.victims
    allowed = {name: _allowed(w, name, nodes) for name, _, _ in w.budgets}
    over = 0
    for name, selector, _ in w.budgets:
        hit = sum(1 for v in victims.values() if all((v["metadata"].get("labels") or {}).get(k) == val
                                                       for k, val in selector.items()))
        over += max(0, hit - allowed[name])
    bound = Counter((p["metadata"].get("labels") or {}).get(POD_GROUP_LABEL) for n, p in kube.pods(NS).items()
                    if n.startswith("high-") and p["spec"].get("nodeName"))
    groups = w.gangs(nodes)
    complete = sum(1 for g, need in groups.items() if bound.get(g, 0) >= need)
    partial = [g for g, need in groups.items() if 0 < bound.get(g, 0) < need]
    return {"workload": w.name, "nodes": nodes, "scheduler": scheduler, "pending": len(w.pending(nodes)),
            "placed": placed, "victims": len(victims), "budget_violations": over, "seconds": round(seconds, 2),
            "gangs_complete": complete if groups else None, "gangs_partial": len(partial) if groups else None,
            "pods_in_partial_gangs": sum(bound[g] for g in partial) if groups else None}


def _allowed(w: Workload, name: str, nodes: int) -> int:
    """Disruptions the budget allows at the start: matching running pods minus minAvailable (at least 0)."""
    _, selector, min_available = next(b for b in w.budgets if b[0] == name)
    matching = sum(1 for i in range(nodes) for _, _, labels in w.running(i)
                   if all(labels.get(k) == v for k, v in selector.items()))
    return max(0, matching - min(min_available, matching))


def schedulers(settings: Settings) -> list[SchedulerKind]:
    return [SchedulerKind("policy-scheduler", "policy-scheduler run (batch preemption)", True, launch_ours),
            SchedulerKind("kube-scheduler", "kube-scheduler v1.36.3, default plugins with DefaultPreemption", False,
                          launch_kube(lambda s: s.kube_bin, default_profile, preemption=True))]


def table(rows: list[dict[str, Any]]) -> str:
    """Medians over repeats, one row per workload and scheduler."""
    keys = ["placed", "victims", "budget_violations", "seconds", "gangs_complete", "gangs_partial",
            "pods_in_partial_gangs"]
    out = ["| workload | nodes | scheduler | pending | runs | high placed | victims | budget violations | "
           "seconds to last bind | gangs complete | gangs partial | pods in partial gangs |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["nodes"], r["scheduler"]), []).append(r)
    for (workload, nodes, scheduler), runs in groups.items():
        cells = []
        for k in keys:
            values = [r[k] for r in runs if r[k] is not None]
            cells.append(f"{statistics.median(values):g}" if values else "–")
        out.append(f"| {workload} | {nodes} | {scheduler} | {runs[0]['pending']} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-w", "--workload", action="append", choices=sorted(WORKLOADS))
    ap.add_argument("-n", "--repeat", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=40)
    args = ap.parse_args()
    bin_dir = build_binaries()
    settings = Settings(kube_bin=bin_dir / "kube-scheduler", plugins_bin=bin_dir / "kube-scheduler")
    rows = []
    for name in args.workload or list(WORKLOADS):
        for repeat in range(args.repeat):
            kinds = schedulers(settings)
            for kind in kinds[repeat % 2:] + kinds[:repeat % 2]:  # alternate who goes first
                row = run_one(WORKLOADS[name], args.nodes, kind, settings)
                print(row, file=sys.stderr, flush=True)
                rows.append(row)
    print(table(rows))


if __name__ == "__main__":
    main()
