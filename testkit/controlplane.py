"""A real Kubernetes control plane on loopback: etcd + kube-apiserver, built from Go modules.

No kubelet or scheduler runs, and a controller-manager only where a test starts one (`controllers`, e.g. the
PV binder for the volume tests): tests create Nodes themselves (see
`ControlPlane.create_ready_node`) and whatever a controller would have made (a namespace's
`default` ServiceAccount: `ControlPlane.ensure_namespace`). Used by the `control_plane`
fixture in tests/e2e/conftest.py and by bench/ (`with start_control_plane(dir) as cp:`).
The Go builds stay beside the e2e tests: tests/e2e/controlplane/ (etcd, kube-apiserver,
kube-scheduler) and tests/e2e/coscheduling/ (scheduler-plugins' kube-scheduler).
"""
from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import kubernetes
import yaml

from .manifests import ready_node

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "tests" / "e2e" / "controlplane" / "build.sh"
COSCHEDULING_BUILD_SCRIPT = REPO / "tests" / "e2e" / "coscheduling" / "build.sh"

ADMIN_USER = "e2e-admin"
SERVICE_CLUSTER_IP_RANGE = "10.96.0.0/16"
STARTUP_TIMEOUT_S = 120.0  # a cold start on a busy 2-core machine; normally 1-3 s
STOP_TIMEOUT_S = 15.0
LOG_TAIL_LINES = 60

# Proxy variables that would route loopback traffic (ours, or the apiserver's to etcd) away.
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
LOOPBACK_NO_PROXY = "127.0.0.1,localhost"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started or reached: tests must fail, not skip."""


# --- versions -----------------------------------------------------------------------------

KUBE_VERSION_ENV = "POLICY_SCHEDULER_KUBE_VERSION"
DEFAULT_KUBE_VERSION = "v1.36.3"


@dataclass(frozen=True)
class VersionFlags:
    """What differs between supported releases in how the test apiserver starts: the feature gates and API
    versions that serve KEP-4671's Workload and PodGroup (the native-gang tests and benchmarks read them).
    DRA (resource.k8s.io/v1) is GA and on in both, with the defaults the DRA tests need."""

    feature_gates: tuple[str, ...]
    runtime_config: tuple[str, ...]


# Keyed by (major, minor); tests/e2e/controlplane/<version>/ holds the module of each patch release built.
VERSION_FLAGS: dict[tuple[int, int], VersionFlags] = {
    # 1.36: Workload/PodGroup alpha in scheduling.k8s.io/v1alpha2, gang scheduling its own gate
    (1, 36): VersionFlags(("GenericWorkload", "GangScheduling", "WorkloadAwarePreemption",
                           "TopologyAwareWorkloadScheduling"), ("scheduling.k8s.io/v1alpha2=true",)),
    # 1.37: v1beta1, GenericWorkload beta but off by default and absorbing GangScheduling and
    # WorkloadAwarePreemption (both gone: an apiserver refuses unknown gates); a group's preemptionPolicy is alpha;
    # CompositePodGroups alpha, served at v1alpha3 only (PodGroups stay at v1beta1, the newest the loop finds)
    (1, 37): VersionFlags(("GenericWorkload", "TopologyAwareWorkloadScheduling", "PodGroupPreemptionPolicy",
                           "CompositePodGroup"), ("scheduling.k8s.io/v1beta1=true", "scheduling.k8s.io/v1alpha3=true")),
}


def supported_versions() -> tuple[str, ...]:
    """The releases with a module under tests/e2e/controlplane/ (e.g. v1.36.3, v1.37.2), oldest first."""
    return tuple(sorted((d.name for d in BUILD_SCRIPT.parent.glob("v*") if (d / "go.mod").is_file()),
                        key=major_minor))


def major_minor(version: str) -> tuple[int, int]:
    """(1, 37) for "v1.37.2" (also a /version gitVersion); a clear error for anything else."""
    parts = version.removeprefix("v").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ControlPlaneError(f"not a Kubernetes version: {version!r} (expected e.g. v1.37.2)")
    return int(parts[0]), int(parts[1])


def kube_version() -> str:
    """The release the e2e suite and benchmarks run against: $POLICY_SCHEDULER_KUBE_VERSION, default v1.36.3."""
    version = os.environ.get(KUBE_VERSION_ENV) or DEFAULT_KUBE_VERSION
    supported = supported_versions()
    if version not in supported or major_minor(version) not in VERSION_FLAGS:
        raise ControlPlaneError(f"{KUBE_VERSION_ENV}={version!r} is not a supported Kubernetes version "
                                f"(supported: {', '.join(supported)})")
    return version


def version_flags(version: str) -> VersionFlags:
    """The apiserver flags that differ for `version`'s minor release."""
    flags = VERSION_FLAGS.get(major_minor(version))
    if flags is None:
        raise ControlPlaneError(f"no apiserver flags for Kubernetes {version}")
    return flags


# --- building -----------------------------------------------------------------------------

def build_binaries(version: str | None = None) -> Path:
    """Run build.sh for `version` (default: `kube_version()`; a no-op when the cache is warm) and return the
    directory of the binaries (etcd, kube-apiserver, kube-scheduler, kube-controller-manager)."""
    version = version or kube_version()
    return run_build(BUILD_SCRIPT, ("etcd", "kube-apiserver", "kube-controller-manager"),
                     env={KUBE_VERSION_ENV: version})


def build_coscheduling() -> Path:
    """Run the scheduler-plugins build (a no-op when cached); the directory with its kube-scheduler and
    scheduler-plugins' PodGroup CRD (podgroups-crd.yaml)."""
    return run_build(COSCHEDULING_BUILD_SCRIPT, ("kube-scheduler",))


def run_build(script: Path, binaries: tuple[str, ...], env: dict[str, str] | None = None) -> Path:
    """Run `script`, then `script --print-dir`; the directory, checked to hold `binaries`.

    Build output streams to this process's stderr, so a first build's minutes are visible
    with `pytest -s` and a failure's compiler errors end up in the test report.
    """
    env = {**os.environ, **(env or {})}
    result = subprocess.run(["bash", str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, check=False, env=env)
    sys.stderr.write(result.stdout)
    if result.returncode != 0:
        raise ControlPlaneError(f"{script} failed (exit {result.returncode}):\n{result.stdout[-8000:]}")
    out = subprocess.run(["bash", str(script), "--print-dir"], capture_output=True,
                         text=True, check=True, env=env)
    bin_dir = Path(out.stdout.strip())
    for name in binaries:
        if not os.access(bin_dir / name, os.X_OK):
            raise ControlPlaneError(f"{script} succeeded but {bin_dir / name} is missing")
    return bin_dir


# --- processes ----------------------------------------------------------------------------

def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's pick), so parallel runs don't clash."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback_env() -> dict[str, str]:
    """This process's environment minus proxies: etcd's and the apiserver's gRPC honour them."""
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    env["NO_PROXY"] = env["no_proxy"] = LOOPBACK_NO_PROXY
    return env


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILLed if pytest dies without running its teardown."""
    with contextlib.suppress(OSError, AttributeError):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Process:
    """A child in its own process group, logging to a file; stop() ends the whole group."""

    name: str
    argv: list[str]
    log_path: Path
    popen: subprocess.Popen | None = None
    env: dict[str, str] = field(default_factory=dict)  # set beside loopback_env()'s (GODEBUG for a benchmark)
    started_at: float | None = None  # time.monotonic() just before the last start's exec
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        """Start (again): the log is appended to, so a restart keeps the earlier run's lines."""
        self._log = open(self.log_path, "ab")  # noqa: SIM115 — kept open for the process's life, closed by stop()
        self._log.write(f"--- {datetime.now(UTC).isoformat()} starting: {' '.join(self.argv)}\n".encode())
        self._log.flush()
        self.started_at = time.monotonic()
        self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=subprocess.STDOUT, env=loopback_env() | self.env,
                                      start_new_session=True, preexec_fn=_die_with_parent)

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL it if still there after STOP_TIMEOUT_S. Idempotent.

        The group is signalled only while its leader is unreaped, so its id cannot have
        been reused by someone else's process.
        """
        if self.popen is not None and self.popen.poll() is None:
            signal_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                signal_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the log, for error messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def signal_group(pgid: int, sig: signal.Signals) -> None:
    """Signal a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def wait_until(ready: Callable[[], bool], proc: Process, what: str, timeout: float = STARTUP_TIMEOUT_S) -> float:
    """Poll `ready()` until true; fail at once with the log tail if `proc` exits. Returns seconds."""
    start = time.monotonic()
    last_error = ""
    while time.monotonic() - start < timeout:
        if not proc.running():
            code = proc.popen.returncode if proc.popen else None
            raise ControlPlaneError(f"{proc.name} exited (code {code}) before {what}; "
                                    f"log {proc.log_path}:\n{proc.log_tail()}")
        try:
            if ready():
                return time.monotonic() - start
        except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
            last_error = repr(exc)
        time.sleep(0.1)
    raise ControlPlaneError(f"{proc.name}: no {what} after {timeout:.0f} s (last error: {last_error}); "
                            f"log {proc.log_path}:\n{proc.log_tail()}")


# --- HTTP without proxies -----------------------------------------------------------------

def http_get(url: str, token: str | None = None, context: ssl.SSLContext | None = None,
             timeout: float = 5.0) -> tuple[int, bytes]:
    """GET without any proxy from the environment; returns (status, body), errors included."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def unverified_context() -> ssl.SSLContext:
    """For readiness polls only: the apiserver writes its self-signed cert while starting."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def verifying_context(ca_file: Path) -> ssl.SSLContext:
    """Trust exactly the apiserver's own CA, ignoring SSL_CERT_FILE and friends."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(ca_file))
    return context


# --- the control plane --------------------------------------------------------------------

@dataclass
class ControlPlane:
    """A running etcd + kube-apiserver. Attributes are what tests need to reach it."""

    workdir: Path
    bin_dir: Path
    server: str               # https://127.0.0.1:<port>
    token: str                # static admin token, user e2e-admin in group system:masters
    kubeconfig: Path          # admin kubeconfig (token + the apiserver's self-signed CA)
    ca_file: Path             # the apiserver's self-signed serving cert bundle (its own CA)
    etcd_url: str
    etcd: Process
    apiserver: Process
    kube_version: str = DEFAULT_KUBE_VERSION  # the release built and started, e.g. v1.37.2
    startup_seconds: float = 0.0  # etcd start to apiserver /readyz, for the record

    @property
    def minor_version(self) -> tuple[int, int]:
        """(major, minor) of the running release, e.g. (1, 37): what version-dependent tests compare."""
        return major_minor(self.kube_version)

    # --- clients

    def api_client(self) -> kubernetes.client.ApiClient:
        """A kubernetes.client.ApiClient for the admin, loaded from the kubeconfig file."""
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes]:
        """GET `path` on the apiserver (verifying its CA) with `token` (None: anonymous)."""
        return http_get(self.server + path, token=token, context=verifying_context(self.ca_file))

    def version(self) -> dict:
        """The apiserver's /version document."""
        status, body = self.get("/version", self.token)
        if status != 200:
            raise ControlPlaneError(f"/version answered {status}: {body[:500]!r}")
        return json.loads(body)

    # --- objects no controller will make for us

    def ensure_namespace(self, name: str) -> None:
        """Create namespace `name` and its `default` ServiceAccount (the ServiceAccount
        admission plugin rejects pods without it, and no controller-manager makes it)."""
        with self.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            _create_if_absent(lambda: core.create_namespace({"metadata": {"name": name}}))
            _create_if_absent(lambda: core.create_namespaced_service_account(
                name, {"metadata": {"name": "default"}}))

    def create_ready_node(self, name: str, cpu: str = "4", memory: str = "8Gi", pods: str = "110",
                          labels: dict[str, str] | None = None, taints: list[dict] | None = None,
                          extra_resources: dict[str, str] | None = None) -> dict:
        """Create a Node whose status says Ready with `cpu`/`memory`/`pods` capacity = allocatable.

        Status is written through the status subresource (a create ignores it). No kubelet
        heartbeats and no node-lifecycle controller runs, so it stays Ready. Returns the Node.
        """
        resources = {"cpu": cpu, "memory": memory, "pods": pods, **(extra_resources or {})}
        body, status = ready_node(name, resources, labels, taints, message="e2e: a Node without a kubelet")
        with self.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            core.create_node(body)
            node = core.patch_node_status(name, status)
            return api.sanitize_for_serialization(node)

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path | None = None,
                                   expiration_seconds: int = 3600) -> Path:
        """Create ServiceAccount `name` in `namespace` (namespace included) and write a
        kubeconfig with a TokenRequest token for it: for testing RBAC as a non-admin."""
        self.ensure_namespace(namespace)
        with self.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            _create_if_absent(lambda: core.create_namespaced_service_account(
                namespace, {"metadata": {"name": name}}))
            token = core.create_namespaced_service_account_token(
                name, namespace, {"spec": {"expirationSeconds": expiration_seconds}}).status.token
        path = path or self.workdir / f"kubeconfig-{namespace}-{name}"
        write_kubeconfig(path, self.server, self.ca_file, f"system:serviceaccount:{namespace}:{name}", token)
        return path

    # --- lifecycle

    def restart_apiserver(self) -> float:
        """Stop kube-apiserver and start it again on the same port with the same etcd
        (and cert dir, so the kubeconfig stays valid). Returns seconds until /readyz."""
        self.apiserver.stop()
        self.apiserver.start()
        return self._wait_apiserver_ready()

    def stop(self) -> None:
        """Stop the apiserver, then etcd. Safe to call more than once."""
        self.apiserver.stop()
        self.etcd.stop()

    def _wait_apiserver_ready(self) -> float:
        context = unverified_context()
        return wait_until(lambda: http_get(self.server + "/readyz", self.token, context)[0] == 200,
                          self.apiserver, "/readyz = 200")


def _create_if_absent(create: Callable[[], object]) -> None:
    """Call `create()`; an AlreadyExists (409) is fine, anything else is raised."""
    try:
        create()
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise


# --- setup pieces -------------------------------------------------------------------------

def make_service_account_key(path: Path) -> None:
    """An RSA key that signs (and, its public half, verifies) service account tokens."""
    subprocess.run(["openssl", "genrsa", "-out", str(path), "2048"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def write_token_file(path: Path, token: str) -> None:
    """--token-auth-file: one static token for an admin (group system:masters bypasses RBAC)."""
    path.write_text(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    path.chmod(0o600)


def write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, token: str) -> None:
    """A one-context kubeconfig; no proxy-url, and NO_PROXY (see conftest) keeps it off proxies."""
    config = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


def etcd_process(bin_dir: Path, workdir: Path) -> tuple[Process, str]:
    """etcd on two free loopback ports, data in `workdir`; fsync off: test data is throwaway."""
    client_url = f"http://127.0.0.1:{free_port()}"
    peer_url = f"http://127.0.0.1:{free_port()}"
    argv = [str(bin_dir / "etcd"), "--name", "e2e", "--data-dir", str(workdir / "etcd-data"),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"e2e={peer_url}", "--initial-cluster-state", "new",
            "--unsafe-no-fsync", "--log-level", "warn"]
    return Process("etcd", argv, workdir / "etcd.log"), client_url


def apiserver_process(bin_dir: Path, workdir: Path, etcd_url: str, port: int,
                      token_file: Path, sa_key: Path, flags: VersionFlags, profiling: bool = False) -> Process:
    """kube-apiserver on loopback with RBAC, a static admin token and a self-signed cert.

    TaintNodesByCondition is off: it taints every new Node not-ready, and no kubelet would
    ever clear it. The endpoint reconciler is off: a loopback address may not be published
    as the `kubernetes` Service's endpoint (a 1.37 apiserver fails to start with it on loopback).
    `flags`: the version's gates and API versions (VERSION_FLAGS); `profiling`: /debug/pprof served (a benchmark's
    CPU profile of the apiserver).
    """
    argv = [str(bin_dir / "kube-apiserver"),
            "--etcd-servers", etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(port), "--cert-dir", str(workdir / "apiserver-certs"),
            "--token-auth-file", str(token_file),
            "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(sa_key),
            "--service-account-signing-key-file", str(sa_key),
            "--service-cluster-ip-range", SERVICE_CLUSTER_IP_RANGE,
            "--disable-admission-plugins", "TaintNodesByCondition",
            "--endpoint-reconciler-type", "none",
            "--feature-gates", ",".join(f"{g}=true" for g in flags.feature_gates),
            "--runtime-config", ",".join(flags.runtime_config),
            f"--profiling={str(profiling).lower()}", "--v=1"]
    return Process("kube-apiserver", argv, workdir / "kube-apiserver.log")


@contextlib.contextmanager
def controllers(cp: ControlPlane, names: tuple[str, ...], workdir: Path) -> Iterator[Process]:
    """kube-controller-manager (the same module and version as the apiserver) running only `names`, e.g. the
    PV binder for volume tests; stopped on exit. No serving port, no leader election: one per test."""
    binary = cp.bin_dir / "kube-controller-manager"
    if not os.access(binary, os.X_OK):
        raise ControlPlaneError(f"{binary} is missing: run {BUILD_SCRIPT}")
    workdir.mkdir(parents=True, exist_ok=True)
    argv = [str(binary), f"--kubeconfig={cp.kubeconfig}", f"--controllers={','.join(names)}", "--leader-elect=false",
            "--secure-port=0", "--use-service-account-credentials=false", "--v=2"]
    proc = Process("kube-controller-manager", argv, workdir / "kube-controller-manager.log")
    proc.start()
    try:
        time.sleep(1.0)
        if not proc.running():
            raise ControlPlaneError(f"kube-controller-manager exited at start:\n{proc.log_tail()}")
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def start_control_plane(workdir: Path, bin_dir: Path | None = None, version: str | None = None,
                        apiserver_env: dict[str, str] | None = None, profiling: bool = False) -> Iterator[ControlPlane]:
    """Build `version` (default: `kube_version()`) if needed, start etcd then kube-apiserver in `workdir`, yield,
    and always stop both. A given `bin_dir` must hold that version's binaries; `apiserver_env` is set in the
    apiserver's environment (a benchmark's GODEBUG=gctrace=1)."""
    version = version or kube_version()
    bin_dir = bin_dir or build_binaries(version)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    etcd, etcd_url = etcd_process(bin_dir, workdir)
    token = secrets.token_hex(24)
    token_file, sa_key = workdir / "tokens.csv", workdir / "service-account.key"
    write_token_file(token_file, token)
    make_service_account_key(sa_key)
    port = free_port()
    apiserver = apiserver_process(bin_dir, workdir, etcd_url, port, token_file, sa_key, version_flags(version),
                                  profiling)
    apiserver.env = dict(apiserver_env or {})
    ca_file = workdir / "apiserver-certs" / "apiserver.crt"
    cp = ControlPlane(workdir=workdir, bin_dir=bin_dir, server=f"https://127.0.0.1:{port}", token=token,
                      kubeconfig=workdir / "kubeconfig", ca_file=ca_file, etcd_url=etcd_url,
                      etcd=etcd, apiserver=apiserver, kube_version=version)
    try:
        etcd.start()
        wait_until(lambda: json.loads(http_get(etcd_url + "/health")[1]).get("health") == "true",
                   etcd, "/health = true")
        apiserver.start()
        cp._wait_apiserver_ready()
        cp.startup_seconds = time.monotonic() - started
        write_kubeconfig(cp.kubeconfig, cp.server, ca_file, ADMIN_USER, token)
        yield cp
    finally:
        cp.stop()
