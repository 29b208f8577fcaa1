#!/usr/bin/env python3
"""A snapshot with N tenants defined (issue 19's scale check): N ElasticQuotas, each with a min of 1/N of the
cluster's cpu and memory and a max of twice that, on the snapshot's namespaces (plus new, empty ones up to N).
With `--spread`, the pods (bound and pending) are first dealt round-robin over N namespaces, so every tenant
holds some of them (for snapshots whose pods share one namespace); `--no-quotas` writes that spread alone, the
baseline the tenants are compared with.

    python bench/with_tenants.py /tmp/keep/basic.yaml -o /tmp/keep/basic-t50.yaml --tenants 50 --spread
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import click
import yaml

from testkit.quantity import amount

QUOTA_API = "scheduling.x-k8s.io/v1alpha1"


def spread(items: list[dict[str, Any]], tenants: int) -> None:
    pods = [o for o in items if o.get("kind") == "Pod"]
    for i, pod in enumerate(pods):
        pod["metadata"]["namespace"] = f"tenant-{i % tenants}"


def totals(items: list[dict[str, Any]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for node in (o for o in items if o.get("kind") == "Node"):
        for r in ("cpu", "memory"):
            out[r] += amount(r, node["status"]["allocatable"][r])
    return out


def quotas(items: list[dict[str, Any]], tenants: int) -> list[dict[str, Any]]:
    namespaces = sorted({o["metadata"].get("namespace") or "default" for o in items if o.get("kind") == "Pod"})
    namespaces += [f"tenant-extra-{i}" for i in range(tenants - len(namespaces))]
    cluster = totals(items)
    low = {"cpu": f"{cluster['cpu'] // tenants}m", "memory": str(cluster["memory"] // tenants)}
    high = {"cpu": f"{2 * cluster['cpu'] // tenants}m", "memory": str(2 * cluster["memory"] // tenants)}
    return [{"apiVersion": QUOTA_API, "kind": "ElasticQuota", "metadata": {"name": "quota", "namespace": ns},
             "spec": {"min": low, "max": high}} for ns in namespaces[:tenants]]


@click.command()
@click.argument("snapshot", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--tenants", type=int, default=50, show_default=True)
@click.option("--spread", "spread_pods", is_flag=True, help="Deal the pods over the tenants' namespaces first.")
@click.option("--no-quotas", is_flag=True, help="Spread only: the baseline to compare the tenants with.")
def main(snapshot: Path, output: Path, tenants: int, spread_pods: bool, no_quotas: bool) -> None:
    doc = yaml.load(snapshot.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    items = doc["items"]
    if spread_pods:
        spread(items, tenants)
    if not no_quotas:
        items += quotas(items, tenants)
    output.write_text(yaml.dump(doc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))
    click.echo(f"{output}: {tenants} tenants over {len(items)} objects")


if __name__ == "__main__":
    main()
