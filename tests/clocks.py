"""Clocks a test hands to code that takes one (`Deadline(at, clock)`, `PodQueue(config, clock)`): time passes as the
test says, never as the machine runs, so what the code does by a time does not depend on how fast the machine is."""
from __future__ import annotations

from collections.abc import Callable


class StoppedClock:
    """Time stands still at `now` (a deadline ahead of it never passes; one at or before it has passed)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TickingClock:
    """Each reading is `step` seconds after the last; `at` runs a callback (once) at the first reading at or past its
    time, before that reading is returned: something that happens at that moment, as the code reading the clock sees
    it."""

    def __init__(self, step: float, now: float = 1000.0, at: dict[float, Callable[[], object]] | None = None) -> None:
        self.step, self.now = step, now
        self.pending = sorted((at or {}).items())
        self._firing = False

    def __call__(self) -> float:
        if self._firing:  # a callback reading the clock reads the moment it runs at
            return self.now
        self.now += self.step
        while self.pending and self.pending[0][0] <= self.now:
            _, event = self.pending.pop(0)
            self._firing = True
            try:
                event()
            finally:
                self._firing = False
        return self.now
