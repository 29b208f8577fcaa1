"""What the serving port answers: /metrics; /healthz and /livez (the process runs); /readyz (caches synced, policies
loaded: a standby is ready too, so a rollout proceeds; the body says `leader` or `standby`); /leaderz (200 only on
the replica that holds the Lease and schedules, 503 on a standby). On the secure port every path but the health
ones is for authenticated, authorized users only (engine.loop.serving.access)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .access import DelegatedAccess
from .certificates import Certificates
from .server import CONNECTION_DEADLINE, MAX_CONNECTIONS, BoundedServer

TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True)
class Endpoints:
    """The answers, from the scheduler's registry and state."""

    registry: CollectorRegistry
    ready: Callable[[], bool]
    leading: Callable[[], bool] = lambda: True

    def answer(self, path: str) -> tuple[int, bytes, str]:
        if path == "/metrics":
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        if path in ("/healthz", "/livez"):
            return 200, b"ok\n", TEXT
        if path == "/readyz":
            ok, role = self.ready(), b"leader" if self.leading() else b"standby"
            return 200 if ok else 503, (b"ok: " if ok else b"not ready: ") + role + b"\n", TEXT
        if path == "/leaderz":
            leads = self.leading()
            return 200 if leads else 503, b"leader\n" if leads else b"standby\n", TEXT
        return 404, b"not found\n", TEXT


def _handler(endpoints: Endpoints, access: DelegatedAccess | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if access is not None:
                decision = access.check(self.headers.get("Authorization"), path)
                if not decision.allowed:
                    self._send(decision.status, decision.message.encode(), TEXT)
                    return
            self._send(*endpoints.answer(path))

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if code == 401:
                self.send_header("WWW-Authenticate", 'Bearer realm="policy-scheduler"')
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # probes every few seconds: keep logs quiet
            pass

    return Handler


@dataclass
class Listener:
    """One port serving the endpoints: HTTPS with delegated access (`certificates` and `access`), or plain HTTP
    with none (the escape hatch, meant for 127.0.0.1)."""

    endpoints: Endpoints
    port: int
    host: str = "0.0.0.0"
    certificates: Certificates | None = None
    access: DelegatedAccess | None = None
    max_connections: int = MAX_CONNECTIONS
    deadline: float = CONNECTION_DEADLINE
    server: BoundedServer | None = field(default=None, init=False)

    def start(self) -> int:
        """Serve in a daemon thread; returns the port (useful with port 0)."""
        self.server = BoundedServer((self.host, self.port), _handler(self.endpoints, self.access), self.certificates,
                                    self.max_connections, deadline=self.deadline)
        self.port = int(self.server.server_address[1])
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.5}, name=f"serve-{self.port}",
                         daemon=True).start()
        return self.port

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
