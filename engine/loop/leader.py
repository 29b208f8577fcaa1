"""Lease-based leader election (coordination.k8s.io/v1), as client-go's leaderelection does it.

A lease held by someone else counts as expired only after this process has seen it unchanged for its
whole duration (its own clock, never the holder's timestamps: clocks differ). Releasing on shutdown
empties the holder, so a standby takes over at once instead of after the lease duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ports import ApiError, ApiUnavailable, ClusterAPI, Conflict, NotFound, Obj

log = logging.getLogger("policy_scheduler.leader")


def micro_time(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1e6):06d}Z"


@dataclass
class LeaderElector:
    api: ClusterAPI
    namespace: str
    name: str
    identity: str
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_seconds: float = 2.0
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    _observed: tuple | None = field(default=None, init=False)
    _observed_at: float = field(default=0.0, init=False)
    _refusal: str | None = field(default=None, init=False)  # the refusal last logged at error level

    def acquire(self, stop: threading.Event, waiting: Callable[[], None] = lambda: None) -> bool:
        """Block until this process holds the lease (True) or `stop` is set (False); `waiting()` runs
        between attempts (a standby keeps its policies loaded, so it is ready and takes over at once)."""
        logged = False
        while not stop.is_set():
            waiting()
            if self.try_acquire_or_renew():
                log.info("became leader lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
                return True
            if not logged:
                log.info("waiting for leadership lease=%s/%s holder=%s", self.namespace, self.name,
                         self._observed[0] if self._observed else None)
                logged = True
            stop.wait(self.retry_seconds)
        return False

    def hold(self, stop: threading.Event, lost: Callable[[], None]) -> None:
        """Renew every retry period until `stop`; call `lost()` when renewal fails past the deadline."""
        last_ok = self.clock()
        while not stop.wait(self.retry_seconds):
            if self.try_acquire_or_renew():
                last_ok = self.clock()
            elif self.clock() - last_ok > self.renew_deadline:
                log.error("leadership lost lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
                lost()
                return

    def try_acquire_or_renew(self) -> bool:
        try:
            lease = self.api.get_lease(self.namespace, self.name)
            if lease is None:
                self.api.create_lease(self.namespace, self._lease(None))
                return True
            spec = lease.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            if holder and holder != self.identity and not self._expired(spec):
                return False
            self.api.update_lease(self.namespace, self._lease(lease))
        except (Conflict, ApiUnavailable) as exc:  # a race or a blip: the next attempt settles it
            log.debug("lease attempt failed error=%r", str(exc))
            return False
        except (NotFound, ApiError) as exc:  # a refusal no retry cures: say so loudly, once per kind of refusal
            self._refused(exc)
            return False
        self._refusal = None
        return True

    def _refused(self, exc: Exception) -> None:
        status = 404 if isinstance(exc, NotFound) else getattr(exc, "status", 0)
        where = f"lease={self.namespace}/{self.name}"
        if status == 403:
            fix = (f"grant this ServiceAccount get, update and create on leases (coordination.k8s.io) in namespace "
                   f"{self.namespace} (deploy/'s Role policy-scheduler-leader-election), or set --lease-namespace to "
                   "the namespace where it has them")
        elif status == 404:
            fix = (f"namespace {self.namespace} does not exist: create it, or set --lease-namespace to the "
                   "scheduler's own namespace")
        else:
            fix = "the apiserver refused the Lease; check the message"
        if self._refusal != f"{status}{exc}":
            self._refusal = f"{status}{exc}"
            log.error("cannot take the lease %s status=%s error=%r: not scheduling; fix: %s", where, status or "?",
                      str(exc), fix)

    def _expired(self, spec: Obj) -> bool:
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseDurationSeconds"))
        now = self.clock()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        return now - self._observed_at > float(spec.get("leaseDurationSeconds") or self.lease_seconds)

    def _lease(self, current: Obj | None) -> Obj:
        now = micro_time(self.wall())
        spec = dict((current or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if current else 0)
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.lease_seconds), renewTime=now)
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if current is not None:
            metadata["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}

    def release(self) -> None:
        """Give the lease up if we hold it (holder emptied, so a standby need not wait it out)."""
        try:
            lease = self.api.get_lease(self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease = {**lease, "spec": {**lease["spec"], "holderIdentity": None, "leaseDurationSeconds": 1,
                                       "renewTime": micro_time(self.wall())}}
            self.api.update_lease(self.namespace, lease)
            log.info("released lease=%s/%s identity=%s", self.namespace, self.name, self.identity)
        except (Conflict, ApiUnavailable, ApiError, NotFound) as exc:
            log.warning("lease release failed error=%r", str(exc))
