"""The `policy-scheduler` command: a thin shell over load → plan → print.

User mistakes print one line on stderr and exit 2; nothing here decides anything about placement.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from dataclasses import replace
from importlib import resources

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .flags import Name, OneLineErrors, Seconds
from .heap import collector_paused
from .loop.live import LIVE_KINDS
from .model.cluster import Cluster
from .model.ir import GangRules, Rules
from .output import now_line, print_table, render_json, render_yaml
from .planning.plan import Plan
from .planning.planner import Options, TimeInputs, plan_batch
from .quotas import tenant_report
from .reading.load import DEFAULT_NAMESPACE, DEFAULT_POLICY_CONFIGMAP, DEFAULT_SCHEDULER, InputError
from .reading.manifests import load_cluster
from .solve.cpsat import MAX_WORKERS
from .time import timeline

DEMO = "demo-cluster.yaml"
EXIT_UNSCHEDULABLE = 3  # dry-run --fail-on-unschedulable: a plan was made, but some pending pod has no node


def kinds_read_live() -> str:
    """The kinds `dry-run --kubeconfig` lists, in words: engine.loop.live's one list, plural ("PodGroups
    (scheduling.k8s.io)" for a kind the store names with its group)."""
    def plural(kind: str) -> str:
        name, _, group = kind.partition(".")
        return name + ("es" if name.endswith("s") else "s") + (f" ({group})" if group else "")
    return ", ".join(plural(kind) for kind in LIVE_KINDS)


def demo_path() -> str:
    return str(resources.files("engine.data").joinpath(DEMO))


class _Progress:
    """Progress lines on stderr: always on a terminal, otherwise once a run has taken over a second."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.start = time.perf_counter()
        self.console = Console(stderr=True)

    def __call__(self, message: str) -> None:
        elapsed = time.perf_counter() - self.start
        if not self.quiet and (sys.stderr.isatty() or elapsed > 1.0):
            self.console.print(f"[dim][{elapsed:6.2f}s] {message}[/dim]", highlight=False)


def _fail(message: str) -> None:
    click.echo(f"policy-scheduler: error: {message}", err=True)
    sys.exit(2)


def _fail_input(exc: InputError) -> None:
    """The first object the snapshot's model refused, and how many more there are."""
    if exc.more:
        click.echo(f"policy-scheduler: error: {exc}", err=True)
        _fail(f"… and {exc.more} more {exc.more_what}")
    _fail(str(exc))


cluster_option = click.option(
    "--cluster", "clusters", multiple=True, metavar="FILE",
    help="Cluster snapshot: YAML (multi-document or kind: List), JSON, or - for stdin. Repeatable. "
    "Default: the bundled demo cluster.",
)
scheduler_option = click.option(
    "--scheduler-name", type=Name(), default=DEFAULT_SCHEDULER, show_default=True,
    help="Pending pods are those with this spec.schedulerName and no spec.nodeName.",
)
# The defaults are `policy-scheduler run`'s, so that a dry run plans as the deployed scheduler does
# (docs/operations.md, "Defaults"; tests/test_deploy_defaults.py fails if they drift).
time_option = click.option("--time-limit", type=Seconds(0.1), default=5.0, show_default=True,
                           metavar="SECONDS", help="Time limit for compiling and solving (loading not included); the best "
                           "plan found so far is returned.")
workers_option = click.option("--workers", type=click.IntRange(min=1, max=MAX_WORKERS), default=1, show_default=True,
                              help="CP-SAT worker threads (1, the scheduler's, gives reproducible plans with --seed; "
                              f"more may find better plans sooner; at most {MAX_WORKERS}, CP-SAT's own limit).")
seed_option = click.option("--seed", type=int, default=0, show_default=True, help="Solver random seed.")
now_option = click.option(
    "--now", type=click.DateTime(["%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S%z"]), metavar="RFC3339",
    help="The plan's now, from which running pods' ends (startTime + activeDeadlineSeconds) count [default: a live "
    "cluster's clock; a snapshot's newest pod creation or start time, leaving out times far beyond the rest]. The "
    "plan says which it used (the table, stats.now).")

strict_option = click.option(
    "--strict", is_flag=True,
    help="Refuse a snapshot whose objects have fields their kind's schema lacks (exit 2), as the apiserver's strict "
    "field validation refuses them (unknown field \"spec.nodeSelectr\"); without it they are ignored, with a note.")
policy_option = click.option(
    "--policy", "policies", multiple=True, metavar="PATH",
    help="Policy files, directories of *.policy files, or a ConfigMap manifest of them. Repeatable.",
)


def _policies(paths) -> Rules:
    """The rules the policies add (none without policies), or every diagnostic and exit 2."""
    return _read_policies(paths)[0]


def _read_policies(paths) -> tuple[Rules, list, dict[str, str]]:
    """The rules the policies add, the checked policies and their sources (none without paths), or every
    diagnostic and exit 2."""
    if not paths:
        return Rules(), [], {}
    from .policy.lower import lower
    from .policy.parse import PolicyError
    from .policy.sources import check_sources, read_sources

    try:
        sources = read_sources(list(paths))
        policies = check_sources(sources)
    except PolicyError as exc:
        _fail_policies(exc, 2)
    return lower(policies), policies, sources


def _fail_policies(exc, code: int, count: bool = False) -> None:
    """Every policy diagnostic on stderr (file:line:col, source line, caret), then exit `code`."""
    for d in exc.diagnostics:
        click.echo(d.render(), err=True)
    if count:
        click.echo(f"{len(exc.diagnostics)} error(s)", err=True)
    sys.exit(code)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="policy-scheduler")
@click.pass_context
def main(ctx: click.Context) -> None:
    """policy-scheduler: place a whole batch of pending Kubernetes pods at once, optimally."""
    _tune_one_shot(ctx)


def _tune_one_shot(ctx: click.Context) -> None:
    """The one place a one-shot command (dry-run, explain, check, test, simulate…) is tuned: the cyclic collector
    off until the command ends. Such a command builds one large graph with next to no cycles (the snapshot's
    objects, the model, every plan's candidates, CP-SAT's model, the answer) and exits: each full pass would walk
    all of it again to free nothing (seconds per compile at 20,000 nodes). Here, not in the core: the core is the
    loop's too, whose long-lived process is tuned phase by phase by its own policy (`run`: engine.loop.runtime)."""
    if ctx.invoked_subcommand not in ("run", "queue"):  # (`queue --watch` runs as long as `run`)
        ctx.with_resource(collector_paused())


@main.command("dry-run")
@cluster_option
@policy_option
@click.option("-o", "--output", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@time_option
@scheduler_option
@workers_option
@seed_option
@click.option("-q", "--quiet", is_flag=True, help="No progress or notes on stderr.")
@click.option("--fail-on-unschedulable", is_flag=True,
              help="Exit 3 when a pending pod is left unschedulable (the plan is still printed): a CI gate that "
              "checks policy changes against a snapshot.")
@click.option("--kubeconfig", metavar="FILE",
              help="Plan against a live cluster's current state instead of a snapshot (read only, binds nothing: "
              f"lists {kinds_read_live()}; a kind the apiserver does not serve counts as none).")
@click.option("--baseline", is_flag=True,
              help="Also run the kube-scheduler-like one-pod-at-a-time baseline and report its count as "
              "stats.sequential_placed (it runs anyway when the first plan leaves pods out).")
@click.option("--no-preemption", "no_preemption", is_flag=True,
              help="Never plan evictions: pods that only fit by evicting lower-priority pods stay unschedulable.")
@now_option
@strict_option
def dry_run(clusters, policies, output, time_limit, scheduler_name, workers, seed, quiet, fail_on_unschedulable,
            kubeconfig, baseline, no_preemption, now, strict) -> None:
    """Solve a cluster snapshot and print the plan; binds nothing.

    Exit 0 when a plan was made (even with unschedulable pods), 2 on bad input, 3 with
    --fail-on-unschedulable when a pending pod could not be placed. Progress and notes go to stderr.
    """
    progress = _Progress(quiet)
    rules, checked, sources = _read_policies(policies)
    started = time.perf_counter()
    cluster = (_load(clusters, scheduler_name, rules.gangs, strict) if kubeconfig is None
               else _load_live(clusters, kubeconfig, scheduler_name, rules.gangs))
    if sources:
        from .policy.lint import notes
        cluster = replace(cluster, notes=[*cluster.notes, *notes(checked, cluster, sources)])  # `check`'s warnings
    loaded = time.perf_counter() - started
    progress(f"loaded {len(cluster.nodes)} nodes, {len(cluster.bound)} bound and {len(cluster.pending)} pending pods")
    chosen, cluster = _choose_now(cluster, now, live=kubeconfig is not None)
    options = Options(time_limit, workers, seed, baseline, preemption=not no_preemption)
    plan = plan_batch(cluster, rules, options, progress, time_inputs=_time_inputs(chosen))
    plan = _with_load(plan, loaded, chosen)
    if not quiet:
        for note in plan.notes:  # stdout stays the plan alone, whatever the format
            click.echo(f"policy-scheduler: note: {note}", err=True)
    _report_failures(plan)
    tenants = tenant_report.of_plan(plan, cluster)
    if output == "json":
        click.echo(render_json(plan, tenants))
    elif output == "yaml":
        click.echo(render_yaml(plan, tenants), nl=False)
    else:
        print_table(plan, Console(highlight=False), tenants=tenants)
    if fail_on_unschedulable and plan.unschedulable:
        click.echo(f"policy-scheduler: {len(plan.unschedulable)} pod(s) unschedulable (--fail-on-unschedulable)", err=True)
        sys.exit(EXIT_UNSCHEDULABLE)


def _epoch(at: datetime.datetime) -> float:
    """--now in seconds since the epoch (a time without an offset is UTC)."""
    return (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).timestamp()


def _choose_now(cluster: Cluster, flag: datetime.datetime | None, live: bool) -> tuple[timeline.Now | None, Cluster]:
    """The plan's now (timeline.choose_now: --now, else a live cluster's clock, else the snapshot's), and the
    cluster with a note when pod times were left out choosing it."""
    chosen = timeline.choose_now(cluster, None if flag is None else _epoch(flag), time.time() if live else None)
    if chosen is None or not (said := chosen.notes()):
        return chosen, cluster
    return chosen, replace(cluster, notes=[*cluster.notes, *said])


def _time_inputs(chosen: timeline.Now | None) -> TimeInputs:
    """A one-shot command's time inputs: the plan's now alone (reservations are worked out, none carried)."""
    return TimeInputs(None if chosen is None else chosen.at)


def _with_load(plan: Plan, seconds: float, now: timeline.Now | None) -> Plan:
    """The plan with the snapshot's load time first in its phases (a plan without phases, planning failed, keeps
    none) and the now it was made at in its stats."""
    phases = plan.stats.phases
    if phases is not None:
        phases = replace(phases, load=round(seconds, 3))
    return replace(plan, stats=replace(plan.stats, phases=phases, now=now))


def _report_failures(plan: Plan) -> None:
    """Planning raised for some pods (a bug, engine.planning.isolation): they are in the plan as unschedulable with the
    error; stderr says so once each, without a traceback."""
    for failure in plan.details.failures:
        click.echo(f"policy-scheduler: internal error: planning {', '.join(failure.pods[:3])}"
                   f"{' …' if len(failure.pods) > 3 else ''} failed ({failure.error}); the plan leaves "
                   "it out (please report this bug)", err=True)


def _load(clusters, scheduler_name, gangs: GangRules | None = None, strict: bool = False):
    """The snapshot (the bundled demo without --cluster), or one error line and exit 2 (`strict`: unknown fields
    too, engine.reading.field_validation)."""
    try:
        return load_cluster(list(clusters) or [demo_path()], scheduler_name, gangs, strict)
    except InputError as exc:
        _fail_input(exc)


def _print_notes(notes: list[str]) -> None:
    """What the snapshot's reading noted (unknown fields, objects ignored), on stderr: stdout is the answer alone."""
    for note in notes:
        click.echo(f"policy-scheduler: note: {note}", err=True)


def _load_live(clusters, kubeconfig: str, scheduler_name: str, gangs: GangRules | None):
    """A live cluster's current state through the scheduler loop's read-only reader, or one error line."""
    from .loop.api import ConfigError
    from .loop.live import read_cluster
    from .loop.ports import ApiError, ApiUnavailable
    from .reading.load import build_cluster

    if clusters:
        _fail("--cluster and --kubeconfig cannot be used together (a snapshot or a live cluster)")
    try:
        cluster = build_cluster(read_cluster(kubeconfig), scheduler_name, gangs, strict=False)
    except (ConfigError, ApiUnavailable, ApiError) as exc:
        _fail(f"{kubeconfig}: {exc}")
    # the apiserver admitted every object: as the scheduler loop, leave out what the model cannot read and say so
    return replace(cluster, notes=[*cluster.notes,
                                   *(f"left out, the scheduler cannot read it: {r.message}" for r in cluster.refused)])


@main.command()
@cluster_option
@policy_option
@click.argument("pod")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@time_option
@scheduler_option
@workers_option
@seed_option
@click.option("--no-preemption", "no_preemption", is_flag=True, help="Explain the plan made without evictions.")
@now_option
@strict_option
def explain(clusters, policies, pod, output, time_limit, scheduler_name, workers, seed, no_preemption, now,
            strict) -> None:
    """Show, node by node, which constraint rejects POD (namespace/name, or a unique name)."""
    from .planning.explain import node_table, score_breakdown

    rules = _policies(policies)
    cluster = _load(clusters, scheduler_name, rules.gangs, strict)
    _print_notes(cluster.notes)
    chosen, cluster = _choose_now(cluster, now, live=False)
    for note in chosen.notes() if chosen is not None else ():
        click.echo(f"policy-scheduler: note: {note}", err=True)
    skipped = [key for key in cluster.skipped if pod in (key, key.split("/", 1)[1])]
    target = _explain_target(cluster, pod, scheduler_name, bool(skipped))
    if target is None:
        _print_skipped_pod(skipped[0], cluster.skipped[skipped[0]], output)
        return
    plan = plan_batch(cluster, rules, Options(time_limit, workers, seed, preemption=not no_preemption),
                      time_inputs=_time_inputs(chosen))
    _report_failures(plan)
    compiled = plan.details.compiled  # the batch as first compiled: the node table shows the cluster as it is now
    classes = compiled.classes if compiled is not None else []
    c = next((i for i, info in enumerate(classes) if any(p.key == target.key for p in info.pods)), None)
    node = plan.assignments.get(target.key)
    rows: list[tuple[str, str, str]] = []
    score: list[tuple[str, int]] = []
    if compiled is not None and c is not None:  # else planning it failed (engine.planning.isolation): its reason is all
        rows = node_table(compiled, c, node)
        score = score_breakdown(compiled, c, node) if node else []
    preemption = plan.preemptions.get(target.key)
    if output == "json":
        click.echo(json.dumps({
            "pod": target.key, "node": node,
            "unschedulable": plan.unschedulable.get(target.key, []),
            "reasons": said.to_dict() if (said := plan.waiting_reasons().get(target.key)) else None,
            "preemption": preemption.to_dict() if preemption else None,
            "score": [{"term": term, "points": points} for term, points in score],
            "nodes": [{"node": name, "verdict": verdict, "reason": reason} for name, verdict, reason in rows],
            "now": chosen.to_dict() if chosen is not None else None,
        }, indent=2))
    else:
        _print_explanation(target.key, rows, plan, score)
        Console(highlight=False).print(escape(now_line(chosen)))


def _explain_target(cluster, pod, scheduler_name, skipped: bool):
    """The one pending pod POD names; None when it names a skipped pod; otherwise one error line and exit 2."""
    matches = [p for p in cluster.pending if pod in (p.key, p.name)]
    if len(matches) > 1:
        _fail(f"pod name {pod!r} is ambiguous: {', '.join(p.key for p in matches)} (use namespace/name)")
    if matches:
        return matches[0]
    if skipped:
        return None
    known = [p for p in cluster.bound if pod in (p.key, p.name)]
    if known:
        _fail(f"pod {known[0].key} is already bound to node {known[0].node_name}")
    _fail(f"no pending pod {pod!r} for scheduler {scheduler_name!r} in the snapshot")


def _print_skipped_pod(key: str, reason: str, output: str) -> None:
    if output == "json":
        click.echo(json.dumps({"pod": key, "node": None, "skipped": reason, "unschedulable": [], "nodes": []}, indent=2))
    else:
        click.echo(f"{key} is not pending for scheduling: {reason}")


def _print_explanation(key: str, rows, plan, score: list[tuple[str, int]]) -> None:
    console = Console(highlight=False)
    table = Table(title=escape(f"{key}: node by node"), title_justify="left")
    table.add_column("node")
    table.add_column("verdict")
    table.add_column("reason")
    for name, verdict, reason in rows:
        style = "green" if verdict in ("fits", "placed here") else "yellow" if verdict == "fits alone" else "red"
        table.add_row(escape(name), f"[{style}]{verdict}[/{style}]", escape(reason))
    console.print(table)
    if key in plan.assignments:
        console.print(f"[bold green]{escape(key)} is placed on {escape(plan.assignments[key])}[/bold green]")
        if key in plan.preemptions:
            victims = plan.preemptions[key].victims
            console.print(f"once {len(victims)} lower-priority pod(s) there are evicted (the table shows the node as it"
                          " is now):" if victims else "in room that evictions beside it free:")
            for v in victims:
                console.print(escape(f"  - {v.pod} (priority {v.priority}; {v.to_dict()['budget']})"))
        if score:
            console.print("why this node (soft score of one pod, term by term):")
        for term, points in score:
            console.print(f"  {points:+d}  {escape(term)}")
    else:
        said = plan.waiting_reasons().get(key)
        codes = f" ({', '.join(c.code.value for c in said.causes)})" if said is not None else ""
        console.print(f"[bold red]{escape(key)} is unschedulable{codes}:[/bold red]")
        for reason in plan.unschedulable.get(key, []):
            console.print(f"  - {escape(reason)}")


@main.command("check")
@click.argument("paths", nargs=-1, metavar="PATH...")
@click.option("--cluster", "clusters", multiple=True, metavar="FILE",
              help="Also lint against a snapshot: rules that match nothing, pods left with no node.")
@click.option("--kubeconfig", metavar="FILE",
              help="Also check the live policies (read only): each ConfigMap a deployed scheduler reads, as it reads it, "
              "and a warning for each ConfigMap that looks like a policy set but that no scheduler reads. PATHs may "
              "then be left out.")
@scheduler_option
@strict_option
def check_command(paths, clusters, kubeconfig, scheduler_name, strict) -> None:
    """Parse and type-check policy files, directories or ConfigMap manifests.

    Prints every error and warning as file:line:col with the source line and a caret; exit 1 on errors, 0 when
    clean (warnings alone do not fail).
    """
    from .policy.lint import Finding, lint
    from .policy.lower import gang_rules
    from .policy.parse import PolicyError
    from .policy.plausible import warnings
    from .policy.sources import check_sources, line_order, read_sources

    if not paths and (kubeconfig is None or clusters):
        _fail("check needs PATH... (policy files or directories; --cluster lints them), --kubeconfig (the live "
              "policies), or both")
    live = 0 if kubeconfig is None else _check_live(kubeconfig)
    if not paths:
        sys.exit(1 if live else 0)
    try:
        sources = read_sources(list(paths))
        policies = check_sources(sources)
    except PolicyError as exc:
        _fail_policies(exc, 1, count=True)
    findings = [Finding(d, False) for d in warnings(policies, sources)]
    if clusters:
        cluster = _load(clusters, scheduler_name, gang_rules(policies), strict)
        _print_notes(cluster.notes)
        findings += lint(policies, cluster, sources)
    in_order = line_order(sources)
    for f in sorted(findings, key=lambda f: in_order(f.diagnostic)):
        click.echo(f.diagnostic.render(), err=True)
    errors = sum(1 for f in findings if f.error)
    if findings:
        click.echo(f"{errors} error(s), {len(findings) - errors} warning(s)", err=True)
    noun = f"{len(policies)} polic{'y' if len(policies) == 1 else 'ies'}"
    click.echo(f"{noun} type-check, but the snapshot lint failed" if errors else f"{noun} OK")
    sys.exit(1 if errors or live else 0)


def _check_live(kubeconfig: str) -> int:
    """The live policies' findings on stderr, one per line (`error:`, `warning:`, `note:`); how many are errors."""
    from .loop.api import ConfigError, KubeAPI, load_client
    from .loop.policy_sources import live_findings
    from .loop.ports import ApiError, ApiUnavailable

    try:
        found = live_findings(KubeAPI(load_client(kubeconfig)))
    except (ConfigError, ApiUnavailable, ApiError) as exc:
        _fail(f"{kubeconfig}: {exc}")
    for f in found:
        click.echo(f"{f.level}: {f.message}", err=True)
    errors = sum(1 for f in found if f.level == "error")
    warnings = sum(1 for f in found if f.level == "warning")
    click.echo(f"live policies: {errors} error(s), {warnings} warning(s)", err=True)
    return errors


@main.command("test")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@time_option
def test_command(paths, time_limit) -> None:
    """Run policy test cases (*_test.yaml: a cluster, policies, the expected plan), like `opa test`.

    A case may expect placements, unschedulable and skipped pods, evictions (for which preemptor, which
    PodDisruptionBudgets broken), reservations and estimated starts (at the case's `now:`), tenant figures and
    reason codes (docs/policy-language.md, "Test files"). Exit 0 when every case passes, 1 when one fails, 2 on a
    malformed test file, expectation or policy.
    """
    from .policy.parse import PolicyError
    from .policy.testing import TestFileError, find_test_files, run_file

    results = []
    try:
        for path in find_test_files(list(paths)):
            results.extend(run_file(path, time_limit))
    except TestFileError as exc:
        _fail(str(exc))
    except PolicyError as exc:
        _fail_policies(exc, 2)
    console = Console(highlight=False, soft_wrap=True)  # one line per case, whatever the width
    for r in results:
        console.print(f"{'[green]PASS[/green]' if r.passed else '[red]FAIL[/red]'} {r.file}: {r.name}")
        for failure in r.failures:
            console.print(f"     {failure}")
    failed = sum(1 for r in results if not r.passed)
    console.print(f"{len(results) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


@main.command("configmap")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--name", type=Name(), default=DEFAULT_POLICY_CONFIGMAP, show_default=True)
@click.option("--namespace", type=Name(label=True), default=DEFAULT_NAMESPACE, show_default=True)
def configmap_command(paths, name, namespace) -> None:
    """Print a ConfigMap manifest holding the (checked) policy files, one data key per file."""
    from pathlib import Path

    import yaml

    from .policy.parse import PolicyError
    from .policy.sources import check_sources, read_sources

    try:
        sources = read_sources(list(paths))
        check_sources(sources)
    except PolicyError as exc:
        _fail_policies(exc, 1)
    # a file's name, or a ConfigMap source's own data key
    data = {(file.rsplit(": ", 1)[1][:-1] if "[ConfigMap " in file else Path(file).name): text
            for file, text in sources.items()}
    if len(data) != len(sources):
        _fail("two policy files share a file name; a ConfigMap needs unique keys")
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace,
                "labels": {"app.kubernetes.io/name": "policy-scheduler"}}, "data": dict(sorted(data.items()))}
    class Literal(yaml.SafeDumper):
        """Policy files as readable `|` blocks."""

    Literal.add_representer(str, lambda d, v: d.represent_scalar("tag:yaml.org,2002:str", v, style="|" if "\n" in v else None))
    header = "# generated by `policy-scheduler configmap`; do not edit by hand\n"
    click.echo(header + yaml.dump(manifest, Dumper=Literal, sort_keys=False, allow_unicode=True), nl=False)


@main.command("simulate")
@click.argument("trace", required=False, metavar="[TRACE]")
@click.option("--generate", type=click.Choice(["kai", "mixed"]),
              help="A synthetic trace instead of a file: kai (a stream of 1-GPU jobs and a gang asking for every GPU, "
              "KAI-scheduler #1969's shape) or mixed (job sizes and durations shaped on the Philly and Helios studies).")
@click.option("--jobs", type=click.IntRange(1), default=None, help="Jobs of the generated trace.")
@click.option("--nodes", type=click.IntRange(1), default=None, help="Nodes of the generated trace.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--mode", "modes", multiple=True, type=click.Choice(["one-at-a-time", "batch", "batch-time"]),
              help="Replay only these ways (repeatable) [default: all three].")
@click.option("--load", type=click.FloatRange(min=0, min_open=True), default=None,
              help="The offered load: kai, the share of the GPUs the stream asks for [default: 0.9]; mixed, the "
              "arrival rate relative to the default (1.0: about 70% of the GPUs, at any --nodes).")
@click.option("--horizon", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop the virtual clock here (seconds).")
@click.option("--period", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Plan at most once per this many virtual seconds, as a scheduler's cycle (0: at every arrival "
              "and end).")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("--plots", type=click.Path(file_okay=False), default=None,
              help="Write PNG plots (utilisation over time, waits) into this directory (needs matplotlib).")
def simulate_command(trace, generate, jobs, nodes, seed, modes, load, horizon, period, output, plots) -> None:
    """Replay a workload trace through the planner with a virtual clock, one pod at a time, as a batch, and as a
    batch with time in the plan; print waits per job class and utilisation.

    A trace file is YAML or JSON: nodes (count, allocatable) and jobs (name, arrival, runtime, requests, pods,
    priority, limit, class); see docs/time.md. Exit 2 on a bad trace.
    """
    from .time import simulate as S

    if (trace is None) == (generate is None):
        _fail("give a trace file or --generate (one of them)")
    if load is not None and generate is None:
        _fail("--load is for --generate")
    if generate is not None:
        params = {k: v for k, v in (("small_jobs" if generate == "kai" else "jobs", jobs),
                                    ("nodes", nodes), ("seed", seed), ("load", load)) if v is not None}
        workload = S.GENERATORS[generate](**params)
    else:
        workload = _trace(trace)
    runs = [S.replay(workload, mode, horizon, period=period) for mode in (modes or S.MODES)]
    stream = max(j.arrival for j in workload.jobs)  # utilisation while jobs arrive (the drain after says little)
    report = {run.mode: {"utilisation": round(S.utilisation(run, stream), 4), "cycles": run.cycles,
                         "classes": [c.to_dict() for c in S.waits(workload, run)],
                         **({"reserved": len(run.promised), "delayed": run.delayed()} if run.promised else {})}
              for run in runs}
    if output == "json":
        click.echo(json.dumps(report, indent=2))
    else:
        _print_simulation(report, Console(highlight=False))
    if plots is not None:
        _plot_simulation(runs, workload, plots)


def _trace(path: str):
    """The trace file, or one error line and exit 2: a YAML or JSON file of one document (engine.time.simulate says
    what is wrong with its content, naming the job)."""
    import yaml

    from .time.simulate import TraceError, trace_of_documents
    try:
        with open(path, encoding="utf-8") as f:
            return trace_of_documents(list(yaml.safe_load_all(f)), path)
    except OSError as exc:
        _fail(f"{path}: cannot read file: {exc.strerror}")
    except UnicodeDecodeError:
        _fail(f"{path}: not UTF-8 text; a trace is YAML or JSON")
    except yaml.YAMLError as exc:
        _fail(f"{path}: not YAML or JSON: {str(exc).splitlines()[0]}")
    except TraceError as exc:
        _fail(str(exc))


@main.group("convert")
def convert_group() -> None:
    """Convert public cluster traces into a cluster snapshot (for dry-run) and a trace (for simulate)."""


@convert_group.command("openb")
@click.argument("nodes_csv", metavar="NODES.csv")
@click.argument("tasks_csv", metavar="PODS.csv")
@click.option("--out-dir", type=click.Path(file_okay=False), default=None,
              help="Write snapshot.yaml and trace.yaml (when the tasks have creation and deletion times) here.")
@click.option("-o", "--output", type=click.Choice(["snapshot", "trace"]), default=None,
              help="Write this one to stdout [default: snapshot, without --out-dir].")
@click.option("--gpus-as", "mode", type=click.Choice(["dra", "extended"]), default="dra", show_default=True,
              help="dra: a ResourceSlice device per GPU with a consumable capacity of 1000 milli, a ResourceClaim per "
              "GPU task; extended: nvidia.com/gpu (whole GPUs only: a task sharing a GPU is refused).")
@click.option("--sample", type=click.IntRange(1), default=None, metavar="N", help="Only N tasks, drawn at random.")
@click.option("--sample-nodes", type=click.IntRange(1), default=None, metavar="N", help="Only N nodes, drawn at random.")
@click.option("--seed", type=int, default=0, show_default=True, help="The random draws' seed (--sample, --sample-nodes).")
@click.option("--scheduler-name", type=Name(), default=DEFAULT_SCHEDULER, show_default=True,
              help="The pods' spec.schedulerName (dry-run's --scheduler-name plans them).")
def convert_openb(nodes_csv, tasks_csv, out_dir, output, mode, sample, sample_nodes, seed, scheduler_name) -> None:
    """Alibaba's openb GPU trace (clusterdata cluster-trace-gpu-v2023: a node list and a task list) as Kubernetes
    objects: Nodes with a GPU model label, GPUs as DRA devices with consumable capacity, tasks as pending Pods
    with ResourceClaims (a shared GPU: part of one device). See docs/simulate-openb.md. Exit 2 on a bad CSV,
    naming its file and line."""
    from .time import openb

    if out_dir is not None and output is not None:
        _fail("give --out-dir or -o, not both")
    try:
        nodes = openb.sample(openb.read_nodes(nodes_csv), sample_nodes, seed)
        tasks = openb.sample(openb.read_tasks(tasks_csv), sample, seed)
        if out_dir is None:
            made = (openb.trace(nodes, tasks, mode) if output == "trace"
                    else openb.snapshot(nodes, tasks, mode, scheduler_name))
            click.echo(_dump_yaml(made), nl=False)
            return
        _write_openb(out_dir, nodes, tasks, mode, scheduler_name)
    except openb.OpenbError as exc:
        _fail(str(exc))


def _write_openb(out_dir: str, nodes, tasks, mode: str, scheduler_name: str) -> None:
    """snapshot.yaml and, when every task has its times, trace.yaml in `out_dir` (a note says why not)."""
    from pathlib import Path

    from .time import openb

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "snapshot.yaml").write_text(_dump_yaml(openb.snapshot(nodes, tasks, mode, scheduler_name)), encoding="utf-8")
    written = ["snapshot.yaml"]
    try:
        (out / "trace.yaml").write_text(_dump_yaml(openb.trace(nodes, tasks, mode)), encoding="utf-8")
        written.append("trace.yaml")
    except openb.OpenbError as exc:
        click.echo(f"policy-scheduler: note: no trace.yaml: {exc}", err=True)
    click.echo(f"{len(nodes)} nodes, {len(tasks)} tasks in {out}: {', '.join(written)}", err=True)


def _dump_yaml(doc) -> str:
    import yaml

    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=120)


def _print_simulation(report: dict, console: Console) -> None:
    """The JSON's figures under the JSON's words (simulate.WAIT_WORDS), a section per mode with its utilisation on
    its first row; at a narrow width a class's name folds onto more lines, never cut."""
    from .time.simulate import WAIT_WORDS

    t = Table(title="Waits per job class (seconds from arrival to start)", title_justify="left")
    for column in ("mode", *WAIT_WORDS, "utilisation"):
        text = column in ("mode", "class")
        t.add_column(column, justify="left" if text else "right", no_wrap=column != "class",
                     overflow="fold" if column == "class" else "ellipsis")
    for mode, r in report.items():
        t.add_section()
        for i, c in enumerate(r["classes"]):
            t.add_row(mode if i == 0 else "", escape(c["class"]), str(c["jobs"]), str(c["started"]),
                      *(("-" if c[k] is None else f"{c[k]:,.0f}") for k in ("p50", "p95", "max")),
                      f"{100 * r['utilisation']:.1f}%" if i == 0 else "")
    console.print(t)
    for mode, r in report.items():
        if "reserved" in r:
            console.print(f"{mode}: {r['reserved']} job(s) reserved, {len(r['delayed'])} started later than their "
                          f"reservation first promised{': ' + ', '.join(r['delayed'][:5]) if r['delayed'] else ''}")


LINE_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))  # one per mode: lines that overlap stay apart


def _plot_simulation(runs, workload, directory: str) -> None:
    from .figures import PlotsUnavailable, save_figures

    def figures():
        yield "simulate_utilisation.png", utilisation_figure(runs)
        yield "simulate_waits.png", waits_figure(runs, workload)

    try:
        written = save_figures(figures, directory)
    except PlotsUnavailable as exc:
        _fail(f"--plots needs matplotlib: {exc}")
    click.echo(f"plots in {directory}: {', '.join(written)}", err=True)


def utilisation_figure(runs):
    """The share in use over time, a step per mode (each in its own dashes)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for run, (dashes, _) in zip(runs, LINE_STYLES * len(runs), strict=False):
        ax.step([t / 3600 for t, _ in run.usage], [100 * u for _, u in run.usage], where="post", linestyle=dashes,
                label=run.mode)
    ax.set(xlabel="hours", ylabel="% in use", title="Utilisation over time")
    ax.legend()
    fig.tight_layout()
    return fig


def waits_figure(runs, workload):
    """The waits' distribution (the share of started jobs that waited at most x minutes) per mode, drawn as the
    steps it is — it rises only at a job's wait — from (0, 0), each mode in its own dashes and markers (about ten
    per line) so that modes with the same waits stay visible one over the other."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for run, (dashes, marker) in zip(runs, LINE_STYLES * len(runs), strict=False):
        w = sorted((run.starts[j.name] - j.arrival) / 60 for j in workload.jobs if j.name in run.starts)
        shares = [k / max(1, len(w)) for k in range(len(w) + 1)]
        ax.step([0.0, *w], shares, where="post", linestyle=dashes, marker=marker, markevery=max(1, len(w) // 10),
                markerfacecolor="none", label=run.mode)
    ax.set(xlabel="minutes waited", ylabel="share of started jobs", title="Waits (cumulative)")
    ax.legend()
    fig.tight_layout()
    return fig


if __name__ == "__main__":  # pragma: no cover
    main()
from .loop.command import run as _run  # noqa: E402 — `policy-scheduler run` (engine/loop/), registered last
from .loop.queue_command import queue as _queue  # noqa: E402 — `policy-scheduler queue` (engine/loop/)
from .simulate_openb import simulate_openb as _simulate_openb  # noqa: E402 — the FGD paper's protocol, sweeps

main.add_command(_run)
main.add_command(_queue)
main.add_command(_simulate_openb)

KUBECTL_PLUGIN = "kubectl policy-scheduler"  # kubectl runs `kubectl-policy_scheduler` on PATH for `kubectl policy-scheduler`


def kubectl_plugin(argv: list[str] | None = None) -> None:
    """The `kubectl-policy_scheduler` entry point: kubectl hands a plugin the words after its name (`queue -o json`),
    as a command's own are handed to `policy-scheduler`; only the name it says in help and errors differs."""
    main.main(args=sys.argv[1:] if argv is None else argv, prog_name=KUBECTL_PLUGIN)
