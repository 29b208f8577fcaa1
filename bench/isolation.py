#!/usr/bin/env python3
"""The cost of isolation (issue 25): one planning cycle of 1,000 pending pods with and without one bad object.

Three variants of one cluster (``--nodes`` nodes in 3 zones, GPUs on a tenth of them, ``--pods`` pending pods
of 50 apps, some with hostname anti-affinity or zone spread, a few GPU pods with ResourceClaims), planned by
``plan_batch`` in one process, alternating variant by variant, ``--repeats`` times:

* ``clean``: as described;
* ``bad claim``: plus one pod whose ResourceClaim's CEL selector fails at run time (``no such key``) — an error
  the engine foresees: the claim's pod is refused where the claim is read, everyone else planned as before;
* ``unforeseen``: plus one pod for which planning raises (injected into compile, as tests/test_isolation.py
  does) — the net: the batch is bisected down to that pod, which is refused, and the rest planned in the same
  call.

Prints medians (and the ratio to ``clean``) of the cycle's wall time and the pods placed.

    python bench/isolation.py                       # 500 nodes, 1,000 pods, 7 repeats
    python bench/isolation.py --nodes 2000 --pods 1000 -n 5
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine.planning.plan  # noqa: E402
from engine.heap import collector_paused  # noqa: E402
from engine.planning.planner import Options, plan_batch  # noqa: E402
from engine.reading.load import build_cluster  # noqa: E402
from testkit import manifests as m  # noqa: E402

RUNTIME_ERROR = 'device.attributes["gpu.example.com"].nosuchattr == "x"'


def cluster_docs(nodes: int, pods: int) -> list[dict]:
    docs: list[dict] = [m.node(f"n{i}", cpu="32", memory="128Gi", labels={m.ZONE_KEY: f"z{i % 3}"})
                        for i in range(nodes)]
    docs += [m.device_class("gpu")]
    docs += [m.resource_slice(f"n{i}", [m.gpu(f"g{j}") for j in range(4)]) for i in range(0, nodes, 10)]
    for i in range(pods):
        app = {"app": f"app-{i % 50}"}
        extra: dict = {}
        if i % 50 < 5:
            extra["affinity"] = m.anti(m.term(app))
        elif i % 50 < 10:
            extra["topologySpreadConstraints"] = [m.spread(app, skew=1)]
        if i % 100 == 99:
            docs.append(m.resource_claim(f"claim-{i}", m.device_request()))
            extra["resourceClaims"] = m.claims(f"claim-{i}")
        docs.append(m.pod(f"p{i}", cpu="500m", memory="1Gi", labels=app, **extra))
    return docs


def bad_claim() -> list[dict]:
    return [m.resource_claim("bad-claim", m.device_request(selectors=(RUNTIME_ERROR,))),
            m.pod("bad", cpu="500m", resourceClaims=m.claims("bad-claim"))]


def poisoned_compile():
    real = engine.planning.plan.compile_cluster

    def compile_cluster(cluster, *args, **kwargs):
        if any(p.name == "poison" for p in cluster.pending):
            raise RuntimeError("injected: planning this pod raises")
        return real(cluster, *args, **kwargs)
    return compile_cluster


def one(docs: list[dict], time_limit: float) -> tuple[float, int, int]:
    """Seconds from the manifests to the plan, pods placed, pods refused."""
    gc.collect()
    with collector_paused():  # as the dry-run runs (engine.cli)
        started = time.perf_counter()
        cluster = build_cluster([(f"doc{i}", d) for i, d in enumerate(docs)])
        plan = plan_batch(cluster, options=Options(time_limit=time_limit, workers=1))
    return time.perf_counter() - started, len(plan.assignments), len(plan.unschedulable)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("-n", "--repeats", type=int, default=7)
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args()
    base = cluster_docs(args.nodes, args.pods)
    variants = {"clean": base, "bad claim": base + bad_claim(), "unforeseen": base + [m.pod("poison", cpu="500m")]}
    real, poisoned = engine.planning.plan.compile_cluster, poisoned_compile()
    seconds: dict[str, list[float]] = {k: [] for k in variants}
    placed: dict[str, int] = {}
    refused: dict[str, int] = {}
    for _ in range(args.repeats):
        for name, docs in variants.items():
            engine.planning.plan.compile_cluster = poisoned if name == "unforeseen" else real
            took, placed[name], refused[name] = one(docs, args.time_limit)
            seconds[name].append(took)
    engine.planning.plan.compile_cluster = real
    clean = statistics.median(seconds["clean"])
    print(f"{args.nodes} nodes, {args.pods} pending pods (+1 with the bad object), time limit {args.time_limit:g} s, "
          f"medians of {args.repeats}, load average {Path('/proc/loadavg').read_text().split()[0]}")
    print("| variant | cycle s | vs clean | pods placed | pods refused |")
    print("|---|---:|---:|---:|---:|")
    for name in variants:
        med = statistics.median(seconds[name])
        print(f"| {name} | {med:.2f} | {med / clean:.2f}× | {placed[name]:,} | {refused[name]} |")


if __name__ == "__main__":
    main()
