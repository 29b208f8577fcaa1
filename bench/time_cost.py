#!/usr/bin/env python3
"""The cost of time in a plan (issue 29): the same batch planned without a "now" and with one, run by run.

A cluster of GPU nodes full of running 1-GPU pods whose `activeDeadlineSeconds` end them over the next hours (a
spread of end times), a pending 2-node gang of whole-node pods that cannot start now (priority 1000,
preemptionPolicy Never), pending 1-GPU pods of random runtimes (some fit in the room left, some wait) — as
`bench/workloads.py` scenarios are, built in-process. Each repeat plans the batch twice, plain (no time: today's
cycle) and with now set (reservations, backfill, estimates), each mode first in every other repeat: the second run
of a pair measured 10-20% slower, whichever it was. The table gives medians, the ratio, and what the timed plan
held.

    python bench/time_cost.py --nodes 500 --nodes 5000 --running-per-node 10 -n 4
    python bench/time_cost.py --nodes 5000 --cycles 40 -n 4     # the scheduler loop's cycles, steady state
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.heap import collector_paused  # noqa: E402
from engine.loop.plan_stage import EARLIER_EVERY, ESTIMATE_EVERY  # noqa: E402
from engine.model.cluster import Cluster, Reservation  # noqa: E402
from engine.model.tables import PodTable  # noqa: E402
from engine.model.view import View  # noqa: E402
from engine.planning.plan import Plan  # noqa: E402
from engine.planning.planner import Options, TimeInputs, plan_batch  # noqa: E402
from engine.preempt import lowest_running  # noqa: E402
from engine.reading.load import build_cluster  # noqa: E402
from engine.time.timeline import Estimate, seconds  # noqa: E402
from testkit.manifests import POD_GROUP_LABEL, node, pod, podgroup, priority_class  # noqa: E402

GPU = "nvidia.com/gpu"
NOW = "2026-11-25T12:00:00Z"
STARTED = "2026-11-25T11:00:00Z"


def scenario(nodes: int, per_node: int, pending: int, seed: int = 7, room: float = 0.0) -> Cluster:
    """`room`: the share of nodes running 4 GPU pods, not 8 (room for pods that arrive)."""
    rng = random.Random(seed)
    docs: list[dict] = [node(f"n{i}", cpu="64", memory="256Gi", **{GPU: "8"}) for i in range(nodes)]
    docs += [priority_class("train", 1000, preemption_policy="Never"), podgroup("train", 2)]
    for i in range(nodes):
        for k in range(per_node):  # 8 GPU pods with bounds, the rest CPU services without
            if 4 <= k < 8 and i < room * nodes:
                continue
            doc = pod(f"run-{i}-{k}", cpu="1", requests={GPU: "1"} if k < 8 else {}, node_name=f"n{i}")
            doc["status"]["startTime"] = STARTED
            if k < 8:
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


def stream_pod(cycle: int, k: int, rng: random.Random) -> dict:
    doc = pod(f"new-{cycle}-{k}", cpu="1", requests={GPU: "1"})
    doc["metadata"]["creationTimestamp"] = NOW
    doc["spec"]["activeDeadlineSeconds"] = 60 * rng.randint(5, 480)
    return doc


def loop_cycles(cluster: Cluster, cycles: int, stream: int, repeats: int) -> tuple[list[float], list[float], Plan]:
    """The scheduler loop's cycles (engine.loop.plan_stage): one a second, each planning the gang (retried) and
    `stream` new 1-GPU pods, with the view and the lowest running priority as the loop's cache keeps them, the
    collector paused (as the plan stage runs a cycle), the last cycle's reservations carried and the last sweep's
    estimates told again while fresh (ESTIMATE_EVERY), carried reservations asked whether to move earlier every
    EARLIER_EVERY. Plain cycles plan the same batches without a now. Each repeat
    runs every cycle of one mode, then every cycle of the other, each mode first in every other repeat (a loop runs
    one mode: interleaving them cycle by cycle made a run 2 ms slower or faster by which ran before it). Per cycle
    after the first (the loop's steady state): the median of `repeats`."""
    rng = random.Random(11)
    kept = View.of(cluster.nodes, cluster.bound).table
    columns = kept.pod_columns()
    lowest = lowest_running(cluster)  # the loop's cache keeps it too
    gang = [p for p in cluster.pending if p.gang]
    batches = [gang + build_cluster([(f"new{c}-{k}", stream_pod(c, k, rng)) for k in range(stream)]).pending
               for c in range(cycles)]
    runs: dict[bool, list[list[float]]] = {False: [[] for _ in batches], True: [[] for _ in batches]}
    plan = None
    for k in range(repeats):
        for with_time in ((False, True) if k % 2 == 0 else (True, False)):
            for c, seconds_taken in enumerate(_cycles(cluster, batches, kept, columns, lowest, with_time)):
                runs[with_time][c].append(seconds_taken[0])
                plan = seconds_taken[1] if with_time else plan
    assert plan is not None
    return ([statistics.median(r) for r in runs[False][1:]], [statistics.median(r) for r in runs[True][1:]], plan)


def _cycles(cluster: Cluster, batches: list[list], kept: PodTable, columns, lowest: int | None, with_time: bool
            ) -> Iterator[tuple[float, Plan]]:
    """One mode's cycles in turn, a second apart: seconds each plan took, and the plan."""
    start = seconds(NOW)
    assert start is not None
    held: tuple[Reservation, ...] = ()
    estimates: dict[str, Estimate] = {}
    swept = looked = float("-inf")
    for c, batch in enumerate(batches):
        now = start + c
        fresh = now - swept < ESTIMATE_EVERY
        earlier = now - looked >= EARLIER_EVERY
        looked = now if earlier else looked
        options = Options(time_limit=10.0, workers=1)
        time_inputs = TimeInputs(now if with_time else None, held, carried=True,
                                 estimated=estimates if fresh else None, ask_earlier=earlier)
        batch_cluster = replace(cluster, pending=batch)
        view = View(PodTable(  # each cycle's own, from the parts the loop's cache keeps
            kept.nodes, list(kept.pods), list(kept.node_of), replace(kept.usage, used=kept.usage.used.copy()),
            kept.special, columns.copy()))
        with collector_paused():  # as the loop runs a cycle (engine.loop.runtime)
            began = time.perf_counter()
            plan = plan_batch(batch_cluster, options=options, view=view, lowest=lowest, time_inputs=time_inputs)
            took = time.perf_counter() - began
        held = plan.reservations
        if not fresh and plan.estimates:
            estimates, swept = dict(plan.estimates), now
        yield took, plan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, action="append", help="sizes (default 500, 5,000)")
    ap.add_argument("--running-per-node", type=int, default=10, help="running pods per node (at most 8 hold GPUs)")
    ap.add_argument("--pending", type=int, default=200)
    ap.add_argument("-n", "--repeats", type=int, default=4, help="repeats (each mode first in every other one)")
    ap.add_argument("--cycles", type=int, default=0, help="also the loop's cycles: this many, a second apart")
    ap.add_argument("--stream", type=int, default=20, help="new pods per loop cycle")
    ap.add_argument("--room", type=float, default=0.0, help="share of nodes with 4 GPUs free (default: none)")
    args = ap.parse_args(argv)
    if args.cycles:
        return cycles_table(args)
    print("| nodes | running | room | pending | plain s | with time s | ratio | reservations | estimated | "
          "placed plain / timed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes in args.nodes or [500, 5000]:
        cluster = scenario(nodes, args.running_per_node, args.pending, room=args.room)
        options = Options(time_limit=10.0, workers=1)
        plain, timed, held, estimated, placed = [], [], 0, 0, ("", "")
        for _ in range(args.repeats):
            for now in ((None, seconds(NOW)) if len(plain) % 2 == 0 else (seconds(NOW), None)):  # each first in turn
                with collector_paused():  # as the dry-run plans (engine.cli)
                    started = time.perf_counter()
                    plan = plan_batch(cluster, options=options, time_inputs=TimeInputs(now))
                (plain if now is None else timed).append(time.perf_counter() - started)
                if now is None:
                    placed = (str(len(plan.assignments)), placed[1])
                else:
                    held, estimated = len(plan.reservations), len(plan.estimates)
                    placed = (placed[0], str(len(plan.assignments)))
        a, b = statistics.median(plain), statistics.median(timed)
        print(f"| {nodes:,} | {len(cluster.bound):,} | {args.room:.0%} | {len(cluster.pending):,} | {a:.2f} | {b:.2f} | "
              f"{b / a:.2f} | "
              f"{held} | {estimated} | {placed[0]} / {placed[1]} |", flush=True)
    return 0


def cycles_table(args: argparse.Namespace) -> int:
    print("| nodes | running | room | new pods per cycle | cycles | plain ms (median) | with time ms (median) | ratio | "
          "p90 plain / with time ms | reservations held |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for nodes in args.nodes or [500, 5000]:
        cluster = scenario(nodes, args.running_per_node, 0, room=args.room)
        plain, timed, last = loop_cycles(cluster, args.cycles, args.stream, args.repeats)
        a, b = statistics.median(plain), statistics.median(timed)
        p90 = (statistics.quantiles(plain, n=10)[-1], statistics.quantiles(timed, n=10)[-1])
        print(f"| {nodes:,} | {len(cluster.bound):,} | {args.room:.0%} | {args.stream} | {len(plain)} | {a * 1000:.1f} | "
              f"{b * 1000:.1f} | {b / a:.2f} | {p90[0] * 1000:.1f} / {p90[1] * 1000:.1f} | {len(last.reservations)} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
