#!/usr/bin/env python3
"""Production-scale benchmark of ``policy-scheduler dry-run`` (issue 6).

Two modes, both on the realistic snapshots of ``bench/realistic.py``:

* ``run``: each workload (hetero-jobs, hetero-affinity, statefulset, rich-mixed) ``--repeat``
  times; prints nodes, running, pending, median wall / load / compile / model / solve seconds,
  peak RSS, pods placed by the engine and by the sequential (kube-scheduler-like) baseline,
  solver status and whether the plan is valid;
* ``engine``: compile and ``make_plan`` in-process on the generated manifests (no YAML load), the
  in-cluster cycle's cost; ``--against REV`` alternates runs with another revision's engine (before /
  after side by side);
* ``sweep``: the hetero-jobs shape with ~16 running pods per node, pending pods 100 -> 10,000 at
  1,500 nodes and nodes 100 -> 20,000 at 1,000 pending; prints a table and draws
  ``bench/scaling.png`` (seconds and peak RSS vs size, log x). ``--quick``: a few small points.

Each run is ``policy-scheduler dry-run --cluster FILE -o json --time-limit T`` as a subprocess,
one at a time, timed by ``bench/run.py``'s ``run_once`` (wall clock, peak RSS from
``os.wait4``). The engine's ``stats.phases`` (load/compile/start/model/solve seconds) and
``stats.sequential_placed`` are optional: missing ones print as "-". Every plan is checked by
``realistic.validate`` (capacity, pools, taints, hard pod (anti-)affinity, hard zone spread,
gangs); ``--oracle on`` also runs ``testkit/checker.py``'s independent ``check_plan`` (slow on big
clusters; ``auto`` uses it up to 12,000 pods).

Guard rails for a shared machine: a run is killed after ``--timeout`` seconds or when its RSS
passes ``--rss-cap-mib``, and skipped when less memory than that is available.

    python bench/scale.py run --time-limit 1                  # the four workloads, full size
    python bench/scale.py run -w hetero-jobs -n 3 --time-limit 2 --markdown
    python bench/scale.py run --nodes 100 --running 1000 --pending 300   # small versions
    python bench/scale.py sweep --quick --time-limit 1        # ~1 minute; writes bench/scaling.png
    python bench/scale.py sweep --time-limit 2 --timeout 600  # the full sweep
    python bench/scale.py engine --nodes 20000 --running 320000 --pending 10000 --against HEAD~1
    python bench/realistic.py hetero-jobs -o /tmp/hj.yaml     # just a snapshot (--help)

Snapshots are cached under ``--out`` (default ``/tmp/policy-scheduler-bench/realistic``) and
rewritten when ``realistic.py`` or ``workloads.py`` change; ``scale-run.json`` /
``scale-sweep.json`` there keep every run's numbers.

Exit status: 0 ok; 1 a ``run`` failed (exit status, timeout, memory cap, bad JSON); 2 a plan
violated a constraint.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR.parent), str(BENCH_DIR)]  # the test kit (testkit/) and the other bench modules

import realistic as RL  # noqa: E402
import run as B  # noqa: E402

PHASES = ("load", "compile", "start", "model", "solve")  # start: greedy and one-at-a-time plans
ORACLE_AUTO_PODS = 12_000
SWEEP_RUNNING_PER_NODE = 16
SWEEP_FULL = {"pending": (1500, (100, 300, 1000, 3000, 10_000)),
              "nodes": (1000, (100, 300, 1000, 3000, 10_000, 20_000))}
SWEEP_QUICK = {"pending": (200, (100, 300, 1000)),
               "nodes": (100, (100, 300, 1000))}
DEFAULT_PLOT = BENCH_DIR / "scaling.png"
err = B.err


# --------------------------------------------------------------------------- #
# Cases and snapshots
# --------------------------------------------------------------------------- #

@dataclass(frozen=True)
class Case:
    """One snapshot to time: a workload with optional size overrides."""

    workload: str
    nodes: int | None = None
    running: int | None = None
    pending: int | None = None
    series: str = ""          # sweep: "pending" or "nodes"

    def cluster(self) -> RL.Cluster:
        return RL.build(self.workload, nodes=self.nodes, running=self.running,
                        pending=self.pending)


def snapshot_file(out: Path, c: RL.Cluster, detail: str) -> Path:
    return out / "realistic" / f"{c.name}-n{c.nodes}-r{c.running}-p{c.pending}-{detail}.yaml"


def ensure_snapshot(path: Path, c: RL.Cluster, detail: str, regen: bool) -> float | None:
    """Write the snapshot unless a copy newer than the generators exists (as bench/run.py
    caches its own); returns generation seconds, None when cached."""
    newest = max(Path(m.__file__).stat().st_mtime for m in (RL, RL.W))
    if not regen and path.exists() and path.stat().st_mtime >= newest:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    t0 = time.perf_counter()
    try:
        RL.write_snapshot(c, tmp, detail)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- #
# Memory guard
# --------------------------------------------------------------------------- #

def mem_available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def _descendants(root: int) -> list[int]:
    """Pids below ``root`` (children of children too), from /proc."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    out, frontier = [], [root]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier]
        out += kids
        frontier = kids
    return out


def _rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssGuard:
    """Kills this process's children whose RSS passes the cap (run_once only knows time)."""

    def __init__(self, cap_mib: float, interval: float = 0.25) -> None:
        self.cap, self.interval = cap_mib, interval
        self.tripped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> RssGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            for pid in _descendants(os.getpid()):
                if _rss_mib(pid) > self.cap:
                    self.tripped = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)


# --------------------------------------------------------------------------- #
# One run, read
# --------------------------------------------------------------------------- #

@dataclass
class RunStats:
    """What one dry-run told us (engine fields None when the engine did not report them)."""

    wall: float
    rss_mib: float
    phases: dict[str, float]
    placed: int
    sequential: int | None
    status: str
    violations: list[str]


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def read_stats(doc: dict, res: B.RunResult, c: RL.Cluster,
               oracle: Callable[[dict[str, str]], list[str]] | None) -> RunStats:
    stats = doc["stats"]
    phases_in = stats.get("phases") if isinstance(stats.get("phases"), dict) else {}
    phases = {k: v for k in PHASES if (v := _number(phases_in.get(k))) is not None}
    seq = _number(stats.get("sequential_placed"))
    placed, violations = RL.validate(c, doc["assignments"])
    if oracle is not None:
        violations += [f"checker: {v}" for v in oracle(doc["assignments"])[:20]]
    return RunStats(res.seconds, res.maxrss_mib, phases, placed,
                    None if seq is None else int(seq), str(stats.get("status", "-")), violations)


def make_oracle(c: RL.Cluster, detail: str, mode: str
                ) -> Callable[[dict[str, str]], list[str]] | None:
    """testkit/checker.py's check_plan over the generator's manifests, if wanted."""
    if mode == "off" or (mode == "auto" and c.running + c.pending > ORACLE_AUTO_PODS):
        return None
    from testkit.checker import check_plan  # an independent oracle: no engine imports

    docs = list(RL.iter_manifests(c, detail))
    return lambda assignments: check_plan(docs, assignments)


# --------------------------------------------------------------------------- #
# Measuring a case
# --------------------------------------------------------------------------- #

@dataclass
class Measure:
    """A case's runs, summarised by medians."""

    case: Case
    nodes: int
    running: int
    pending: int
    argv: list[str]
    file_mib: float
    runs: list[RunStats] = field(default_factory=list)
    failure: str | None = None

    def median(self, get: Callable[[RunStats], float | None]) -> float | None:
        vals = [v for r in self.runs if (v := get(r)) is not None]
        return statistics.median(vals) if vals else None

    def phase(self, name: str) -> float | None:
        return self.median(lambda r: r.phases.get(name))

    @property
    def engine_s(self) -> float | None:
        """compile + start + model + solve: the in-cluster cycle's cost (no YAML load)."""
        parts = [self.phase(p) for p in PHASES[1:]]
        return sum(parts) if all(p is not None for p in parts) else None

    @property
    def violations(self) -> list[str]:
        return next((r.violations for r in self.runs if r.violations), [])

    def valid_text(self) -> str:
        if not self.runs:
            return "-"
        return f"{len(self.violations)} bad" if self.violations else "ok"


def measure(case: Case, cmd: B.Command, opts: Options) -> Measure:
    c = case.cluster()
    path = snapshot_file(opts.out, c, opts.detail)
    gen = ensure_snapshot(path, c, opts.detail, opts.regen)
    size = path.stat().st_size / (1 << 20)
    err.print(f"{RL.describe(c)}: {'cached' if gen is None else f'generated in {gen:.1f}s'}"
              f" {path} ({size:.0f} MiB)", markup=False, style="dim" if gen is None else None)
    argv = [*cmd.argv(path, opts.time_limit), "--baseline"]  # report the one-at-a-time baseline too
    m = Measure(case, c.nodes, c.running, c.pending, argv, size)
    oracle = make_oracle(c, opts.detail, opts.oracle)
    for k in range(1, opts.repeat + 1):
        m.failure = _one_run(m, c, cmd, opts, oracle, k)
        if m.failure:
            err.print(f"  {c.name}: {m.failure}", style="red", markup=False)
            break
    return m


def _one_run(m: Measure, c: RL.Cluster, cmd: B.Command, opts: Options,
             oracle: Callable[[dict[str, str]], list[str]] | None, k: int) -> str | None:
    """Run once and append its stats to ``m``; returns why it failed, if it did."""
    avail = mem_available_mib()
    if avail < opts.rss_cap_mib:
        return f"skipped: {avail:.0f} MiB available < cap {opts.rss_cap_mib:.0f} MiB"
    err.print(f"  run {k}/{opts.repeat}: {shlex.join(m.argv)}", markup=False)
    with RssGuard(opts.rss_cap_mib) as guard:
        res = B.run_once(m.argv, cmd, opts.timeout)
    if guard.tripped:
        return f"killed at the {opts.rss_cap_mib:.0f} MiB RSS cap after {res.seconds:.1f}s"
    if res.timed_out or res.returncode != 0:
        tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        why = f"timeout {opts.timeout:g}s" if res.timed_out else f"exit {res.returncode}"
        return (f"{why} after {res.seconds:.1f}s, peak RSS {res.maxrss_mib:.0f} MiB; "
                + " | ".join(tail))
    try:
        r = read_stats(B.parse_output(res.stdout), res, c, oracle)
    except B.BadOutput as e:
        return f"bad output: {e}"
    m.runs.append(r)
    phases = " ".join(f"{p} {v:.2f}s" for p, v in r.phases.items())
    err.print(f"    {r.wall:.2f}s wall, {r.rss_mib:.0f} MiB, placed {r.placed}/{c.pending} "
              f"(sequential {'-' if r.sequential is None else r.sequential}), {r.status}"
              + (f", {phases}" if phases else ""), markup=False)
    for v in r.violations[:10]:
        err.print(f"    violation: {v}", style="red", markup=False)
    return None


# --------------------------------------------------------------------------- #
# Tables
# --------------------------------------------------------------------------- #

COLUMNS = ("workload", "nodes", "running", "pending", "runs", "wall s", *(f"{p} s" for p in
           PHASES), "peak RSS MiB", "placed", "sequential", "status", "valid")


def cells(m: Measure) -> list[str]:
    f = B._fmt
    placed = m.median(lambda r: r.placed)
    seq = m.median(lambda r: r.sequential)
    status = "/".join(dict.fromkeys(r.status for r in m.runs)) or (
        m.failure.split()[0].rstrip(":").upper() if m.failure else "-")   # TIMEOUT, KILLED...
    label = m.case.workload + (f" ({m.case.series})" if m.case.series else "")
    return [label, str(m.nodes), str(m.running), str(m.pending), str(len(m.runs)),
            f(m.median(lambda r: r.wall), ".2f"), *(f(m.phase(p), ".2f") for p in PHASES),
            f(m.median(lambda r: r.rss_mib), ".0f"), _placed_text(placed, seq), f(seq, ".0f"),
            status, m.valid_text()]


def _placed_text(placed: float | None, seq: float | None) -> str:
    """Engine placements, flagged when below the one-at-a-time baseline (issue 6 forbids it)."""
    text = B._fmt(placed, ".0f")
    return text + " (< seq)" if None not in (placed, seq) and placed < seq else text


def print_table(title: str, rows: list[Measure], notes: list[str], markdown: bool) -> None:
    body = [cells(m) for m in rows]
    if markdown:
        print(f"**{title}**\n")
        print("| " + " | ".join(COLUMNS) + " |")
        print("|" + "|".join("---" if c in ("workload", "status") else "---:"
                             for c in COLUMNS) + "|")
        for row in body:
            print("| " + " | ".join(row) + " |")
        print()
        print("\n".join(f"{n}  " for n in notes))
        return
    table = Table(title=title)
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("workload", "status") else "right")
    for m, row in zip(rows, body):
        table.add_row(*row, style="red" if m.failure or m.violations else None)
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 220)
    console.print(table)
    for n in notes:
        console.print(n, markup=False, soft_wrap=True)


def notes(opts: Options, rows: list[Measure], cmd: B.Command) -> list[str]:
    rev = B.git_rev()
    out = [B.machine_line() + (f"; repo {rev}" if rev else ""),
           f"bench: {shlex.join(['python', *sys.argv])}",
           f"time limit {opts.time_limit:g}s, median of {opts.repeat} run(s), "
           f"snapshots --detail {opts.detail}; command {shlex.join(cmd.prefix)}"]
    out += [f"{m.case.workload} n{m.nodes} p{m.pending}: {m.failure}" for m in rows if m.failure]
    return out


def save_results(opts: Options, mode: str, rows: list[Measure]) -> Path:
    path = opts.out / f"scale-{mode}.json"
    path.write_text(json.dumps({"machine": B.machine_line(), "repo": B.git_rev(),
                                "argv": sys.argv, "options": {**asdict(opts), "out": str(opts.out)},
                                "rows": [asdict(m) for m in rows]}, indent=1, default=str))
    return path


# --------------------------------------------------------------------------- #
# Sweep plot
# --------------------------------------------------------------------------- #

def sweep_cases(quick: bool) -> list[Case]:
    plan = SWEEP_QUICK if quick else SWEEP_FULL
    fixed_nodes, pending_points = plan["pending"]
    fixed_pending, node_points = plan["nodes"]
    cases = [Case("hetero-jobs", fixed_nodes, SWEEP_RUNNING_PER_NODE * fixed_nodes, p,
                  "pending") for p in pending_points]
    cases += [Case("hetero-jobs", n, SWEEP_RUNNING_PER_NODE * n, fixed_pending, "nodes")
              for n in node_points]
    return cases


def _series(rows: list[Measure], name: str, get: Callable[[Measure], float | None]
            ) -> tuple[list[int], list[float]]:
    pts = [(m.pending if name == "pending" else m.nodes, v) for m in rows
           if m.case.series == name and (v := get(m)) is not None]
    return [x for x, _ in pts], [y for _, y in pts]


def plot(rows: list[Measure], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fixed = {s: _fixed_label(rows, s) for s in ("pending", "nodes")}
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for s, color in (("pending", "tab:blue"), ("nodes", "tab:orange")):
        label = f"vs {s} ({fixed[s]})"
        _line(ax_t, _series(rows, s, lambda m: m.median(lambda r: r.wall)), "o-", color,
              f"wall, {label}")
        _line(ax_t, _series(rows, s, lambda m: m.engine_s), "s--", color,
              f"compile+start+model+solve, {label}")
        _line(ax_m, _series(rows, s, lambda m: m.median(lambda r: r.rss_mib)), "o-", color,
              label)
    for ax, ylabel in ((ax_t, "seconds"), (ax_m, "peak RSS (MiB)")):
        ax.set_xscale("log")
        ys = [y for line in ax.get_lines() for y in line.get_ydata() if y > 0]
        if ys and max(ys) > 30 * min(ys):   # minutes next to seconds: log y too
            ax.set_yscale("log")
        ax.set_xlabel("size (pending pods or nodes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    failed = [f"{m.case.series} n{m.nodes} p{m.pending}: {m.failure.split(' after')[0]}"
              for m in rows if m.failure]
    if failed:
        title += "\nnot shown: " + "; ".join(failed)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _line(ax: Any, xy: tuple[list[int], list[float]], style: str, color: str,
          label: str) -> None:
    """One series, left out (legend too) when the engine did not report it."""
    if xy[0]:
        ax.plot(*xy, style, color=color, label=label)


def _fixed_label(rows: list[Measure], series: str) -> str:
    ms = [m for m in rows if m.case.series == series]
    if not ms:
        return ""
    return f"{ms[0].nodes} nodes" if series == "pending" else f"{ms[0].pending} pending"


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #

@dataclass
class Options:
    """Settings shared by both modes."""

    repeat: int
    time_limit: float
    timeout: float
    rss_cap_mib: float
    out: Path
    detail: str
    regen: bool
    oracle: str
    markdown: bool


def common(f: Callable) -> Callable:
    """The options of both subcommands."""
    for opt in reversed((
        click.option("-n", "--repeat", default=1, show_default=True, type=click.IntRange(1),
                     help="Runs per case (medians are reported)."),
        click.option("--time-limit", default=2.0, show_default=True,
                     type=click.FloatRange(0.1), help="dry-run --time-limit (seconds)."),
        click.option("--timeout", default=120.0, show_default=True, type=click.FloatRange(1),
                     help="Kill a run after this many seconds."),
        click.option("--rss-cap-mib", default=8192.0, show_default=True,
                     type=click.FloatRange(64), help="Kill a run above this RSS; skip it when "
                                                     "less memory is available."),
        click.option("--out", type=click.Path(file_okay=False, path_type=Path),
                     default=B.DEFAULT_OUT, show_default=True,
                     help="Snapshots (cached) and scale-*.json go here."),
        click.option("--detail", type=click.Choice(RL.DETAILS), default="full",
                     show_default=True, help="'lean' drops kubectl's boilerplate fields "
                                             "(volumes, default tolerations, conditions)."),
        click.option("--regen", is_flag=True, help="Rewrite snapshots even if cached."),
        click.option("--oracle", type=click.Choice(("auto", "on", "off")), default="auto",
                     show_default=True, help="Also check plans with testkit/checker.py "
                                             f"(auto: up to {ORACLE_AUTO_PODS} pods)."),
        click.option("--markdown", is_flag=True, help="Markdown table (for BENCHMARKS.md)."),
    )):
        f = opt(f)
    return f


def _options(kw: dict[str, Any]) -> Options:
    return Options(**{k: kw.pop(k) for k in Options.__dataclass_fields__})


def _measure_all(cases: list[Case], opts: Options, keep_going: bool = True
                 ) -> tuple[list[Measure], B.Command]:
    """Measure every case; unless ``keep_going``, a sweep series stops at its first failure
    (the bigger points would only burn the timeout again)."""
    cmd = B.resolve_command()
    opts.out.mkdir(parents=True, exist_ok=True)
    err.print(f"command: {shlex.join(cmd.prefix)}  [{cmd.origin}]", markup=False)
    rows: list[Measure] = []
    for case in cases:
        failed = next((m for m in rows if m.failure and m.case.series == case.series), None)
        rows.append(_skipped(case, failed) if failed and not keep_going
                    else measure(case, cmd, opts))
    return rows, cmd


def _skipped(case: Case, failed: Measure) -> Measure:
    c = case.cluster()
    return Measure(case, c.nodes, c.running, c.pending, [], 0.0,
                   failure=f"skipped: n{failed.nodes} p{failed.pending} failed already")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Benchmark policy-scheduler dry-run on realistic, production-sized clusters."""


@cli.command("run")
@click.option("-w", "--workload", "names", multiple=True, metavar="NAME",
              type=click.Choice(sorted(RL.WORKLOADS)),
              help="Workload (repeatable). Default: all four.")
@click.option("--nodes", type=click.IntRange(1), help="Override the workload's node count.")
@click.option("--running", type=click.IntRange(0), help="Override its running pod count.")
@click.option("--pending", type=click.IntRange(1), help="Override its pending pod count.")
@common
def run_cmd(names: tuple[str, ...], nodes: int | None, running: int | None,
            pending: int | None, **kw: Any) -> None:
    """Time each realistic workload; exit 1 on a failed run, 2 on an invalid plan."""
    opts = _options(kw)
    cases = [Case(n, nodes, running, pending) for n in names or RL.WORKLOADS]
    rows, cmd = _measure_all(cases, opts)
    print_table("policy-scheduler dry-run on realistic clusters", rows,
                notes(opts, rows, cmd), opts.markdown)
    err.print(f"results: {save_results(opts, 'run', rows)}", markup=False)
    _exit(rows, failures_count=True)


@cli.command("sweep")
@click.option("--quick", is_flag=True, help="A few small points (a couple of minutes).")
@click.option("--keep-going", is_flag=True,
              help="Run a series' bigger points even after a smaller one failed.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              default=DEFAULT_PLOT, show_default=True, help="Where the PNG goes.")
@common
def sweep_cmd(quick: bool, keep_going: bool, plot_path: Path, **kw: Any) -> None:
    """Solve time and peak RSS vs pending pods and vs nodes (hetero-jobs shape)."""
    opts = _options(kw)
    rows, cmd = _measure_all(sweep_cases(quick), opts, keep_going)
    info = notes(opts, rows, cmd)
    print_table("scaling: hetero-jobs shape, ~16 running pods per node", rows, info,
                opts.markdown)
    rev = B.git_rev()
    plot(rows, plot_path, f"policy-scheduler dry-run, hetero-jobs shape (~16 running pods per "
                          f"node), --time-limit {opts.time_limit:g}, median of {opts.repeat}"
                          + (f", repo {rev}" if rev else "") + f"\n{_machine_short()}")
    err.print(f"plot: {plot_path}; results: {save_results(opts, 'sweep', rows)}", markup=False)
    _exit(rows, failures_count=False)


# --------------------------------------------------------------------------- #
# Engine only: compile and solve in-process, no YAML (optionally against another revision)
# --------------------------------------------------------------------------- #

ENGINE_PHASES = ("compile", "start", "model", "solve")


def docs_file(out: Path, c: RL.Cluster) -> Path:
    return out / "realistic" / f"{c.name}-n{c.nodes}-r{c.running}-p{c.pending}.docs.pickle"


def ensure_docs(path: Path, c: RL.Cluster) -> None:
    """The snapshot's manifests as pickled plain dicts (what any engine version's loader reads), cached
    like the YAML snapshots: loading a 20,000-node YAML takes minutes, unpickling seconds."""
    import pickle

    newest = max(Path(m.__file__).stat().st_mtime for m in (RL, RL.W))
    if path.exists() and path.stat().st_mtime >= newest:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        pickle.dump(list(RL.iter_manifests(c, "lean")), f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def checkout(out: Path, rev: str) -> Path:
    """`rev`'s engine/ and grammar/ unpacked under ``out`` (once), to import instead of this tree's."""
    import subprocess

    sha = subprocess.run(["git", "-C", str(B.REPO_ROOT), "rev-parse", rev], check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = out / f"rev-{sha[:12]}"
    if not (tree / "engine").exists():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(B.REPO_ROOT), "archive", sha, "engine", "grammar"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def engine_once(docs_path: Path, time_limit: float) -> dict[str, Any]:
    """One measurement in this process: compile alone (wall and CPU), then make_plan (compile + solve)."""
    import gc
    import pickle

    import engine
    from engine.heap import collector_paused
    from engine.planning.compile import compile_cluster
    from engine.planning.plan import make_plan
    from engine.reading.load import build_cluster

    gc.disable()
    with open(docs_path, "rb") as f:
        cluster = build_cluster([("bench", d) for d in pickle.load(f)])
    gc.enable()
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    with collector_paused():  # as the dry-run (engine.cli) and the loop's cycle (engine.loop.runtime) compile
        compiled = compile_cluster(cluster)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    classes = len(compiled.classes)
    del compiled
    started = time.perf_counter()
    with collector_paused():
        stats = make_plan(cluster, None, time_limit=time_limit).stats
    stats = stats.to_dict() if hasattr(stats, "to_dict") else stats  # a checkout before Stats: already the dict
    return {"engine": str(Path(engine.__file__).parent), "compile": wall, "compile_cpu": cpu, "classes": classes,
            "plan": time.perf_counter() - started, "phases": stats.get("phases", {}), "placed": stats["placed"],
            "pods": stats["pods"], "status": stats["status"], "strategy": stats.get("strategy", "")}


def _engine_run(tree: Path, docs_path: Path, time_limit: float, timeout: float) -> dict[str, Any]:
    """engine_once in a fresh interpreter that imports the engine from ``tree``."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, __file__, "engine-once", str(docs_path), str(time_limit)], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=tree)
    if done.returncode:
        raise click.ClickException(f"engine run failed in {tree}: {done.stderr.strip()[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(result["engine"]).resolve() == (tree / "engine").resolve(), result["engine"]
    return result


def engine_table(rows: list[tuple[Case, RL.Cluster, str, list[dict[str, Any]]]]) -> None:
    """Markdown: medians per case and version."""
    head = ("workload", "nodes", "running", "pending", "engine", "runs", "classes", "compile s", "compile CPU s",
            "start s", "model s", "solve s", "compile+solve s", "placed", "status")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" if h in ("workload", "engine", "status") else "---:" for h in head) + "|")
    for case, c, label, runs in rows:
        med = lambda get, runs=runs: statistics.median(get(r) for r in runs)  # noqa: E731
        phase = [med(lambda r, p=p: r["phases"].get(p, 0.0)) for p in ENGINE_PHASES[1:]]
        status = "/".join(dict.fromkeys(r["status"] for r in runs))
        print(f"| {case.workload} | {c.nodes} | {c.running} | {c.pending} | {label} | {len(runs)} | {runs[0]['classes']} "
              f"| {med(lambda r: r['compile']):.2f} | {med(lambda r: r['compile_cpu']):.2f} | "
              + " | ".join(f"{v:.2f}" for v in phase)
              + f" | {med(lambda r: r['plan']):.2f} | {med(lambda r: r['placed']):.0f}/{c.pending} | {status} |")


@cli.command("engine")
@click.option("-w", "--workload", "names", multiple=True, metavar="NAME", type=click.Choice(sorted(RL.WORKLOADS)),
              help="Workload (repeatable). Default: hetero-jobs and rich-mixed.")
@click.option("--nodes", type=click.IntRange(1), help="Override the workload's node count.")
@click.option("--running", type=click.IntRange(0), help="Override its running pod count.")
@click.option("--pending", "pendings", multiple=True, type=click.IntRange(1), help="Pending pods (repeatable).")
@click.option("-n", "--repeat", default=3, show_default=True, type=click.IntRange(1))
@click.option("--time-limit", default=2.0, show_default=True, type=click.FloatRange(0.0))
@click.option("--timeout", default=900.0, show_default=True, type=click.FloatRange(1))
@click.option("--against", metavar="REV", help="Also run this git revision's engine, alternating run by run.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=B.DEFAULT_OUT, show_default=True)
def engine_cmd(names: tuple[str, ...], nodes: int | None, running: int | None, pendings: tuple[int, ...],
               repeat: int, time_limit: float, timeout: float, against: str | None, out: Path) -> None:
    """Compile and make_plan in-process (no YAML load): what one in-cluster cycle costs on a snapshot.
    Each run is a fresh interpreter; with --against, that revision and this tree alternate."""
    trees = ([(f"{against}", checkout(out, against))] if against else []) + [("this tree", B.REPO_ROOT)]
    cases = [Case(n, nodes, running, p) for n in names or ("hetero-jobs", "rich-mixed") for p in pendings or (None,)]
    rows = []
    for case in cases:
        c = case.cluster()
        path = docs_file(out, c)
        ensure_docs(path, c)
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in trees}
        for k in range(repeat):
            for label, tree in trees:
                r = _engine_run(tree, path, time_limit, timeout)
                runs[label].append(r)
                err.print(f"{RL.describe(c)} [{label}] run {k + 1}: compile {r['compile']:.2f}s "
                          f"(CPU {r['compile_cpu']:.2f}s), compile+solve {r['plan']:.2f}s, placed {r['placed']}, "
                          f"{r['status']}, {r['strategy']}", markup=False)
        rows += [(case, c, label, runs[label]) for label, _ in trees]
    engine_table(rows)
    print(f"\n{B.machine_line()}; repo {B.git_rev()}; bench: {shlex.join(['python', *sys.argv])}")


@cli.command("engine-once", hidden=True)
@click.argument("docs_path", type=click.Path(exists=True, path_type=Path))
@click.argument("time_limit", type=float)
def engine_once_cmd(docs_path: Path, time_limit: float) -> None:
    print(json.dumps(engine_once(docs_path, time_limit)))


def _machine_short() -> str:
    """machine_line without the kernel, to fit a plot title."""
    return B.machine_line().split("; Linux")[0]


def _exit(rows: list[Measure], failures_count: bool) -> None:
    """2 for an invalid plan; 1 for a failed run where failures count (not in sweeps, whose
    big points are expected to hit the guard rails until the engine scales)."""
    if any(m.violations for m in rows):
        sys.exit(2)
    if failures_count and any(m.failure for m in rows):
        sys.exit(1)


if __name__ == "__main__":
    cli()
