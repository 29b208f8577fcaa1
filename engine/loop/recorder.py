"""Which FailedScheduling writes to make: one Event object per waiting pod, counted, rate-limited.

client-go's event recorder (its EventCorrelator) keeps a repeated event as one object and patches its `count`
and `lastTimestamp`, and limits how often one object is written (a token bucket per object). A pod the plan
leaves out again and again is told the same here: the first time an Event is created; after that the same
object is patched, with the number of times it was left out and the message of the last time, at most once per
`min_interval` while the message stays the same and within a burst of writes per object refilled slowly. What
was not written is not lost: the next write carries the whole count.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TOLD_LIMIT = 50_000  # pods whose series is remembered (the oldest half is forgotten beyond it)


def event_name(meta: dict[str, Any]) -> str:
    """A new Event's name, as client-go makes them: the object's name and a unique hex suffix."""
    return f"{meta.get('name')}.{time.time_ns():x}"


@dataclass(frozen=True, slots=True)
class Write:
    """An Event to create (`create`) or the existing one to patch, by name, with its total count and message."""

    create: bool
    name: str
    count: int
    message: str


@dataclass(slots=True)
class _Series:
    name: str
    message: str  # the last message told (written or not)
    written: str  # the message the object says
    count: int
    last_write: float
    tokens: float


class EventRecorder:
    """Per pod (by UID), the Event object of its FailedScheduling series. Not thread-safe: the sink locks it."""

    def __init__(self, clock: Callable[[], float], burst: int = 5, refill_seconds: float = 60.0,
                 min_interval: float = 10.0):
        self.clock, self.burst, self.refill, self.min_interval = clock, burst, refill_seconds, min_interval
        self._series: dict[str, _Series] = {}

    def record(self, uid: str, message: str, name: str) -> Write | None:
        """The pod was left out (again) with `message`; `name` is the new Event's name should one be created.
        Returns what to write now, or None (counted, written with the next write)."""
        now = self.clock()
        series = self._series.get(uid)
        if series is None:
            self._forget_oldest()
            self._series[uid] = _Series(name, message, message, 1, now, self.burst - 1.0)
            return Write(True, name, 1, message)
        series.count += 1
        series.message = message
        series.tokens = min(float(self.burst), series.tokens + (now - series.last_write) / self.refill)
        same = message == series.written
        if (same and now - series.last_write < self.min_interval) or series.tokens < 1.0:
            return None
        series.tokens -= 1.0
        series.last_write, series.written = now, message
        return Write(False, series.name, series.count, message)

    def recreated(self, uid: str, name: str) -> None:
        """The object was gone (expired, deleted): the series goes on in a new one of this name."""
        if (series := self._series.get(uid)) is not None:
            series.name = name

    def forget(self, uid: str) -> None:
        """The pod was placed or is gone: a later FailedScheduling starts a new series."""
        self._series.pop(uid, None)

    def _forget_oldest(self) -> None:
        if len(self._series) >= TOLD_LIMIT:  # bound memory; at worst one extra Event object for a forgotten pod
            for key in sorted(self._series, key=lambda k: self._series[k].last_write)[: TOLD_LIMIT // 2]:
                del self._series[key]
