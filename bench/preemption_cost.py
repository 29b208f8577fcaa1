#!/usr/bin/env python3
"""What the preemption stage costs in-process, by workload and size: wall seconds of `plan_batch` (the plan without
preemption, then the stage) on a snapshot of full nodes, median of repeats, with what was placed and evicted. Run it
from a checkout's root: the engine imported is that checkout's, so two checkouts give a side-by-side comparison.

    python bench/preemption_cost.py                              # every workload at 200 and 1,000 nodes
    python bench/preemption_cost.py --nodes 2000 -w spread -n 5
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path.cwd()
sys.path[:0] = [str(ROOT)]

from engine.heap import collector_paused  # noqa: E402
from engine.planning.planner import Options, plan_batch  # noqa: E402
from engine.reading.load import build_cluster  # noqa: E402
from testkit.manifests import anti, node, pod, spread, term  # noqa: E402

ZONE = "topology.kubernetes.io/zone"


def snapshot(workload: str, nodes: int) -> list[dict]:
    """`nodes` 4-cpu nodes in 10 zones, each full of four 1-cpu running pods (priority 0 or 10, app a or b); as many
    2-cpu preemptors (priority 100) as a tenth of the nodes, replicas of one spec: plain (`resources`), a zone spread
    over their own label (`spread`), anti-affinity to each other per node (`anti`)."""
    docs = []
    for i in range(nodes):
        docs.append(node(f"n{i}", cpu="4", pods=20, labels={ZONE: f"z{i % 10}"}))
        docs += [pod(f"r{i}-{j}", cpu="1", node_name=f"n{i}", priority=10 * (j % 2), labels={"app": "ab"[j % 2]})
                 for j in range(4)]
    extra: dict = {}
    if workload == "spread":
        extra["topologySpreadConstraints"] = [spread({"app": "p"}, ZONE)]
    elif workload == "anti":
        extra["affinity"] = anti(term({"app": "p"}))
    docs += [pod(f"p{k}", cpu="2", priority=100, labels={"app": "p"}, **extra) for k in range(max(1, nodes // 10))]
    return docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, action="append", help="sizes (default 200 and 1,000)")
    ap.add_argument("-w", "--workload", action="append", choices=("resources", "spread", "anti"))
    ap.add_argument("-n", "--repeats", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    print("| workload | nodes | preemptors | seconds (median) | placed | victims | strategy: note |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for workload in args.workload or ["resources", "spread", "anti"]:
        for nodes in args.nodes or [200, 1000]:
            cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(snapshot(workload, nodes))])
            times, plan = [], None
            for _ in range(args.repeats):
                with collector_paused():  # as the dry-run plans (engine.cli) and the loop's cycle (engine.loop.runtime)
                    started = time.perf_counter()
                    plan = plan_batch(cluster, options=Options(time_limit=args.time_limit, workers=1))
                times.append(time.perf_counter() - started)
            assert plan is not None
            said = _chosen(plan.stats.preemption)
            print(f"| {workload} | {nodes} | {len(cluster.pending)} | {statistics.median(times):.2f} | "
                  f"{len(plan.assignments)} | {len(plan.evictions)} | {said[:70]} |", flush=True)
    return 0


def _chosen(stats) -> str:
    """Which strategy chose the victims and what became of the others; an older checkout's `model` field."""
    if stats is None:
        return ""
    if hasattr(stats, "strategy"):
        return f"{stats.strategy}: {stats.note or ''}"
    return f"(before strategies) model: {stats.model or ''}"


if __name__ == "__main__":
    sys.exit(main())
