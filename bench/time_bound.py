#!/usr/bin/env python3
"""What any fair scheduler must make the small jobs wait on KAI-scheduler #1969's shape if the gang starts within
its bound (issue 29's two `simulate` goals, side by side).

The issue asks on this shape for the big gang's wait to be bounded by the running jobs' bounds *and* for the small
jobs' p95 wait to be within 10% of the batch without time, which starves or defers the gang. This script asks
whether any scheduler could meet both. It takes the same trace (`engine.time.simulate.kai_starvation`) and an idealised
cluster that favours the small jobs in every way a real one cannot:

- the GPUs are one pool (1-GPU jobs fit wherever a GPU is free: no node boundaries, no fragmentation);
- the scheduler knows every job's true runtime (no bounds, no drain: the gang takes its GPUs at the instant it
  starts, overcommitting the pool for as long as the small jobs it finds there still run);
- the gang starts at the best instant for the small jobs within its bound (every 10 s from its arrival up to the
  latest end bound of the jobs running then, the gang goal's limit), and holds its GPUs for its runtime.

Small jobs start in arrival order (first come, first served: a scheduler may not make a few small jobs wait for
ever to keep the others' p95 down), each as soon as a GPU of the pool is free. For jobs of one GPU in a fixed order
that is the earliest each can start, so the p95 printed is a lower bound on any such scheduler's.

The table sets it beside `simulate`'s batch and batch-time on the same trace (`--no-replay` leaves them out).

    python bench/time_bound.py --jobs 600 --nodes 2 --load 0.9 --nodes 8 --load 0.7
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.time import simulate as S  # noqa: E402

SMALL = "1-GPU job"
GANG = "gang"
STEP = 10.0  # seconds between the gang starts tried


def fifo_waits(small: list[S.Job], gpus: int, gang: tuple[float, float, int] | None) -> list[float]:
    """Each small job's wait on a pool of `gpus` GPUs in arrival order, as early as a GPU is free; `gang`
    (start, end, GPUs) takes that many out of the pool while it runs (the jobs already running keep theirs)."""
    ends: list[float] = []  # the running small jobs' ends (a heap)
    waits = []
    t = 0.0
    for job in small:
        t = max(t, job.arrival)  # in arrival order: never before the job ahead of it
        while True:
            while ends and ends[0] <= t:
                heapq.heappop(ends)
            room = gpus - (gang[2] if gang and gang[0] <= t < gang[1] else 0)
            if len(ends) < room:
                break
            nxt = [ends[0]] if ends else []  # (every end left is past t)
            if gang and gang[0] <= t < gang[1]:
                nxt.append(gang[1])
            t = min(nxt)
        heapq.heappush(ends, t + job.runtime)
        waits.append(t - job.arrival)
    return waits


def reserved_waits(small: list[S.Job], gpus: int, gang: S.Job, size: int, promise: float) -> tuple[list[float], float]:
    """Each small job's wait on a pool of `gpus` GPUs in arrival order when the gang, from its arrival, holds a
    reservation for `size` GPUs by `promise` under the issue's backfill rule: a small job starts before the gang
    only while the jobs that may run past the promise (by their bounds) leave the gang its GPUs. The scheduler
    sees jobs end (not when they will): the gang starts the first instant `size` GPUs are free, by `promise` at
    the latest, and holds them for its runtime. Returns the waits and the gang's start."""
    running: list[tuple[float, float]] = []  # (end, bound's end) of the running small jobs, a heap by end
    waits: list[float] = []
    start: float | None = None
    t = 0.0

    def ended(until: float) -> None:
        nonlocal start
        while running and running[0][0] <= until:
            end, _ = heapq.heappop(running)
            if start is None and end >= gang.arrival and len(running) <= gpus - size:
                start = end
        if start is None and until >= gang.arrival and len(running) <= gpus - size:
            start = max(gang.arrival, t)

    for job in small:
        t = max(t, job.arrival)
        while True:
            ended(t)
            holding = start is not None and start <= t < start + gang.runtime
            fits = len(running) < gpus - (size if holding else 0)
            if fits and start is None and t >= gang.arrival:  # the backfill rule: keep the reserved GPUs free
                past = sum(1 for _, b in running if b > promise) + (t + (job.limit or math.inf) > promise)
                fits = past <= gpus - size
            if fits:
                break
            nxt = [running[0][0]] if running else []  # (every end left is past t)
            if holding:
                nxt.append(start + gang.runtime)
            t = min(nxt)
        heapq.heappush(running, (t + job.runtime, t + (job.limit or math.inf)))
        waits.append(t - job.arrival)
    ended(math.inf)
    return waits, start if start is not None else math.inf


def latest_bound(trace: S.Trace, at: float) -> float:
    """The latest end bound of the jobs started at t=0 (the warm ones, running when the gang arrives): the gang
    goal's limit for its start."""
    return max(j.arrival + (j.limit or math.inf) for j in trace.jobs if j.kind == SMALL and j.arrival <= at)


def bound_row(trace: S.Trace) -> dict:
    """The fair lower bound: the small jobs' p95 with the gang started at the best instant within its bound."""
    small = [j for j in trace.jobs if j.kind == SMALL]
    gang = next(j for j in trace.jobs if j.kind == GANG)
    gpus = sum(s.count * int(s.allocatable["nvidia.com/gpu"]) for s in trace.nodes)
    size = gang.pods * int(gang.requests["nvidia.com/gpu"])
    limit = latest_bound(trace, gang.arrival)
    best = min(((S.p95(fifo_waits(small, gpus, (s, s + gang.runtime, size))), s)
                for s in itertools.chain(_steps(gang.arrival, limit), [limit])), key=lambda x: x[0])
    rule, start = reserved_waits(small, gpus, gang, size, limit)
    return {"p95 no gang": S.p95(fifo_waits(small, gpus, None)), "p95 bound": best[0], "gang start": best[1],
            "gang limit": limit, "p95 rule": S.p95(rule), "gang start rule": start}


def _steps(start: float, stop: float):
    t = start
    while t < stop:
        yield t
        t += STEP


def replay_row(trace: S.Trace) -> dict:
    out = {}
    for mode in ("batch", "batch-time"):
        run = S.replay(trace, mode)
        waits = {c.kind: c for c in S.waits(trace, run)}
        out[mode] = {"p95": waits[SMALL].p95, "gang wait": waits[GANG].p95}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, action="append", help="small jobs in the trace (repeatable) [600]")
    ap.add_argument("--nodes", type=int, action="append", help="nodes of 8 GPUs, paired with --load [2]")
    ap.add_argument("--load", type=float, action="append", help="the stream's share of the GPUs [0.9]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-replay", action="store_true", help="leave out simulate's batch and batch-time")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    nodes, loads = args.nodes or [2], args.load or [0.9]
    if len(nodes) != len(loads):
        ap.error("give --nodes and --load in pairs")
    rows = []
    print("| jobs | nodes (GPUs) | load | p95, no gang | bound, clairvoyant (gang start) "
          "| bound, backfill rule (gang start) | batch p95 | 1.1 × batch | batch-time p95 | bounds / batch |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for jobs, (n, load) in itertools.product(args.jobs or [600], zip(nodes, loads)):
        trace = S.kai_starvation(small_jobs=jobs, nodes=n, load=load, seed=args.seed)
        row = {"jobs": jobs, "nodes": n, "load": load, **bound_row(trace)}
        if not args.no_replay:
            row.update(replay_row(trace))
        rows.append(row)
        batch = row.get("batch", {}).get("p95")
        timed = row.get("batch-time", {}).get("p95")
        cells = [f"{jobs:,}", f"{n} ({n * 8})", f"{load:g}", f"{row['p95 no gang']:,.0f}",
                 f"{row['p95 bound']:,.0f} ({row['gang start']:,.0f} s)",
                 f"{row['p95 rule']:,.0f} ({row['gang start rule']:,.0f} s)",
                 "" if batch is None else f"{batch:,.0f}", "" if batch is None else f"{1.1 * batch:,.0f}",
                 "" if timed is None else f"{timed:,.0f}",
                 "" if not batch else f"{row['p95 bound'] / batch:.2f}×, {row['p95 rule'] / batch:.2f}×"]
        print("| " + " | ".join(cells) + " |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
