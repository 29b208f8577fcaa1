#!/usr/bin/env python3
"""Does `--time-limit` hold when preemption has a lot to do? (issue 26, point 3)

A crowded cluster (`crowded`): m5.4xlarge-like nodes about 94% full of running Deployments of three priorities
(0, 100, 1000), and pending pods mostly of higher priorities (1,000 / 10,000 / 100,000 Deployments, gangs of 16
at 10,000, StatefulSets with required hostname anti-affinity), so that about half of them need evictions; a
few priority-0 Jobs cannot evict anyone and wait. PodDisruptionBudgets on a third of the running Deployments
(half of them allowing none), and by default 40 tenants (`bench/with_tenants.py`'s ElasticQuotas on the
pods' namespaces), which make the preemption stage's work per priority and tenant. Manifests from
`bench/realistic.py`'s builders.

Then the same dry-run from two revisions, alternating run by run (as `bench/side_by_side.py`), once per time
limit: wall seconds (process start to exit), the engine's load seconds (`stats.phases.load`), pods placed and
victims, medians over the runs.

    python bench/time_limit.py snapshot -o /tmp/crowded.json            # 2,000 nodes, 30,000 running, 40 tenants
    python bench/time_limit.py compare /tmp/crowded.json --against main -t 0.5 -t 1 -t 2 -t 5 -t 10 -n 3
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import click
import yaml

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path[:0] = [str(ROOT), str(BENCH_DIR)]

import realistic as RL  # noqa: E402
import side_by_side as SBS  # noqa: E402
import with_tenants as WT  # noqa: E402

RUNNING_PRIORITIES = (0, 0, 0, 100, 100, 1000)
PENDING_PRIORITIES = (1000, 10_000, 100_000)
RUNNING_CPU_M = (500, 1000, 1000, 1500)  # 15 a node: ~94% of an m5.4xlarge's 15,890m
RUNNING_MEMORY_MI = (1024, 2048, 4096)


def crowded(nodes: int = 2000, running: int = 30_000, pending: int = 3000, seed: int = 7) -> RL.Cluster:
    """The crowded cluster (see the module's doc): `running` pods bound, `pending` waiting."""
    ow = RL.Owners(seed, RUNNING_CPU_M, RUNNING_MEMORY_MI)
    deployments = max(1, running // 50)
    for d, n in enumerate(RL.split(running, deployments, ow.rng)):
        if n:
            base = f"{RL.SERVICES[d % len(RL.SERVICES)]}-{RL.ROLES[d // len(RL.SERVICES) % len(RL.ROLES)]}"
            ow.add("Deployment", base, RL.NAMESPACES[d % len(RL.NAMESPACES)], n, n,
                   priority=RUNNING_PRIORITIES[d % len(RUNNING_PRIORITIES)])
    for g in range(pending * 6 // 100 // 16):
        ow.add("Job", f"train-{RL.TEAMS[g % len(RL.TEAMS)]}-{g}", RL.NAMESPACES[g % 10 + 10], 16, 0, gang=True,
               priority=10_000, cpu_m=2000, memory_mi=8192)
    for s in range(max(1, pending // 300)):
        ow.add("StatefulSet", f"{RL.SERVICES[s % len(RL.SERVICES)]}-db-{s}", RL.NAMESPACES[s % len(RL.NAMESPACES)],
               20, 0, priority=100_000, anti_host="required", cpu_m=4000, memory_mi=16384)
    RL.soft_anti_jobs(ow, pending * 3 // 100, priority=0)
    rest = pending - sum(o.pending for o in ow.items)
    for d, n in enumerate(RL.split_even(rest, max(1, rest // 25))):
        ow.add("Deployment", f"{RL.SERVICES[d % len(RL.SERVICES)]}-new-{d}", RL.NAMESPACES[d % len(RL.NAMESPACES)],
               n, 0, priority=PENDING_PRIORITIES[d % 3], cpu_m=(500, 1000, 2000)[d // 3 % 3],
               memory_mi=(1024, 2048, 4096)[d % 3], prefer_zone=RL.ZONES[d % 3] if d % 2 else None)
    c = RL.Cluster("crowded", (RL.m5_4xlarge(nodes),), ow.items)
    RL.place_running(c, seed)
    return c


@click.group()
def cli() -> None:
    """Snapshots and timings for the time limit as a wall (issue 26, point 3)."""


@cli.command()
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="FILE.json (loads ~5x faster than YAML, so the table shows the engine) or FILE.yaml.")
@click.option("--nodes", default=2000, show_default=True)
@click.option("--running", default=30_000, show_default=True)
@click.option("--pending", default=3000, show_default=True)
@click.option("--tenants", default=40, show_default=True,
              help="ElasticQuotas on the pods' namespaces (bench/with_tenants.py's); 0: none.")
@click.option("--detail", type=click.Choice(RL.DETAILS), default="lean", show_default=True)
def snapshot(output: str, nodes: int, running: int, pending: int, tenants: int, detail: str) -> None:
    """Write the crowded cluster as one `kind: List` document, with its budgets and the tenants' quotas."""
    c = crowded(nodes, running, pending)
    items = list(RL.iter_manifests(c, detail))
    items += budgets(c)
    items += WT.quotas(items, tenants) if tenants else []
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    with open(output, "w", encoding="utf-8") as f:
        if output.endswith(".json"):
            json.dump(doc, f)
        else:
            yaml.dump(doc, f, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False)
    click.echo(f"{RL.describe(c)}; {len(budgets(c))} PodDisruptionBudgets, {tenants} tenants", err=True)


def budgets(c: RL.Cluster) -> list[dict[str, Any]]:
    """PodDisruptionBudgets on every third running Deployment below priority 1000: every other one allows no
    disruption (minAvailable 100%), the rest 10% of the pods; with the status the disruption controller writes, as
    `kubectl get -o yaml` prints it."""
    out = []
    for k, o in enumerate(c.owners):
        if o.running and o.priority is not None and o.priority < 1000 and k % 3 == 0:
            strict = k % 2 == 0
            out.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                        "metadata": {"name": f"{o.name}-pdb", "namespace": o.namespace},
                        "spec": {("minAvailable" if strict else "maxUnavailable"): "100%" if strict else "10%",
                                 "selector": {"matchLabels": o.selector}},
                        "status": {"disruptionsAllowed": 0 if strict else -(-o.running // 10),
                                   "currentHealthy": o.running, "expectedPods": o.running}})
    return out


def run(checkout: Path, snapshot: str, time_limit: str, workers: str) -> dict[str, Any]:
    """One dry-run from `checkout`: wall seconds, load seconds, the engine's (`stats.seconds`: planning,
    preemption included), placed, victims."""
    wall, answer = SBS.dry_run(checkout, snapshot, time_limit, workers)
    stats = answer["stats"]
    return {"wall": wall, "load": stats.get("phases", {}).get("load", 0.0), "engine": stats["seconds"],
            "placed": stats["placed"], "victims": sum(len(p["victims"]) for p in answer.get("preemptions", {}).values())}


@cli.command()
@click.argument("snapshot_file")
@click.option("--against", "old_rev", required=True, help="The revision to compare with (e.g. main).")
@click.option("--rev", "new_rev", default="HEAD", show_default=True)
@click.option("-t", "--time-limit", "limits", multiple=True, default=("0.5", "1", "2", "5", "10"), show_default=True)
@click.option("-n", "--repeat", type=int, default=3, show_default=True)
@click.option("--workers", default="1", show_default=True)
def compare(snapshot_file: str, old_rev: str, new_rev: str, limits: tuple[str, ...], repeat: int,
            workers: str) -> None:
    """Both revisions alternating, per time limit; a Markdown table of medians."""
    rows = []
    with SBS.checkouts((old_rev, new_rev)) as trees:
        for limit in limits:
            runs: dict[str, list[dict[str, Any]]] = {rev: [] for rev in trees}
            for _ in range(repeat):
                for rev, path in trees.items():
                    runs[rev].append(run(path, snapshot_file, limit, workers))
                    click.echo(f"{limit} {rev}: {runs[rev][-1]}", err=True)
            rows.append((limit, {rev: _medians(r) for rev, r in runs.items()}))
    sides = (old_rev, new_rev)
    head = " | ".join(f"{rev}: {k}" for k in ("wall s", "load s", "engine s", "placed", "victims") for rev in sides)
    click.echo(f"| --time-limit | {head} | " + " | ".join(f"{rev}: wall − load − limit" for rev in sides) + " |")
    click.echo("|---:|" + "---:|" * 12)
    for limit, m in rows:
        cells = [_cell(m[rev][k]) for k in ("wall", "load", "engine", "placed", "victims") for rev in sides]
        cells += [f"{m[rev]['wall'] - m[rev]['load'] - float(limit):+.2f}" for rev in sides]
        click.echo(f"| {limit} | " + " | ".join(cells) + " |")


def _medians(runs: list[dict[str, Any]]) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _cell(v: float) -> str:
    return f"{v:.2f}" if isinstance(v, float) and not v.is_integer() else f"{v:g}"


if __name__ == "__main__":
    cli()
