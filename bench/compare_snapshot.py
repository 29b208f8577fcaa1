#!/usr/bin/env python3
"""A bench/compare.py workload as one dry-run snapshot (a `kind: List` of PriorityClasses, Nodes, PodGroups, the pods
created bound before a run and the pending pods, addressed to policy-scheduler): what the live scheduler sees when the
run's pods have all arrived, to replay in process.

    python bench/compare_snapshot.py hero-preemption 4900 > /tmp/hero-4900.yaml
    python -m engine dry-run --cluster /tmp/hero-4900.yaml -o json --time-limit 5
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from compare_workloads import WORKLOADS, NodeSpec, Scenario  # noqa: E402
from testkit.manifests import priority_class  # noqa: E402

SCHEDULER = "policy-scheduler"


def node_doc(spec: NodeSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": spec.name, "labels": dict(spec.labels)},
            "spec": {"taints": list(spec.taints)} if spec.taints else {},
            "status": {"allocatable": spec.allocatable, "capacity": spec.allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def snapshot(scenario: Scenario) -> dict[str, Any]:
    items: list[dict[str, Any]] = [priority_class(name, value) for name, value in scenario.priority_classes.items()]
    items += [node_doc(n) for n in scenario.nodes]
    items += scenario.pod_groups
    for pods, phase in ((scenario.running + scenario.preset, "Running"), (scenario.pending, "Pending")):
        items += [{**p, "spec": {**p["spec"], "schedulerName": SCHEDULER}, "status": {"phase": phase}} for p in pods]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in WORKLOADS:
        raise SystemExit(f"usage: compare_snapshot.py WORKLOAD NODES (workloads: {', '.join(WORKLOADS)})")
    yaml.safe_dump(snapshot(WORKLOADS[argv[0]].scenario(int(argv[1]), "v1.37.2")), sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main(sys.argv[1:])
