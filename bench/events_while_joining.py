#!/usr/bin/env python3
"""A pod that fits nowhere while nodes join (issue 17): how many Event objects it gets, and how many cycles ran.

A local etcd + kube-apiserver (testkit/controlplane.py), `policy-scheduler run` as a process, one pod asking more
cpu than any node has, then ``--nodes`` nodes too small for it joining at ``--rate`` per second. Prints the pod's
FailedScheduling Event objects (with their counts) and the scheduler's cycles (its /metrics), then adds one node
that fits and prints how long the pod took to be bound after it joined.

    python bench/events_while_joining.py                    # 200 nodes at 10/s (the issue's case)
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testkit import metrics  # noqa: E402
from testkit.controlplane import start_control_plane  # noqa: E402
from testkit.manifests import api_pod  # noqa: E402
from testkit.scheduling import Kube, Schedulers, node_of, wait_for  # noqa: E402

NS = "bench"


def failed(kube: Kube, name: str) -> list[dict]:
    return [e for e in kube.events(NS) if e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--rate", type=float, default=10.0, help="nodes joining per second")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, start_control_plane(Path(tmp) / "cp") as cp:
        kube = Kube(cp.kubeconfig)
        cp.ensure_namespace(NS)
        cp.create_ready_node("small-0", cpu="2")
        schedulers = Schedulers(cp, Path(tmp))
        try:
            s = schedulers.start("--batch-window", "0")
            kube.create(api_pod("huge", NS, cpu="16"))
            wait_for("the first FailedScheduling", lambda: failed(kube, "huge"))
            cycles_before = metrics.total(s.metrics_text(), "policy_scheduler_batches_total")
            started = time.monotonic()
            for i in range(1, args.nodes + 1):
                cp.create_ready_node(f"small-{i}", cpu="2")
                time.sleep(max(0.0, started + i / args.rate - time.monotonic()))
            time.sleep(2.0)  # whatever the last joins woke has run
            cycles = metrics.total(s.metrics_text(), "policy_scheduler_batches_total") - cycles_before
            events = failed(kube, "huge")
            print(f"| nodes joining | rate | Event objects | their count | cycles while they joined |\n"
                  f"|---:|---:|---:|---:|---:|\n"
                  f"| {args.nodes} | {args.rate:g}/s | {len(events)} | {sum(e.get('count') or 1 for e in events)} "
                  f"| {cycles:.0f} |")
            joined = time.monotonic()
            cp.create_ready_node("big", cpu="32")
            wait_for("huge bound", lambda: node_of(kube.pods(NS)["huge"]) == "big")
            print(f"\nthe pod was bound {time.monotonic() - joined:.2f} s after a node that fits joined")
        finally:
            schedulers.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
