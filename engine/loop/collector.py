"""When the cyclic collector's full passes run: at quiet moments, not in the middle of a stream.

Once the caches sync, what startup made is frozen (command._tune_interpreter); what the loop adds after (each
pod's manifest, its model, the cache's entries) is walked again by every full pass. At 200 nodes with 1,000 pods
bound a pass took 30–50 ms, stalling every thread (watches, binds, the cycle), and in a 10-second stream two of
them fell on the pods in flight: its p99 (BENCHMARKS.md, issue 30). kube-scheduler's collector (Go's) runs
beside its goroutines.

CPython starts a full pass once its middle generation has been collected 10 times since the last one (and the old
generation grew by a quarter). Here those automatic passes are off, and `FullPasses.tick` (every half second, from
the `run` command's main thread) starts one when as many middle passes have run and no pod has been in hand for
QUIET seconds; at most every GAP seconds, so a scheduler that is idle but for node updates does not walk its heap
every second; and, under load that never pauses, once EVERY seconds all the same.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from .pace import GilPace

QUIET = 1.0  # seconds with no pod in hand (a cycle's batch, a bind) before a full pass may run
GAP = 30.0  # seconds between two full passes at quiet moments, at least
EVERY = 300.0  # seconds: a full pass runs at least this often, quiet or not
PASSES = 10  # middle-generation passes since the last full one before another is due: CPython's own threshold
NEVER = 2**30  # a full-pass threshold never reached


class FullPasses:
    """Full collections at quiet moments (see the module's docstring); `engage` turns the automatic ones off."""

    def __init__(self, pace: GilPace, quiet: float = QUIET, gap: float = GAP, every: float = EVERY,
                 passes: int = PASSES, collect: Callable[[], object] = gc.collect) -> None:
        self.pace, self.quiet, self.gap, self.every, self.passes = pace, quiet, gap, every, passes
        self._collect = collect
        self._last = pace.clock()
        self.runs = 0  # full passes run by `tick`

    def engage(self) -> None:
        """From now on only `tick` runs full passes (the young and middle generations are collected as before)."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, NEVER)
        self._last = self.pace.clock()

    def tick(self) -> bool:
        """Run a full pass if one is due and the moment suits it; True when one ran."""
        if gc.get_count()[2] < self.passes:
            return False  # the old generation has not grown enough to be worth a walk
        since = self.pace.clock() - self._last
        if since < self.every and (since < self.gap or self.pace.quiet_for() < self.quiet):
            return False
        self._collect()
        self._last = self.pace.clock()
        self.runs += 1
        return True
