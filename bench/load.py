"""Snapshot loading: the engine's event-built loader vs PyYAML's own constructor, side by side.

    python bench/load.py [--workload basic] [--repeat 3]

Prints a table of median seconds (alternating runs, so machine noise hits both alike) and the ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.heap import collector_paused
from engine.reading.manifests import load_cluster, load_yaml_documents
from workloads import get_workload, write_snapshot


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="basic")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="/tmp/policy-scheduler-bench")
    args = ap.parse_args()
    path = Path(args.out) / f"{args.workload}.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_snapshot(get_workload(args.workload), path)
    text = path.read_text()
    runs: dict[str, list[float]] = {"engine loader (parse events)": [], "yaml.load_all(CSafeLoader)": [],
                                    "load_cluster (file → typed model)": []}
    objects = 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        docs = load_yaml_documents(text)
        runs["engine loader (parse events)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        reference = list(yaml.load_all(text, Loader=yaml.CSafeLoader))
        runs["yaml.load_all(CSafeLoader)"].append(time.perf_counter() - t)
        assert docs == reference
        with collector_paused():  # as the dry-run reads a snapshot (engine.cli)
            t = time.perf_counter()
            cluster = load_cluster([str(path)])
        runs["load_cluster (file → typed model)"].append(time.perf_counter() - t)
        objects = len(cluster.nodes) + len(cluster.bound) + len(cluster.pending)
    base = statistics.median(runs["yaml.load_all(CSafeLoader)"])
    table = Table(title=f"Loading {path.name}: {objects} objects, {path.stat().st_size / 2**20:.1f} MiB, "
                        f"median of {args.repeat}")
    table.add_column("loader")
    table.add_column("median s", justify="right")
    table.add_column("vs yaml.load_all", justify="right")
    for name, ts in runs.items():
        m = statistics.median(ts)
        table.add_row(name, f"{m:.2f}", f"{base / m:.1f}× faster")
    Console().print(table)


if __name__ == "__main__":
    main()
