#!/usr/bin/env python3
"""End-to-end benchmark of ``policy-scheduler run`` through a local etcd + kube-apiserver (issue 8).

Starts the e2e control plane (testkit/controlplane.py; binaries built on first use), creates
``--nodes`` Ready nodes, starts the scheduler as a subprocess, then creates ``--pods`` pending pods
from ``--clients`` threads and measures: pods created → all bound (wall seconds, pods/s), and the
scheduler's own pending→bound latency histogram (p50/p99, interpolated from its /metrics buckets) and its
cycles (pods per cycle, solve seconds: the batch_size and solve_seconds histograms of /metrics).
Everything it started is stopped at the end.

    python bench/loop_e2e.py --nodes 500 --pods 1000
    python bench/loop_e2e.py --nodes 5000 --pods 5000 --batch-window 1 --time-limit 5
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test kit (testkit/)

from testkit import metrics  # noqa: E402
from testkit.controlplane import start_control_plane  # noqa: E402
from testkit.manifests import api_pod  # noqa: E402
from testkit.scheduling import Kube, Schedulers  # noqa: E402


def cycle_summary(cycles: metrics.Cycles) -> str:
    """The scheduler's cycles from its histograms: pods per cycle and solve seconds (mean, buckets)."""
    def spread(h: metrics.Histogram) -> str:
        counts, prev = [], 0.0
        for le, n in h.buckets:
            if n > prev:
                counts.append(f"<={le:g}: {n - prev:.0f}")
            prev = n
        return ", ".join(counts)
    if not cycles.count:
        return "cycles: none"
    return (f"cycles={cycles.count} pods_per_cycle mean={cycles.sizes.mean:.0f} ({spread(cycles.sizes)}) "
            f"solve_s total={cycles.solve.sum:.2f} mean={cycles.solve.mean:.2f} ({spread(cycles.solve)})")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process so far (/proc/PID/stat), to see who the bottleneck is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--clients", type=int, default=16, help="threads creating pods")
    ap.add_argument("--batch-window", default="1")
    ap.add_argument("--time-limit", default="5")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--bind-workers", default="16")
    ap.add_argument("--precreate", action="store_true",
                    help="create the pods before the scheduler starts (its own throughput, apart from creation)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, start_control_plane(Path(tmp) / "cp") as cp:
        kube = Kube(cp.kubeconfig)
        cp.ensure_namespace("bench")
        started = time.monotonic()
        with ThreadPoolExecutor(args.clients) as pool:
            list(pool.map(lambda i: cp.create_ready_node(f"node-{i:05d}", cpu="8", memory="32Gi"), range(args.nodes)))
        print(f"{args.nodes} nodes created in {time.monotonic() - started:.1f} s", flush=True)
        schedulers = Schedulers(cp, Path(tmp))
        try:
            def create() -> float:
                t = time.monotonic()
                with ThreadPoolExecutor(args.clients) as pool:
                    list(pool.map(lambda i: kube.create(api_pod(f"p-{i:05d}", "bench", cpu="100m")),
                                  range(args.pods)))
                return time.monotonic() - t

            created = create() if args.precreate else 0.0
            s = schedulers.start("--batch-window", args.batch_window, "--time-limit", args.time_limit,
                                 "--bind-workers", args.bind_workers)
            pids = {"scheduler": s.process.popen.pid, "apiserver": cp.apiserver.popen.pid, "etcd": cp.etcd.popen.pid}
            cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
            t0 = time.monotonic()
            if not args.precreate:
                created = create()
            while s.metric("policy_scheduler_pods_bound_total") < args.pods:
                if time.monotonic() - t0 > args.timeout:
                    sys.exit(f"timed out; scheduler log:\n{s.process.log_tail()}")
                time.sleep(0.1)
            wall = time.monotonic() - t0
            cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items()}
            text = s.metrics_text()
            latency = metrics.histogram(text, "policy_scheduler_pending_to_bound_seconds")
            batches = metrics.total(text, "policy_scheduler_batches_total")
            print(f"nodes={args.nodes} pods={args.pods} created_in={created:.1f}s all_bound_in={wall:.1f}s "
                  f"pods_per_s={args.pods / wall:.0f} batches={batches:.0f} "
                  f"latency_p50={latency.quantile(0.5):.2f}s latency_p99={latency.quantile(0.99):.2f}s "
                  f"batch_window={args.batch_window}s")
            print("cpu seconds while scheduling: " + " ".join(f"{k}={v:.1f}" for k, v in cpu.items())
                  + f" (of {2 * wall:.1f} on 2 cores)")
            print(cycle_summary(metrics.cycles(text)))
        finally:
            schedulers.stop_all()


if __name__ == "__main__":
    main()
