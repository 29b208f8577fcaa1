"""List+watch one resource into the store (a reflector): relist on 410 Gone, reconnect with backoff.

A watch that breaks resumes from the last resourceVersion seen; one that is too old relists, and a relist
replaces the store's view of the resource, so no pending pod is ever lost.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from .ports import ApiError, ApiUnavailable, ClusterAPI, Gone, NotFound, WatchTarget
from .store import Store, meta

log = logging.getLogger("policy_scheduler.sync")


@dataclass(slots=True)
class Backoff:
    """Exponential delays, reset after a success."""

    initial: float = 0.5
    maximum: float = 30.0
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.maximum, self.current * 2 if self.current else self.initial)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


@dataclass
class Reflector:
    api: ClusterAPI
    resource: WatchTarget
    store: Store
    stop: threading.Event
    watch_seconds: int = 300
    absent_retry: float = 30.0  # a missing CRD (PodGroups) is looked for again this often
    backoff: Backoff | None = None

    def run(self) -> None:
        """Until `stop` is set; meant for its own daemon thread."""
        backoff = self.backoff or Backoff()
        version: str | None = None
        while not self.stop.is_set():
            try:
                if version is None:
                    items, version = self.api.list(self.resource)
                    self.store.replace(self.resource, items)
                version = self._watch(version)
                backoff.reset()
            except Gone:
                log.info("watch expired kind=%s; relisting", self.resource.kind)
                version = None
            except NotFound:
                self.store.replace(self.resource, [])
                version = None
                self.stop.wait(self.absent_retry)
            except (ApiUnavailable, ApiError) as exc:
                delay = backoff.next()
                log.warning("api unavailable kind=%s error=%r retry_in=%.1fs", self.resource.kind, str(exc), delay)
                if isinstance(exc, ApiError):
                    version = None
                self.stop.wait(delay)
            except Exception:
                log.exception("reflector error kind=%s; relisting", self.resource.kind)
                version = None
                self.stop.wait(backoff.next())

    def _watch(self, version: str) -> str:
        """Apply events until the server ends the watch; returns the last resourceVersion seen."""
        for event in self.api.watch(self.resource, version, self.watch_seconds):
            if self.stop.is_set():
                break
            version = str(meta(event.obj).get("resourceVersion") or version)
            if event.type != "BOOKMARK":
                self.store.apply(self.resource.kind, event.type, event.obj)
        return version
