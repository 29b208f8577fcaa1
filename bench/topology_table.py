#!/usr/bin/env python3
"""Issue 49's tables from bench/compare.py's results.json files: scheduler_perf 1.38's topology-aware gang shapes
(pods/s, groups whole, groups in one rack, racks per group) and the hero preemption shape (time until the hero gang
is bound, victims, groups evicted whole and half-evicted), medians over repeats, one row per workload, size and
scheduler, with policy-scheduler's ratio to kube-scheduler.

    python bench/topology_table.py /tmp/run-*/results.json
"""
from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "bench")]

from compare_workloads import hero_fewest_victims  # noqa: E402


def med(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def fmt(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def grouped(results: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, list[dict[str, Any]]]]:
    out: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        if not r.get("error"):
            out[(r["workload"], r["nodes"])][r["scheduler"]].append(r)
    return out


def tas_table(groups: dict) -> list[str]:
    rows = ["| workload | nodes | scheduler | runs | placed / pods | pods/s | ratio | p50 s | p99 s | groups whole | "
            "in one rack | racks per group (mean / max) | CPU s apiserver+etcd | CPU s scheduler |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (workload, nodes), by in sorted(groups.items()):
        if not workload.startswith("tas-"):
            continue
        kube = med(by.get("kube-scheduler", []), "pods_per_s")
        for scheduler, runs in sorted(by.items(), reverse=True):
            ps = med(runs, "pods_per_s")
            ratio = f"{ps / kube:.2f}×" if scheduler != "kube-scheduler" and ps and kube else ""
            rows.append(f"| {workload} | {nodes:,} | {scheduler} | {len(runs)} | {fmt(med(runs, 'placed'), 0)} / "
                        f"{runs[0]['pending']:,} | {fmt(ps, 0)} | {ratio} | {fmt(med(runs, 'latency_p50'), 2)} | "
                        f"{fmt(med(runs, 'latency_p99'), 2)} | {fmt(med(runs, 'gangs_complete'), 0)} / {runs[0]['gangs']:,} | "
                        f"{fmt(med(runs, 'gangs_one_domain'), 0)} | {fmt(med(runs, 'domains_mean'), 2)} / "
                        f"{fmt(med(runs, 'domains_max'), 0)} | {fmt(med(runs, 'apiserver_cpu_s'))} | "
                        f"{fmt(med(runs, 'scheduler_cpu_s'))} |")
    return rows


def hero_table(groups: dict) -> list[str]:
    """One row per run: a run either binds the whole hero gang or not, so a median would hide which."""
    rows = ["| nodes | scheduler | repeat | hero pods bound | seconds to the last hero bind | victims (fewest possible) | "
            "victims by namespace (1: training, priority 10,000; 2, 3: batch, 100) | groups evicted whole | "
            "half-evicted |",
            "|---:|---|---:|---:|---:|---:|---|---:|---:|"]
    for (workload, nodes), by in sorted(groups.items()):
        if workload != "hero-preemption":
            continue
        for scheduler, runs in sorted(by.items(), reverse=True):
            for r in runs:
                whole = r["placed"] == r["pending"]
                by_ns = ", ".join(f"{ns.rsplit('-', 1)[-1]}: {n}" for ns, n in (r.get("victims_by_namespace") or {}).items())
                rows.append(f"| {nodes:,} | {scheduler} | {r['repeat'] + 1} | {r['placed']:,} / {r['pending']:,} | "
                            f"{fmt(r['seconds']) if whole else 'not bound'} | {r.get('preemptions')} "
                            f"({hero_fewest_victims(nodes)}) | {by_ns or 'none'} | {r.get('groups_evicted')} | "
                            f"{r.get('groups_half_evicted')} |")
    return rows


def main(paths: list[str]) -> None:
    results = [r for p in paths for r in json.loads(Path(p).read_text())]
    groups = grouped(results)
    print("\n".join(tas_table(groups)))
    print()
    print("\n".join(hero_table(groups)))


if __name__ == "__main__":
    main(sys.argv[1:])
