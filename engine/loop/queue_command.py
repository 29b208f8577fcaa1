"""`policy-scheduler queue` (and, as a kubectl plugin, `kubectl policy-scheduler queue`): what waits, by profile,
tenant and workload, and why — read off what the loop publishes (engine.loop.queue_view), with the lists a `kubectl
get` makes; `--watch` keeps the same objects through watches and prints the view again when they change.

User mistakes (no usable kubeconfig, an apiserver that says no) print one line and exit 2.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..flags import Name
from ..model.workload_gangs import KINDS as WORKLOAD_KINDS
from ..reading.load import DEFAULT_SCHEDULER
from ..reading.objects import NATIVE_POD_GROUP
from .ports import ApiError, ApiUnavailable, NotFound, WatchTarget
from .queue_view import Listed, QueueView, WorkloadRow, queue_view

if TYPE_CHECKING:
    from .ports import ClusterAPI

# what the view lists, as `Listed` holds them: pods, groups, quotas, and the workloads `gang by workload` sizes
KINDS = ("Pod", "PodGroup", NATIVE_POD_GROUP, "ElasticQuota", *WORKLOAD_KINDS)
SETTLE = 0.5  # seconds --watch lets a burst of changes settle before it prints again


def _fail(message: str) -> NoReturn:
    click.echo(f"policy-scheduler: error: {message}", err=True)
    sys.exit(2)


def profile_names(values: tuple[str, ...]) -> frozenset[str]:
    """--scheduler-name/--profile values as scheduler names: `run`'s `--profile NAME=NS/CONFIGMAP` form is taken too
    (its NAME), so the flags a deployment runs with select its profiles here."""
    return frozenset(v.split("=", 1)[0] for v in values)


def listed(objects: dict[str, list[dict]]) -> Listed:
    return Listed(objects.get("Pod", []), objects.get("PodGroup", []), objects.get(NATIVE_POD_GROUP, []),
                  objects.get("ElasticQuota", []), [(k, o) for k in WORKLOAD_KINDS for o in objects.get(k, [])])


def read_once(api: ClusterAPI, namespace: str | None) -> tuple[Listed, tuple[str, ...]]:
    """One list of each kind (a kind the apiserver does not serve, a CRD not installed, lists as nothing), and the
    kinds listed: a workload kind the user may not list is left out, said once (its workloads are shown without
    their sizes); any other refusal is the command's error."""
    out: dict[str, list[dict]] = {}
    for kind in KINDS:
        try:
            out[kind] = api.list(WatchTarget(kind, namespace))[0]
        except NotFound:
            out[kind] = []
        except ApiError as exc:
            if kind not in WORKLOAD_KINDS or exc.status != 403:
                raise
            click.echo(f"policy-scheduler: note: cannot list {kind} objects ({exc}): their workloads are shown "
                       "without their gang's size", err=True)
    return listed(out), tuple(out)


@click.command("queue")
@click.option("--kubeconfig", metavar="FILE",
              help="The cluster to read [default: in a pod, its service account; else $KUBECONFIG or ~/.kube/config, "
              "as kubectl].")
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True)
@click.option("-w", "--watch", is_flag=True, help="Keep watching; print the view again after each change.")
@click.option("--scheduler-name", "--profile", "profiles", multiple=True, metavar="NAME",
              help=f"The profiles (pods' spec.schedulerName) to show; repeatable; `run`'s NAME=NS/CONFIGMAP is taken "
              f"too [default: {DEFAULT_SCHEDULER}].")
@click.option("-n", "--namespace", type=Name(label=True), default=None, help="Only this namespace.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Every namespace (the default).")
def queue(kubeconfig, output, watch, profiles, namespace, all_namespaces) -> None:
    """The pending pods by profile, tenant and workload: a gang's progress (`6/8 members created`), the dominant
    reason code, the expected start and the nodes reserved for it, the tenants' quota use.

    It reads only what the scheduler publishes and `kubectl get` lists (pods and their PodScheduled conditions,
    PodGroups and their conditions, ElasticQuotas), never plans: see docs/queue.md.
    """
    if namespace and all_namespaces:
        _fail("-n/--namespace and -A/--all-namespaces cannot be used together")
    from .api import ConfigError, KubeAPI, load_client

    try:
        api = KubeAPI(load_client(kubeconfig, pool_size=4))
    except ConfigError as exc:
        _fail(str(exc))
    names = profile_names(profiles) or frozenset({DEFAULT_SCHEDULER})
    show = _printer(output, Console(highlight=False, soft_wrap=output == "json"), watch)
    try:
        found, kinds = read_once(api, namespace)  # (under --watch too: an apiserver that says no, said once)
        show(queue_view(found, names))
        if watch:
            _watch(api, namespace, lambda found: show(queue_view(found, names)), kinds=kinds)
    except (ApiUnavailable, ApiError) as exc:
        _fail(f"{kubeconfig or 'the cluster'}: {exc}")
    except KeyboardInterrupt:
        pass


def _printer(output: str, console: Console, watch: bool) -> Callable[[QueueView], None]:
    """How a view is printed: JSON (one document a line under --watch, as `kubectl get -o json -w` streams), or
    tables (on a terminal under --watch, the screen cleared first); a view the same as the last is not printed again."""
    last: list[dict] = []

    def show(view: QueueView) -> None:
        said = view.to_dict()
        if last and last[-1] == said:
            return
        last[:] = [said]
        if output == "json":
            click.echo(json.dumps(said, indent=None if watch else 2))
            return
        if watch and console.is_terminal:
            console.clear()
        elif watch:
            console.print(time.strftime("--- %Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        print_view(view, console)
    return show


def print_view(view: QueueView, console: Console) -> None:
    """The workloads, as `kubectl get` prints (profile and tenant said once per run of rows), then the tenants'
    quotas. Names fold at a narrow width; codes and times are never cut."""
    if not view.rows:
        console.print("No pending pods.")
        return
    t = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("PROFILE", "TENANT", "WORKLOAD", "PENDING", "GANG", "REASON", "EXPECTED START", "RESERVED"):
        t.add_column(column, overflow="fold", no_wrap=column in ("PENDING", "REASON", "EXPECTED START"),
                     justify="right" if column == "PENDING" else "left")
    last: tuple[str, str | None] | None = None
    for row in view.rows:
        head = (row.profile, row.tenant)
        t.add_row(*_cells(row, head != last))
        last = head
    console.print(t)
    if view.quotas:
        q = Table(box=None, pad_edge=False, header_style="bold", title="quotas of the tenants shown",
                  title_justify="left")
        for column in ("TENANT", "USE", "FROM"):
            q.add_column(column, overflow="fold")
        for quota in view.quotas:
            use = "\n".join(quota.words()) or "-"
            q.add_row(escape(quota.tenant), escape(use + (f"\n{quota.problem}" if quota.problem else "")),
                      "status.used" if quota.source == "status" else "bound pods")
        console.print()
        console.print(q)


def _cells(row: WorkloadRow, first: bool) -> list[str]:
    expected = row.expected()
    start = None if expected is None else expected.start_text()
    return [escape(row.profile) if first else "", escape(row.tenant or "-") if first else "",
            escape(f"{row.kind} {row.namespace}/{row.name}"), str(len(row.pods)),
            escape(row.gang.words()) if row.gang is not None else "-", escape(row.reason or "not tried yet"),
            start or "-", escape(expected.reserved) if expected is not None and expected.reserved else "-"]


def _watch(api: ClusterAPI, namespace: str | None, show: Callable[[Listed], None],
           stop: threading.Event | None = None, kinds: tuple[str, ...] = KINDS) -> None:
    """List and watch the view's kinds (the loop's reflectors, into a store of their own); show the view once all are
    listed, then after each burst of changes, until `stop` (or Ctrl-C). A watch that breaks resumes or lists again,
    as the loop's do."""
    from .store import Store
    from .sync import Reflector

    stop = stop or threading.Event()
    store, changed = Store(), threading.Event()
    store.subscribe(lambda _change: changed.set())
    targets = [WatchTarget(kind, namespace) for kind in kinds]
    for target in targets:
        threading.Thread(target=Reflector(api, target, store, stop).run, name=f"queue-{target.kind}", daemon=True).start()
    try:
        while not stop.is_set() and not store.synced(targets):
            stop.wait(0.05)
        changed.set()
        while not stop.is_set():
            if changed.wait(0.5):
                stop.wait(SETTLE)
                changed.clear()
                show(listed({kind: store.objects(kind) for kind in kinds}))
    finally:
        stop.set()
