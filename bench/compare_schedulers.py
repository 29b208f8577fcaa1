"""The schedulers of the side-by-side benchmark, each started as its own process against the same apiserver.

* ``policy-scheduler``: ``python -m engine run`` (this repository), its defaults unless told otherwise.
* ``kube-scheduler``: the real one, from the e2e control plane's build of the release measured
  (``--kube-version``: k8s.io/kubernetes v1.36.3 or v1.37.2), default plugins; on workloads with native gangs
  (scheduling.k8s.io PodGroups) with that release's workload gates on, as scheduler_perf's gang tests run it
  (1.37: ``GenericWorkload``, beta but off by default). DRA's partitionable devices and consumable capacity are
  beta and on by default in both releases: nothing to set.
* ``kube-workload``: the same binary with the workload gates always on.
* ``kube-binpack``: the same binary, the upstream bin-packing profile (NodeResourcesFit scoring strategy
  MostAllocated).
* ``coscheduling``: kube-scheduler with sigs.k8s.io/scheduler-plugins v0.34.7 (tests/e2e/coscheduling/), the
  Coscheduling plugin in multiPoint and queueSort, as its manifests/coscheduling example configures it.
* ``capacity-scheduling``: the same binary, the CapacityScheduling plugin (ElasticQuota min / max: PreFilter,
  Reserve; its quota-aware preemption as the only PostFilter), as its manifests/capacityscheduling example
  configures it. Run on the workloads with quotas only, unless asked for by name.

DefaultPreemption is disabled in every kube-scheduler profile (capacity-scheduling's PostFilter is its own
reclaim). Their client QPS / burst are raised from the 50 / 100 defaults to 5000 (scheduler_perf's setting),
since our scheduler's client has no such limit. Leader election is off everywhere.
"""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from testkit import metrics
from testkit.controlplane import DEFAULT_KUBE_VERSION, ControlPlane, Process, free_port, http_get, major_minor, unverified_context
from testkit.scheduling import Kube, apply

ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT_S = 120.0
POLICY_CONFIGMAP = "policy-scheduler/policy-scheduler-policies"  # `policy-scheduler configmap`'s default, as deploy/
CLIENT_QPS = 5000


@dataclass(frozen=True)
class Settings:
    """How each scheduler is run; the same for every workload of one benchmark run."""

    kube_bin: Path                      # the e2e control plane's kube-scheduler (of `kube_version`)
    plugins_bin: Path                   # scheduler-plugins' kube-scheduler (v0.34.7)
    ours_args: tuple[str, ...] = ()     # extra `policy-scheduler run` flags (defaults otherwise)
    kube_version: str = DEFAULT_KUBE_VERSION  # the release of the control plane and of kube_bin


@dataclass
class Running:
    """A started scheduler: its process, when it became ready, and what it can tell about itself."""

    name: str
    process: Process
    started_at: float
    ready_at: float = 0.0
    metrics_port: int | None = None

    def peak_rss_mib(self) -> float | None:
        """VmHWM of the process (the kernel's high-water mark of resident memory), read before it stops."""
        try:
            text = Path(f"/proc/{self.process.popen.pid}/status").read_text()
        except OSError:
            return None
        match = re.search(r"^VmHWM:\s+(\d+) kB", text, re.M)
        return int(match.group(1)) / 1024 if match else None

    def cpu_s(self) -> float | None:
        """CPU seconds the scheduler process used so far (user + system), read before it stops."""
        return cpu_seconds(self.process)

    def cycles(self, bound: int = 0, patience: float = 5.0) -> metrics.Cycles | None:
        """policy-scheduler's cycles so far (batch sizes, solve seconds) from its /metrics; None for the
        others (no metrics port here). A cycle is recorded once its binds are sent, which the watch may show
        first: with `bound` pods seen bound, wait (up to `patience` seconds) until the batches hold as many."""
        if self.metrics_port is None:
            return None
        deadline = time.monotonic() + patience
        while True:
            status, body = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
            if status != 200:
                raise RuntimeError(f"{self.name} /metrics answered {status}: {body[:300]!r}")
            found = metrics.cycles(body.decode())
            if found.sizes.sum >= bound or time.monotonic() >= deadline:
                return found
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.stop()


def cpu_seconds(process: Process) -> float | None:
    """utime + stime of a started process from /proc/<pid>/stat, in seconds; None once it is gone."""
    if process.popen is None:
        return None
    try:
        stat = Path(f"/proc/{process.popen.pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name (which may hold spaces): state is field 3
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # fields 14 and 15 of proc(5)


@dataclass(frozen=True)
class SchedulerKind:
    """One contender. ``name`` is also its pods' ``spec.schedulerName`` (and its profile's)."""

    name: str
    description: str
    gangs: bool                                     # knows PodGroups (all-or-nothing)
    launch: Callable[..., Running] = field(repr=False)  # (kind, cp, settings, workdir, with_policy, native, preemption)
    workloads: frozenset[str] | None = None         # the only workloads it runs unless asked for by name (None: all)

    def start(self, cp: ControlPlane, settings: Settings, workdir: Path, with_policy: bool,
              native: bool = False, preemption: bool = False) -> Running:
        """`native`: the workload has scheduling.k8s.io PodGroups (kube-scheduler then runs with the workload gates);
        `preemption`: it is about preemption (kube-scheduler then runs with DefaultPreemption; ours always may)."""
        return self.launch(self, cp, settings, workdir, with_policy, native, preemption)


# --- policy-scheduler -------------------------------------------------------------------------------------

def apply_policy_configmap(cp: ControlPlane, policy_dir: Path) -> None:
    """`policy-scheduler configmap DIR` into the policy-scheduler namespace, as deploy/ reads it (replaced if present)."""
    manifest = subprocess.run([sys.executable, "-m", "engine", "configmap", str(policy_dir)], check=True,
                              capture_output=True, text=True, cwd=ROOT).stdout
    path = cp.workdir / "policies-configmap.yaml"
    path.write_text(manifest)
    kube = Kube(cp.kubeconfig)
    apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": POLICY_CONFIGMAP.split("/")[0]}})
    status, data = apply(kube, yaml.safe_load(manifest))
    if status >= 300:
        raise RuntimeError(f"policy ConfigMap not applied: {status} {data}")


def launch_ours(kind: SchedulerKind, cp: ControlPlane, settings: Settings, workdir: Path,
                with_policy: bool, native: bool = False, preemption: bool = False, extra: tuple[str, ...] = ()) -> Running:
    port = free_port()
    argv = [sys.executable, "-m", "engine", "run", "--kubeconfig", str(cp.kubeconfig),
            "--scheduler-name", kind.name, "--secure-port", "0", "--insecure-port", str(port), "--no-leader-elect",
            *(["--policy-configmap", POLICY_CONFIGMAP] if with_policy else []), *extra, *settings.ours_args]
    running = Running(kind.name, Process(kind.name, argv, workdir / f"{kind.name}.log"), time.monotonic(),
                      metrics_port=port)
    running.process.start()
    running.ready_at = wait_ready(running, lambda: http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200)
    return running


# --- kube-scheduler ---------------------------------------------------------------------------------------

def kube_config(cp: ControlPlane, profile: dict, preemption: bool = False) -> dict:
    """A KubeSchedulerConfiguration with one profile, preemption off (unless `preemption`), leader election off."""
    plugins = profile.setdefault("plugins", {})
    if not preemption:
        plugins.setdefault("postFilter", {})["disabled"] = [{"name": "DefaultPreemption"}]
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "clientConnection": {"kubeconfig": str(cp.kubeconfig), "qps": CLIENT_QPS, "burst": CLIENT_QPS},
            "profiles": [profile]}


def default_profile(name: str) -> dict:
    return {"schedulerName": name}


def binpack_profile(name: str) -> dict:
    """The upstream bin-packing example (docs: "Resource Bin Packing"): MostAllocated on cpu and memory."""
    return {"schedulerName": name, "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}}}]}


def coscheduling_profile(name: str) -> dict:
    """scheduler-plugins' manifests/coscheduling/scheduler-config.yaml, under our scheduler name."""
    return {"schedulerName": name,
            "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]}},
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}}]}


def capacity_profile(name: str) -> dict:
    """scheduler-plugins' manifests/capacityscheduling/scheduler-config.yaml, under our scheduler name: the plugin
    at every extension point it has (PreFilter, Reserve, its EnqueueExtensions) and as the only PostFilter
    (DefaultPreemption off: its preemption reclaims borrowed quota)."""
    return {"schedulerName": name,
            "plugins": {"multiPoint": {"enabled": [{"name": "CapacityScheduling"}]},
                        "postFilter": {"enabled": [{"name": "CapacityScheduling"}], "disabled": [{"name": "*"}]}}}


# KEP-4671's gates per release. 1.36: alpha, gang scheduling its own gate. 1.37: GenericWorkload is beta but off by
# default and absorbed GangScheduling (gone: kube-scheduler refuses an unknown gate); topology-aware placement alpha.
WORKLOAD_GATES: dict[tuple[int, int], tuple[str, ...]] = {
    (1, 36): ("GenericWorkload", "GangScheduling", "TopologyAwareWorkloadScheduling"),
    (1, 37): ("GenericWorkload", "TopologyAwareWorkloadScheduling"),
}


def workload_gates(version: str) -> tuple[str, ...]:
    """The gates that make kube-scheduler `version` schedule native gangs."""
    gates = WORKLOAD_GATES.get(major_minor(version))
    if gates is None:
        raise ValueError(f"no workload feature gates known for kube-scheduler {version}")
    return gates


def launch_kube(binary: Callable[[Settings], Path], profile: Callable[[str], dict], preemption: bool = False,
                gates: str = "none") -> Callable[..., Running]:
    """`gates`: the workload gates "always", only on workloads with native gangs ("native"), or "none";
    `preemption`: DefaultPreemption always, else only on workloads about preemption."""
    def launch(kind: SchedulerKind, cp: ControlPlane, settings: Settings, workdir: Path,
               with_policy: bool, native: bool = False, preemption_here: bool = False) -> Running:
        config = workdir / f"{kind.name}-config.yaml"
        config.write_text(yaml.safe_dump(kube_config(cp, profile(kind.name), preemption or preemption_here),
                                         sort_keys=False))
        port = free_port()
        on = workload_gates(settings.kube_version) if gates == "always" or (gates == "native" and native) else ()
        argv = [str(binary(settings)), "--config", str(config), "--secure-port", str(port),
                "--bind-address", "127.0.0.1", "--v", "1",
                *(["--feature-gates", ",".join(f"{g}=true" for g in on)] if on else [])]
        running = Running(kind.name, Process(kind.name, argv, workdir / f"{kind.name}.log"), time.monotonic())
        running.process.start()
        context = unverified_context()
        running.ready_at = wait_ready(running, lambda: http_get(f"https://127.0.0.1:{port}/readyz",
                                                                 context=context)[0] == 200)
        return running
    return launch


def wait_ready(running: Running, ready: Callable[[], bool]) -> float:
    """Poll readiness every 10 ms (the time to first bind is measured from it); the monotonic time it answered.
    Fails with the log tail if the process exits first."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if not running.process.running():
            raise RuntimeError(f"{running.name} exited before ready:\n{running.process.log_tail()}")
        try:
            if ready():
                return time.monotonic()
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"{running.name} not ready after {READY_TIMEOUT_S:.0f} s:\n{running.process.log_tail()}")


SCHEDULERS: dict[str, SchedulerKind] = {k.name: k for k in (
    SchedulerKind("policy-scheduler", "this repository: `policy-scheduler run` (CP-SAT batches)", True, launch_ours),
    SchedulerKind("policy-scheduler-json", "policy-scheduler speaking JSON to the apiserver "
                  "(`--kube-api-content-type application/json`; the default is protobuf)", True,
                  functools.partial(launch_ours, extra=("--kube-api-content-type", "application/json")),
                  frozenset()),  # no workload of its own: it runs only when asked for by name (-s)
    SchedulerKind("kube-scheduler", "kube-scheduler of the control plane's release, default plugins (on workloads "
                  "with native gangs: its workload gates on, 1.37's GenericWorkload included)", False,
                  launch_kube(lambda s: s.kube_bin, default_profile, gates="native")),
    SchedulerKind("kube-binpack", "kube-scheduler of the control plane's release, NodeResourcesFit MostAllocated", False,
                  launch_kube(lambda s: s.kube_bin, binpack_profile)),
    SchedulerKind("coscheduling", "scheduler-plugins v0.34.7 kube-scheduler, Coscheduling", True,
                  launch_kube(lambda s: s.plugins_bin, coscheduling_profile)),
    SchedulerKind("kube-workload", "kube-scheduler of the control plane's release, default plugins with the "
                  "workload gates always on (1.36: GenericWorkload, GangScheduling, TopologyAwareWorkloadScheduling; "
                  "1.37: GenericWorkload, TopologyAwareWorkloadScheduling); DRA is on by default", True,
                  launch_kube(lambda s: s.kube_bin, default_profile, gates="always")),
    SchedulerKind("capacity-scheduling", "scheduler-plugins v0.34.7 kube-scheduler, CapacityScheduling (ElasticQuota "
                  "min / max; its PostFilter reclaims borrowed quota by preemption)", False,
                  launch_kube(lambda s: s.plugins_bin, capacity_profile, preemption=True),
                  frozenset({"tenants", "tenants-reclaim"})),
)}
