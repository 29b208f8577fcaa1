"""`policy-scheduler simulate-openb`: the FGD paper's protocol on an openb trace (engine/sharing/protocol.py), a
sweep of runs (engine/time/sweep.py) on a process pool or a user's Executor, printed as a table or JSON, drawn as
PNG curves. A thin shell: bad input is one line on stderr and exit 2."""
from __future__ import annotations

import json
import sys
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.table import Table


def _fail(message: str) -> NoReturn:
    click.echo(f"policy-scheduler: error: {message}", err=True)
    sys.exit(2)


@click.command("simulate-openb")
@click.argument("nodes_csv", metavar="NODES.csv")
@click.argument("tasks_csv", metavar="PODS.csv")
@click.option("--scheduler", "schedulers", multiple=True, metavar="NAME",
              help="A scheduler to run (repeatable): a baseline (random-fit, best-fit, dot-product, gpu-packing, "
              "gpu-clustering, fgd, kube-default) or ours (policy-scheduler, with --policy; policy-scheduler-frag) "
              "[default: every baseline].")
@click.option("--inflation", "inflations", multiple=True, type=click.FloatRange(min=0, min_open=True),
              metavar="RATIO", help="Tasks arrive until the GPUs they ask for reach RATIO × capacity (repeatable) "
              "[default: 1.3].")
@click.option("--seeds", type=click.IntRange(1), default=None, metavar="N", help="Seeds 1..N.")
@click.option("--seed", "seed_list", multiple=True, type=int, metavar="N", help="A seed (repeatable) [default: 1].")
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1), metavar="N",
              help="Arrival steps of N tasks (repeatable) [default: 1, one at a time].")
@click.option("--batch-seconds", "windows", multiple=True, type=click.FloatRange(min=0, min_open=True), metavar="T",
              help="Arrival steps of the tasks created in each T seconds (repeatable; needs creation_time).")
@click.option("--departures", is_flag=True, help="Tasks leave at their deletion_time [default: no departures].")
@click.option("--prefill", default=None, metavar="NAME:SHARE",
              help="Fill the cluster first with scheduler NAME, one task at a time, until SHARE of the GPUs has arrived "
              "(e.g. fgd:0.9); each scheduler of the sweep takes over from there. Not with --batch-seconds or "
              "--departures.")
@click.option("--policy", "policy_files", multiple=True, type=click.Path(dir_okay=False), metavar="FILE",
              help="A policy for the schedulers that read one (repeatable; each runs once per policy).")
@click.option("--parallel", type=click.IntRange(1), default=1, show_default=True, metavar="N",
              help="Runs at a time, each in its own process (1: in this process).")
@click.option("--executor", "executor_spec", default=None, metavar="MODULE:CALLABLE",
              help="Run on the concurrent.futures.Executor this callable returns (a Ray or Dask cluster); "
              "instead of --parallel.")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--out", "out_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the results (one JSON document) here.")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Write PNG curves of unallocated GPUs against arrived workload here (needs matplotlib).")
def simulate_openb(nodes_csv, tasks_csv, schedulers, inflations, seeds, seed_list, batches, windows, departures,
                   prefill, policy_files, parallel, executor_spec, output, out_file, plot_dir) -> None:
    """The FGD paper's evaluation protocol on Alibaba's openb trace (NODES.csv, PODS.csv): the workload inflated
    to a share of the GPU capacity with each seed, tasks arriving one at a time or in batches, with or without
    departures; after each arrival step the GPUs allocated, unallocated and fragmented and the tasks refused.
    Prints, per scheduler, the unallocated GPUs at 100% arrived and the area under the curve (mean ± stdev over
    seeds). See docs/gpu-protocol.md. Exit 2 on bad input."""
    from .sharing.protocol import ProtocolError
    from .time import openb
    from .time import sweep as S

    if seeds is not None and seed_list:
        _fail("give --seeds or --seed, not both")
    if executor_spec is not None and parallel != 1:
        _fail("give --parallel or --executor, not both")
    try:
        workload = S.read_openb(nodes_csv, tasks_csv)
        jobs = S.grid(S.OpenbFiles(nodes_csv, tasks_csv), schedulers or list(S.BASELINES),
                      list(range(1, seeds + 1)) if seeds else (seed_list or [1]), inflations or [1.3],
                      _settings(batches, windows, departures), [(p, _read(p)) for p in policy_files],
                      _prefill(prefill))
        if any(job.arrivals.is_timed for job in jobs):
            _check_times(workload)
        S.check_policies(jobs)
        executor = _executor(executor_spec, parallel)
    except (openb.OpenbError, S.SweepError) as exc:
        _fail(str(exc))
    try:
        document = S.sweep(jobs, executor)
    except ProtocolError as exc:  # a placer's bad answer (an overcommitment): which placer and task
        _fail(str(exc))
    finally:
        if executor is not None:
            executor.shutdown()
    _emit(document, output, out_file, plot_dir)


def _settings(batches, windows, departures: bool):
    from .sharing.protocol import Arrivals

    made = [Arrivals(batch=b, departures=departures) for b in batches]
    made += [Arrivals(seconds=t, departures=departures) for t in windows]
    return made or [Arrivals(departures=departures)]


def _prefill(spec: str | None) -> tuple[str, float] | None:
    """`NAME:SHARE` as (name, share), or one error line."""
    if spec is None:
        return None
    name, _, share = spec.rpartition(":")
    try:
        value = float(share)
    except ValueError:
        value = -1.0
    if not name or not 0 < value <= 10:
        _fail(f"--prefill {spec!r}: give NAME:SHARE, a scheduler and the share of the GPUs it fills (e.g. fgd:0.9)")
    return name, value


def _read(path: str) -> str:
    """A policy file's text, parsed and checked here so that a mistake is told by file, line and column before
    any run (a scheduler's factory parses it again, nameless)."""
    from .policy.parse import PolicyError
    from .policy.sources import check_sources

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        _fail(f"{path}: cannot read file: {exc.strerror}")
    except UnicodeDecodeError:
        _fail(f"{path}: not UTF-8 text")
    try:
        check_sources({path: text})
    except PolicyError as exc:
        _fail(str(exc))
    return text


def _check_times(workload) -> None:
    from .sharing.protocol import ProtocolError, timed

    try:
        timed(workload.arrivals)
    except ProtocolError as exc:
        _fail(str(exc))


def _executor(spec: str | None, parallel: int) -> Executor | None:
    from .time.sweep import load_executor

    if spec is not None:
        return load_executor(spec)
    return ProcessPoolExecutor(parallel) if parallel > 1 else None


def _emit(document: dict[str, Any], output: str, out_file: str | None, plot_dir: str | None) -> None:
    if out_file is not None:
        try:
            Path(out_file).write_text(json.dumps(document), encoding="utf-8")
        except OSError as exc:
            _fail(f"{out_file}: cannot write file: {exc.strerror}")
    if output == "json":
        click.echo(json.dumps(document))
    else:
        print_summary(document["summary"], Console(highlight=False))
        click.echo(f"{len(document['runs'])} run(s) in {document['seconds']:.1f} s", err=True)
    if plot_dir is not None:
        write_plots(document, plot_dir)


def arrivals_label(row: dict[str, Any]) -> str:
    """How a run's tasks arrived, in a few characters: `1`, `50`, `60s`, with `+dep` when tasks leave."""
    text = f"{row['batch_seconds']:g}s" if row["batch_seconds"] is not None else str(row["batch"])
    return text + ("+dep" if row["departures"] else "")


def _pm(spread: dict[str, float | None]) -> str:
    return "-" if spread["mean"] is None else f"{spread['mean']:,.1f} ± {spread['stdev']:,.1f}"


def print_summary(rows: list[dict[str, Any]], console: Console) -> None:
    """A row per setting; the policy, inflation and arrivals columns only when the sweep varies them."""
    cells: dict[str, Callable[[dict[str, Any]], str]] = {
        "policy": lambda r: r["policy"] or "-", "inflation": lambda r: f"{r['inflation']:g}", "arrivals": arrivals_label}
    varying = [name for name, cell in cells.items() if len({cell(r) for r in rows}) > 1]
    prefills = sorted({r["prefill"] for r in rows if r.get("prefill")})
    t = Table(title="Unallocated GPUs (mean ± stdev over seeds)"
              + (f", the cluster first filled by {', '.join(prefills)}" if prefills else ""), title_justify="left")
    for column in ("scheduler", *varying, "seeds", "at 100% arrived", "area under curve", "refused"):
        t.add_column(column, justify="left" if column in ("scheduler", "policy") else "right", no_wrap=True)
    for row in rows:
        t.add_row(row["scheduler"], *(cells[c](row) for c in varying), str(len(row["seeds"])),
                  _pm(row["unallocated_at_full"]), _pm(row["auc"]), _pm(row["refused"]))
    console.print(t)


def write_plots(document: dict[str, Any], directory: str) -> None:
    """One PNG per inflation level, departures and prefill: a line per scheduler (and policy, and arrivals)."""
    from .figures import PlotsUnavailable, save_figures
    from .time.sweep_plot import unallocated_figures

    try:
        written = save_figures(lambda: unallocated_figures(document["runs"]), directory)
    except PlotsUnavailable as exc:
        _fail(f"--plot needs matplotlib: {exc}")
    click.echo(f"plots in {directory}: {', '.join(written)}", err=True)
