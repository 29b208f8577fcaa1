"""The openb benchmark's report (issue 52): `simulate-openb` result documents merged into one small JSON (each run's
series read at fixed steps of the arrived workload instead of at every one of its ~10,000 arrivals), the curves as
PNG (a figure per trace, inflation and prefill, every scheduler and arrival setting in it), and a Markdown table for
BENCHMARKS.md: per trace and setting, unallocated GPUs at 100% arrived and the area under the curve (mean ± stdev
over seeds), and each against FGD's of the same trace and prefill.

    python bench/openb_report.py RESULTS.json... --out bench/results/openb.json --plots bench/results/
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.time.sweep import summarise

STEP = 0.01  # the arrived share between two points of a compacted series


def trace_name(run: dict[str, Any]) -> str:
    """`default`, `gpushare100`, `multigpu50`: the task file's name without openb_pod_list_ and .csv."""
    return Path(run["parameters"]["trace"]["tasks_csv"]).stem.removeprefix("openb_pod_list_")


def compact(run: dict[str, Any]) -> dict[str, Any]:
    """The run with its series at arrived = 0, STEP, 2·STEP, … up to its last step (linear between steps)."""
    series = run["series"]
    arrived = np.array([0.0, *series["arrived"]])
    xs = np.round(np.arange(0.0, arrived[-1] + 1e-9, STEP), 6)
    start = {"unallocated": run["summary"]["capacity_gpus"], "fragmented": None, "refused": 0}
    out = {"arrived": xs.tolist()}
    for key in ("unallocated", "fragmented", "refused"):
        ys = np.array([start[key] if start[key] is not None else series[key][0], *series[key]], dtype=float)
        out[key] = np.round(np.interp(xs, arrived, ys), 2).tolist()
    return {**run, "series": out}


def versus_fgd(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], float]:
    """FGD's mean unallocated GPUs at 100% arrived per (trace, inflation, prefill)."""
    return {(r["trace"], r["inflation"], r["prefill"]): r["unallocated_at_full"]["mean"]
            for r in rows if r["scheduler"] == "fgd" and r["batch"] == 1}


def table(rows: list[dict[str, Any]]) -> str:
    fgd = versus_fgd(rows)
    lines = ["| trace | scheduler | arrivals | prefill | seeds | unallocated GPUs at 100% arrived | vs FGD | "
             "area under curve | refused tasks |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        at = r["unallocated_at_full"]
        base = fgd.get((r["trace"], r["inflation"], r["prefill"]))
        ratio = f"{at['mean'] / base - 1:+.1%}" if base and at["mean"] is not None else "-"
        arrivals = f"batch {r['batch']}" if r["batch"] > 1 else "one at a time"
        shown = "-" if at["mean"] is None else f"{at['mean']:,.1f} ± {at['stdev']:,.1f}"  # never reached 100%
        lines.append(f"| {r['trace']} | {r['scheduler']} | {arrivals} | {r['prefill'] or '-'} | {len(r['seeds'])} | "
                     f"{shown} | {ratio} | {r['auc']['mean']:,.1f} ± "
                     f"{r['auc']['stdev']:,.1f} | {r['refused']['mean']:,.0f} |")
    return "\n".join(lines)


def summary_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """summarise() per trace, each row named by its trace."""
    rows = []
    for trace in dict.fromkeys(trace_name(r) for r in runs):
        rows += [{"trace": trace, **row} for row in summarise(r for r in runs if trace_name(r) == trace)]
    return rows


def plots(runs: list[dict[str, Any]], directory: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    from engine.time.sweep_plot import unallocated_figures

    written = []
    for trace in dict.fromkeys(trace_name(r) for r in runs):
        for name, figure in unallocated_figures([r for r in runs if trace_name(r) == trace]):
            target = directory / f"openb_{trace}_{name}"
            figure.axes[0].set_title(f"openb {trace}: {figure.axes[0].get_title()}", fontsize="medium")
            figure.savefig(target, dpi=100)
            written.append(str(target))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", nargs="+", help="simulate-openb --out files")
    parser.add_argument("--out", required=True, help="the merged, compacted JSON")
    parser.add_argument("--plots", default=None, help="a directory for the PNG curves")
    args = parser.parse_args()
    runs = [compact(r) for path in args.documents for r in json.loads(Path(path).read_text())["runs"]]
    rows = summary_rows(runs)
    Path(args.out).write_text(json.dumps({"runs": runs, "summary": rows}, separators=(",", ":")))
    if args.plots:
        Path(args.plots).mkdir(parents=True, exist_ok=True)
        print("\n".join(plots(runs, Path(args.plots))), file=sys.stderr)
    print(table(rows))


if __name__ == "__main__":
    main()
