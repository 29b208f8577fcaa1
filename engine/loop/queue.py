"""When to cycle: collect pending pods for a batch, back off unplaced ones, wake them on a change that may help.

Backoff is per *unit*: a gang (all pods of one PodGroup) waits and wakes together, so a batch never holds
half a gang because the other half was backing off. As upstream's scheduling queue: a unit the plan left out
because of what the cluster holds is *unschedulable*: it waits, after its backoff (1 s doubling to 10 s), for a
cluster change that one of the kinds that rejected it says may help (their events and queueing hints,
`engine.kinds.helped_by`), or for the flush (5 minutes); a unit left out for any other reason (the time limit)
only backs off. A new member, an update of the pod itself or new policies wake a unit at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ..kinds import ModelChange, helped_by
from .cycle import ANY_CHANGE, Rejected


@dataclass(frozen=True, slots=True)
class QueueConfig:
    batch_window: float = 0.0  # seconds to collect pods after the first is ready (0: a cycle takes what is ready:
    # what arrived while the previous cycle ran, so a pod arriving alone is placed at once)
    batch_idle: float | None = None  # close the window early once no new pod arrived for this long
    max_batch: int | None = None  # pods per batch (a gang is never split, so one may exceed it)
    # a ready batch of more than HEAD_OF × `head` pods is taken in two: its first units up to `head` pods (they
    # bind while the rest is planned: a Job's fan-out or a restart's backlog is not all compiled before its first
    # bind), then the rest whole; None: never (`policy-scheduler run --head`, 250 unless told). First: by the
    # queue's `rank` (the loop's: priority, then the largest pods, as the batch's first fit takes them, so the
    # head's places are those the whole batch would have given them first), then oldest
    head: int | None = None
    backoff_initial: float = 1.0
    backoff_max: float = 10.0  # upstream's podMaxBackoffSeconds
    flush: float = 300.0  # an unschedulable unit is tried again after this long without a helping change


HEAD_OF = 4  # a batch is taken in two only when the head is at most a quarter of it


@dataclass(slots=True)
class _Unit:
    attempts: int = 0
    not_before: float = 0.0
    waiting: dict[str, float] = field(default_factory=dict)  # pod key -> arrival, ready for a batch
    members: set[str] = field(default_factory=set)  # waiting, in a cycle, or placed and not yet seen bound
    unschedulable_since: float | None = None  # set: it waits for a change that may help (or the flush)
    rejected: list[Rejected] = field(default_factory=list)  # why its pods were left out: what may help
    nudged: bool = False  # a new member or an update of its own while its pods were in a cycle

    def helped_by(self, change: ModelChange) -> bool:
        """Could this change help one of its pods?"""
        return any(r.waiting is None or helped_by(r.plugins or frozenset(), r.waiting, change) for r in self.rejected)


class PodQueue:
    """Pending pods of one scheduler profile; one consumer calls next_batch() then done().

    A pod stays a member from add() until remove() (the watch shows it bound or deleted), so watch
    updates of a pod that is being scheduled or bound never put it back in line.
    """

    def __init__(self, config: QueueConfig, clock: Callable[[], float] = time.monotonic,
                 rank: Callable[[str], tuple] | None = None):
        self.config = config
        self.clock = clock
        self.rank = rank  # a pod's place in a head (config.head), lowest first; None: by age alone
        self._cond = threading.Condition()
        self._units: dict[str, _Unit] = {}
        self._unit_of: dict[str, str] = {}
        self._arrived: dict[str, float] = {}  # first seen pending (monotonic)
        self._parked: set[str] = set()  # members waiting for the watch to say what became of them
        self._last_arrival = float("-inf")
        self._in_flight = False  # a batch taken and not yet done()
        self._headed = False  # the last batch was a head (config.head): the next takes the rest whole
        self._seen: list[ModelChange] = []  # changes while a batch was in flight (upstream's in-flight events)

    def add(self, key: str, unit: str) -> None:
        """A pending pod; a new one resets its unit's backoff wait, a known one changes nothing (unless it was
        parked: then the watch has shown it still pending, and it is waiting again at once)."""
        with self._cond:
            if key in self._parked:
                self._parked.discard(key)
                self._units[self._unit_of[key]].waiting[key] = self._arrived[key]
                self._cond.notify_all()
                return
            if key in self._unit_of:
                return
            now = self.clock()
            self._arrived[key] = now
            self._last_arrival = now
            self._unit_of[key] = unit
            state = self._units.setdefault(unit, _Unit())
            state.members.add(key)
            state.waiting[key] = now
            state.not_before = 0.0  # a new member may complete its gang: the unit tries again at once
            # and the tries while it was short of members were no tries of the whole gang (upstream holds a gang's
            # pods at PreEnqueue until its quorum is pending): its backoff starts again from the first step
            state.attempts = 0
            state.unschedulable_since = None
            state.nudged = True
            self._cond.notify_all()

    def remove(self, key: str) -> None:
        """The pod was bound or deleted: it leaves the queue for good."""
        with self._cond:
            unit = self._unit_of.pop(key, None)
            self._arrived.pop(key, None)
            self._parked.discard(key)
            if unit is None:
                return
            state = self._units[unit]
            state.waiting.pop(key, None)
            state.members.discard(key)
            if not state.members:
                del self._units[unit]

    def wake_all(self) -> None:
        """Something changed that may help anyone (new policies): every waiting unit is ready now (attempts kept)."""
        with self._cond:
            for state in self._units.values():
                state.not_before = 0.0
                state.unschedulable_since = None
            self._cond.notify_all()

    def on_change(self, change: ModelChange) -> int:
        """A cluster change: the unschedulable units it may help wait out their backoff only (upstream moves them
        to backoffQ or activeQ); returns how many it woke."""
        with self._cond:
            if self._in_flight:
                self._seen.append(change)  # judged for the batch's pods once the cycle says why they were left out
            woken = [s for s in self._units.values() if s.unschedulable_since is not None and s.helped_by(change)]
            for state in woken:
                state.unschedulable_since = None
            if woken:
                self._cond.notify_all()
            return len(woken)

    def touch(self, key: str) -> None:
        """The pending pod itself changed (its labels, tolerations, scheduling gates): its unit may try again
        once its backoff is over."""
        with self._cond:
            unit = self._unit_of.get(key)
            if unit is not None:
                self._units[unit].nudged = True
                if self._units[unit].unschedulable_since is not None:
                    self._units[unit].unschedulable_since = None
                    self._cond.notify_all()

    def unschedulable(self) -> int:
        """Pods waiting for a change that may help (the rest wait for their backoff or a batch)."""
        with self._cond:
            return sum(len(s.waiting) for s in self._units.values() if s.unschedulable_since is not None)

    def arrival(self, key: str) -> float | None:
        with self._cond:
            return self._arrived.get(key)

    def waiting(self) -> int:
        with self._cond:
            return sum(len(s.waiting) for s in self._units.values())

    def _ready(self, now: float) -> list[str]:
        """Ready units, oldest first: backed off long enough, and not waiting for a change (or flushed)."""
        ready = [(min(s.waiting.values()), u) for u, s in self._units.items() if s.waiting and s.not_before <= now
                 and (s.unschedulable_since is None or now - s.unschedulable_since >= self.config.flush)]
        return [u for _, u in sorted(ready)]

    def _next_ready(self, now: float) -> float:
        """Seconds until some waiting unit is ready without any change (its backoff or its flush ends)."""
        waits = [max(s.not_before, (s.unschedulable_since or 0.0) + self.config.flush) - now
                 if s.unschedulable_since is not None else s.not_before - now
                 for s in self._units.values() if s.waiting]
        return min(waits, default=float("inf"))

    def next_batch(self, stop: threading.Event, idle: float = 1.0) -> list[str]:
        """Block until a pod is ready (or `idle` seconds pass: []), then collect for the batch window."""
        cfg = self.config
        with self._cond:
            give_up = self.clock() + idle
            while not self._ready(now := self.clock()):
                if stop.is_set() or now >= give_up:
                    return []
                self._cond.wait(max(0.001, min(self._next_ready(now), give_up - now, 0.5)))
            window_end = self.clock() + cfg.batch_window
            while not stop.is_set() and (now := self.clock()) < window_end:
                if cfg.max_batch is not None and sum(len(self._units[u].waiting) for u in self._ready(now)) >= cfg.max_batch:
                    break
                if cfg.batch_idle is not None and now - self._last_arrival >= cfg.batch_idle:
                    break  # a burst has arrived whole: waiting out the window would only add latency
                self._cond.wait(min(window_end - now, cfg.batch_idle or 0.5, 0.5))
            return self._take(self._ready(self.clock()))

    def _take(self, units: list[str]) -> list[str]:
        """The waiting pods of `units` up to max_batch, whole units only, oldest first; or a head (config.head),
        its units first by `rank`."""
        out: list[str] = []
        self._in_flight, self._seen = True, []
        most, head = self.config.max_batch, self.config.head
        ready = sum(len(self._units[u].waiting) for u in units) if head is not None else 0
        self._headed = head is not None and not self._headed and ready > HEAD_OF * head
        if head is not None and self._headed:
            most = head if most is None else min(most, head)
            if self.rank is not None:
                rank = self.rank
                units = sorted(units, key=lambda u: min(rank(key) for key in self._units[u].waiting))
        for unit in units:
            if out and most is not None and len(out) >= most:
                break
            waiting = self._units[unit].waiting
            out.extend(sorted(waiting, key=waiting.__getitem__))
            waiting.clear()
            self._units[unit].nudged = False
        return out

    def done(self, unplaced: Iterable[str], rejected: Mapping[str, Rejected] | None = None) -> None:
        """After a cycle: the batch's unplaced pods wait longer before the next try, and, when every one of a unit
        was kept out by kinds (`rejected`: why; a pod missing there was not planned at all), for a change that may
        help. Placed pods stay members (assumed) until remove(); requeue() them if their binding fails."""
        rejected = rejected or {}
        units: dict[str, list[Rejected]] = {}
        with self._cond:
            for key in unplaced:
                self._back_off(key)
                if (unit := self._unit_of.get(key)) is not None:
                    units.setdefault(unit, []).append(rejected.get(key, ANY_CHANGE))
            now = self.clock()
            for unit, why in units.items():
                state = self._units[unit]
                state.rejected = why
                if state.nudged:  # a member arrived (or the pod changed) during the cycle: at once
                    state.not_before, state.unschedulable_since = 0.0, None
                elif any(r.plugins is None for r in why) or any(state.helped_by(c) for c in self._seen):
                    state.unschedulable_since = None  # the time limit, or a change it did not see: back off only
                else:
                    state.unschedulable_since = now
            self._in_flight, self._seen = False, []

    def requeue(self, key: str) -> None:
        """A placed pod whose binding failed (the apiserver erred; the pod is still pending and ours): back in
        line, after a backoff (no change needed)."""
        with self._cond:
            self._back_off(key)
            if (unit := self._unit_of.get(key)) is not None:
                self._units[unit].unschedulable_since = None

    def park(self, key: str) -> None:
        """A placed pod whose binding conflicted (409: bound meanwhile, or replaced by another pod of that name):
        not retried blindly. It stays a member, neither waiting nor backed off, until the watch says: bound or
        deleted (`remove`), or still pending (`add` puts it back in line)."""
        with self._cond:
            if key in self._unit_of:
                self._parked.add(key)

    def parked(self, key: str) -> bool:
        with self._cond:
            return key in self._parked

    def _back_off(self, key: str) -> None:
        unit = self._unit_of.get(key)
        if unit is None:  # bound or deleted meanwhile
            return
        state = self._units[unit]
        now = self.clock()
        if not state.waiting or state.not_before <= now:  # the unit's first pod back sets the wait
            state.not_before = now + min(self.config.backoff_max, self.config.backoff_initial * 2 ** state.attempts)
            state.attempts += 1
        state.waiting[key] = self._arrived[key]
        self._cond.notify_all()
