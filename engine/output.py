"""Print a plan as a rich table, JSON or YAML (the edges of the pipeline: no logic here)."""

from __future__ import annotations

import json

import yaml
from rich.console import Console
from rich.table import Table

from .plan import Plan

_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def render_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=2)


def render_yaml(plan: Plan) -> str:
    return yaml.dump(plan.to_dict(), Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _fmt(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{value / 2**30:.1f}Gi"
    return str(value)


def print_table(plan: Plan, console: Console, max_rows: int = 200) -> None:
    s = plan.stats
    if plan.assignments:
        t = Table(title=f"Placements ({len(plan.assignments)})", title_justify="left")
        t.add_column("pod")
        t.add_column("node")
        for i, (pod, node) in enumerate(sorted(plan.assignments.items())):
            if i == max_rows:
                t.add_row(f"… {len(plan.assignments) - max_rows} more (use -o json)", "")
                break
            t.add_row(pod, node)
        console.print(t)
    if plan.unschedulable:
        t = Table(title=f"Unschedulable ({len(plan.unschedulable)})", title_justify="left", show_lines=True)
        t.add_column("pod", style="red")
        t.add_column("why")
        for i, (pod, reasons) in enumerate(sorted(plan.unschedulable.items())):
            if i == max_rows:
                t.add_row(f"… {len(plan.unschedulable) - max_rows} more (use -o json)", "")
                break
            t.add_row(pod, "\n".join(reasons))
        console.print(t)
    touched = [u for u in plan.usage if u.placed] or plan.usage
    if touched:
        resources = sorted({r for u in touched for r in u.requested if r != "pods"} | {"cpu", "memory"})
        t = Table(title="Node utilisation after the plan", title_justify="left")
        t.add_column("node")
        t.add_column("new pods", justify="right")
        t.add_column("pods", justify="right")
        for r in resources:
            t.add_column(r, justify="right")
        for i, u in enumerate(touched):
            if i == max_rows:
                t.add_row(f"… {len(touched) - max_rows} more", "", "")
                break
            cells = []
            for r in resources:
                cap = u.allocatable.get(r, 0)
                used = u.requested.get(r, 0)
                pct = f" ({100 * used / cap:.0f}%)" if cap else ""
                cells.append(f"{_fmt(r, used)}/{_fmt(r, cap)}{pct}")
            t.add_row(u.node, str(u.placed), f"{u.pods}/{u.allocatable.get('pods', 0)}", *cells)
        console.print(t)
    for note in plan.notes:
        console.print(f"[dim]note: {note}[/dim]")
    console.print(
        f"[bold]{s['placed']}/{s['pods']} pods placed[/bold] on {s['nodes']} nodes · status {s['status']} · "
        f"gap {100 * s['gap']:.2f}% · {s['classes']} pod classes · solver {s['solver_seconds']:.2f}s · "
        f"total {s['seconds']:.2f}s"
    )
