"""`policy-scheduler run`: the in-cluster named scheduler. A thin shell: options → Settings → Scheduler.

User mistakes (bad kubeconfig, malformed option, port in use) print one line and exit 2; losing
leadership exits 1 (the Deployment restarts the pod, as kube-scheduler does); SIGTERM/SIGINT stop
gracefully: the cycle in progress finishes, binds and events are flushed, the lease is released.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from typing import TYPE_CHECKING, NoReturn

import click
from click.core import ParameterSource

from ..flags import Name, PolicySource, Seconds, name_problem, policy_source
from ..reading.load import DEFAULT_NAMESPACE, DEFAULT_SCHEDULER
from ..solve import load_solver
from .runtime import RuntimePolicy
from .serving.listen import SECURE_PORT, Serving

PROTOBUF = "application/vnd.kubernetes.protobuf"  # engine.loop.wire.MEDIA, named here without importing protobuf

if TYPE_CHECKING:  # the heavy modules (the client, the solver) load only when `run` runs
    from .api import KubeAPI
    from .leader import LeaderElector
    from .scheduler import Profile, Scheduler
    from .serving.endpoints import Listener

log = logging.getLogger("policy_scheduler")
LOG_FORMAT = "ts=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)s"
EXIT_LEADERSHIP_LOST = 1


def _fail(message: str) -> NoReturn:
    click.echo(f"policy-scheduler: error: {message}", err=True)
    sys.exit(2)


class ProfileError(ValueError):
    """--profile or --policy-configmap cannot be served as given."""


def parse_profiles(scheduler_name: str, policy_configmap: tuple[tuple[str, str], bool] | None,
                   profiles: tuple[str, ...], named: bool = False) -> tuple[Profile, ...]:
    """--profile NAME=NS/CONFIGMAP[,optional] (repeatable; NAME= for one without policies) replaces the single
    --scheduler-name/--policy-configmap profile; either of those given (`named`: --scheduler-name was) beside it is
    refused, not ignored. Raises ProfileError."""
    if not profiles:
        return (_profile(scheduler_name, policy_configmap, "--policy-configmap"),)
    if policy_configmap:
        raise ProfileError("--policy-configmap goes with --scheduler-name; with --profile give each profile its ConfigMap")
    if named:
        raise ProfileError(f"--scheduler-name {scheduler_name!r} goes with --policy-configmap; with --profile name every "
                           f"scheduler in a --profile (add --profile {scheduler_name}=NAMESPACE/CONFIGMAP, or "
                           f"{scheduler_name}= for no policies)")
    out: list[Profile] = []
    for item in profiles:
        name, sep, where = item.partition("=")
        if not sep:
            raise ProfileError(f"--profile must be NAME=NAMESPACE/CONFIGMAP[,optional] (or NAME= for no policies), got {item!r}")
        if problem := name_problem(name):
            raise ProfileError(f"--profile {item!r}: scheduler name {name!r} {problem}")
        if any(p.name == name for p in out):
            raise ProfileError(f"--profile {name!r} is given twice")
        source = policy_source(where) if where else None
        if isinstance(source, str):
            raise ProfileError(f"--profile {item!r}: the ConfigMap {source}")
        out.append(_profile(name, source, f"--profile {item!r}"))
    return tuple(out)


def _profile(name: str, source: tuple[tuple[str, str], bool] | None, flag: str) -> Profile:
    """One profile; its ConfigMap's name leaves room for the copy kept beside it (NAME-last-valid)."""
    from .profile import Profile

    if source is None:
        return Profile(name)
    (namespace, configmap), optional = source
    profile = Profile(name, (namespace, configmap), optional)
    kept = profile.kept_configmap
    if kept is not None and (problem := name_problem(kept[1])):
        raise ProfileError(f"{flag}: the ConfigMap name {configmap!r} is too long: the copy kept beside it, "
                           f"{kept[1]!r}, {problem}")
    return profile


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT, "%Y-%m-%dT%H:%M:%S"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


@click.command("run")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), metavar="FILE",
              help="Kubeconfig to use; default: the in-cluster config, else $KUBECONFIG / ~/.kube/config.")
@click.option("--kube-api-content-type", type=click.Choice([PROTOBUF, "application/json"]), default=PROTOBUF,
              show_default=True, help="The encoding of lists, watches, binds, events and status writes (kube-scheduler's "
              "flag): protobuf for every built-in kind, JSON for custom resources either way.")
@click.option("--scheduler-name", type=Name(), default=DEFAULT_SCHEDULER, show_default=True,
              help="Schedule pods whose spec.schedulerName is this.")
@click.option("--policy-configmap", type=PolicySource(), metavar="NS/NAME[,optional]",
              help="ConfigMap of policy files (hot-reloaded; the set in force is kept in NAME-last-valid beside it, for "
                   "a start while it has errors). Until it loads the scheduler schedules nothing; with ',optional', "
                   "until it first exists pods are placed by their own specs. Default: none, pods are placed by their "
                   "own specs.")
@click.option("--profile", "profiles", multiple=True, metavar="NAME=NS/CONFIGMAP[,optional]",
              help="Serve several scheduler names, each with its own policies (NAME= for none), in place of "
              "--scheduler-name and --policy-configmap (given beside it, they are refused). Repeatable.")
@click.option("--batch-window", type=Seconds(0.0), default=0.0, show_default=True, metavar="SECONDS",
              help="Collect pending pods this long before solving (0: each cycle takes what arrived while the "
                   "previous one ran, so a pod arriving alone is placed at once).")
@click.option("--batch-idle", type=Seconds(0.0), default=0.0, show_default=True, metavar="SECONDS",
              help="Close the batch window early once no new pod arrived for this long (0: always wait it out).")
@click.option("--max-batch", type=click.IntRange(min=1), default=None, metavar="N", help="At most N pods per batch.")
@click.option("--head", type=click.IntRange(min=0), default=250, show_default=True, metavar="N",
              help="A batch of more than 4×N ready pods is planned in two: N first (the highest priority, then the "
                   "largest pods, then the oldest), bound while the rest is planned (a large arrival's first binds "
                   "do not wait for all of it to be compiled; 0: never).")
@click.option("--time-limit", type=Seconds(0.1), default=5.0, show_default=True, metavar="SECONDS",
              help="Time limit of a cycle's plan at most; each cycle's is sized to its batch (--time-per-pod).")
@click.option("--time-per-pod", type=Seconds(0.0), default=0.005, show_default=True, metavar="SECONDS",
              help="A cycle's time limit: 0.2 s plus this per pod of its batch, at most --time-limit "
                   "(0: always --time-limit).")
@click.option("--leader-elect/--no-leader-elect", default=False, show_default=True,
              help="Run with replicas: only the holder of the Lease schedules.")
@click.option("--lease-namespace", type=Name(label=True), default=DEFAULT_NAMESPACE, show_default=True,
              help="Where the Lease is (deploy/ and the Helm chart grant Lease rights in their own namespace).")
@click.option("--lease-name", type=Name(), default=None, help="Default: the (first) scheduler name.")
@click.option("--lease-duration", type=Seconds(1.0), default=15.0, show_default=True, metavar="SECONDS")
@click.option("--secure-port", type=click.IntRange(min=0, max=65535), default=SECURE_PORT, show_default=True,
              help="HTTPS port of /metrics, /leaderz (for users a TokenReview and a SubjectAccessReview admit) and "
              "/healthz, /readyz, /livez (for anyone); 0: none.")
@click.option("--bind-address", default="0.0.0.0", show_default=True, metavar="IP",
              help="Address the secure port listens on.")
@click.option("--tls-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Serving certificate (PEM; with --tls-private-key-file), read again when it changes. Default: a "
              "self-signed one made in memory at start.")
@click.option("--tls-private-key-file", type=click.Path(dir_okay=False), metavar="FILE",
              help="The serving certificate's key (PEM).")
@click.option("--insecure-port", type=click.IntRange(min=0, max=65535), default=0, show_default=True,
              help="Plain-HTTP port without authentication, on 127.0.0.1 only: for development and benchmarks "
              "(0: none).")
@click.option("--metrics-port", type=int, hidden=True, callback=lambda ctx, param, value: _gone_metrics_port(value))
@click.option("--bind-workers", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--preemption/--no-preemption", default=True, show_default=True,
              help="Evict lower-priority pods to place higher-priority ones, as kube-scheduler does (needs delete on "
              "pods: deploy/ and the Helm chart grant it unless preemption is turned off). Without it they wait for "
              "room. The last of the two flags wins.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info", show_default=True)
def run(kubeconfig, kube_api_content_type, scheduler_name, policy_configmap, profiles, batch_window, batch_idle,
        max_batch, head, time_limit, time_per_pod, leader_elect, lease_namespace, lease_name, lease_duration, secure_port,
        bind_address, tls_cert_file, tls_private_key_file, insecure_port, metrics_port, bind_workers, preemption,
        log_level) -> None:
    """Run as a named scheduler: watch the cluster, plan each batch of pending pods, bind them."""
    from .api import ConfigError, KubeAPI, load_client
    from .leader import LeaderElector
    from .queue import QueueConfig
    from .scheduler import Scheduler, Settings, connections

    _configure_logging(log_level)
    named = click.get_current_context().get_parameter_source("scheduler_name") != ParameterSource.DEFAULT
    try:
        served = parse_profiles(scheduler_name, policy_configmap, profiles, named)
    except ProfileError as exc:
        _fail(str(exc))
    if bool(tls_cert_file) != bool(tls_private_key_file):
        _fail("--tls-cert-file and --tls-private-key-file go together: give both or neither")
    for flag, path in (("--tls-cert-file", tls_cert_file), ("--tls-private-key-file", tls_private_key_file)):
        if path and not os.path.isfile(path):  # said at start, not when parsed: `check` parses a pod's arguments here
            _fail(f"{flag} {path}: no such file")
    settings = Settings(served,
                        QueueConfig(batch_window=batch_window, max_batch=max_batch,
                                    batch_idle=batch_idle or None, head=head or None), time_limit=time_limit,
                        time_per_pod=time_per_pod, bind_workers=bind_workers, preemption=preemption, own_pod=_own_pod())
    try:
        api = KubeAPI(load_client(kubeconfig, pool_size=connections(settings)),
                      protobuf=kube_api_content_type == PROTOBUF)
    except ConfigError as exc:
        _fail(str(exc))
    scheduler = Scheduler(api, settings, runtime=RuntimePolicy())  # how this process is tuned, phase by phase
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    listeners = _start_serving(scheduler, api, Serving(secure_port, bind_address, tls_cert_file, tls_private_key_file,
                                                    insecure_port))
    elector = None
    if leader_elect:
        elector = LeaderElector(api, lease_namespace, lease_name or settings.profiles[0].name, _identity(),
                                lease_seconds=lease_duration, renew_deadline=lease_duration * 2 / 3,
                                retry_seconds=max(0.5, lease_duration / 7.5))
    sys.exit(_serve(scheduler, elector, stop, listeners))


def _gone_metrics_port(value: int | None) -> None:
    if value is not None:
        raise click.BadParameter("the plain-HTTP metrics port is gone: /metrics and the health paths are served over "
                                 "HTTPS on --secure-port (10259) to authorized users; --insecure-port N serves them "
                                 "in plain HTTP on 127.0.0.1 only", param_hint="--metrics-port")


def _start_serving(scheduler: Scheduler, api: KubeAPI, serving: Serving) -> list[Listener]:
    from .serving.certificates import CertificateError
    from .serving.endpoints import Endpoints
    from .serving.listen import listen

    endpoints = Endpoints(scheduler.metrics.registry, scheduler.ready, scheduler.leading.is_set)
    try:
        return listen(serving, endpoints, api)
    except CertificateError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot serve on port {serving.secure_port or serving.insecure_port}: {exc.strerror or exc}")


def _own_pod() -> tuple[str, str] | None:
    """The pod this process runs in (POD_NAMESPACE, POD_NAME: the installs set them from the downward API)."""
    namespace, name = os.environ.get("POD_NAMESPACE"), os.environ.get("POD_NAME")
    return (namespace, name) if namespace and name else None


def _identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def _serve(scheduler: Scheduler, elector: LeaderElector | None, stop: threading.Event,
           listeners: list[Listener]) -> int:
    """Watch, (wait for leadership,) schedule until stopped; returns the exit code. The process is tuned by the
    scheduler's runtime policy (engine.loop.runtime), phase by phase: startup, cycles, quiet moments, the end."""
    names = ",".join(p.name for p in scheduler.settings.profiles)
    log.info("starting profiles=%s leader_elect=%s", names, elector is not None)
    runtime = scheduler.runtime
    try:
        if not _start(scheduler, stop, runtime):
            return _stop(scheduler, None, listeners, 0)
        return _schedule(scheduler, elector, stop, listeners, runtime)
    finally:
        runtime.restore()


def _start(scheduler: Scheduler, stop: threading.Event, runtime: RuntimePolicy) -> bool:
    """The solver loaded, the watches started and the caches synced (False: stopped first)."""
    with runtime.starting():
        scheduler.start_watches(stop)  # standbys keep their caches warm: takeover needs no relist
        load_solver()  # while the lists are on their way: the apiserver encodes them on the other core
        while not scheduler.wait_synced(stop, timeout=5.0):
            if stop.is_set():
                return False
            log.info("waiting for caches to sync")
        runtime.started()
    return True


def _schedule(scheduler: Scheduler, elector: LeaderElector | None, stop: threading.Event,
              listeners: list[Listener], runtime: RuntimePolicy) -> int:
    """(Wait for leadership,) run the loops until stopped; the main thread gives the runtime its quiet moments."""
    lost = threading.Event()
    if elector is not None:
        if not elector.acquire(stop, waiting=scheduler.refresh_policies):
            return _stop(scheduler, None, listeners, 0)
        threading.Thread(target=elector.hold, args=(stop, functools.partial(_lost, lost, stop)), name="lease",
                         daemon=True).start()
    else:
        scheduler.refresh_policies()  # before the loops start, so the log below says what holds
    scheduler.start_loops(stop)
    _log_profiles(scheduler)
    while not stop.wait(0.5):
        runtime.tick()
    return _stop(scheduler, elector, listeners, EXIT_LEADERSHIP_LOST if lost.is_set() else 0)


def _log_profiles(scheduler: Scheduler) -> None:
    """Say which profiles schedule now, and why the others do not (their pods are told too)."""
    ready = [loop.name for loop in scheduler.loops if loop.ready()]
    if ready:
        log.info("scheduling profiles=%s", ",".join(ready))
    for loop in scheduler.loops:
        if not loop.ready():
            log.warning("not scheduling profile=%s reason=%r kept=%r: its pods wait until a valid policy set loads",
                        loop.name, loop.policies.problem or "policies not loaded yet", loop.policies.kept_problem)


def _lost(lost: threading.Event, stop: threading.Event) -> None:
    """The lease was lost: say so, and stop."""
    lost.set()
    stop.set()


def _stop(scheduler: Scheduler, elector: LeaderElector | None, listeners: list[Listener], code: int) -> int:
    log.info("shutting down")
    scheduler.leading.clear()
    scheduler.shutdown()
    if elector is not None and code == 0:
        elector.release()
    for listener in listeners:
        listener.stop()
    log.info("stopped exit_code=%d", code)
    return code
