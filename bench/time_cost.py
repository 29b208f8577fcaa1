#!/usr/bin/env python3
"""The cost of time in a plan (issue 29): the same batch planned without a "now" and with one, run by run.

A cluster of GPU nodes full of running 1-GPU pods whose `activeDeadlineSeconds` end them over the next hours (a
spread of end times), a pending 2-node gang of whole-node pods that cannot start now (priority 1000,
preemptionPolicy Never), pending 1-GPU pods of random runtimes (some fit in the room left, some wait) — as
`bench/workloads.py` scenarios are, built in-process. Each repeat plans the batch twice, alternating: plain (no
time: today's cycle) and with now set (reservations, backfill, estimates). The table gives medians, the ratio,
and what the timed plan held.

    python bench/time_cost.py --nodes 500 --nodes 5000 --running-per-node 10 -n 3
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.load import build_cluster  # noqa: E402
from engine.model import Cluster  # noqa: E402
from engine.planner import Options, plan_batch  # noqa: E402
from engine.timeline import seconds  # noqa: E402
from testkit.manifests import POD_GROUP_LABEL, node, pod, podgroup, priority_class  # noqa: E402

GPU = "nvidia.com/gpu"
NOW = "2026-11-25T12:00:00Z"
STARTED = "2026-11-25T11:00:00Z"


def scenario(nodes: int, per_node: int, pending: int, seed: int = 7) -> Cluster:
    rng = random.Random(seed)
    docs: list[dict] = [node(f"n{i}", cpu="64", memory="256Gi", **{GPU: "8"}) for i in range(nodes)]
    docs += [priority_class("train", 1000, preemption_policy="Never"), podgroup("train", 2)]
    for i in range(nodes):
        for k in range(min(per_node, 8)):
            doc = pod(f"run-{i}-{k}", cpu="1", requests={GPU: "1"}, node_name=f"n{i}")
            doc["status"]["startTime"] = STARTED
            doc["spec"]["activeDeadlineSeconds"] = 3600 + 60 * rng.randint(5, 600)  # ends 12:05 .. 21:00
            docs.append(doc)
    for k in range(2):
        doc = pod(f"train-{k}", cpu="8", requests={GPU: "8"}, labels={POD_GROUP_LABEL: "train"},
                  priorityClassName="train")
        doc["metadata"]["creationTimestamp"] = "2026-11-25T09:00:00Z"
        docs.append(doc)
    for k in range(pending):
        doc = pod(f"job-{k}", cpu="1", requests={GPU: "1"})
        doc["metadata"]["creationTimestamp"] = NOW
        if rng.random() < 0.8:
            doc["spec"]["activeDeadlineSeconds"] = 60 * rng.randint(5, 480)
        docs.append(doc)
    return build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, action="append", help="sizes (default 500, 5,000)")
    ap.add_argument("--running-per-node", type=int, default=10, help="running pods per node (at most 8 hold GPUs)")
    ap.add_argument("--pending", type=int, default=200)
    ap.add_argument("-n", "--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    print("| nodes | running | pending | plain s | with time s | ratio | reservations | estimated | placed plain / timed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes in args.nodes or [500, 5000]:
        cluster = scenario(nodes, args.running_per_node, args.pending)
        options = Options(time_limit=10.0, workers=1)
        plain, timed, held, estimated, placed = [], [], 0, 0, ("", "")
        for _ in range(args.repeats):
            for now in (None, seconds(NOW)):
                started = time.perf_counter()
                plan = plan_batch(replace(cluster, now=now), options=options)
                (plain if now is None else timed).append(time.perf_counter() - started)
                if now is None:
                    placed = (str(len(plan.assignments)), placed[1])
                else:
                    held, estimated = len(plan.reservations), len(plan.estimates)
                    placed = (placed[0], str(len(plan.assignments)))
        a, b = statistics.median(plain), statistics.median(timed)
        print(f"| {nodes:,} | {len(cluster.bound):,} | {len(cluster.pending):,} | {a:.2f} | {b:.2f} | {b / a:.2f} | "
              f"{held} | {estimated} | {placed[0]} / {placed[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
