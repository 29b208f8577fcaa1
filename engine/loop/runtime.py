"""How the `run` process is tuned, in one place: the cyclic collector, the GIL's switch interval and the pacing of
writes that can wait. One `RuntimePolicy`, made by the command and handed to the parts that need it (each profile's
loop, the binder, the event sink), owns them through the process's phases:

- **Startup** (`starting`, until the caches sync): the collector is off. The first lists decode and convert millions
  of containers and no cycles, and each collection their allocations set off walked the growing heap again (the
  25,000-pod list's JSON decodes in 1.0–1.3 s with the collector running, 0.2–0.26 s without).
- **Started** (`started`, once synced, before the first cycle): what startup made leaves the collector's reach
  (`gc.freeze`, as for a server's pre-fork heap), not collected first (at 5,000 nodes × 25,000 pods that pass took
  0.5–1.5 s and found ~1,200 unreachable objects): each full pass walked it all again, a stall of every thread
  (watches, binds, the cycle) of 0.07–0.12 s several times in a 10-second stream at 200 nodes; after it, 0.03 s.
  CPython's automatic full passes stop (quiet moments, below) and the switch interval follows the pods in hand.
- **A cycle** (`cycle`, entered once per cycle by `ProfileLoop.cycle_isolated`): its batch is in hand and the
  collector is paused until the last cycle in progress ends. A cycle's snapshot, compile, starting plans, CP-SAT
  model and preemption make many small objects and no cycles while the heap around them holds millions: a full
  pass over a 20,000-node snapshot costs a good part of a second.
- **Pods in hand** (`holding`: a cycle's batch, a bind call's placements): while few are (a stream), a thread
  waiting for the GIL has it after QUICK (1 ms), so a watch event or a bind's answer does not wait 5 ms at each
  step while a cycle computes (streaming p99 at 200 nodes: 0.32 → 0.18 s); above MANY (a batch arrival) it is
  CPython's 5 ms, where a pod's wait is set by how fast the whole batch goes and the short interval only adds
  switches (at 5,000 nodes × 25,000 pods, 10% more CPU and 5% fewer pods/s in five pairs of runs).
- **Writes that can wait** (`wait_quiet`: events, engine.loop.binder.Outbox) wait for a moment with no pod in hand,
  so in a stream the last pod's Scheduled event does not share the GIL or the apiserver with the next pod's cycle.
- **Quiet moments** (`tick`, every half second from the command's main thread): the collector's full passes walk
  all the loop added since startup (each pod's manifest, model, cache entries): at 200 nodes with 1,000 pods bound
  30–50 ms, every thread stalled, and in a 10-second stream two of them fell on the pods in flight. CPython starts
  one once its middle generation has been collected 10 times since the last; here one runs when as many middle
  passes have run and no pod has been in hand for QUIET seconds, at most every GAP seconds (a scheduler idle but
  for node updates does not walk its heap every second) and, under load that never pauses, every EVERY seconds.
  kube-scheduler's collector (Go's) runs beside its goroutines.
- **The end** (`restore`): the settings as `starting` found them (for a process that goes on: a test).

Figures: BENCHMARKS.md, issue 30 and issue 48. The dry-run and the other one-shot commands are tuned in one place
too (engine.cli's command group: the collector off for the whole command); nothing else in the engine touches these
settings (an import-linter contract keeps `gc` here and in engine.heap).
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

QUICK = 0.001  # seconds, the switch interval while few pods are in hand
BUSY = 0.005  # CPython's default, while many are
MANY = 64  # pods in hand (planned in a cycle or binding) above which the loop is busy: 4 × the binder's threads
QUIET = 1.0  # seconds with no pod in hand before a full pass may run
GAP = 30.0  # seconds between two full passes at quiet moments, at least
EVERY = 300.0  # seconds: a full pass runs at least this often, quiet or not
PASSES = 10  # middle-generation passes since the last full one before another is due: CPython's own threshold
NEVER = 2**30  # a full-pass threshold never reached


@dataclass(frozen=True, slots=True)
class Found:
    """The process's settings before the policy changed them, put back by `restore`."""

    interval: float
    thresholds: tuple[int, int, int]
    collecting: bool

    @staticmethod
    def now() -> Found:
        young, middle, old = gc.get_threshold()
        return Found(sys.getswitchinterval(), (young, middle, old), gc.isenabled())


class RuntimePolicy:
    """The process's tuning through its phases (see the module's docstring). Until `started`, the switch interval
    and CPython's thresholds are left alone: they are the process's, and a Scheduler a test or a bench builds is
    never started. A cycle pauses the collector either way and leaves it as it found it."""

    def __init__(self, quick: float = QUICK, busy: float = BUSY, many: int = MANY, quiet: float = QUIET,
                 gap: float = GAP, every: float = EVERY, passes: int = PASSES,
                 clock: Callable[[], float] = time.monotonic, collect: Callable[[], object] = gc.collect,
                 set_interval: Callable[[float], None] = sys.setswitchinterval) -> None:
        self.quick, self.busy, self.many = quick, busy, many
        self.quiet, self.gap, self.every, self.passes = quiet, gap, every, passes
        self.clock = clock
        self._collect, self._set_interval = collect, set_interval
        self._lock = threading.Lock()
        self._in_hand = 0
        self._quiet_since: float | None = clock()  # None while some pod is in hand
        self._quiet = threading.Event()  # set while no pod is in hand
        self._quiet.set()
        self._pauses = 0  # startup and cycles in progress: the collector is off while there is one
        self._resume = False  # whether the last of them turns it on again
        self._started = False
        self._interval: float | None = None  # the switch interval last set
        self._last_pass = clock()
        self._found: Found | None = None
        self.full_passes = 0  # run by `tick`

    # --- startup ---------------------------------------------------------------------------------------------

    @contextmanager
    def starting(self) -> Iterator[None]:
        """The collector off while the watches list and the caches sync (`started` is called before it ends)."""
        self._keep_found()
        with self._paused():
            yield

    def started(self) -> None:
        """The caches synced, no cycle run yet: startup's heap frozen, full passes at quiet moments only (`tick`),
        the switch interval by the pods in hand from now on."""
        self._keep_found()
        gc.freeze()
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        with self._lock:
            self._started = True
            self._last_pass = self.clock()
            self._apply()

    # --- cycles and pods in hand -----------------------------------------------------------------------------

    @contextmanager
    def cycle(self, pods: int) -> Iterator[None]:
        """One cycle of `pods`: entered once, around all of it (a failed cycle's bisection too)."""
        with self._paused(), self.holding(pods):
            yield

    @contextmanager
    def holding(self, pods: int) -> Iterator[None]:
        """`pods` in hand while the block runs (a cycle's batch, a bind call's placements)."""
        self._add(pods)
        try:
            yield
        finally:
            self._add(-pods)

    @property
    def interval(self) -> float:
        """The switch interval the pods in hand ask for (set only once started)."""
        return self.busy if self._in_hand > self.many else self.quick

    def wait_quiet(self, timeout: float) -> bool:
        """Block until no pod is in hand, at most `timeout` seconds; True if none is. Work that can wait (an
        event) waits here so it does not take the GIL or the apiserver from a pod in hand."""
        return self._quiet.wait(timeout)

    def quiet_for(self) -> float:
        """Seconds since the last pod in hand was let go (0 while some pod is in hand)."""
        since = self._quiet_since
        return 0.0 if since is None else max(0.0, self.clock() - since)

    # --- quiet moments ---------------------------------------------------------------------------------------

    def tick(self) -> bool:
        """Run a full pass if one is due and the moment suits it (once started); True when one ran."""
        if not self._started or gc.get_count()[2] < self.passes:
            return False  # the old generation has not grown enough to be worth a walk
        since = self.clock() - self._last_pass
        if since < self.every and (since < self.gap or self.quiet_for() < self.quiet):
            return False
        self._collect()
        self._last_pass = self.clock()
        self.full_passes += 1
        return True

    # --- the end ---------------------------------------------------------------------------------------------

    def restore(self) -> None:
        """The interval, CPython's thresholds and the collector as `starting` found them, nothing frozen."""
        found = self._found
        if found is None:
            return
        gc.unfreeze()
        gc.set_threshold(*found.thresholds)
        with self._lock:
            self._started = False
            self._interval = None
            self._set_interval(found.interval)
            if self._pauses == 0:
                (gc.enable if found.collecting else gc.disable)()

    # --- the parts -------------------------------------------------------------------------------------------

    def _keep_found(self) -> None:
        if self._found is None:
            self._found = Found.now()

    @contextmanager
    def _paused(self) -> Iterator[None]:
        """No cyclic collection while some startup or cycle is in progress, from however many threads; the
        collector as it was before the first of them once the last ends."""
        with self._lock:
            if self._pauses == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._pauses -= 1
                if self._pauses == 0 and self._resume:
                    gc.enable()

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
        """Set the interval the pods in hand ask for, when started and it changed (under the lock)."""
        interval = self.interval
        if self._started and interval != self._interval:
            self._interval = interval
            self._set_interval(interval)
