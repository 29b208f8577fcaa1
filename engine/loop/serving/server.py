"""A small HTTP(S) server that one slow client cannot stall: each connection is handled in a thread of its own
(its TLS handshake too, never on the accept loop), with a socket timeout, a deadline for the whole connection,
and a bound on connections open at once (those beyond it are closed at once). A client that connects and sends
nothing, or trickles bytes, holds one slot until its deadline and delays nobody else's /readyz.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from .certificates import Certificates

log = logging.getLogger("policy_scheduler.serving")

MAX_CONNECTIONS = 128
IDLE_TIMEOUT = 10.0  # seconds a connection may wait on one read or write
CONNECTION_DEADLINE = 30.0  # seconds a connection may stay open in all (a Prometheus scrape's timeout is 10 s)


class BoundedServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """`socketserver`'s threading TCP server with TLS per connection (when `certificates`), the bound and the
    deadlines. The accept loop only accepts, counts and reaps."""

    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 certificates: Certificates | None = None, max_connections: int = MAX_CONNECTIONS,
                 idle_timeout: float = IDLE_TIMEOUT, deadline: float = CONNECTION_DEADLINE,
                 clock: Callable[[], float] = time.monotonic):
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)
        self.certificates = certificates
        self.idle_timeout = idle_timeout
        self.deadline = deadline
        self._clock = clock
        self._slots = threading.BoundedSemaphore(max_connections)
        self._open: dict[int, tuple[socket.socket, float]] = {}  # id -> (a dup of the socket, its deadline)
        self._lock = threading.Lock()
        self.refused = 0  # connections closed at once: the bound was reached

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            request.settimeout(self.idle_timeout)
            with self._lock:
                self._open[id(request)] = (request.dup(), self._clock() + self.deadline)
            super().process_request(request, client_address)
        except BaseException:
            self._forget(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._forget(request)

    def _forget(self, request: Any) -> None:
        with self._lock:
            entry = self._open.pop(id(request), None)
        if entry is not None:
            entry[0].close()
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the connection's own thread: the TLS handshake (with the certificate of the moment), then HTTP."""
        if self.certificates is None:
            super().finish_request(request, client_address)
            return
        tls = self.certificates.context().wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
            super().finish_request(tls, client_address)
        finally:
            tls.close()

    def service_actions(self) -> None:
        """Between accepts (every poll interval): end the connections past their deadline."""
        now = self._clock()
        with self._lock:
            late = [dup for dup, deadline in self._open.values() if deadline <= now]
        for dup in late:
            with contextlib.suppress(OSError):  # already closed by its own thread
                dup.shutdown(socket.SHUT_RDWR)  # the connection's thread wakes with an error and ends

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away, timed out or failed its handshake is not the server's error."""
        log.debug("connection from %s ended", client_address, exc_info=True)

    @property
    def open_connections(self) -> int:
        with self._lock:
            return len(self._open)

