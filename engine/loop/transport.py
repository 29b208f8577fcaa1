"""The apiserver's one-shot requests (binds, events, patches, lists) over kept-alive `http.client` connections.

Per request, the Kubernetes client's urllib3 stack (its pool, retries, header dicts and response wrapper) cost
0.92 ms of CPU where this costs 0.47 (an Event create against a local apiserver, medians of 900:
`bench/request_cost.py`, BENCHMARKS.md). A pod's bind and Scheduled event are two such requests, on 2 cores
beside the apiserver. Watches stay on the client (engine.loop.api): they stream.

Only what `engine.loop.api` hands it: where the apiserver is, the TLS context the kubeconfig asks for, and the
Authorization header per request (a rotating service-account token or an exec plugin's refreshes it).
"""

from __future__ import annotations

import http.client
import select
import ssl
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

RETRIES = 4  # tries of an idempotent request the apiserver asks to retry later (urllib3's default: 3 retries)
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})  # urllib3's retry-after methods
RETRY_LATER = frozenset({413, 429, 503})


def _retry_after(response: http.client.HTTPResponse) -> float | None:
    """Seconds the apiserver asks to wait before asking again (None: it did not ask)."""
    if response.status not in RETRY_LATER:
        return None
    try:
        return max(0.0, float(response.getheader("Retry-After") or ""))
    except ValueError:
        return None


class Unreachable(Exception):
    """The request got no answer: no connection, or it broke."""


class _Connection(http.client.HTTPSConnection):
    """A TLS connection whose certificate is checked against `server_name` (the kubeconfig's tls-server-name),
    which may differ from the host it dials."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, server_name: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)  # TCP, with TCP_NODELAY
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._server_name)  # type: ignore[attr-defined]

    def dropped(self) -> bool:
        """The server closed it while it sat in the pool (the apiserver drops connections idle for 90 s): the
        socket reads as ready with nothing asked, and what it reads is its end, not a TLS 1.3 session ticket the
        server sends after the handshake (a warmed connection has one waiting)."""
        sock = self.sock
        if sock is None:
            return True
        if not select.select([sock], [], [], 0)[0]:
            return False
        sock.settimeout(0.0)
        try:
            sock.recv(1)  # the end (b""), or data nobody asked for: either way, not reusable
        except ssl.SSLWantReadError:
            return False  # only TLS records of its own (session tickets): still open
        except OSError:
            pass
        return True


class Transport:
    """Requests to one apiserver through a pool of kept-alive connections, last used first; thread-safe."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, server_name: str,
                 authorization: Callable[[], str | None], keep: int = 32) -> None:
        self.host, self.port, self.context, self.server_name = host, port, context, server_name
        self.authorization = authorization
        self.keep = keep  # idle connections kept; those beyond are closed after their request
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()

    def request(self, method: str, path: str, body: bytes | None, content_type: str,
                timeout: float, accept: str = "application/json") -> tuple[int, bytes, str]:
        """One request: (status, body, the body's content type). An idempotent one the apiserver asks to retry
        later (429 or 503 with Retry-After: "storage is (re)initializing" while a resource's cache starts) is
        retried after that wait, up to RETRIES times, as the client's urllib3 does. Raises Unreachable when it got
        no answer."""
        tries = RETRIES if method in IDEMPOTENT else 1
        while True:
            status, data, media, retry_after = self._once(method, path, body, content_type, timeout, accept)
            tries -= 1
            if retry_after is None or tries == 0:
                return status, data, media
            time.sleep(min(retry_after, timeout))

    def _once(self, method: str, path: str, body: bytes | None, content_type: str,
              timeout: float, accept: str) -> tuple[int, bytes, str, float | None]:
        headers = {"Accept": accept, "Content-Type": content_type}
        if (token := self.authorization()) is not None:
            headers["Authorization"] = token
        conn = self._take(timeout)
        try:
            conn.sock.settimeout(timeout)
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            raise Unreachable(f"{method} {path}: {exc!r}") from None
        if response.will_close:
            conn.close()
        else:
            self._give_back(conn)
        return response.status, data, response.getheader("Content-Type") or "", _retry_after(response)

    def warm(self, connections: int) -> int:
        """Open `connections` at once into the pool, ahead of the first requests (how many opened)."""
        def one(_: int) -> _Connection | None:
            try:
                return self._open(10.0)
            except OSError:
                return None
        with ThreadPoolExecutor(max_workers=max(1, connections), thread_name_prefix="warm") as pool:
            opened = [conn for conn in pool.map(one, range(connections)) if conn is not None]
        for conn in opened:
            self._give_back(conn)
        return len(opened)

    def _take(self, timeout: float) -> _Connection:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                try:
                    return self._open(timeout)
                except OSError as exc:
                    raise Unreachable(f"cannot connect to {self.host}:{self.port}: {exc!r}") from None
            if not conn.dropped():
                return conn
            conn.close()

    def _open(self, timeout: float) -> _Connection:
        conn = _Connection(self.host, self.port, self.context, self.server_name, timeout)
        conn.connect()
        return conn

    def _give_back(self, conn: _Connection) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
