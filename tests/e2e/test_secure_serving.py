"""The secure port through a real apiserver (issue 50, point 6): the scheduler runs as the Helm chart's
ServiceAccount with the chart's RBAC (system:auth-delegator included), so its TokenReviews and SubjectAccessReviews
are the apiserver's own answers: 401 with no token, 403 for a ServiceAccount without the chart's metrics-reader
ClusterRole, 200 with it, the health paths open to anyone, a stalled TCP client delaying nobody's /readyz, a
rotated certificate served without a restart, and a clear 503 when the scheduler may not ask."""
from __future__ import annotations

import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from engine.loop.serving.certificates import self_signed
from testkit.controlplane import ControlPlane, free_port, http_get, unverified_context
from testkit.deploytools import chart_rbac
from testkit.scheduling import Kube, Scheduler, Schedulers, apply, wait_for

RELEASE = NAMESPACE = "ps-secure"


def _token(kubeconfig: Path) -> str:
    return yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]


def _https(port: int, path: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    return http_get(f"https://127.0.0.1:{port}{path}", token=token, context=context or unverified_context(), timeout=5)


def _reader(control_plane: ControlPlane, kube: Kube, name: str, may_read: bool) -> str:
    """A ServiceAccount's token in namespace `monitoring`, bound to the chart's metrics-reader ClusterRole or not."""
    token = _token(control_plane.service_account_kubeconfig("monitoring", name))
    if may_read:
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": f"{name}-reads-{RELEASE}"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": f"{RELEASE}-metrics-reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "monitoring"}]}
        assert apply(kube, binding)[0] in (200, 201)
    return token


@pytest.fixture
def secure_scheduler(control_plane: ControlPlane, chart_identity: Callable[..., Path],
                     tmp_path: Path) -> tuple[Schedulers, Path]:
    started = Schedulers(control_plane, tmp_path, kubeconfig=chart_identity(RELEASE, NAMESPACE))
    try:
        yield started, tmp_path
    finally:
        started.stop_all()


def _start(schedulers: Schedulers, *args: str) -> tuple[Scheduler, int]:
    port = free_port()
    scheduler = schedulers.start("--secure-port", str(port), "--bind-address", "127.0.0.1", *args, name="secure")
    return scheduler, port


def test_metrics_are_for_the_readers_the_apiserver_names_and_the_health_paths_for_anyone(
        control_plane: ControlPlane, kube: Kube, secure_scheduler) -> None:
    schedulers, _ = secure_scheduler
    scheduler, port = _start(schedulers)
    reader, nosy = _reader(control_plane, kube, "prometheus", True), _reader(control_plane, kube, "nosy", False)
    assert _https(port, "/metrics")[0] == 401
    assert _https(port, "/metrics", "not-a-token")[0] == 401
    status, body = _https(port, "/metrics", nosy)
    assert status == 403 and b'"system:serviceaccount:monitoring:nosy" cannot get path "/metrics"' in body
    status, body = _https(port, "/metrics", reader)
    assert status == 200 and b"policy_scheduler_leader" in body
    for path in ("/healthz", "/livez", "/readyz"):
        assert _https(port, path)[0] == 200, path
    # the plain-HTTP port the tests read is on 127.0.0.1 only and off unless asked for (testkit asks)
    assert scheduler.get("/metrics")[0] == 200

    # a TCP client that connects and sends nothing holds one connection; /readyz answers everyone else
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        for _ in range(3):
            assert _https(port, "/readyz") == (200, b"ok: leader\n")

    # without system:auth-delegator the scheduler may not ask: a clear 503, not a hang and not a 401
    delegator = next(d for d in chart_rbac(RELEASE, NAMESPACE) if d["kind"] == "ClusterRoleBinding"
                     and d["roleRef"]["name"] == "system:auth-delegator")
    kube.ok("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{delegator['metadata']['name']}")
    try:
        fresh = _reader(control_plane, kube, "late", True)  # a token the scheduler has not cached
        status, body = wait_for("the review refused", lambda: (answer := _https(port, "/metrics", fresh))[0] == 503
                                and answer)
        assert b"system:auth-delegator" in body, body
    finally:
        assert apply(kube, delegator)[0] in (200, 201)


def _serial(port: int, ca: Path) -> int:
    context = ssl.create_default_context(cafile=str(ca))  # verified: the served certificate is the file's
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_a_rotated_certificate_is_served_without_a_restart(secure_scheduler) -> None:
    schedulers, workdir = secure_scheduler
    tls = workdir / "tls"
    tls.mkdir()
    first, second = self_signed(("localhost", "127.0.0.1")), self_signed(("localhost", "127.0.0.1"))
    (tls / "tls.crt").write_bytes(first[0])
    (tls / "tls.key").write_bytes(first[1])
    scheduler, port = _start(schedulers, "--tls-cert-file", str(tls / "tls.crt"),
                             "--tls-private-key-file", str(tls / "tls.key"))
    (workdir / "first.crt").write_bytes(first[0])
    (workdir / "second.crt").write_bytes(second[0])
    assert _serial(port, workdir / "first.crt") == x509.load_pem_x509_certificate(first[0]).serial_number
    pid = scheduler.process.popen.pid
    (tls / "tls.key").write_bytes(second[1])  # as a Secret volume's update lands: both files replaced
    (tls / "tls.crt").write_bytes(second[0])
    assert wait_for("the new certificate served", lambda: _try_serial(port, workdir / "second.crt")) \
        == x509.load_pem_x509_certificate(second[0]).serial_number
    assert scheduler.process.running() and scheduler.process.popen.pid == pid
    assert "serving certificate reloaded" in scheduler.log()


def _try_serial(port: int, ca: Path) -> int | None:
    try:
        return _serial(port, ca)
    except ssl.SSLError:  # still the first certificate: not signed by the second
        return None
