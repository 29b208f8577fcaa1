"""The planner's answers about a later time, as engine.timeline asks them (one `Later` per plan with time).

The cluster at time t is today's with the running pods that end by t gone and each held reservation's pods bound
where they are to start (their room is theirs from then on). Every bound pod's end is worked out once, as an
array over the table's positions (from its per-pod columns, which the loop's cache keeps), and each time asked is
a view of the table without the pods ended by then (`View.without`): at 50,000 running pods, parsing start times
and copying pod lists per step and pod was most of a plan with time. `enough` answers from capacity alone, so the
shadow search plans only where resources already suffice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .ir import PlacementRules
from .model import Cluster, Pod, Reservation
from .plan import make_plan
from .tables import FEW
from .timeline import ends
from .view import View

NEVER = float("inf")
Runtimes = Callable[[Pod], int | None]


def end_times(base: View, now: float, runtimes: Runtimes | None = None) -> np.ndarray:
    """When each of the view's pods ends at the latest (engine.timeline.ends; inf: no bound): from the table's
    lifetimes, or pod by pod where the policies give runtimes the pods' specs do not."""
    if runtimes is None:
        starts, bounds = base.lifetimes()
        return np.maximum(now, np.where(np.isnan(starts), now, starts) + bounds)
    out = np.full(len(base.pods), NEVER)
    for k, pod in enumerate(base.pods):
        if (end := ends(pod, now, None if pod.runtime is not None else runtimes(pod))) is not None:
            out[k] = end
    return out


@dataclass(slots=True)
class Later:
    """A cluster's answers at times t ≥ now: where pods would go, and whether capacity alone could take them."""

    cluster: Cluster
    base: View  # the bound pods, now
    placement: PlacementRules | None
    time_limit: float  # per plan asked
    seed: int
    ends: np.ndarray  # per pod of base.pods
    pending: dict[str, Pod]
    where: np.ndarray  # per pod of base.pods: its node's position
    position: dict[str, int]  # node name -> position

    @classmethod
    def of(cls, cluster: Cluster, base: View, placement: PlacementRules | None, time_limit: float,
           seed: int, runtimes: Runtimes | None = None) -> Later:
        """`base` is the view of the cluster's bound pods, `runtimes` the policies' estimates the cluster's were
        given (engine.timeline.with_estimates), which the view's pods may lack. Pods bound to nodes the view
        does not know are left out at later times (they hold no room)."""
        assert cluster.now is not None
        base = base.settled()
        return cls(cluster, base, placement, time_limit, seed, end_times(base, cluster.now, runtimes),
                   {p.key: p for p in cluster.pending}, base.node_array(), base.positions())

    def times(self, horizon: float) -> list[float]:
        """The distinct times within the horizon at which a running pod ends, earliest first."""
        assert self.cluster.now is not None
        ends = self.ends
        return [float(t) for t in np.unique(ends[ends <= self.cluster.now + horizon])]

    def place(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Pod] = ()
              ) -> dict[str, str]:
        """Where `pods` go at t, beside `held` and `running` (pods bound, each on its node_name, while they run)."""
        extra = (*self._reserved(held), *running)
        view = self.base.without(self.ends <= t, extra)
        at = replace(self.cluster, bound=view.pods, pending=list(pods))
        return make_plan(at, self.placement, time_limit=self.time_limit, workers=1, seed=self.seed,
                         preference_limit=0.0, view=view).assignments

    def enough(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Pod] = ()) -> bool:
        """Whether the nodes' free capacity at t could hold `pods` at all: each shape of request counted in the
        whole pods that fit node by node, and all together in total. A necessary condition only (every other
        kind still decides in `place`), and cheap: no plan."""
        names, free = self._free_at(t, (*self._reserved(held), *running))
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
        only: the other kinds were asked when it was made; what changes under it in a cycle is capacity)."""
        where = self.position
        if any(node not in where for node, _ in reservation.need):
            return False
        names, free = self._free_at(reservation.start, self._reserved(held), [where[n] for n, _ in reservation.need])
        return all(v <= 0 or (r in names and free[where[node], names[r]] >= v) for node, need in reservation.need
                   for r, v in need)

    def _free_at(self, t: float, extra: Sequence[Pod], only: list[int] | None = None
                 ) -> tuple[dict[str, int], np.ndarray]:
        """Free capacity per node and resource at t, beside `extra` (pods bound, each on its node_name); `only`:
        the nodes asked about (the others' rows are left as they are now)."""
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
        for pod in extra:
            i = self.position.get(pod.node_name or "")
            for r, v in pod.requests.items():
                if i is not None and r in names:
                    free[i, names[r]] -= v
        return names, free

    def _reserved(self, held: Sequence[Reservation]) -> list[Pod]:
        """The held reservations' pods, bound where they are to start; for one carried from an earlier cycle whose
        pods are not in this batch, a stand-in per node asking what it needs there."""
        out = []
        for r in held:
            if all(key in self.pending for key, _ in r.pods):
                out += [replace(self.pending[key], node_name=node, gang=None) for key, node in r.pods]
            else:
                out += [Pod("", f"reserved:{r.holder}:{node}", requests=dict(need), node_name=node)
                        for node, need in r.need]
        return out
