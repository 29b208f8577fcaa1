"""The loop's one-shot requests (engine.loop.transport) against a real kube-apiserver: kept-alive connections are
reused, opened ahead by `warm`, replaced when the server closed them, and each request carries the token as it is
then."""

from __future__ import annotations

import select
import socket

import pytest

from engine.loop import transport
from engine.loop.api import KubeAPI, load_client
from engine.loop.ports import ApiError, WatchTarget
from testkit.controlplane import ControlPlane

pytestmark = pytest.mark.e2e


@pytest.fixture
def connects(monkeypatch) -> list[int]:
    """Every TLS connection the transport opens, counted."""
    opened: list[int] = []
    connect = transport._Connection.connect

    def counted(self) -> None:
        connect(self)
        opened.append(1)
    monkeypatch.setattr(transport._Connection, "connect", counted)
    return opened


def _nodes(api: KubeAPI) -> None:
    _, version = api.list(WatchTarget("Node"))
    assert version


def test_requests_after_warm_open_no_connection_of_their_own(control_plane: ControlPlane, connects) -> None:
    api = KubeAPI(load_client(str(control_plane.kubeconfig)))
    assert api.warm(3) == 3 and len(connects) == 3
    for _ in range(6):
        _nodes(api)
    assert len(connects) == 3  # one request at a time: the last connection used is used again


def test_a_connection_the_server_closed_is_replaced_not_failed(control_plane: ControlPlane, connects) -> None:
    api = KubeAPI(load_client(str(control_plane.kubeconfig)))
    _nodes(api)
    assert len(connects) == 1
    (conn,) = api._transport._idle  # type: ignore[union-attr]
    conn.sock.shutdown(socket.SHUT_WR)  # the server sees the end and closes its side, as after its idle timeout…
    assert select.select([conn.sock], [], [], 5.0)[0]  # …while the connection sits in the pool
    _nodes(api)
    assert len(connects) == 2


def test_each_request_carries_the_token_as_it_is_then(control_plane: ControlPlane) -> None:
    client = load_client(str(control_plane.kubeconfig))
    api = KubeAPI(client)
    _nodes(api)
    client.configuration.refresh_api_key_hook = None  # the loader's hook sets the kubeconfig's token again each time
    keys = client.configuration.api_key
    (name, good), = keys.items()  # the kubeconfig's token, under the name the client's loader gave it
    keys[name] = "Bearer not-the-token"  # as a refresh hook would replace it
    with pytest.raises(ApiError) as refused:
        _nodes(api)
    assert refused.value.status == 401
    keys[name] = good
    _nodes(api)


def test_the_release_is_read_from_the_apiserver(control_plane: ControlPlane) -> None:
    """What status writes that differ by release (a refused PodGroup's reason) are decided by."""
    from testkit.controlplane import kube_version, major_minor

    api = KubeAPI(load_client(str(control_plane.kubeconfig)))
    assert api.server_version() == major_minor(kube_version())
