"""The planner's answers about a later time, as engine.time.timeline asks them (one `FutureRoom` per plan with time).

The cluster at time t is the one a cycle would see then: today's with the running pods that end by t gone (and
the ResourceClaims only they used deallocated: engine.time.dra_time), each held reservation whose start has come bound
where it starts (its pods holding their room and devices until their bounds), and those still ahead handed to the
planner as reservations at a `now` of t, so that the same backfill rule decides who may use their room. Every
bound pod's end is worked out once, as an array over the table's positions (from its per-pod columns, which the
loop's cache keeps), and each time asked is a view of the table without the pods ended by then (`View.without`): at
50,000 running pods, parsing start times and copying pod lists per step and pod was most of a plan with time.
`enough` answers from capacity alone (requests; devices are the plan's to decide), so the shadow search plans only
where resources already suffice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import chain

import numpy as np

from ..model.cluster import Cluster, Devices, Moment, Pod, Reservation, ResourceClaim
from ..model.ir import PlacementRules
from ..model.tables import FEW
from ..model.view import View
from ..planning.plan import Plan, make_plan
from .dra_time import claim_ends, later_devices, placed_claims, still_free
from .timeline import Begun, Placed, ends, exempt, rfc3339, takes_from

NEVER = float("inf")
Runtimes = Callable[[Pod], int | None]


def end_times(base: View, now: float, runtimes: Runtimes | None = None) -> np.ndarray:
    """When each of the view's pods ends at the latest (engine.time.timeline.ends; inf: no bound): from the table's
    lifetimes, or pod by pod where the policies give runtimes the pods' specs do not."""
    if runtimes is None:
        starts, bounds = base.lifetimes()
        return np.maximum(now, np.where(np.isnan(starts), now, starts) + bounds)
    out = np.full(len(base.pods), NEVER)
    for k, pod in enumerate(base.pods):
        if (end := ends(pod, now, None if pod.runtime is not None else runtimes(pod))) is not None:
            out[k] = end
    return out


def placed(plan: Plan, cluster: Cluster) -> Placed:
    """A plan's placements, with the claims each placed pod allocated (as its Reserve allocated them)."""
    claims = cluster.devices.claims
    return Placed(dict(plan.assignments), {p.key: got for p in cluster.pending if p.key in plan.assignments
                                           and p.resource_claims
                                           and (got := placed_claims(claims, plan.details.reserved, p))})


def split(held: Sequence[Reservation], t: float, pods: Sequence[Pod] = ()) -> tuple[list[Reservation],
                                                                                    tuple[Reservation, ...]]:
    """The reservations whose start has come by t (their pods started there), and those still ahead of it, or due
    with their pods among `pods` (planned at t with the batch, as a cycle then plans a holder: its room kept)."""
    planned = {p.key for p in pods}
    started = [r for r in held if r.start <= t and not any(key in planned for key, _ in r.pods)]
    return started, tuple(r for r in held if all(r is not s for s in started))


@dataclass(slots=True)
class FutureRoom:
    """A cluster's answers at times t ≥ now (engine.time.timeline.Room): where pods would go, and whether capacity alone
    could take them."""

    cluster: Cluster
    now: float  # the plan's
    base: View  # the bound pods, now
    placement: PlacementRules | None
    time_limit: float  # per plan asked
    seed: int
    ends: np.ndarray  # per pod of base.pods
    pending: dict[str, Pod]
    where: np.ndarray  # per pod of base.pods: its node's position
    position: dict[str, int]  # node name -> position
    claim_ends: dict[str, float]  # allocated ResourceClaims that free: claim key -> when (engine.time.dra_time)
    started: tuple[Begun, ...] = ()  # pods placed now for good (a carried cycle's): running beside every answer

    @classmethod
    def of(cls, cluster: Cluster, now: float, base: View, placement: PlacementRules | None, time_limit: float,
           seed: int, runtimes: Runtimes | None = None) -> FutureRoom:
        """`base` is the view of the cluster's bound pods, `runtimes` the policies' estimates the cluster's were
        given (engine.time.timeline.with_estimates), which the view's pods may lack. Pods bound to nodes the view
        does not know are left out at later times (they hold no room)."""
        base = base.settled()
        found = end_times(base, now, runtimes)
        freed = (claim_ends(cluster.devices, {p.key: float(e) for p, e in zip(base.pods, found)}, cluster.pending)
                 if any(c.reserved_for for c in cluster.devices.claims.values()) else {})
        return cls(cluster, now, base, placement, time_limit, seed, found, {p.key: p for p in cluster.pending},
                   base.node_array(), base.positions(), freed)

    def with_started(self, started: Sequence[Begun]) -> FutureRoom:
        """This cluster with `started` running from now (a carried cycle's placements, bound before its
        reservations are worked out: they hold their room until they end)."""
        return replace(self, started=tuple(started))

    def times(self, horizon: float, held: Sequence[Reservation] = ()) -> list[float]:
        """The distinct times within the horizon at which a running pod, or a pod of a `held` reservation, ends,
        earliest first."""
        until = self.now + horizon
        found = self.ends
        more = {end for r in held for key, _ in r.pods
                if (p := self.pending.get(key)) is not None and p.runtime is not None
                and (end := r.start + p.runtime) <= until}
        more.update(u for b in self.started if (u := b.until) is not None and u <= until)
        return sorted({float(t) for t in np.unique(found[found <= until])} | more)

    def place(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Begun] = ()
              ) -> Placed:
        """Where `pods` go at t, beside `held` and `running` (each on its node while it runs), with the planner at
        a `now` of t: reservations still ahead keep their room from pods that would run past their starts."""
        started, ahead = split(held, t, pods)
        running = self._running(running, t)
        extra = (*self._reserved(started, t), *(b.bound() for b in running))
        view = self.base.without(self.ends <= t, extra)
        at = replace(self.cluster, bound=view.pods, pending=list(pods), devices=self._devices(t, started, running))
        plan = make_plan(at, self.placement, time_limit=self.time_limit, workers=1, seed=self.seed,
                         preference_limit=0.0, view=view, moment=Moment(t, ahead))
        return placed(plan, at)

    def enough(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Begun] = ()
               ) -> bool:
        """Whether the nodes' free capacity at t could hold `pods` at all: each shape of request counted in the
        whole pods that fit node by node, and all together in total. A necessary condition only (every other
        kind still decides in `place`), and cheap: no plan."""
        started, _ = split(held, t, pods)
        running = self._running(running, t)
        names, free = self._free_at(t, self._reserved(started, t), running)
        self._keep_off(free, names, t, held, pods)
        need = np.zeros(len(names), dtype=np.int64)
        for shape, count in Counter(tuple(sorted(p.requests.items())) for p in pods).items():
            asked = [(names[r], v) for r, v in shape if v > 0 and r in names]
            if not asked:
                continue
            slots = np.min(np.stack([np.maximum(free[:, k], 0) // v for k, v in asked]), axis=0)
            if int(slots.sum()) < count:
                return False
            for k, v in asked:
                need[k] += v * count
        return bool(np.all(need <= np.maximum(free, 0).sum(axis=0)))

    def before(self, t: float) -> float | None:
        """The latest time before t at which a running pod ends (None: none ends before t)."""
        latest = float(np.where(self.ends < t, self.ends, -NEVER).max(initial=-NEVER))
        return None if latest == -NEVER else latest

    def holds(self, reservation: Reservation, held: Sequence[Reservation]) -> bool:
        """Whether what `reservation` needs on its nodes is still free there at its start, beside `held` (capacity
        and its devices: the other kinds were asked when it was made; what changes under it in a cycle is room)."""
        where = self.position
        if any(node not in where for node, _ in reservation.need):
            return False
        start = reservation.start
        started, ahead = split(held, start)
        running = self._running((), start)
        names, free = self._free_at(start, self._reserved(started, start), running, [where[n] for n, _ in reservation.need])
        pods = [Pod("", "", gang=reservation.holder)]  # its pods run past any later start, as far as it knows
        self._keep_off(free, names, start, held, pods)
        if not all(v <= 0 or (r in names and free[where[node], names[r]] >= v) for node, need in reservation.need
                   for r, v in need):
            return False
        return not reservation.claims or still_free(
            self._devices(start, started, running, [c for r in ahead for c in r.claims]), reservation.claims)

    def _running(self, running: Sequence[Begun], t: float) -> tuple[Begun, ...]:
        """`running` and the pods `started` now that still run at t."""
        return (*running, *(b for b in self.started if b.runs_at(t))) if self.started else tuple(running)

    def _keep_off(self, free: np.ndarray, names: dict[str, int], t: float, held: Sequence[Reservation],
                  pods: Sequence[Pod]) -> None:
        """`free` (at t) as pods placed at t may use it beside the reservations still ahead that every one of
        `pods` takes from (engine.time.timeline.takes_from): on their nodes no more than is left at their start once
        the running pods still running then and what they need are counted. Bound pods alone counted then (not
        reservations or pods started between t and the start): a necessary condition stays one."""
        for k, r in enumerate(held):
            if r.start <= t or not all(takes_from(r, exempt(held, k), p, t) for p in pods):
                continue
            nodes = [self.position[n] for n, _ in r.need if n in self.position]
            _, then = self._free_at(r.start, (), (), nodes)
            for node, need in r.need:
                i = self.position.get(node)
                for resource, amount in need:
                    if i is not None and resource in names:
                        column = names[resource]
                        free[i, column] = min(free[i, column], then[i, column] - amount)

    def _devices(self, t: float, started: Sequence[Reservation], running: Sequence[Begun],
                 more: Sequence[ResourceClaim] = ()) -> Devices:
        """The devices at t: the claims only pods gone by then used deallocated, those of the reservations started
        by then (their pods still running) and of `running` pods allocated, and `more`."""
        freed = [key for key, end in self.claim_ends.items() if end <= t]
        held = [*(c for r in started for c in self._running_claims(r, t)), *(c for b in running for c in b.claims),
                *more]
        if not freed and not held:
            return self.cluster.devices
        return later_devices(self.cluster.devices, freed, held)

    def _running_claims(self, r: Reservation, t: float) -> list[ResourceClaim]:
        """The claims of a started reservation whose pods still run at t."""
        gone = {key.partition("/")[2] for key, _ in r.pods if (p := self.pending.get(key)) is not None
                and p.runtime is not None and r.start + p.runtime <= t}
        return [c for c in r.claims if not gone.issuperset(c.reserved_for)] if gone else list(r.claims)

    def _free_at(self, t: float, extra: Sequence[Pod], running: Sequence[Begun] = (), only: list[int] | None = None
                 ) -> tuple[dict[str, int], np.ndarray]:
        """Free capacity per node and resource at t, beside `extra` (pods bound, each on its node_name) and
        `running`; `only`: the nodes asked about (the others' rows are left as they are now)."""
        names, free = self.base.free_matrix()
        free = free.copy()
        where = self.where
        gone = self.ends <= t
        if only is not None:
            asked = np.zeros(len(free), dtype=bool)
            asked[only] = True
            gone &= asked[where]
        positions = np.flatnonzero(gone)
        if len(positions) > FEW:  # from the table's request columns, summed per node
            free += self.base.table.summed(gone)
        else:
            pods = self.base.table.pods
            for k in positions.tolist():
                for r, v in pods[k].requests.items():
                    if r in names:
                        free[where[k], names[r]] += v
        for node, requests in chain(((p.node_name or "", p.requests) for p in extra),
                                    ((b.node, b.pod.requests) for b in running)):
            i = self.position.get(node)
            for r, v in requests.items():
                if i is not None and r in names:
                    free[i, names[r]] -= v
        return names, free

    def _reserved(self, started: Sequence[Reservation], t: float) -> list[Pod]:
        """The started reservations' pods still running at t, bound where they started (from its start); for one
        carried from an earlier cycle whose pods are not in this batch, a stand-in per node asking what it needs
        there (for as long as anyone knows)."""
        out = []
        for r in started:
            if all(key in self.pending for key, _ in r.pods):
                out += [replace(p, node_name=node, gang=None, started=rfc3339(r.start)) for key, node in r.pods
                        if (p := self.pending[key]).runtime is None or r.start + p.runtime > t]
            else:
                out += [Pod("", f"reserved:{r.holder}:{node}", requests=dict(need), node_name=node)
                        for node, need in r.need]
        return out
