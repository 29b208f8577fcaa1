"""Snapshot loading: the engine's reader against plain parsers, JSON and YAML, on one snapshot.

    python bench/snapshot_load.py [--workload hetero-jobs] [--repeat 3]     # the table (in-process medians)
    python bench/snapshot_load.py --method NAME FILE                        # one method once (to time a process)
    python bench/snapshot_load.py --phases FILE... [--before DIR] [--repeat 5]  # the load phase against json.load
    python bench/snapshot_load.py --stages FILE [--repeat 5]                    # the load phase, step by step

With --phases, each round runs, as fresh processes in turn: a bare `json.load` of each FILE (timed inside its
process), `import engine.cli` alone, and `policy-scheduler dry-run --cluster FILE -o json -q` (its
stats.phases, and the wall time around the process), for this tree and for a checkout DIR of an earlier one
(--before). Medians; "rest" is the dry-run's wall time less the import, the load phase and the planning phases:
interpreter start and exit, the tenant report, rendering and printing the JSON. With --stages, each round is a
fresh process that runs the steps of `load_cluster` one by one (the collector paused, as it pauses it).

Writes FILE.yaml with bench/realistic.py and the same objects as FILE.json (indented as `kubectl -o json`)
when missing. Methods (rows): plain `json.load` (the garbage collector on, as any caller has it), `orjson.loads`
(when installed), the engine's reader (`engine.reading.manifests.read_objects`: parse, nesting check, List flattening, with
the collector paused as `load_cluster` pauses it); PyYAML's `CSafeLoader`, the engine's YAML reader (libyaml
events, lines kept; on several cores for a big List), and rapidyaml's parse alone (when installed: its tree
still has to become Python objects, which the next row measures on a tenth of the file).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.reading.manifests import read_objects  # noqa: E402


def _paused(call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        gc.disable()
        try:
            return call()
        finally:
            gc.enable()
    return run


def _ryml_objects(data: bytes) -> object:
    """rapidyaml's tree as Python objects (strings only: scalar typing would only add to it)."""
    import ryml

    tree = ryml.parse_in_arena(data)

    def conv(n: int) -> object:
        if tree.is_map(n):
            return {bytes(tree.key(c)).decode(): conv(c) for c in ryml.children(tree, n)}
        if tree.is_seq(n):
            return [conv(c) for c in ryml.children(tree, n)]
        v = tree.val(n)
        return None if v is None else bytes(v).decode()
    return conv(tree.root_id())


def methods(base: Path) -> dict[str, Callable[[], object]]:
    js, ym = base.with_suffix(".json"), base.with_suffix(".yaml")
    out: dict[str, Callable[[], object]] = {
        "json: json.load (plain)": lambda: json.load(js.open()),
        "json: engine read_objects": _paused(lambda: read_objects(str(js))),
        "yaml: yaml.load_all(CSafeLoader)": lambda: list(yaml.load_all(ym.open(), Loader=yaml.CSafeLoader)),
        "yaml: engine read_objects": _paused(lambda: read_objects(str(ym))),
    }
    try:
        import orjson
        out["json: orjson.loads"] = lambda: orjson.loads(js.read_bytes())
    except ImportError:
        pass
    try:
        import ryml
        out["yaml: rapidyaml parse (tree only)"] = lambda: ryml.parse_in_arena(ym.read_bytes())
        head = _tenth(ym.read_bytes())
        out["yaml: rapidyaml → objects, 1/10 of the file"] = lambda: _ryml_objects(head)
    except ImportError:
        pass
    return out


def _tenth(data: bytes) -> bytes:
    """The List's first tenth of items (cut at an item start)."""
    cut = data.find(b"\n- ", len(data) // 10)
    return data[: cut + 1] if cut > 0 else data


def ensure(base: Path, workload: str) -> None:
    ym, js = base.with_suffix(".yaml"), base.with_suffix(".json")
    if not ym.exists():
        subprocess.run([sys.executable, str(ROOT / "bench" / "realistic.py"), workload, "-o", str(ym)], check=True)
    if not js.exists():
        doc = yaml.load(ym.open(), Loader=yaml.CSafeLoader)
        with js.open("w") as f:
            json.dump(doc, f, indent=4)


def _seconds(argv: list[str], tree: Path) -> tuple[float, str]:
    """Wall seconds of one process (run in `tree`, which it imports `engine` from) and what it printed."""
    started = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)})
    return time.perf_counter() - started, out.stdout


def _phase_round(files: list[str], trees: list[Path], runs: dict[tuple[str, str], dict[str, list[float]]]) -> None:
    bare = "import json, sys, time; t = time.perf_counter(); json.load(open(sys.argv[1])); print(time.perf_counter() - t)"
    for tree in trees:
        runs[("", str(tree))].setdefault("import", []).append(_seconds([sys.executable, "-c", "import engine.cli"], tree)[0])
    for file in files:
        runs[(file, "")].setdefault("json.load", []).append(float(_seconds([sys.executable, "-c", bare, file], ROOT)[1]))
        for tree in trees:
            wall, out = _seconds([sys.executable, "-m", "engine", "dry-run", "--cluster", file, "-o", "json", "-q"], tree)
            phases = json.loads(out)["stats"]["phases"]
            row = runs[(file, str(tree))]
            row.setdefault("wall", []).append(wall)
            row.setdefault("load", []).append(phases["load"])
            row.setdefault("plan", []).append(sum(v for k, v in phases.items() if k != "load"))


def phases_table(files: list[str], trees: list[Path], repeat: int) -> Table:
    """The load phase against a bare json.load, and where the rest of the dry-run goes, for each tree."""
    runs: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(dict)
    for _ in range(repeat):
        _phase_round(files, trees, runs)
    med = statistics.median
    out = Table(title=f"dry-run -o json -q: medians of {repeat}, fresh processes in turn")
    for col in ("snapshot", "tree", "json.load s", "load phase s", "× json.load", "plan s", "import s", "rest s", "dry-run s"):
        out.add_column(col, justify="left" if col in ("snapshot", "tree") else "right")
    for file in files:
        plain = med(runs[(file, "")]["json.load"])
        for tree in trees:
            row, imported = runs[(file, str(tree))], med(runs[("", str(tree))]["import"])
            load, plan, wall = med(row["load"]), med(row["plan"]), med(row["wall"])
            out.add_row(Path(file).name, str(tree), f"{plain:.3f}", f"{load:.3f}", f"{load / plain:.2f}", f"{plan:.3f}",
                        f"{imported:.3f}", f"{wall - imported - load - plan:.3f}", f"{wall:.3f}")
    return out


def stages(file: str) -> dict[str, float]:
    """Seconds of each step of engine.reading.manifests.load_cluster on one JSON snapshot, in this process."""
    from engine.reading import load, manifests
    from engine.reading.convert.nodes import node_of_manifest
    from engine.reading.resolve import resolve_cluster

    out: dict[str, float] = {}

    def step(name: str, call: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        value = call()
        out[name] = time.perf_counter() - started
        return value

    gc.disable()
    text = step("read and decode", lambda: manifests._read_text(file, file))
    value = step("json.loads", lambda: json.loads(text))
    step("nesting check", lambda: manifests._nesting_at_most(text, manifests.MAX_DEPTH))
    docs = step("List flattened", lambda: list(manifests._flatten([value], file, {})))
    found = step("sort_objects (nodes converted)", lambda: load.sort_objects(docs))
    seen = {str(o["metadata"].get("namespace") or "default") for _, o in found.pods}
    context = load.Context(load.namespace_labels(found.cluster.namespaces, seen), found.priorities,
                           found.cluster.native_groups)
    pods, errors = step("convert_pods", lambda: load.convert_pods(context, found.pods, checked=True))
    assembled = step("assemble (pods placed, budgets)", lambda: load.assemble(
        found.cluster, pods, found.priorities, load.DEFAULT_SCHEDULER, found.budgets, errors))
    step("resolve_cluster", lambda: resolve_cluster(assembled[0], None))
    # the converters alone, again on the same objects: the rest of the two steps above is the assembly's
    nodes = [obj for _, obj in docs if obj.get("kind") == "Node"]
    step("  again: node_of_manifest alone", lambda: [node_of_manifest(obj) for obj in nodes])
    step("  again: Context.pod alone", lambda: [context.pod(obj) for _, obj in found.pods])
    return out


def stages_table(file: str, repeat: int) -> Table:
    code = f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); from bench.snapshot_load import stages; " \
        f"print(json.dumps(stages({file!r})))"
    runs = [json.loads(_seconds([sys.executable, "-c", code], ROOT)[1]) for _ in range(repeat)]
    out = Table(title=f"load_cluster step by step, {Path(file).name}: medians of {repeat} fresh processes")
    out.add_column("step")
    out.add_column("median s", justify="right")
    for name in runs[0]:
        out.add_row(name, f"{statistics.median(r[name] for r in runs):.3f}")
    total = statistics.median(sum(v for k, v in r.items() if "again" not in k) for r in runs)
    out.add_row("load_cluster's steps", f"{total:.3f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="hetero-jobs")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="/tmp/policy-scheduler-bench")
    ap.add_argument("--method", help="run this one method once and print its seconds")
    ap.add_argument("file", nargs="?", help="with --method: the snapshot (either suffix)")
    ap.add_argument("--phases", nargs="+", metavar="FILE", help="the load phase of a dry-run against json.load")
    ap.add_argument("--before", type=Path, help="with --phases: a checkout of an earlier tree, run side by side")
    ap.add_argument("--stages", metavar="FILE", help="the load phase of one JSON snapshot, step by step")
    args = ap.parse_args()
    if args.stages:
        Console(width=120).print(stages_table(args.stages, args.repeat))
        return
    if args.phases:
        trees = [ROOT] + ([args.before.resolve()] if args.before else [])
        Console(width=160).print(phases_table(args.phases, trees, args.repeat))
        return
    base = Path(args.file).with_suffix("") if args.file else Path(args.out) / f"load-{args.workload}"
    base.parent.mkdir(parents=True, exist_ok=True)
    ensure(base, args.workload)
    table = methods(base)
    if args.method:
        started = time.perf_counter()
        table[args.method]()
        print(f"{time.perf_counter() - started:.3f}")
        return
    runs: dict[str, list[float]] = {name: [] for name in table}
    for _ in range(args.repeat):  # alternating, so drift hits every method alike
        for name, call in table.items():
            gc.collect()
            started = time.perf_counter()
            call()
            runs[name].append(time.perf_counter() - started)
    plain = statistics.median(runs["json: json.load (plain)"])
    out = Table(title=f"{base.with_suffix('.yaml').name} ({base.with_suffix('.yaml').stat().st_size >> 20} MiB YAML, "
                f"{base.with_suffix('.json').stat().st_size >> 20} MiB JSON); median of {args.repeat}")
    for col in ("method", "median s", "min s", "× plain json.load"):
        out.add_column(col, justify="left" if col == "method" else "right")
    for name, xs in runs.items():
        out.add_row(name, f"{statistics.median(xs):.2f}", f"{min(xs):.2f}", f"{statistics.median(xs) / plain:.2f}")
    Console(width=120).print(out)


if __name__ == "__main__":
    main()
