"""Print a plan as a rich table, JSON or YAML (the edges of the pipeline: no logic here)."""

from __future__ import annotations

import json
import re

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .planning.plan import NodeUsage, Plan
from .quotas.tenant_report import TenantLine
from .quotas.tenants import SHARE_UNIT, shown
from .time.timeline import Now, rfc3339

WHY_WIDTH = 30  # the narrowest a column of reasons (wrapped at words) stays readable
CODE_WIDTH = 14  # a reason code's column (engine.model.reasons: GangIncomplete, SchedulerError)


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Plain YAML: pods that share one list of reasons must not come out as &id001 / *id001 aliases."""

    def ignore_aliases(self, data) -> bool:
        return True


def plan_dict(plan: Plan, tenants: list[TenantLine] | None = None) -> dict:
    """The dry-run contract's object: the plan's, with `tenants` (before `stats`) when the cluster has quotas."""
    out = plan.to_dict()
    if not tenants:
        return out
    stats = out.pop("stats")
    return {**out, "tenants": {line.name: line.to_dict() for line in tenants}, "stats": stats}


def render_json(plan: Plan, tenants: list[TenantLine] | None = None) -> str:
    return json.dumps(plan_dict(plan, tenants), indent=2)


def render_yaml(plan: Plan, tenants: list[TenantLine] | None = None) -> str:
    return yaml.dump(plan_dict(plan, tenants), Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def _fmt(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value / 1000:g}"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return f"{value / 2**30:.1f}Gi"
    return str(value)


def _pod_cell(split: bool):
    """A pod key as one cell; on a narrow console namespace/ and name on two lines rather than cut mid-word."""
    return (lambda key: key.replace("/", "/\n", 1)) if split else (lambda key: key)


def _print_skipped(skipped: dict[str, str], console: Console, max_rows: int) -> None:
    """Pods the scheduler does not consider pending (gated, terminating, ...): one line each, with the reason."""
    pod_cell = _pod_cell(max(len(p) for p in skipped) + WHY_WIDTH + 7 > console.width)
    t = Table(title=f"Skipped, not pending ({len(skipped)})", title_justify="left")
    t.add_column("pod", style="yellow", overflow="fold")
    t.add_column("why")
    for i, (pod, reason) in enumerate(sorted(skipped.items())):
        if i == max_rows:
            t.add_row(f"… {len(skipped) - max_rows} more (use -o json)", "")
            break
        t.add_row(escape(pod_cell(pod)), escape(reason))
    console.print(t)


def _print_reservations(plan: Plan, console: Console) -> None:
    """Room held for pods that start later (engine.time.timeline): each reserved pod, its node and start."""
    t = Table(title=f"Reservations ({sum(len(r.pods) for r in plan.reservations)})", title_justify="left")
    for column in ("pod", "node", "starts", "for"):
        t.add_column(column, overflow="fold")
    for r in plan.reservations:
        for pod, node in r.pods:
            t.add_row(escape(pod), escape(node), rfc3339(r.start), escape(r.holder))
    console.print(t)


def _print_topology(plan: Plan, console: Console) -> None:
    """Each started gang with topology levels: the domains it spans per level, and why when more than one."""
    t = Table(title=f"Gang topology ({len(plan.topology)})", title_justify="left")
    for column in ("gang", "spans", "note"):
        t.add_column(column, overflow="fold")
    for gang, span in sorted(plan.topology.items()):
        spans = "; ".join(f"{key}: {', '.join(v or '(none)' for v in values)}" for key, values in span.levels)
        t.add_row(escape(gang), escape(spans), escape(span.note))
    console.print(t)


def print_table(plan: Plan, console: Console, max_rows: int = 200, tenants: list[TenantLine] | None = None) -> None:
    """Placements, unschedulable and skipped pods, node utilisation, the tenants (when the cluster has quotas),
    and a summary line.

    Sized to the console: names fold rather than being cut, and at a narrow width resource columns are
    dropped (extended resources first) rather than cutting their values. Notes are the caller's (stderr).
    """
    s = plan.stats
    if plan.assignments:
        longest = max(len(p) for p in plan.assignments) + max(len(n) for n in plan.assignments.values())
        pod_cell = _pod_cell(longest + 7 > console.width)
        t = Table(title=f"Placements ({len(plan.assignments)})", title_justify="left")
        t.add_column("pod", overflow="fold")
        t.add_column("node", overflow="fold")
        for i, (pod, node) in enumerate(sorted(plan.assignments.items())):
            if i == max_rows:
                t.add_row(f"… {len(plan.assignments) - max_rows} more (use -o json)", "")
                break
            t.add_row(escape(pod_cell(pod)), escape(node))
        console.print(t)
    if plan.preemptions:
        _print_preemptions(plan, console, max_rows)
    if plan.reservations:
        _print_reservations(plan, console)
    if plan.topology:
        _print_topology(plan, console)
    if plan.unschedulable:
        _print_unschedulable(plan, console, max_rows)
    if plan.skipped:
        _print_skipped(plan.skipped, console, max_rows)
    _print_usage(plan, console, max_rows)
    if tenants:
        print_tenants(tenants, console)
    console.print(escape(now_line(s.now)))
    skipped = f" · {s.skipped} skipped" if s.skipped else ""
    evicted = len(plan.evictions)
    skipped += f" · {evicted} eviction{'s' if evicted != 1 else ''}" if evicted else ""
    console.print(
        f"[bold]{s.placed}/{s.pods} pods placed[/bold] on {s.nodes} nodes{skipped} · status {s.status} · "
        f"gap {100 * (s.gap or 0.0):.2f}% · {s.classes} pod classes · solver {s.solver_seconds or 0.0:.2f}s · "
        f"total {s.seconds or 0.0:.2f}s"
    )


def _print_unschedulable(plan: Plan, console: Console, max_rows: int) -> None:
    """The pods left out: each with its reason codes (engine.model.reasons; the dominant first, the rest below it)
    and its reasons in words."""
    codes = plan.waiting_reasons()
    pod_cell = _pod_cell(max(len(p) for p in plan.unschedulable) + CODE_WIDTH + WHY_WIDTH + 10 > console.width)
    t = Table(title=f"Unschedulable ({len(plan.unschedulable)})", title_justify="left", show_lines=True)
    t.add_column("pod", style="red", overflow="fold")
    t.add_column("code", overflow="fold")
    t.add_column("why", overflow="fold")
    for i, (pod, reasons) in enumerate(sorted(plan.unschedulable.items())):
        if i == max_rows:
            t.add_row(f"… {len(plan.unschedulable) - max_rows} more (use -o json)", "", "")
            break
        said = codes.get(pod)
        code = "\n".join(c.code.value for c in said.causes) if said is not None else ""
        t.add_row(escape(pod_cell(pod)), code, escape("\n".join(reasons)))
    console.print(t)


def now_line(now: Now | None) -> str:
    """Which now the plan was made at, and where it came from (engine.time.timeline.Now)."""
    if now is None:
        return "now: none known (no pod in the snapshot has a creation or start time; --now sets one)"
    return f"now: {now.words()}"


def _print_preemptions(plan: Plan, console: Console, max_rows: int) -> None:
    """Pods placed by evicting lower-priority ones: each preemptor, its node, and its victims with why."""
    pods, evictions = len(plan.preemptions), len(plan.evictions)
    t = Table(title=f"Preemptions ({pods} pod{'s' * (pods != 1)}, {evictions} eviction{'s' * (evictions != 1)})",
              title_justify="left", show_lines=True)
    t.add_column("pod (priority)", overflow="fold")
    t.add_column("node", overflow="fold")
    t.add_column("evicts (priority; budget; why)", overflow="fold")
    for i, (pod, p) in enumerate(sorted(plan.preemptions.items())):
        if i == max_rows:
            t.add_row(f"… {len(plan.preemptions) - max_rows} more (use -o json)", "", "")
            break
        victims = "\n".join(f"{v.pod} ({v.priority}; {v.to_dict()['budget']}"
                             f"{f'; with PodGroup {v.group}' if v.group else ''}"
                             f"{f'; beyond the min of {v.quota}' if v.quota else ''}"
                             f"{f'; {v.why}' if v.why else ''})" for v in p.victims)
        reclaim = f"\nreclaims the min of {p.reclaim}" if p.reclaim else ""
        t.add_row(escape(f"{pod} ({p.priority}){reclaim}"), escape(p.node),
                  escape(victims) or "nothing: room freed by the evictions beside it")
    console.print(t)


def _print_usage(plan: Plan, console: Console, max_rows: int) -> None:
    """Node utilisation, laid out to fit the console: percentages on a second line if need be, then
    extended resources dropped (named below the table) rather than any value cut."""
    every_node = [u for u in plan.usage if u.placed] or plan.usage
    touched = every_node[:max_rows]
    if not touched:
        return
    extended = sorted({r for u in touched for r in u.requested if r not in ("pods", "cpu", "memory")})
    every = ["cpu", "memory", *extended]
    for resources in (every[:n] for n in range(len(every), 0, -1)):
        for split in (False, True):
            header, rows = _usage_rows(touched, resources, split)
            if _table_width(header, rows) <= console.width or (split and len(resources) == 1):
                t = Table(title="Node utilisation after the plan", title_justify="left")
                for i, name in enumerate(header):
                    t.add_column(name, justify="left" if i == 0 else "right", no_wrap=i > 0, overflow="fold")
                for row in rows:
                    t.add_row(*row)
                console.print(t)
                if len(every_node) > max_rows:
                    console.print(f"[dim]… {len(every_node) - max_rows} more node(s)[/dim]")
                hidden = every[len(resources):]
                if hidden:
                    console.print(f"[dim]not shown at this width: {', '.join(hidden)}[/dim]")
                return


def _usage_rows(touched: list, resources: list[str], split: bool) -> tuple[list[str], list[list[str]]]:
    header = ["node", "new pods", "pods", *resources]
    rows = []
    for u in touched:
        cells = [_usage_cell(u, r, split) for r in resources]
        rows.append([u.node, str(u.placed), f"{u.pods}/{u.allocatable.get('pods', 0)}", *cells])
    return header, rows


def _usage_cell(u: NodeUsage, r: str, split: bool) -> str:
    """used/allocatable (percent) for the node's own resources; for rows counted beside them (devices, volumes)
    what the plan's pods take of what was free ("1 (of 2 free)"); "—" where the node has none and none is used."""
    used = u.requested.get(r, 0)
    if r in u.counted:
        free = u.counted[r]
        if free is None:
            return f"{used} (no node limit)"
        return "—" if not free and not used else f"{used} (of {free} free)"
    cap = u.allocatable.get(r, 0)
    if not cap:
        return "—" if not used else f"{_fmt(r, used)} (of 0 allocatable)"
    return f"{_fmt(r, used)}/{_fmt(r, cap)}{chr(10) if split else ' '}({100 * used / cap:.0f}%)"


def _table_width(header: list[str], rows: list[list[str]]) -> int:
    """Characters a rich table needs to show every cell line whole: each column, its padding and a border."""
    widths = [max(len(line) for cell in column for line in cell.split("\n")) for column in zip(header, *rows)]
    return sum(w + 3 for w in widths) + 1


TENANT_NAME_WIDTH = 12  # the narrowest the quotas' names column stays readable
TENANT_DROPPED = ("left", "placed", "borrowed", "share")  # columns left out for it at a narrow width, in this order


def print_tenants(tenants: list[TenantLine], console: Console) -> None:
    """One row per quota and resource it names: used before → after the plan, min, max, borrowed; per tenant its
    share and its pods placed / left out on its first row ("-": not a tenant, or not named). At a narrow width
    a quota's name is folded after its '/' and '-' (never a number cut), and when even so its column would be
    narrower than TENANT_NAME_WIDTH, the last columns are left out (named under the table)."""
    header = ["quota", "resource", "used", "min", "max", "borrowed", "share", "placed", "left"]
    rows = [[line.name if i == 0 else "", *row, *(_tenant_pods(line) if i == 0 else ("", ""))]
            for line in tenants for i, row in enumerate(_tenant_rows(line) or [["-"] * 6])]
    shown, width = _tenant_layout(header, rows, console.width)
    t = Table(title=f"Tenants after the plan ({len(tenants)} quota{'s' * (len(tenants) != 1)})", title_justify="left",
              caption="used: before → after the plan · borrowed: used beyond the min · share: weighted dominant share "
              "of the cluster · placed, left: the tenant's pending pods", caption_justify="left")
    for i in shown:
        t.add_column(header[i], justify="left" if i < 2 else "right", no_wrap=i > 0, overflow="fold",
                     min_width=width if i == 0 else None)
    for row in rows:
        if row[0] and row is not rows[0]:
            t.add_section()
        t.add_row(_fold(row[0], width), *(row[i] for i in shown[1:]))
    console.print(t)
    if hidden := [h for i, h in enumerate(header) if i not in shown]:
        console.print(f"[dim]not shown at this width: {', '.join(hidden)}[/dim]")


def _tenant_layout(header: list[str], rows: list[list[str]], width: int) -> tuple[list[int], int]:
    """The columns shown and the names' width: every column and the longest name when they fit, else the names
    folded into what the other columns leave, else columns of TENANT_DROPPED left out until that is at least
    TENANT_NAME_WIDTH (at least that, however narrow the console)."""
    longest = max(len(row[0]) for row in [header, *rows])
    shown = list(range(len(header)))
    for drop in (None, *TENANT_DROPPED):
        if drop is not None:
            shown.remove(header.index(drop))
        rest = [[row[i] for i in shown[1:]] for row in rows]
        room = width - _table_width([header[i] for i in shown[1:]], rest) - 3
        if room >= min(longest, TENANT_NAME_WIDTH):
            return shown, min(room, longest)
    return shown, TENANT_NAME_WIDTH


def _fold(name: str, width: int) -> str:
    """`name` on lines of at most `width`, broken after a '/' or '-' where it can be, inside a word only when
    one is longer than the line."""
    lines = [""]
    for part in re.findall(r"[^/-]+[/-]?|[/-]", name):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(line[i:i + width] for line in lines for i in range(0, len(line), width))


def _tenant_rows(line: TenantLine) -> list[list[str]]:
    """resource, used, min, max, borrowed, share: the share on the first row only."""
    def amount(r: str, v: int | None) -> str:
        return "-" if v is None else shown(r, v)
    share = "-" if line.share is None else f"{100 * line.share / SHARE_UNIT:.1f}%"
    return [[a.resource, f"{shown(a.resource, a.before)} → {shown(a.resource, a.used)}", amount(a.resource, a.min),
             amount(a.resource, a.max), amount(a.resource, a.borrowed), share if i == 0 else ""]
            for i, a in enumerate(line.resources)]


def _tenant_pods(line: TenantLine) -> tuple[str, str]:
    return (str(len(line.placed)), str(len(line.left))) if line.tenant else ("-", "-")
