"""What orders within a batch are worth (issue 52): FGD itself places each batch of the paper's protocol in the best
of K orders (the batch's own, then shuffled ones), judged by the tasks placed, then by how little the expected
fragment of the nodes the batch fills grows — the starting plans' search of the planner's marginal scores, without
the planner. Prints unallocated GPUs at 100% arrived per K.

    python bench/openb_orders.py ../shared/data/openb default --seed 1 --batch 50 -k 1 -k 4 -k 16
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.sharing.fragmentation import TaskShape
from engine.sharing.gpus import GpuChoice, GpuNode, GpuTask, place
from engine.sharing.policies import Fgd
from engine.sharing.protocol import Arrivals, OneAtATime, capacity_milli, inflate, run
from engine.time.sweep import read_openb


@dataclass
class BestOfOrders:
    """FGD over each batch in K orders, the best kept."""

    k: int
    seed: int
    shapes: tuple[TaskShape, ...]
    name: str = "fgd-best-of-orders"

    def place(self, nodes: tuple[GpuNode, ...], tasks: list[GpuTask]) -> list[GpuChoice | None]:
        rng, fgd = random.Random(self.seed), Fgd(self.shapes)
        fragment = lambda node: fgd.fragment(node.cpu_free, node.gpu_free, node.model)  # noqa: E731 (memoised)
        best: tuple[tuple[int, float], list[GpuChoice | None]] | None = None
        for trial in range(self.k):
            order = list(range(len(tasks)))
            if trial:
                rng.shuffle(order)
            out: list[GpuChoice | None] = [None] * len(tasks)
            state = list(nodes)
            for i, choice in zip(order, OneAtATime(fgd).place(nodes, [tasks[i] for i in order])):
                out[i] = choice
                if choice is not None:
                    state[choice.node] = place(state[choice.node], tasks[i], choice.gpus)
            touched = {c.node for c in out if c is not None}
            key = (-sum(c is not None for c in out), sum(fragment(state[n]) - fragment(nodes[n]) for n in touched))
            if best is None or key < best[0]:
                best = (key, out)
        assert best is not None
        return best[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="the openb directory")
    parser.add_argument("trace", help="default, gpushare100, multigpu50")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("-k", type=int, action="append", help="orders a batch (repeatable)")
    args = parser.parse_args()
    workload = read_openb(f"{args.data}/openb_node_list_all_node.csv", f"{args.data}/openb_pod_list_{args.trace}.csv")
    arrivals = inflate(workload.arrivals, capacity_milli(workload.nodes), 1.3, args.seed)
    print("| K | unallocated GPUs at 100% arrived | seconds |\n|---|---|---|")
    for k in args.k or [1, 4, 16]:
        started = time.perf_counter()
        result = run(workload.nodes, arrivals, BestOfOrders(k, args.seed, workload.shapes), workload.shapes, 1.3,
                     Arrivals(batch=args.batch))
        print(f"| {k} | {result.unallocated_at_full:.1f} | {time.perf_counter() - started:.0f} |", flush=True)


if __name__ == "__main__":
    main()
