#!/usr/bin/env python3
"""End-to-end benchmark of ``policy-scheduler dry-run``.

For each workload (see ``bench/workloads.py``) this writes the cluster
snapshot once (cached in ``--out``), then runs

    policy-scheduler dry-run --cluster FILE -o json --time-limit S

as a subprocess ``--repeat`` times, measuring wall-clock seconds and the
child's peak RSS (``os.wait4`` rusage), checks the JSON answer (every pending
pod placed, no capacity/constraint violation) and prints a table. Workloads
with ``expect_all_placed`` False (``mixed``: more demand than capacity) only
need a valid plan; their placed/pods, solver status and gap are reported.

If ``policy-scheduler`` is not on PATH, ``python -m engine`` (run from the
repository root) is used. The environment variable ``BENCH_COMMAND`` (a shell
word list, e.g. ``BENCH_COMMAND="python /tmp/fake.py"``) overrides the
command prefix; the ``dry-run --cluster ...`` arguments are always appended.

Exit status: 0 ok; 1 a dry-run command failed (non-zero exit, timeout or
unparsable output); 2 a run completed but the answer violates a constraint,
or left pods unplaced on a workload that expects all placed. ``--markdown`` prints a Markdown table for
BENCHMARKS.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import workloads as W  # noqa: E402

DEFAULT_OUT = Path(tempfile.gettempdir()) / "policy-scheduler-bench"

err = Console(stderr=True, highlight=False, soft_wrap=True)


# --------------------------------------------------------------------------- #
# Command under test
# --------------------------------------------------------------------------- #

@dataclass
class Command:
    prefix: list[str]
    cwd: str | None
    env: dict[str, str] | None
    origin: str

    def argv(self, cluster: Path, time_limit: float, policies: tuple[str, ...] = ()) -> list[str]:
        extra = [arg for p in policies for arg in ("--policy", str(Path(p).resolve()))]
        return [*self.prefix, "dry-run", "--cluster", str(cluster), "-o", "json",
                "--time-limit", f"{time_limit:g}", *extra]


def resolve_command() -> Command:
    override = os.environ.get("BENCH_COMMAND")
    if override:
        return Command(shlex.split(override), None, None, "BENCH_COMMAND")
    exe = shutil.which("policy-scheduler")
    if exe:
        return Command([exe], None, None, "console script")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return Command([sys.executable, "-m", "engine"], str(REPO_ROOT), env, "python -m engine")


# --------------------------------------------------------------------------- #
# One measured run
# --------------------------------------------------------------------------- #

@dataclass
class RunResult:
    seconds: float
    maxrss_mib: float
    returncode: int
    timed_out: bool
    stdout: bytes = field(repr=False)
    stderr: bytes = field(repr=False)


def _maxrss_mib(ru: os.struct_rusage) -> float:  # type: ignore[name-defined]
    # Linux reports KiB, macOS bytes
    scale = 1 if sys.platform == "darwin" else 1024
    return ru.ru_maxrss * scale / (1 << 20)


def run_once(argv: list[str], cmd: Command, timeout: float) -> RunResult:
    """Run argv, wait with os.wait4 to get this child's own rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as errf:
        lock = threading.Lock()
        state = {"done": False, "killed": False}
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=errf,
                                cwd=cmd.cwd, env=cmd.env)

        def kill() -> None:
            with lock:
                if not state["done"]:
                    state["killed"] = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        try:
            while True:
                try:
                    _, status, ru = os.wait4(proc.pid, 0)
                    break
                except InterruptedError:
                    continue
        except BaseException:
            timer.cancel()
            kill()
            raise
        t1 = time.perf_counter()
        with lock:
            state["done"] = True
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped by wait4
        out.seek(0)
        errf.seek(0)
        return RunResult(t1 - t0, _maxrss_mib(ru), proc.returncode, state["killed"],
                         out.read(), errf.read())


# --------------------------------------------------------------------------- #
# Checking the answer
# --------------------------------------------------------------------------- #

class BadOutput(Exception):
    pass


def parse_output(raw: bytes) -> dict:
    try:
        doc = json.loads(raw)
    except ValueError as e:
        head = raw[:300].decode("utf-8", "replace")
        raise BadOutput(f"stdout is not JSON ({e}); starts with: {head!r}") from None
    if not isinstance(doc, dict):
        raise BadOutput("JSON output is not an object")
    for key in ("assignments", "unschedulable", "stats"):
        if not isinstance(doc.get(key), dict):
            raise BadOutput(f"JSON output lacks object {key!r}")
    return doc


# --------------------------------------------------------------------------- #
# Per-workload aggregation
# --------------------------------------------------------------------------- #

@dataclass
class Row:
    workload: str
    nodes: int
    pods: int
    target: float | None
    argv: list[str]
    expect_all_placed: bool = True
    file_mib: float = 0.0
    gen_seconds: float | None = None
    seconds: list[float] = field(default_factory=list)
    rss_mib: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)        # stats.gap, fraction
    solver_seconds: list[float] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)     # workloads.summarize per run
    placed: int | None = None        # min over runs
    violations: list[str] = field(default_factory=list)
    unschedulable_sample: dict = field(default_factory=dict)
    stats_pods_mismatch: list = field(default_factory=list)
    failure: str | None = None

    @property
    def runs(self) -> int:
        return len(self.seconds)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def min_s(self) -> float | None:
        return min(self.seconds) if self.seconds else None

    @property
    def pods_per_s(self) -> float | None:
        m = self.median_s
        return self.pods / m if m else None

    @property
    def peak_rss(self) -> float | None:
        return max(self.rss_mib) if self.rss_mib else None

    @property
    def max_gap_pct(self) -> float | None:
        return 100 * max(self.gaps) if self.gaps else None

    @property
    def all_placed(self) -> bool:
        return self.placed == self.pods and not self.violations

    @property
    def valid(self) -> bool:
        """The answer is acceptable: no violation, and everything placed if expected."""
        if self.violations:
            return False
        return self.all_placed if self.expect_all_placed else self.placed is not None

    @property
    def ok(self) -> bool:
        return self.failure is None and self.valid

    @property
    def met(self) -> str:
        if self.failure:
            return "FAILED"
        if not self.valid:
            return "no (invalid)" if self.violations else "no (unplaced)"
        if self.target is None:
            return "-"
        return "yes" if (self.pods_per_s or 0) >= self.target else "no"

    def status_text(self) -> str:
        if self.failure and not self.statuses:
            return "error"
        uniq = list(dict.fromkeys(self.statuses))
        return "/".join(uniq) if uniq else "-"


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _fmt_gap(pct: float | None) -> str:
    """Gap in percent: 2 decimals, or 2 significant digits when below 0.01%."""
    if pct is None:
        return "-"
    return f"{pct:.2f}" if pct == 0 or pct >= 0.01 else f"{pct:.2g}"


COLUMNS = ["workload", "nodes", "pods", "runs", "median s", "min s", "median pods/s",
           "peak RSS MiB", "placed/pods", "solver status", "gap %", "target pods/s", "met?"]
LEFT_COLUMNS = ("workload", "solver status")


def row_cells(r: Row) -> list[str]:
    placed = "-" if r.placed is None else f"{r.placed}/{r.pods}"
    if r.violations:
        placed += " !"
    return [r.workload, str(r.nodes), str(r.pods), str(r.runs),
            _fmt(r.median_s, ".2f"), _fmt(r.min_s, ".2f"), _fmt(r.pods_per_s, ".0f"),
            _fmt(r.peak_rss, ".0f"), placed, r.status_text(), _fmt_gap(r.max_gap_pct),
            _fmt(r.target, ".0f"), r.met]


def machine_line() -> str:
    cpus = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = cpus
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f", {int(line.split()[1]) / (1 << 20):.1f} GiB RAM"
                break
    except (OSError, ValueError, IndexError):
        pass
    nproc = f"nproc {usable}" + (f" (of {cpus})" if usable != cpus else "")
    cpu = f", {model}" if model else ""
    return (f"machine: {nproc}{cpu}{mem}; Python {platform.python_version()} "
            f"({platform.python_implementation()}); {platform.system()} {platform.release()}")


def git_rev() -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() or None if r.returncode == 0 else None


# --------------------------------------------------------------------------- #
# Snapshot cache
# --------------------------------------------------------------------------- #

def snapshot_path(out: Path, name: str, bound: int, detail: str) -> Path:
    parts = [name]
    if bound:
        parts.append(f"bound{bound}")
    if detail != "minimal":
        parts.append(detail)
    return out / ("-".join(parts) + ".yaml")


def ensure_snapshot(path: Path, w: W.Workload, bound: int, detail: str,
                    regen: bool) -> float | None:
    """Write the snapshot unless a cache newer than workloads.py exists.
    Returns generation seconds, or None when the cache was used."""
    gen_src = Path(W.__file__)
    if (not regen and path.exists()
            and path.stat().st_mtime >= gen_src.stat().st_mtime):
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    t0 = time.perf_counter()
    try:
        W.write_snapshot(w, tmp, bound=bound, detail=detail)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return time.perf_counter() - t0


def expand_workloads(names: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for n in names or ("full",):
        for part in n.split(","):
            part = part.strip()
            if not part:
                continue
            if part == "full":
                group = list(W.FULL_WORKLOADS)
            elif part == "small":
                group = list(W.SMALL_WORKLOADS)
            elif part == "all":
                group = list(W.WORKLOADS)
            elif part in W.WORKLOADS:
                group = [part]
            else:
                raise click.BadParameter(
                    f"unknown workload {part!r}; choose from {', '.join(W.WORKLOADS)}"
                    " or the groups full, small, all", param_hint="--workload")
            out.extend(g for g in group if g not in out)
    return out


# --------------------------------------------------------------------------- #
# Output
# --------------------------------------------------------------------------- #

def print_rich(rows: list[Row], info: list[str], commands: list[str]) -> None:
    # rich wraps at 80 columns when stdout is not a terminal; the table needs ~150
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    table = Table(title="policy-scheduler dry-run benchmark")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in LEFT_COLUMNS else "right",
                         no_wrap=c == "workload")
    for r in rows:
        cells = row_cells(r)
        style = "red" if not r.ok or r.met == "no" else ("green" if r.met == "yes" else None)
        table.add_row(*cells, style=style)
    console.print(table)
    for line in info:
        console.print(line, soft_wrap=True, markup=False)
    console.print("commands:", markup=False)
    for c in commands:
        console.print(f"$ {c}", soft_wrap=True, markup=False)


def print_markdown(rows: list[Row], info: list[str], commands: list[str]) -> None:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---" if c in LEFT_COLUMNS else "---:" for c in COLUMNS) + "|"]
    for r in rows:
        lines.append("| " + " | ".join(esc(c) for c in row_cells(r)) + " |")
    print("\n".join(lines))
    print()
    for line in info:
        key, _, rest = line.partition(": ")
        print(f"{key}: `{rest}`  " if key in ("bench", "snapshots") else f"{line}  ")
    print()
    print("```console")
    for c in commands:
        print(f"$ {c}")
    print("```")


# --------------------------------------------------------------------------- #
# CLI
# --------------------------------------------------------------------------- #

@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-w", "--workload", "workload_names", multiple=True, metavar="NAME",
              help="Workload to run (repeatable or comma-separated). Groups: full "
                   "(default), small, all. See --list.")
@click.option("-n", "--repeat", default=3, show_default=True, type=click.IntRange(1),
              help="Runs per workload.")
@click.option("--time-limit", default=10.0, show_default=True, type=click.FloatRange(0),
              help="Passed to dry-run --time-limit (seconds).")
@click.option("--timeout", type=click.FloatRange(0), default=None,
              help="Kill a run after this many seconds [default: 2*time-limit + 120].")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=DEFAULT_OUT, show_default=True,
              help="Where snapshots (cached), last outputs and results.json go.")
@click.option("--bound", default=0, show_default=True, type=click.IntRange(0),
              help="Add N already-running pods (spec.nodeName set, phase Running).")
@click.option("--detail", type=click.Choice(W.DETAILS), default="minimal", show_default=True,
              help="'full' adds the default fields a real `kubectl get -o yaml` prints "
                   "(tolerations, volumes, node conditions, ...), ~3x bigger files.")
@click.option("--regen", is_flag=True, help="Regenerate snapshots even if cached.")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for BENCHMARKS.md).")
@click.option("--policy", "policies", multiple=True, metavar="PATH",
              help="Pass --policy PATH to every dry-run (e.g. the policy library). Repeatable.")
@click.option("--list", "list_only", is_flag=True, help="List workloads and exit.")
def main(workload_names: tuple[str, ...], repeat: int, time_limit: float,
         timeout: float | None, out_dir: Path, bound: int, detail: str, regen: bool,
         markdown: bool, policies: tuple[str, ...], list_only: bool) -> None:
    """Benchmark `policy-scheduler dry-run` end to end on scheduler_perf-like clusters."""
    if list_only:
        W.main(["--list"])
        return
    names = expand_workloads(workload_names)
    if timeout is None:
        timeout = 2 * time_limit + 120
    cmd = resolve_command()
    out_dir.mkdir(parents=True, exist_ok=True)
    err.print(f"command: {shlex.join(cmd.prefix)}  [{cmd.origin}]"
              + (f" (cwd {cmd.cwd})" if cmd.cwd else ""), markup=False)

    rows: list[Row] = []
    for name in names:
        w = W.get_workload(name)
        if w.kind == "anti-affinity" and w.pods > w.nodes:
            err.print(f"[yellow]warning:[/] {name} is infeasible ({w.pods} pods > {w.nodes} nodes)")
        if w.kind == "spread-hostname" and -(-w.pods // w.nodes) > W.pods_per_node_limit():
            err.print(f"[yellow]warning:[/] {name} is infeasible ({w.pods} pods spread evenly over "
                      f"{w.nodes} nodes exceed {W.pods_per_node_limit()} pods per node)")
        path = snapshot_path(out_dir, name, bound, detail)
        gen = ensure_snapshot(path, w, bound, detail, regen)
        size = path.stat().st_size / (1 << 20)
        if gen is None:
            err.print(f"{name}: cached {path} ({size:.1f} MiB)", style="dim", markup=False)
        else:
            err.print(f"{name}: generated {path} ({size:.1f} MiB) in {gen:.2f}s", markup=False)
        argv = cmd.argv(path, time_limit, policies)
        row = Row(name, w.nodes, w.pods, w.target, argv, expect_all_placed=w.expect_all_placed,
                  file_mib=size, gen_seconds=gen)
        rows.append(row)
        placed_runs: list[int] = []
        for k in range(1, repeat + 1):
            err.print(f"  run {k}/{repeat}: {shlex.join(argv)}", markup=False)
            res = run_once(argv, cmd, timeout)
            stem = out_dir / f"{path.stem}.last"
            Path(f"{stem}.stdout.json").write_bytes(res.stdout)
            Path(f"{stem}.stderr.txt").write_bytes(res.stderr)
            if res.timed_out or res.returncode != 0:
                why = (f"killed after {timeout:g}s timeout" if res.timed_out
                       else f"exit status {res.returncode}")
                row.failure = why
                tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-25:]
                err.print(f"  {name}: dry-run failed ({why}) after {res.seconds:.2f}s",
                          style="red", markup=False)
                for line in tail:
                    err.print(f"    {line}", markup=False)
                break
            try:
                doc = parse_output(res.stdout)
            except BadOutput as e:
                row.failure = f"bad output: {e}"
                err.print(f"  {name}: {e}", style="red", markup=False)
                break
            row.seconds.append(res.seconds)
            row.rss_mib.append(res.maxrss_mib)
            stats = doc["stats"]
            row.statuses.append(str(stats.get("status", "?")))
            gap = stats.get("gap")
            if isinstance(gap, (int, float)):
                row.gaps.append(float(gap))
            solver_s = stats.get("solver_seconds")
            if isinstance(solver_s, (int, float)):
                row.solver_seconds.append(float(solver_s))
            if stats.get("pods") not in (None, w.pods, w.pods + bound):
                row.stats_pods_mismatch.append(stats.get("pods"))
            placed, violations = W.validate(w, doc["assignments"], bound=bound)
            placed_runs.append(placed)
            if violations and not row.violations:
                row.violations = violations
            if placed < w.pods and not row.unschedulable_sample:
                row.unschedulable_sample = dict(list(doc["unschedulable"].items())[:5])
            engine_s = stats.get("seconds")
            timing = "".join(f", {what} {v:.2f}s" for what, v in (
                ("engine", engine_s), ("solver", solver_s)) if isinstance(v, (int, float)))
            gap_txt = f", gap {_fmt_gap(100 * gap)}%" if isinstance(gap, (int, float)) else ""
            err.print(f"    {res.seconds:.2f}s wall{timing}, {res.maxrss_mib:.0f} MiB peak RSS, "
                      f"placed {placed}/{w.pods}, status {stats.get('status')}{gap_txt}",
                      markup=False)
            summary = W.summarize(w, doc["assignments"])
            if summary:
                row.summaries.append(summary)
                err.print(f"    {summary}", markup=False)
        if placed_runs:
            row.placed = min(placed_runs)
        if row.violations:
            err.print(f"  {name}: answer violates constraints:", style="red", markup=False)
            for v in row.violations:
                err.print(f"    {v}", markup=False)
        if row.placed is not None and row.placed < w.pods and w.expect_all_placed:
            err.print(f"  {name}: only {row.placed}/{w.pods} pods placed;"
                      f" sample unschedulable: {row.unschedulable_sample}",
                      style="red", markup=False)
        elif row.placed is not None and row.placed < w.pods:
            first = next(iter(row.unschedulable_sample.items()), None)
            err.print(f"  {name}: {row.placed}/{w.pods} pods placed (not all expected to fit)"
                      + (f"; e.g. {first[0]}: {first[1]}" if first else ""),
                      style="dim", markup=False)
        if row.stats_pods_mismatch:
            err.print(f"  {name}: stats.pods = {row.stats_pods_mismatch[0]} "
                      f"(expected {w.pods})", style="yellow", markup=False)

    rev = git_rev()
    info = [machine_line() + (f"; repo {rev}" if rev else ""),
            f"bench: {shlex.join([Path(sys.executable).name, *sys.argv])}"]
    if bound or detail != "minimal":
        info.append(f"snapshots: --bound {bound} --detail {detail}")
    commands = [shlex.join(r.argv) for r in rows]

    if markdown:
        print_markdown(rows, info, commands)
    else:
        print_rich(rows, info, commands)

    results = {
        "machine": machine_line(), "repo": rev, "bench_argv": sys.argv,
        "command_origin": cmd.origin, "repeat": repeat, "time_limit": time_limit,
        "bound": bound, "detail": detail, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rows": [{**asdict(r), "median_s": r.median_s, "min_s": r.min_s,
                  "pods_per_s": r.pods_per_s, "peak_rss_mib": r.peak_rss,
                  "max_gap_pct": r.max_gap_pct, "met": r.met}
                 for r in rows],
    }
    (out_dir / "results.json").write_text(json.dumps(results, indent=2))

    if any(r.failure for r in rows):
        sys.exit(1)
    if not all(r.valid for r in rows):
        sys.exit(2)


if __name__ == "__main__":
    main()
