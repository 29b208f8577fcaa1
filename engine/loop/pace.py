"""How long a thread may hold the GIL while another waits (sys.setswitchinterval): short while the loop has few
pods in hand, CPython's default while it has many.

With a pod or two in hand (a stream), each of its steps (watch → queue → plan → bind → its answer) waits for the
GIL while a cycle computes, so a short interval shortens every pod's wait (streaming p99 at 200 nodes: 0.32 →
0.18 s with 1 ms). With thousands in hand (a batch arrival), a pod's wait is set by how fast the whole batch goes,
and the short interval only adds switches: at 5,000 nodes × 25,000 pods it cost 10% more CPU and 5% fewer pods/s
in five pairs of runs (BENCHMARKS.md, issue 30).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

QUICK = 0.001  # seconds, while few pods are in hand
BUSY = 0.005  # CPython's default, while many are
MANY = 64  # pods in hand (planned in a cycle or binding) above which the loop is busy: 4 × the binder's threads


class GilPace:
    """Counts the pods the loop has in hand (`holding`) and sets the interval when the count crosses MANY. It acts
    only once engaged (`engage`, by the `run` command after the caches sync): the interval is the process's, so
    nothing else (a test, the dry-run) has it changed. It also says how long no pod has been in hand (`quiet_for`):
    when the collector's full passes may run (engine.loop.collector)."""

    def __init__(self, quick: float = QUICK, busy: float = BUSY, many: int = MANY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.quick, self.busy, self.many = quick, busy, many
        self.clock = clock
        self._in_hand = 0
        self._quiet_since: float | None = clock()  # None while some pod is in hand
        self._set: Callable[[float], None] | None = None
        self._interval: float | None = None
        self._lock = threading.Lock()
        self._quiet = threading.Event()  # set while no pod is in hand
        self._quiet.set()

    def engage(self, set_interval: Callable[[float], None]) -> None:
        """From now on, set the interval through `set_interval` (sys.setswitchinterval), starting now."""
        with self._lock:
            self._set = set_interval
            self._apply()

    @contextmanager
    def holding(self, pods: int) -> Iterator[None]:
        """`pods` in hand while the block runs (a cycle's batch, a bind's placements)."""
        self._add(pods)
        try:
            yield
        finally:
            self._add(-pods)

    def wait_quiet(self, timeout: float) -> bool:
        """Block until no pod is in hand, at most `timeout` seconds; True if none is. Work that can wait (an
        event) waits here so it does not take the GIL or the apiserver from a pod in hand."""
        return self._quiet.wait(timeout)

    def quiet_for(self) -> float:
        """Seconds since the last pod in hand was let go (0 while some pod is in hand)."""
        since = self._quiet_since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    @property
    def interval(self) -> float:
        return self.busy if self._in_hand > self.many else self.quick

    def _add(self, pods: int) -> None:
        with self._lock:
            self._in_hand += pods
            self._quiet_since = self.clock() if self._in_hand == 0 else None
            if self._in_hand == 0:
                self._quiet.set()
            else:
                self._quiet.clear()
            self._apply()

    def _apply(self) -> None:
        interval = self.interval
        if self._set is not None and interval != self._interval:
            self._interval = interval
            self._set(interval)
