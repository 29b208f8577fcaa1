"""Which requests take the lean transport (engine.loop.transport), and how it tells a closed connection."""

from __future__ import annotations

import socket
import ssl

import kubernetes
import pytest

from engine.loop import transport
from engine.loop.api import _transport


def _config(**fields) -> kubernetes.client.Configuration:
    config = kubernetes.client.Configuration()
    config.host = "https://10.0.0.1:6443/prefix/"
    for name, value in fields.items():
        setattr(config, name, value)
    return config


def test_a_plain_https_kubeconfig_takes_the_lean_transport() -> None:
    config = _config(api_key={"authorization": "Bearer t"}, tls_server_name="kubernetes")
    found, base = _transport(config)
    assert found is not None and base == "/prefix"
    assert (found.host, found.port, found.server_name) == ("10.0.0.1", 6443, "kubernetes")
    assert found.authorization() == "Bearer t"
    config.api_key["authorization"] = "Bearer rotated"  # read per request, as the client's refresh hook leaves it
    assert found.authorization() == "Bearer rotated"
    assert found.context.verify_mode == ssl.CERT_REQUIRED and found.context.check_hostname


def test_verify_ssl_off_is_honoured() -> None:
    found, _ = _transport(_config(verify_ssl=False))
    assert found is not None and found.context.verify_mode == ssl.CERT_NONE and not found.context.check_hostname


@pytest.mark.parametrize("fields", [
    {"host": "http://127.0.0.1:8001"},  # kubectl proxy
    {"proxy": "http://proxy:3128"},
    {"assert_hostname": "other-name"},
    {"socket_options": [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]},
    {"ssl_ca_cert": "/nonexistent/ca.crt"},  # the client says what is wrong at its first request
])
def test_what_only_the_client_does_goes_through_the_client(fields) -> None:
    assert _transport(_config(**fields)) == (None, "")


def test_a_connection_closed_by_its_peer_reads_as_dropped() -> None:
    ours, theirs = socket.socketpair()
    conn = transport._Connection("localhost", 443, ssl.create_default_context(), "localhost", 1.0)
    conn.sock = ours
    try:
        assert not conn.dropped()
        theirs.close()
        assert conn.dropped()
    finally:
        ours.close()


@pytest.mark.parametrize(("method", "tries"), [("GET", 3), ("POST", 1)])
def test_a_request_the_apiserver_asks_to_retry_later_is_retried_only_when_idempotent(monkeypatch, method, tries) -> None:
    """429 with Retry-After ("storage is (re)initializing" while a resource's watch cache starts): a list waits and
    asks again, as the client's urllib3 did; a bind (POST) is not sent twice."""
    found, _ = _transport(_config())
    assert found is not None
    busy = (429, b"storage is (re)initializing", "text/plain", 0.01)
    answers = [busy, busy, (200, b"{}", "application/json", None)]
    sent: list[str] = []

    def once(method_, path, body, content_type, timeout, accept):
        sent.append(method_)
        return answers[len(sent) - 1]
    monkeypatch.setattr(found, "_once", once)
    status, _, _ = found.request(method, "/api/v1/nodes", None, "application/json", 5.0)
    assert len(sent) == tries and status == (200 if method == "GET" else 429)
