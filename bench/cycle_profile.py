#!/usr/bin/env python3
"""Where one batch-arrival cycle's seconds go (issue 30), in-process, no apiserver.

A workload of bench/compare_workloads.py (default ``mixed-hetero``) is fed to a store and the loop's cluster cache
as the watches would feed it, every pod pending: a batch arrival. Then one cycle plans the whole batch as the loop
does (`PlanStage.plan`: the cache's snapshot, then `cycle.run_cycle` → `planner.plan_batch` with the loop's
options: one CP-SAT worker, the time limit sized to the batch by `Settings.limit_for` (0.2 s + 5 ms per pod, at most
5 s), preferences capped by `Settings.preferences_for`, preemption on), ``--repeats`` times on the same cache.

Each repeat runs twice: once plain (the cycle's wall time, what the table's first line says; all the plain
cycles run first) and once with ``time.perf_counter`` wrappers around the phases (the named functions below, in
the modules that call them); the wrappers nest, so every row is inclusive of the rows under it, and a row's time
is counted under the phase that called it (compile inside preemption is preemption's). The rows are medians over
the repeats; "calls" is per cycle.

    python bench/cycle_profile.py --nodes 200 --nodes 1000 --nodes 5000 -n 5
    python bench/cycle_profile.py --nodes 1000 --write-snapshot /tmp/mixed-hetero-1000.json   # for dry-run
    python bench/cycle_profile.py -w scheduling-basic --nodes 5000 --batch 10   # one small cycle of a stream
    python bench/cycle_profile.py --nodes 200 --bound 900 --batch 1 --as-loop  # late in a stream: 900 pods bound
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import compare_workloads as CW  # noqa: E402
from engine import preempt as preempt_module  # noqa: E402
from engine import solve as solve_module  # noqa: E402
from engine.kinds import EMITTERS, FILTERS, PRE_FILTERS, SCORES  # noqa: E402
from engine.loop import cycle as cycle_module  # noqa: E402
from engine.loop.cache import ClusterCache  # noqa: E402
from engine.loop.profile import Settings  # noqa: E402
from engine.loop.store import Store, source_name  # noqa: E402
from engine.model.ir import Rules  # noqa: E402
from engine.planning import compile as compile_module  # noqa: E402
from engine.planning import plan as plan_module  # noqa: E402
from engine.planning import planner as planner_module  # noqa: E402
from engine.planning.planner import Options  # noqa: E402
from engine.solve import load_solver  # noqa: E402
from testkit.manifests import namespace, priority_class, ready_node  # noqa: E402

SCHEDULER = "policy-scheduler"
TIME_PER_POD = 0.005  # `policy-scheduler run --time-per-pod`'s default


# --- the cluster, as objects -------------------------------------------------------------------------------

def scenario_docs(scenario: CW.Scenario, scheduler: str = SCHEDULER) -> list[dict[str, Any]]:
    """Every object of a scenario as the apiserver would list it (nodes with their status, uids on pods), the
    pending pods addressed to `scheduler`: a snapshot `dry-run --cluster` reads and the store is fed."""
    docs: list[dict[str, Any]] = [namespace(ns) for ns in scenario.namespaces]
    docs += [priority_class(name, value) for name, value in scenario.priority_classes.items()]
    for spec in scenario.nodes:
        body, status = ready_node(spec.name, spec.allocatable, {"kubernetes.io/os": "linux", **spec.labels},
                                  list(spec.taints), spec.annotations)
        if spec.unschedulable:
            body["spec"]["unschedulable"] = True
        docs.append({"apiVersion": "v1", "kind": "Node", **body, **status})
    docs += [{"apiVersion": CW.W.POD_GROUP_API, **g} if "apiVersion" not in g else g for g in scenario.pod_groups]
    for k, pod in enumerate(scenario.running + scenario.pending):
        meta = {**pod["metadata"], "uid": f"uid-{k}", "resourceVersion": str(k + 1),
                "creationTimestamp": "2026-01-01T00:00:00Z"}
        spec = pod["spec"] if pod["spec"].get("nodeName") else {**pod["spec"], "schedulerName": scheduler}
        docs.append({"apiVersion": "v1", "kind": "Pod", **pod, "metadata": meta, "spec": spec})
    return docs


def fill(docs: list[dict[str, Any]]) -> tuple[Store, ClusterCache, list[tuple[str, dict[str, Any]]]]:
    """A store with the loop's cache listening, fed `docs` as watches would; and the batch (every pending pod)."""
    store = Store()
    cache = ClusterCache(store.assumptions)
    store.subscribe(lambda change: cache.apply(change.kind, change.old, change.new))
    for doc in docs:
        store.apply(doc["kind"], "ADDED", doc)
    batch = [(source_name("Pod", d["metadata"]["namespace"], d["metadata"]["name"]), d) for d in docs
             if d["kind"] == "Pod" and not d["spec"].get("nodeName")]
    return store, cache, batch


# --- timing ------------------------------------------------------------------------------------------------

class Timers:
    """Inclusive seconds and calls per path of nested phases ("plan_batch > make_plan > compile")."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[str] = []
        self.undo: list[tuple[Any, str, Any, bool]] = []

    def wrap(self, owner: Any, attr: str, label: str) -> None:
        had = attr in vars(owner)
        own = vars(owner).get(attr)  # what to put back (a class's own attribute, not a bound method)
        fn = getattr(owner, attr)
        timers = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            timers.stack.append(label)
            path = " > ".join(timers.stack)
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timers.seconds[path] += time.perf_counter() - started
                timers.calls[path] += 1
                timers.stack.pop()
        setattr(owner, attr, timed)
        self.undo.append((owner, attr, own, had))

    def restore(self) -> None:
        for owner, attr, old, had in reversed(self.undo):
            if had:
                setattr(owner, attr, old)
            else:
                delattr(owner, attr)
        self.undo.clear()


PHASES: tuple[tuple[Any, str, str], ...] = (
    (ClusterCache, "snapshot", "snapshot"),
    (cycle_module, "plan_batch", "plan_batch"),
    (planner_module, "make_plan", "make_plan"),
    (planner_module, "say_never", "say_never"),
    (planner_module, "preempt", "preemption"),
    (preempt_module, "make_plan", "make_plan"),
    (preempt_module, "compile_cluster", "compile"),
    (plan_module, "compile_cluster", "compile"),
    (compile_module, "group_pods", "classes (group_pods)"),
    (compile_module, "Batch", "Batch (bound pods' facts)"),
    (compile_module, "_check_classes", "filter + score per class"),
    (compile_module, "_filtered", "filters"),
    (compile_module, "score_parts", "scores"),
    (compile_module, "_pod_classes", "solver classes"),
    (compile_module, "_rank", "rank"),
    (plan_module, "solve", "solve"),
    (solve_module, "starting_plan", "starting plans"),
    (solve_module, "greedy", "greedy"),
    (solve_module, "sequential", "one pod at a time"),
    (solve_module, "ClassModel", "CP-SAT model"),
    (solve_module._Search, "_search", "CP-SAT search"),
    (plan_module, "reserve", "reserve"),
    (plan_module, "plan_from_solution", "plan + explanations"),
    (plan_module, "replay", "replay"),
    (plan_module, "explain_unplaced", "explain"),
)


@contextmanager
def instrumented() -> Iterator[Timers]:
    timers = Timers()
    for owner, attr, label in PHASES:
        timers.wrap(owner, attr, label)
    for step, kinds in (("prefilter", PRE_FILTERS), ("filter", FILTERS), ("score", SCORES), ("emit", EMITTERS)):
        for kind in kinds:  # each kind's steps, on its instance (the registry calls them through it)
            timers.wrap(kind, step, f"{kind.name}.{step}")
    try:
        yield timers
    finally:
        timers.restore()


# --- one cycle -------------------------------------------------------------------------------------------

def one_cycle(cache: ClusterCache, batch: list[tuple[str, dict[str, Any]]],
              handed: list[float] | None = None, collect: bool = True) -> tuple[float, Any]:
    """Seconds of one cycle as `PlanStage.plan` runs it (collector paused), and its result; `handed` gets the
    seconds at which its placements were final (`engine.planning.plan.placed_plan`: the loop starts their binds there)."""
    settings = Settings((), time_per_pod=TIME_PER_POD)
    options = Options(settings.limit_for(len(batch)), settings.solver_workers, preemption=settings.preemption,
                      preference_limit=settings.preferences_for(len(batch)))
    if collect:  # (not as the loop runs: its heap is frozen once synced and never collected before a cycle)
        gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        snapshot = cache.snapshot(batch, SCHEDULER, Rules().gangs, Rules().quotas)
        on_placed = None if handed is None else (lambda _plan: handed.append(time.perf_counter() - started))
        result = cycle_module.run_cycle(snapshot, Rules(), options, on_placed=on_placed)
        return time.perf_counter() - started, result
    finally:
        gc.enable()


def bind_first(store: Store, cache: ClusterCache, batch: list[tuple[str, dict[str, Any]]], bound: int
               ) -> list[tuple[str, dict[str, Any]]]:
    """The first `bound` pods of the batch planned in one cycle and their placements bound in the store, as the
    watch would show them: the state late in a stream. The rest of the batch is returned."""
    early, rest = batch[:bound], batch[bound:]
    _, result = one_cycle(cache, early)
    for _, doc in early:
        key = f"{doc['metadata']['namespace']}/{doc['metadata']['name']}"
        if (node := result.plan.assignments.get(key)) is not None:
            store.apply("Pod", "MODIFIED", {**doc, "spec": {**doc["spec"], "nodeName": node}})
    return rest


def measure(workload: str, nodes: int, repeats: int, batch_size: int | None = None, bound: int = 0,
            as_loop: bool = False) -> tuple[list[float], dict[str, list[float]], dict[str, int], dict[str, Any]]:
    scenario = CW.WORKLOADS[workload].build(nodes)
    if batch_size is not None:  # a streaming cycle: the first pending pods only, the rest not created yet
        scenario.pending[bound + batch_size:] = []
    docs = scenario_docs(scenario)
    started = time.perf_counter()
    store, cache, batch = fill(docs)
    fed = time.perf_counter() - started
    started = time.perf_counter()
    load_solver()  # as `policy-scheduler run` does before it lists the cluster
    cache.build({SCHEDULER})  # as the loop does once every watch has listed, before it is ready
    built = time.perf_counter() - started
    if bound:
        batch = bind_first(store, cache, batch, bound)
    if as_loop:
        gc.freeze()  # as `policy-scheduler run` does once its caches sync
    first, _ = one_cycle(cache, batch)  # the first snapshot converts what the watches fed once
    walls: list[float] = []
    rows: dict[str, list[float]] = defaultdict(list)
    calls: dict[str, int] = {}
    facts: dict[str, Any] = {"fed": fed, "built": built, "first": first}
    placed: list[int] = []
    handed: list[float] = []
    for _ in range(repeats):  # the plain cycles first: instrumented ones in between slowed them (up to 2x)
        seconds, result = one_cycle(cache, batch, handed, collect=not as_loop)
        walls.append(seconds)
        placed.append(result.plan.stats.placed)
    for k in range(repeats):
        with instrumented() as timers:
            total, result = one_cycle(cache, batch, collect=not as_loop)
        rows["(instrumented cycle)"].append(total)
        for path, s in timers.seconds.items():
            rows[path] += [0.0] * (k - len(rows[path])) + [s]  # a phase a repeat did not reach took 0 s there
        calls.update(timers.calls)
        stats = result.plan.stats
        facts["placed per repeat"] = placed
        facts |= {"pods": stats.pods, "placed": stats.placed, "classes": stats.classes, "status": stats.status,
                 "strategy": stats.strategy, "nodes": stats.nodes}
    for path in rows:
        rows[path] += [0.0] * (repeats - len(rows[path]))
    facts["handed"] = handed
    return walls, rows, calls, facts


def _seconds(s: float) -> str:
    """Seconds, or milliseconds below a tenth of a second (a stream's one-pod cycle)."""
    return f"{s:.3f} s" if s >= 0.1 else f"{s * 1000:.2f} ms"


def table(workload: str, nodes: int, repeats: int, walls: list[float], rows: dict[str, list[float]],
          calls: dict[str, int], facts: dict[str, Any], min_ms: float) -> str:
    wall = statistics.median(walls)
    out = [f"#### {workload}, {nodes:,} nodes: {facts['pods']:,} pods in {facts['classes']:,} classes, "
           f"{facts['placed']:,} placed by the last instrumented cycle ({facts['status']}, {facts['strategy']})",
           "",
           f"cycle (snapshot + plan_batch), uninstrumented: **{_seconds(wall)}** (median of {repeats}: "
           + ", ".join(_seconds(w) for w in walls) + ")"
           + (f"; placements final (their binds start) at **{statistics.median(facts['handed']):.3f} s**"
              if facts.get("handed") else ""),
           "",
           f"cold: feeding the store and cache {facts['fed']:.3f} s, loading OR-tools and building the cache's model "
           f"{facts['built']:.3f} s (before ready, as the loop does), then the first cycle {facts['first']:.3f} s; "
           f"pods placed by the uninstrumented cycles: {', '.join(f'{p:,}' for p in facts['placed per repeat'])}",
           "",
           "| phase (inclusive; nested under the one above it) | s (median) | % of cycle | calls |",
           "|---|---:|---:|---:|"]
    instrumented_total = statistics.median(rows.pop("(instrumented cycle)"))
    ordered = sorted(rows, key=lambda p: [_order(part) for part in p.split(" > ")])
    for path in ordered:
        s = statistics.median(rows[path])
        if s * 1000 < min_ms:
            continue
        depth = path.count(" > ")
        name = path.rsplit(" > ", 1)[-1]
        out.append(f"| {'&nbsp;&nbsp;' * depth}{name} | {s:.3f} | {100 * s / instrumented_total:.0f}% | "
                   f"{calls.get(path, 0):,} |")
    out.append(f"| (instrumented cycle) | {instrumented_total:.3f} | 100% | |")
    return "\n".join(out)


_LABELS = [label for _, _, label in PHASES]


def _order(label: str) -> tuple[int, str]:
    return (_LABELS.index(label), "") if label in _LABELS else (len(_LABELS), label)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-w", "--workload", default="mixed-hetero", choices=list(CW.WORKLOADS))
    ap.add_argument("--nodes", type=int, action="append", help="sizes (default 200, 1,000, 5,000)")
    ap.add_argument("-n", "--repeats", type=int, default=3)
    ap.add_argument("--min-ms", type=float, default=5.0, help="leave out rows below this many ms")
    ap.add_argument("--write-snapshot", type=Path, help="write the (first size's) objects as JSON and stop")
    ap.add_argument("--batch", type=int, help="pending pods in the cycle (default: all of the workload's; fewer: "
                                              "one cycle of a stream)")
    ap.add_argument("--bound", type=int, default=0, help="the workload's first pods placed and bound before "
                                                         "the measured cycle (late in a stream)")
    ap.add_argument("--as-loop", action="store_true", help="the heap frozen once built and no collection before "
                                                             "each cycle, as the scheduler loop runs")
    args = ap.parse_args(argv)
    sizes = args.nodes or [200, 1000, 5000]
    if args.write_snapshot:
        docs = scenario_docs(CW.WORKLOADS[args.workload].build(sizes[0]))
        args.write_snapshot.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        print(f"{len(docs)} objects -> {args.write_snapshot}")
        return 0
    for nodes in sizes:
        walls, rows, calls, facts = measure(args.workload, nodes, args.repeats, args.batch, args.bound, args.as_loop)
        print(table(args.workload, nodes, args.repeats, walls, rows, calls, facts, args.min_ms) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
