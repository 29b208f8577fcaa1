#!/usr/bin/env python3
"""The same dry-run from two revisions, alternating run by run on one machine: wall seconds and pods/s.

Each revision is checked out once into a temporary worktree; every run is `python -m engine dry-run --cluster
SNAPSHOT -o json -q` from that worktree (its own engine, imports included), timed from process start to exit.
Alternating keeps both sides under the same load; the table gives medians.

    python bench/side_by_side.py --against 7510600 /tmp/policy-scheduler-bench/basic.yaml -n 5

A snapshot given as `NEW.yaml=OLD.yaml` runs NEW on the new revision and OLD on the old one: the cost of what
NEW adds (say, 50 tenants' quotas, `bench/with_tenants.py`) against the old revision without it.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

ROOT = Path(__file__).resolve().parents[1]


def dry_run(checkout: Path, snapshot: str, time_limit: str, workers: str) -> tuple[float, dict[str, Any]]:
    """`python -m engine dry-run` from `checkout`: (seconds from process start to exit, its JSON answer)."""
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "engine", "dry-run", "--cluster", snapshot, "-o", "json", "-q",
                          "--time-limit", time_limit, "--workers", workers], cwd=checkout, capture_output=True,
                         text=True, check=True)
    return time.perf_counter() - started, json.loads(out.stdout)


def run(checkout: Path, snapshot: str, time_limit: str, workers: str) -> tuple[float, int]:
    wall, answer = dry_run(checkout, snapshot, time_limit, workers)
    return wall, answer["stats"]["placed"]


@contextmanager
def checkouts(revs: Iterable[str]) -> Iterator[dict[str, Path]]:
    """Each revision checked out once into a temporary worktree of this repository (removed afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        sides: dict[str, Path] = {}
        try:
            for rev in revs:
                path = Path(tmp) / rev.replace("/", "_")
                subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                               capture_output=True)
                sides[rev] = path
            yield sides
        finally:
            for path in sides.values():
                subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)


@click.command()
@click.argument("snapshots", nargs=-1, required=True)
@click.option("--against", "old_rev", required=True, help="The revision to compare with (e.g. a commit).")
@click.option("--rev", "new_rev", default="HEAD", show_default=True)
@click.option("-n", "--repeat", type=int, default=5, show_default=True)
@click.option("--time-limit", default="10", show_default=True)
@click.option("--workers", default="2", show_default=True,
              help="CP-SAT workers, given to both sides (dry-run's default moved from 2 to 1 in issue 25).")
def main(snapshots: tuple[str, ...], old_rev: str, new_rev: str, repeat: int, time_limit: str, workers: str) -> None:
    with checkouts((old_rev, new_rev)) as sides:
        rows = [_compare(s, sides, repeat, time_limit, workers) for s in snapshots]
    click.echo(f"| snapshot | pods | {old_rev}: wall s | {new_rev}: wall s | {old_rev}: pods/s | {new_rev}: pods/s | runs |")
    click.echo("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        click.echo("| " + " | ".join(str(c) for c in row) + " |")


def _compare(snapshot: str, sides: dict[str, Path], repeat: int, time_limit: str, workers: str) -> list:
    new, _, old = snapshot.partition("=")
    inputs = dict(zip(sides, (old or new, new)))
    walls: dict[str, list[float]] = {rev: [] for rev in sides}
    placed = 0
    for _ in range(repeat):
        for rev, path in sides.items():
            wall, placed = run(path, inputs[rev], time_limit, workers)
            walls[rev].append(wall)
    (_old, a), (_new, b) = ((rev, statistics.median(w)) for rev, w in walls.items())
    name = Path(new).stem + (f" (old: {Path(old).stem})" if old else "")
    return [name, placed, f"{a:.2f}", f"{b:.2f}", f"{placed / a:,.0f}", f"{placed / b:,.0f}", repeat]


if __name__ == "__main__":
    main()
