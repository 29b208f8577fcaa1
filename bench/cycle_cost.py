#!/usr/bin/env python3
"""The scheduler loop's fixed cost per cycle against cluster size (issue 17): one new pending pod, everything else
bound.

For each size (nodes, 10 bound pods per node, 3 zones, 200 apps) a store and the loop's cluster cache are fed
the objects as the watches would feed them; then a pending pod arrives and one cycle plans it, ``--repeats``
times (the pod is taken back between repeats). Two ways side by side in one run:

* ``cache``: what the loop does now — the cache's snapshot (what changed since the last one, plus the batch),
  then compile, solve and plan;
* ``rebuild``: what it did before — ``build_cluster`` over the store's whole snapshot, then the same planning
  (only up to ``--rebuild-max`` nodes: it takes seconds there).

With ``--tenants N`` (issue 19's scale check) a third way runs beside ``cache``: the same cluster with its pods
dealt over N namespaces, each with an ElasticQuota (a min of 1/N of the cluster's cpu and memory, a max of
twice that), so every cycle sorts the bound pods into tenants and the model gets the quota rows.

Prints a table of medians (and the ratio), and draws ``bench/cycle_cost.png`` (seconds per cycle vs nodes, log
axes).

    python bench/cycle_cost.py                               # 1,000 -> 20,000 nodes
    python bench/cycle_cost.py --nodes 1000 --nodes 5000 -n 5 --no-plot
    python bench/cycle_cost.py --nodes 5000 --tenants 50 --rebuild-max 0 --no-plot
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

from engine.loop.cache import ClusterCache  # noqa: E402
from engine.loop.cycle import run_cycle  # noqa: E402
from engine.loop.store import Store, source_name  # noqa: E402
from engine.model.ir import Rules  # noqa: E402
from engine.planning.planner import Options, plan_batch  # noqa: E402
from engine.reading.load import build_cluster  # noqa: E402
from testkit import manifests as m  # noqa: E402

SCHEDULER = "policy-scheduler"
PODS_PER_NODE = 10


def fill(nodes: int, tenants: int = 0) -> tuple[Store, ClusterCache]:
    """A store with the cache listening, fed `nodes` nodes and 10 bound pods per node, as watches would (with
    `tenants`, the pods dealt over that many namespaces, each with an ElasticQuota)."""
    store = Store()
    cache = ClusterCache(store.assumptions)
    store.subscribe(lambda change: cache.apply(change.kind, change.old, change.new))
    for i in range(nodes):
        store.apply("Node", "ADDED", m.node(f"n{i}", cpu="32", memory="128Gi",
                                            labels={m.ZONE_KEY: f"z{i % 3}"}))
    for t in range(tenants):
        low, high = {"cpu": str(32 * nodes // tenants)}, {"cpu": str(64 * nodes // tenants)}
        store.apply("ElasticQuota", "ADDED", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
                                              "metadata": {"name": "quota", "namespace": f"t{t}", "uid": f"q{t}"},
                                              "spec": {"min": low, "max": high}})
    for k in range(nodes * PODS_PER_NODE):
        pod = m.pod(f"b{k}", cpu="1", memory="1Gi", labels={"app": f"a{k % 200}"}, node_name=f"n{k % nodes}",
                    ns=namespace(k, tenants))
        pod["metadata"]["uid"] = f"uid-b{k}"
        store.apply("Pod", "ADDED", pod)
    return store, cache


def namespace(k: int, tenants: int) -> str:
    return f"t{k % tenants}" if tenants else "default"


def one_cycle(store: Store, cache: ClusterCache, way: str, k: int) -> float:
    """Seconds for one cycle planning a newly arrived pod; the pod is deleted again afterwards."""
    ns = "t0" if way == "tenants" else "default"
    new = m.pod(f"new{k}", cpu="1", memory="1Gi", labels={"app": "new"}, ns=ns)
    new["metadata"]["uid"] = f"uid-new{k}"
    store.apply("Pod", "ADDED", new)
    options = Options(time_limit=5.0, workers=1)
    gc.disable()  # as the loop's cycle does
    started = time.perf_counter()
    if way in ("cache", "tenants"):
        result = run_cycle(cache.snapshot([(source_name("Pod", ns, f"new{k}"), new)], SCHEDULER, None),
                           Rules(), options)
        placed = result.plan.assignments
    else:
        cluster = build_cluster(store.snapshot({f"default/new{k}"}), SCHEDULER, None, strict=False)
        placed = plan_batch(cluster, Rules(), options).assignments
    seconds = time.perf_counter() - started
    gc.enable()
    assert placed, f"{way}: the new pod was not placed"
    store.apply("Pod", "DELETED", new)
    return seconds


def measure(nodes: int, repeats: int, rebuild: bool, tenants: int = 0) -> dict[str, float | None]:
    worlds = {"cache": fill(nodes), "rebuild": None, "tenants": fill(nodes, tenants) if tenants else None}
    worlds["rebuild"] = worlds["cache"] if rebuild else None
    ways = [w for w, world in worlds.items() if world is not None]
    for way in ways:
        one_cycle(*worlds[way], way, -1)  # type: ignore[misc]  # the first snapshot builds the index rows once
    times: dict[str, list[float]] = {w: [] for w in ways}
    for k in range(repeats):
        for way in ways:  # side by side, alternating
            times[way].append(one_cycle(*worlds[way], way, k))  # type: ignore[misc]
    return {w: statistics.median(times[w]) if w in times else None for w in ("cache", "rebuild", "tenants")}


def plot(rows: list[tuple[int, dict[str, float | None]]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for way, label in (("cache", "incremental cache (now)"), ("rebuild", "rebuild the model (before)")):
        points = [(n, r[way]) for n, r in rows if r[way] is not None]
        if points:
            ax.plot([n for n, _ in points], [s * 1000 for _, s in points], marker="o", label=label)
    ax.axhline(50, color="grey", linestyle=":", label="50 ms target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"nodes ({PODS_PER_NODE} bound pods per node)")
    ax.set_ylabel("one cycle, one new pod (ms, median)")
    ax.set_title("policy-scheduler loop: fixed cost per cycle")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, action="append", help="sizes (default 1,000 2,000 5,000 10,000 20,000)")
    ap.add_argument("-n", "--repeats", type=int, default=7)
    ap.add_argument("--rebuild-max", type=int, default=5000, help="largest size the rebuild way is measured at")
    ap.add_argument("--plot", type=Path, default=ROOT / "bench" / "cycle_cost.png")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--tenants", type=int, default=0, help="also time the cluster with this many ElasticQuota tenants")
    args = ap.parse_args(argv)
    sizes = args.nodes or [1000, 2000, 5000, 10000, 20000]
    rows = []
    print(f"| nodes | bound pods | cache ms | rebuild ms | rebuild / cache | {args.tenants} tenants ms | tenants / cache |"
          "\n|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    for nodes in sizes:
        r = measure(nodes, args.repeats, nodes <= args.rebuild_max, args.tenants)
        rows.append((nodes, r))
        cache, rebuild, tenants = r["cache"] or 0.0, r["rebuild"], r["tenants"]
        ratio = f"{rebuild / cache:.0f}×" if rebuild and cache else "–"
        shown = f"{rebuild * 1000:,.0f}" if rebuild else "–"
        with_tenants = f"{tenants * 1000:.1f} | {tenants / cache:.2f}" if tenants and cache else "– | –"
        print(f"| {nodes:,} | {nodes * PODS_PER_NODE:,} | {cache * 1000:.1f} | {shown} | {ratio} | {with_tenants} |",
              flush=True)
    if not args.no_plot:
        plot(rows, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
