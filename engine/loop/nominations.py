"""Preemptors waiting for their victims to leave, as kube-scheduler's nominated pods do.

A cycle's preemptors (the pods its plan places only after evictions) are assumed on their nodes at once, so
no later batch takes the room; they are bound together, once every victim of the cycle is gone from the
store (the watch shows it deleted), so a gang is never bound half before its room is free. A nomination
whose victims do not leave in time is given up: its pods are forgotten and go back to the queue.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .binder import Placement


@dataclass(slots=True)
class Nomination:
    placements: list[Placement]
    victims: set[str]  # pod keys not yet seen gone
    deadline: float  # monotonic


@dataclass
class Nominations:
    clock: Callable[[], float] = time.monotonic
    _waiting: list[Nomination] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, nomination: Nomination, present: Callable[[str], bool]) -> bool:
        """Wait for `nomination`'s victims; False (nothing to wait for) when `present` says all are gone."""
        with self._lock:
            nomination.victims = {key for key in nomination.victims if present(key)}
            if not nomination.victims:
                return False
            self._waiting.append(nomination)
            return True

    def gone(self, key: str) -> list[Nomination]:
        """A pod left the cluster: the nominations it was the last victim of, now ready to bind."""
        with self._lock:
            ready = []
            for n in self._waiting:
                n.victims.discard(key)
                if not n.victims:
                    ready.append(n)
            self._waiting = [n for n in self._waiting if n.victims]
            return ready

    def expired(self) -> list[Nomination]:
        """Nominations past their deadline, removed: their victims did not leave in time."""
        now = self.clock()
        with self._lock:
            late = [n for n in self._waiting if n.deadline <= now]
            self._waiting = [n for n in self._waiting if n.deadline > now]
            return late

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)
