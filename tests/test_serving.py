"""The serving side (engine.loop.serving): HTTPS with a certificate made in memory or read from files and reloaded,
delegated authentication and authorization with kube-scheduler's caching, the plain-HTTP escape hatch on
127.0.0.1 only, and a server that a stalled or trickling client cannot hold up. The same through a real
apiserver, as the chart's ServiceAccount: tests/e2e/test_secure_serving.py."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtensionOID
from prometheus_client import CollectorRegistry, Gauge

from engine.loop.ports import ApiError, ApiUnavailable
from engine.loop.serving.access import DelegatedAccess
from engine.loop.serving.certificates import CertificateError, Certificates, self_signed
from engine.loop.serving.endpoints import Endpoints, Listener
from engine.loop.serving.listen import Serving, listen

TOKENS = {"reader-token": "system:serviceaccount:monitoring:prometheus", "other-token": "system:serviceaccount:x:y"}
READERS = {"system:serviceaccount:monitoring:prometheus"}


class Reviews:
    """The apiserver's TokenReview and SubjectAccessReview as recorded answers; `down` makes it unreachable."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict]] = []
        self.down: Exception | None = None

    def review(self, kind: str, spec: dict, timeout: float) -> dict:
        self.asked.append((kind, spec))
        if self.down is not None:
            raise self.down
        if kind == "TokenReview":
            user = TOKENS.get(spec["token"])
            return {"authenticated": True, "user": {"username": user, "groups": ["system:authenticated"]}} \
                if user else {"authenticated": False, "error": "invalid bearer token"}
        assert spec["nonResourceAttributes"]["verb"] == "get"
        return {"allowed": spec["user"] in READERS and spec["nonResourceAttributes"]["path"] == "/metrics"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _endpoints() -> Endpoints:
    registry = CollectorRegistry()
    Gauge("policy_scheduler_leader", "1 while this replica leads", registry=registry).set(1)
    return Endpoints(registry, lambda: True, lambda: True)


def _client_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _get(port: int, path: str, token: str | None = None, tls: bool = True, host: str = "127.0.0.1",
         timeout: float = 5) -> tuple[int, bytes]:
    connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=_client_context()) if tls \
        else http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _peer_certificate(port: int) -> x509.Certificate:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            _client_context().wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


@pytest.fixture
def secure():
    """A secure listener with a generated certificate and recorded reviews: (port, reviews)."""
    reviews = Reviews()
    listener = Listener(_endpoints(), 0, "127.0.0.1", Certificates(hosts=("localhost", "127.0.0.1")),
                        DelegatedAccess(reviews))
    port = listener.start()
    yield port, reviews
    listener.stop()


def test_metrics_need_a_token_a_reviewer_accepts_and_a_right_the_health_paths_do_not(secure) -> None:
    port, reviews = secure
    assert _get(port, "/metrics")[0] == 401
    assert _get(port, "/metrics", "forged-token")[0] == 401
    assert _get(port, "/metrics", "other-token") == (403, b'Forbidden: user "system:serviceaccount:x:y" cannot get '
                                                          b'path "/metrics"\n')
    status, body = _get(port, "/metrics", "reader-token")
    assert status == 200 and b"policy_scheduler_leader 1.0" in body
    assert _get(port, "/leaderz", "reader-token")[0] == 403  # the reader's right is /metrics alone
    asked = len(reviews.asked)
    for path in ("/healthz", "/readyz", "/livez"):
        assert _get(port, path)[0] == 200
    assert len(reviews.asked) == asked  # open paths ask nobody
    assert ("SubjectAccessReview", {"user": "system:serviceaccount:monitoring:prometheus",
                                    "groups": ["system:authenticated"],
                                    "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}) in reviews.asked


def test_a_plain_http_client_gets_no_answer_from_the_secure_port(secure) -> None:
    port, _ = secure
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        _get(port, "/healthz", tls=False)


def test_the_generated_certificate_names_the_hosts_and_is_self_signed(secure) -> None:
    port, _ = secure
    cert = _peer_certificate(port)
    names = cert.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert cert.issuer == cert.subject
    assert 364 <= (cert.not_valid_after_utc - cert.not_valid_before_utc).days <= 366


def test_answers_are_cached_for_their_ttl_allowed_and_denied_apart_errors_never() -> None:
    reviews, clock = Reviews(), Clock()
    access = DelegatedAccess(reviews, token_ttl=10, allowed_ttl=10, denied_ttl=2, clock=clock)
    assert access.check("Bearer reader-token", "/metrics").allowed
    assert access.check("Bearer other-token", "/metrics").status == 403
    assert len(reviews.asked) == 4  # a TokenReview and a SubjectAccessReview each
    clock.now += 5  # the denial expired (2 s), the permission and the tokens did not (10 s)
    assert access.check("Bearer reader-token", "/metrics").allowed
    assert access.check("Bearer other-token", "/metrics").status == 403
    assert [kind for kind, _ in reviews.asked[4:]] == ["SubjectAccessReview"]
    clock.now += 6
    assert access.check("Bearer reader-token", "/metrics").allowed
    assert [kind for kind, _ in reviews.asked[5:]] == ["TokenReview", "SubjectAccessReview"]
    reviews.down = ApiUnavailable("connection refused")
    clock.now += 11
    decision = access.check("Bearer reader-token", "/metrics")
    assert decision.status == 503 and "connection refused" in decision.message
    reviews.down = None
    assert access.check("Bearer reader-token", "/metrics").allowed  # the failure was not remembered


def test_a_review_the_scheduler_may_not_ask_says_which_role_it_lacks() -> None:
    reviews = Reviews()
    reviews.down = ApiError(403, 'tokenreviews.authentication.k8s.io is forbidden')
    decision = DelegatedAccess(reviews).check("Bearer reader-token", "/metrics")
    assert decision.status == 503 and "system:auth-delegator" in decision.message


def test_an_unauthenticated_token_is_remembered_as_such() -> None:
    reviews = Reviews()
    access = DelegatedAccess(reviews, clock=Clock())
    assert access.check("Bearer forged-token", "/metrics").status == 401
    assert access.check("Bearer forged-token", "/metrics").status == 401
    assert access.check("Basic dXNlcjpwYXNz", "/metrics").status == 401
    assert len(reviews.asked) == 1


def _write_pair(directory: Path, cert: bytes, key: bytes) -> None:
    (directory / "tls.crt").write_bytes(cert)
    (directory / "tls.key").write_bytes(key)


def test_certificate_files_are_served_and_a_rotation_is_picked_up_without_a_restart(tmp_path, caplog) -> None:
    first, second, third = (self_signed(("localhost", "127.0.0.1")) for _ in range(3))
    _write_pair(tmp_path, *first)
    certificates = Certificates(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    listener = Listener(_endpoints(), 0, "127.0.0.1", certificates, DelegatedAccess(Reviews()))
    port = listener.start()
    try:
        serial = [x509.load_pem_x509_certificate(pem).serial_number for pem, _ in (first, second, third)]
        assert _peer_certificate(port).serial_number == serial[0]
        _write_pair(tmp_path, *second)
        assert _peer_certificate(port).serial_number == serial[1]
        _write_pair(tmp_path, third[0], second[1])  # mid-rotation: the new certificate, the old key
        assert _peer_certificate(port).serial_number == serial[1]  # the last good pair serves on
        assert "does not load, keeping the previous one" in caplog.text
        (tmp_path / "tls.key").write_bytes(third[1])
        assert _peer_certificate(port).serial_number == serial[2]
    finally:
        listener.stop()


def test_certificate_files_that_do_not_serve_are_refused_at_start(tmp_path) -> None:
    cert, _ = self_signed(("localhost",))
    _, other_key = self_signed(("localhost",))
    _write_pair(tmp_path, cert, other_key)
    with pytest.raises(CertificateError, match="cannot serve with"):
        Certificates(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    with pytest.raises(CertificateError, match="go together"):
        Certificates(str(tmp_path / "tls.crt"), None)


def test_the_escape_hatch_is_plain_http_without_access_checks_on_loopback_only() -> None:
    listeners = listen(Serving(secure_port=0, insecure_port=_free_port()), _endpoints(), Reviews())
    try:
        assert len(listeners) == 1
        server = listeners[0].server
        assert server is not None and server.server_address[0] == "127.0.0.1"
        status, body = _get(listeners[0].port, "/metrics", tls=False)
        assert status == 200 and b"policy_scheduler_leader" in body
    finally:
        for listener in listeners:
            listener.stop()


def test_by_default_only_the_secure_port_is_served() -> None:
    listeners = listen(Serving(secure_port=_free_port(), bind_address="127.0.0.1"), _endpoints(), Reviews())
    try:
        assert [listener.certificates is not None and listener.access is not None for listener in listeners] == [True]
        assert _get(listeners[0].port, "/metrics")[0] == 401
    finally:
        for listener in listeners:
            listener.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _client_hello() -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = _client_context().wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


@pytest.mark.parametrize("tls", [True, False], ids=["https", "http"])
@pytest.mark.parametrize("stall", ["send nothing", "trickle"])
def test_a_stalled_client_does_not_delay_readyz_for_anyone_else(tls, stall) -> None:
    """A connection that sends nothing, or a handshake (HTTPS) or request (HTTP) a byte at a time, is handled in a
    thread of its own: /readyz answers everyone else meanwhile."""
    listener = Listener(_endpoints(), 0, "127.0.0.1", Certificates(hosts=("localhost",)) if tls else None,
                        DelegatedAccess(Reviews()) if tls else None)
    port = listener.start()
    stalled = socket.create_connection(("127.0.0.1", port), timeout=5)
    stop = threading.Event()

    def trickle() -> None:
        data = _client_hello() if tls else b"GET /readyz HTTP/1.1\r\nHost: localhost\r\n"
        for byte in data[:-1]:  # never the last: the server keeps waiting
            if stop.wait(0.1):
                return
            stalled.send(bytes([byte]))

    if stall == "trickle":
        threading.Thread(target=trickle, daemon=True).start()
    try:
        assert listener.server is not None
        _wait(lambda: listener.server.open_connections == 1)
        for _ in range(3):
            assert _get(port, "/readyz", tls=tls, timeout=3) == (200, b"ok: leader\n")
        assert listener.server.open_connections >= 1  # the stalled one is still held, in its own thread
    finally:
        stop.set()
        stalled.close()
        listener.stop()


def test_connections_beyond_the_bound_are_closed_and_a_slot_frees_at_its_deadline() -> None:
    listener = Listener(_endpoints(), 0, "127.0.0.1", max_connections=2, deadline=0.5)
    port = listener.start()
    assert listener.server is not None
    holders = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(2)]
    try:
        _wait(lambda: listener.server.open_connections == 2)
        refused = socket.create_connection(("127.0.0.1", port), timeout=5)
        assert refused.recv(1) == b""  # closed at once: no slot
        refused.close()
        assert listener.server.refused == 1
        _wait(lambda: listener.server.open_connections == 0)  # the holders' deadline passed: reaped
        assert holders[0].recv(1) == b""
        assert _get(port, "/readyz", tls=False) == (200, b"ok: leader\n")
    finally:
        for holder in holders:
            holder.close()
        listener.stop()


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
