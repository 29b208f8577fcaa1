"""The batch planner on openb against FGD one task at a time (issue 52, point 4): the full node list, the default trace
shuffled with a seed (and drawn again with replacement past its end, the paper's inflation), the cluster first filled
by FGD to `--prefill` of its GPUs (a state all start from), then `--arrivals` tasks: FGD (and Best-fit) one by one, the
planner (engine.time.gpu_planner) in batches of `--batch` with and without `prefer less fragmentation`. Prints and
writes (`--out`) per scheduler: GPUs unallocated and fragmented (the paper's measure over the trace's shapes), tasks
refused and their GPUs, seconds. Until the protocol harness lands (helper A's `simulate`), a script of its own.

    python bench/gpu_planner_sweep.py --arrivals 1000 --batch 50 --seed 1 --out /tmp/sweep.json
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.sharing.fragmentation import cluster_fragmentation, typical_shapes
from engine.sharing.gpus import MILLI, GpuNode, GpuTask, gpu_node, place
from engine.sharing.policies import make_policy, schedule
from engine.time import openb
from engine.time.gpu_planner import PlannerPlacer

DATA = "/work/shared/data/openb/"
FRAGMENTATION = ('policy less-fragmentation {{\n  applies to all pods\n'
                 '  prefer less fragmentation of device class "gpu.openb" weight {weight}\n}}\n')


def trace(tasks: list[GpuTask], seed: int, count: int) -> list[GpuTask]:
    """The trace shuffled, then tasks drawn from it with replacement until there are `count`."""
    rng = random.Random(seed)
    out = list(tasks)
    rng.shuffle(out)
    while len(out) < count:
        out.append(rng.choice(tasks))
    return out[:count]


def measure(nodes: tuple[GpuNode, ...], shapes, refused: list[GpuTask], seconds: float) -> dict:
    free = sum(n.gpu_milli_free for n in nodes)
    return {"unallocated_gpus": round(free / MILLI, 2),
            "fragmented_gpus": round(cluster_fragmentation(nodes, shapes) / MILLI, 2),
            "refused_tasks": len(refused), "refused_gpus": round(sum(t.gpu_total for t in refused) / MILLI, 2),
            "seconds": round(seconds, 1)}


def one_by_one(name: str, nodes: tuple[GpuNode, ...], arrivals: list[GpuTask], shapes) -> dict:
    policy = make_policy(name, shapes=shapes)
    refused, started = [], time.perf_counter()
    for task in arrivals:
        nodes, choice = schedule(policy, nodes, task)
        if choice is None:
            refused.append(task)
    return measure(nodes, shapes, refused, time.perf_counter() - started)


def batches(placer: PlannerPlacer, nodes: tuple[GpuNode, ...], arrivals: list[GpuTask], size: int, shapes) -> dict:
    refused: list[GpuTask] = []
    started, slowest = time.perf_counter(), 0.0
    for k in range(0, len(arrivals), size):
        batch = arrivals[k:k + size]
        t = time.perf_counter()
        choices = placer.place(nodes, batch)
        slowest = max(slowest, time.perf_counter() - t)
        out = list(nodes)
        for task, choice in zip(batch, choices):
            if choice is None:
                refused.append(task)
            else:
                out[choice.node] = place(out[choice.node], task, choice.gpus)
        nodes = tuple(out)
    return {**measure(nodes, shapes, refused, time.perf_counter() - started), "slowest_batch_seconds": round(slowest, 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--arrivals", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--prefill", type=float, default=0.9, help="share of GPU capacity FGD fills first")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--weight", type=int, default=100, help="the fragmentation preference's weight")
    ap.add_argument("--only", action="append", default=[], help="run only these schedulers (repeat)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    rows = openb.read_nodes(DATA + "openb_node_list_all_node.csv")
    nodes = tuple(gpu_node(r.name, r.cpu_milli, r.memory_mib, r.gpus, r.model) for r in rows)
    tasks = [GpuTask(t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, frozenset(t.gpu_spec))
             for t in openb.read_tasks(DATA + "openb_pod_list_default.csv")]
    shapes = typical_shapes(tasks)
    stream = trace(tasks, args.seed, 3 * len(tasks))
    fgd, capacity, k = make_policy("fgd", shapes=shapes), sum(len(n.gpu_free) for n in nodes) * MILLI, 0
    while sum(n.gpu_milli_free for n in nodes) > capacity * (1 - args.prefill):
        nodes, _ = schedule(fgd, nodes, stream[k])
        k += 1
    arrivals = stream[k:k + args.arrivals]
    results = {"seed": args.seed, "prefill": args.prefill, "weight": args.weight, "prefill_tasks": k,
               "arrivals": len(arrivals), "batch": args.batch,
               "arrived_gpus": round(sum(t.gpu_total for t in arrivals) / MILLI, 1),
               "start": measure(nodes, shapes, [], 0.0), "schedulers": {}}
    print(json.dumps({key: v for key, v in results.items() if key != "schedulers"}), flush=True)
    runs = {"fgd": lambda: one_by_one("fgd", nodes, arrivals, shapes),
            "best-fit": lambda: one_by_one("best-fit", nodes, arrivals, shapes),
            "policy-scheduler": lambda: batches(PlannerPlacer(time_limit=args.time_limit), nodes, arrivals,
                                                args.batch, shapes),
            "policy-scheduler-frag": lambda: batches(
                PlannerPlacer(name="policy-scheduler-frag", policy=FRAGMENTATION.format(weight=args.weight),
                              time_limit=args.time_limit, shapes=shapes), nodes, arrivals, args.batch, shapes)}
    for name, run in runs.items():
        if args.only and name not in args.only:
            continue
        results["schedulers"][name] = run()
        print(name, json.dumps(results["schedulers"][name]), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
