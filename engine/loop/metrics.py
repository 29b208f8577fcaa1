"""Prometheus metrics and the /metrics, /healthz, /readyz endpoints (one small HTTP server).

Each process owns its registry (no module-level collectors), so tests can run several schedulers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

PREFIX = "policy_scheduler"
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 30, 60, 120, 300)
SIZE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r, p = self.registry, PREFIX
        self.batches = Counter(f"{p}_batches", "Scheduling cycles run", ["profile"], registry=r)
        self.batch_size = Histogram(f"{p}_batch_size", "Pending pods per cycle", ["profile"],
                                    buckets=SIZE_BUCKETS, registry=r)
        self.solve_seconds = Histogram(f"{p}_solve_seconds", "Seconds from snapshot to plan", ["profile"], registry=r)
        self.pods_bound = Counter(f"{p}_pods_bound", "Pods bound to a node", ["profile"], registry=r)
        self.unschedulable = Counter(f"{p}_pods_unschedulable", "Pod attempts left without a node", ["profile"],
                                     registry=r)
        self.bind_errors = Counter(f"{p}_bind_errors", "Bindings the apiserver refused or never got", ["profile"],
                                   registry=r)
        self.latency = Histogram(f"{p}_pending_to_bound_seconds", "From first seen pending to bound", ["profile"],
                                 buckets=LATENCY_BUCKETS, registry=r)
        self.preemptors = Counter(f"{p}_preemptors", "Pods placed by evicting lower-priority pods", ["profile"],
                                  registry=r)
        self.victims = Counter(f"{p}_preemption_victims", "Running pods evicted for a higher-priority pod",
                               ["profile"], registry=r)
        self.budget_violations = Counter(f"{p}_preemption_budget_violations",
                                         "Evictions that went over a PodDisruptionBudget (nothing else placed the pod)",
                                         ["profile"], registry=r)
        self.events_dropped = Counter(f"{p}_events_dropped", "Events and status writes dropped: the outbox was full",
                                      registry=r)
        self.policy_reloads = Counter(f"{p}_policy_reloads", "Policy ConfigMap loads", ["profile", "result"],
                                      registry=r)


@dataclass
class HealthServer:
    """GET /metrics, /healthz (the process runs), /readyz (caches synced, policies loaded)."""

    metrics: Metrics
    ready: Callable[[], bool]
    port: int
    host: str = "0.0.0.0"
    _server: ThreadingHTTPServer | None = None

    def start(self) -> int:
        """Serve in a daemon thread; returns the port (useful with port 0)."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(outer.metrics.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/livez"):
                    self._send(200, b"ok\n")
                elif path == "/readyz":
                    ok = outer.ready()
                    self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
                else:
                    self._send(404, b"not found\n")

            def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # probes every few seconds: keep logs quiet
                pass

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        return self._server.server_address[1]

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
