"""Time in the plan (issue 29): when running pods end, and when a pod or gang that cannot start now will. Pure.

A pod's runtime bound is `spec.activeDeadlineSeconds` (Kubernetes' own time limit, as Slurm uses a job's time
limit) or a policy's estimate; a running pod ends by `status.startTime` + it, a pod with neither is taken as never
ending. Room only grows as pods end, so the earliest time a unit fits — its shadow time — is found by bisecting
the running pods' end times, asking at each the same planner that places pods now (`Fits`: every constraint kind
takes part). The first units in line (priority, then age) get a reservation there; room reserved is taken by
pods placed meanwhile only if they end before it starts (engine.kinds.reservations: backfill).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import chain
from typing import Protocol

from .model import Cluster, Pod, Reservation


class Room(Protocol):
    """The planner's answers about the cluster at a time t ≥ now (engine.timed_plan): the running pods that end by
    t gone, each `held` reservation's pods bound where they are to start, `running` pods bound where they run."""

    def times(self, horizon: float) -> list[float]:
        """The distinct times within the horizon at which a running pod ends, earliest first."""
        ...

    def place(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Pod] = ()
              ) -> dict[str, str]:
        """Where those of `pods` that fit at t go (pod key -> node), every constraint kind taking part."""
        ...

    def enough(self, t: float, held: Sequence[Reservation], pods: Sequence[Pod], running: Sequence[Pod] = ()) -> bool:
        """Whether capacity alone could take `pods` at t: a necessary condition for `place` to place them all."""
        ...

    def holds(self, reservation: Reservation, held: Sequence[Reservation]) -> bool:
        """Whether what `reservation` needs on its nodes is still free there at its start, beside `held`."""
        ...

    def before(self, t: float) -> float | None:
        """The latest time before t at which a running pod ends (None: none ends before t)."""
        ...


def fits(room: Room, t: float, held: Sequence[Reservation], unit: Sequence[Pod]) -> dict[str, str] | None:
    """Where each pod of `unit` starts at t (pod key -> node), or None when it does not fit there whole."""
    if not room.enough(t, held, unit):
        return None
    got = room.place(t, held, unit)
    return dict(got) if len(got) == len(unit) else None


DEFAULT_RESERVATIONS = 2  # units holding a reservation at once (a policy sets another number)
DEFAULT_HORIZON = 7 * 24 * 3600  # seconds ahead a reservation or an estimate may reach
ESTIMATE_STEPS = 12  # times the estimate sweep plans the waiting pods at, besides now
LOOKED_AT = 4  # units in line looked at per reservation held at most (each costs a plan or a few: a batch left
# waiting by competition, not time, is not tried one unit at a time)


def seconds(rfc3339: str) -> float | None:
    """An RFC 3339 time in seconds since the epoch (None: empty or unreadable)."""
    if not rfc3339:
        return None
    try:
        at = datetime.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (at if at.tzinfo else at.replace(tzinfo=datetime.UTC)).timestamp()


def rfc3339(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ends(pod: Pod, now: float, runtime: int | None = None) -> float | None:
    """When a running pod ends at the latest: its start (now, if it has none yet) plus its runtime bound (`runtime`
    where a policy estimates one its spec does not set), and not before now (a pod past its bound is being
    stopped); None without a bound."""
    bound = pod.runtime if pod.runtime is not None else runtime
    if bound is None:
        return None
    started = seconds(pod.started)
    return max(now, (now if started is None else started) + bound)


def ends_after(pod: Pod, now: float, start: float) -> bool:
    """Whether a pending pod started now would still run at `start` (a pod without a bound always would)."""
    return pod.runtime is None or now + pod.runtime > start


def with_estimates(cluster: Cluster, runtimes: Callable[[Pod], int | None] | None) -> Cluster:
    """The cluster with the policies' runtime estimates on the pods whose spec sets no bound (a `runtime`
    statement in scope; engine.policy.lower.runtime_rules)."""
    if runtimes is None or cluster.now is None:
        return cluster

    def estimated(pods: list[Pod]) -> list[Pod]:
        return [replace(p, runtime=est) if p.runtime is None and (est := runtimes(p)) is not None else p for p in pods]
    return replace(cluster, bound=estimated(cluster.bound), pending=estimated(cluster.pending))


FLAG, CLOCK, SNAPSHOT = "flag", "clock", "snapshot"  # where a plan's now came from (`Now.source`)
OUTLIER_GAP = 24 * 3600  # a pod time this far (and farther than the rest spread) after the others is not "now"


@dataclass(frozen=True, slots=True)
class Now:
    """The plan's now and where it came from: `--now`, a live cluster's clock, or a snapshot's newest pod time
    (then whose, which field, and the pods whose times lie so far beyond the rest that they were left out). The
    table and `stats.now` show it, so a plan's times can be read against it."""

    at: float
    source: str  # FLAG, CLOCK or SNAPSHOT
    pod: str = ""  # SNAPSHOT: the pod whose time it is
    field: str = ""  # SNAPSHOT: creationTimestamp or startTime
    outliers: tuple[tuple[str, str, float], ...] = ()  # SNAPSHOT: (pod, field, time) left out, newest last

    def to_dict(self) -> dict[str, object]:
        """`stats.now` (docs/dry-run-contract.md)."""
        return {"at": rfc3339(self.at), "source": self.source, **({"pod": self.pod, "field": self.field}
                if self.pod else {}), **({"ignored": {pod: rfc3339(t) for pod, _, t in self.outliers}}
                                         if self.outliers else {})}

    def words(self) -> str:
        """"2026-11-25T12:00:00Z, the snapshot's newest pod time (default/p's creationTimestamp)", and so on."""
        why = {FLAG: "from --now", CLOCK: "the clock (a live cluster's state)"}.get(
            self.source, f"the snapshot's newest pod time ({self.pod}'s {self.field}"
            f"{f'; {len(self.outliers)} pod time(s) far beyond the rest left out' if self.outliers else ''})")
        return f"{rfc3339(self.at)}, {why}"

    def notes(self) -> list[str]:
        """What a reader must know: pod times that were not taken as now, and why."""
        if not self.outliers:
            return []
        shown = ", ".join(f"{pod} ({field} {rfc3339(t)})" for pod, field, t in self.outliers[-3:])
        more = f" and {len(self.outliers) - 3} more" if len(self.outliers) > 3 else ""
        return [f"now is {rfc3339(self.at)} ({self.pod}'s {self.field}), not the snapshot's newest pod time: "
                f"{len(self.outliers)} pod time(s) far beyond the rest were left out: {shown}{more}; --now plans "
                "from another time"]


def choose_now(cluster: Cluster, flag: float | None = None, clock: float | None = None) -> Now | None:
    """The plan's now: `--now` when given, else a live cluster's clock, else the snapshot's (None: none known)."""
    if flag is not None:
        return Now(flag, FLAG)
    if clock is not None:
        return Now(clock, CLOCK)
    return snapshot_now(cluster)


def snapshot_now(cluster: Cluster) -> Now | None:
    """A snapshot's time, as near as it says: its newest pod creation or start (None: it has no times), leaving
    out pod times far beyond the rest (`first_outlier`): a clock set wrong or a hand-edited year would otherwise
    end every running pod at once."""
    times = sorted((newest[0], pod.key, newest[1]) for pod in (*cluster.bound, *cluster.pending)
                   if (newest := _newest(pod)) is not None)
    if not times:
        return None
    cut = first_outlier([t for t, _, _ in times])
    at, pod, field = times[cut - 1]
    return Now(at, SNAPSHOT, pod, field, tuple((p, f, t) for t, p, f in times[cut:]))


def _newest(pod: Pod) -> tuple[float, str] | None:
    """A pod's newest time and the field it is in (None: it has none)."""
    times = [(t, name) for t, name in ((seconds(pod.created), "creationTimestamp"), (seconds(pod.started), "startTime"))
             if t is not None]
    return max(times, default=None)


def first_outlier(times: Sequence[float]) -> int:
    """Where the times (sorted) far beyond the rest begin (len(times): none are). The newest few — fewer than the
    rest — are left out when they all come more than OUTLIER_GAP after the rest, and more than the rest's newer
    half spans (a cluster that ran for weeks and was quiet for two days is not suspect; one whose pods came within
    an hour and one a year later is); of several such gaps, the widest."""
    n, cut, widest = len(times), len(times), 0.0
    for i in range(n // 2 + 1, n):  # times[i:] are fewer than times[:i]
        gap, spread = times[i] - times[i - 1], times[i - 1] - times[(i - 1) // 2]
        if gap > max(OUTLIER_GAP, spread) and gap > widest:
            cut, widest = i, gap
    return cut


def snapshot_time(cluster: Cluster) -> float | None:
    """A snapshot's time (`snapshot_now`), in seconds since the epoch."""
    now = snapshot_now(cluster)
    return None if now is None else now.at


def timed(cluster: Cluster) -> bool:
    """Whether time is in the plan: a "now" is known and some pod, running or waiting, has a runtime bound (a
    cluster where no one declares one plans as it always has, at no cost)."""
    return cluster.now is not None and any(p.runtime is not None for p in chain(cluster.bound, cluster.pending))


def end_times(cluster: Cluster, now: float, horizon: float) -> list[float]:
    """The distinct times within the horizon at which a running pod ends, earliest first."""
    return sorted({end for p in cluster.bound if (end := ends(p, now)) is not None and end <= now + horizon})


@dataclass(frozen=True, slots=True)
class Shadow:
    """When a unit fits whole, and where its pods go then."""

    start: float
    where: dict[str, str]


def shadow(room: Room, unit: tuple[Pod, ...], horizon: float, held: tuple[Reservation, ...] = ()) -> Shadow | None:
    """The earliest end time of a running pod (within the horizon) after which `unit` fits whole, beside the room
    `held` reservations keep; None if it does not fit even once every bounded pod has ended. Room only grows as
    pods end, so it bisects: first on capacity alone (no plan), then with plans from where capacity suffices —
    where capacity is all that stands in the way, one plan."""
    times = room.times(horizon)
    low, high = 0, len(times)
    while low < high:  # the first time capacity suffices
        mid = (low + high) // 2
        if room.enough(times[mid], held, unit):
            high = mid
        else:
            low = mid + 1
    if low == len(times):
        return None
    where = fits(room, times[low], held, unit)
    if where is not None:
        return Shadow(times[low], where)
    low, high, found = low + 1, len(times) - 1, None
    while low <= high:
        mid = (low + high) // 2
        where = fits(room, times[mid], held, unit)
        if where is None:
            low = mid + 1
        else:
            found, high = Shadow(times[mid], where), mid - 1
    return found


def in_line(cluster: Cluster, waiting: Iterable[str]) -> list[tuple[Pod, ...]]:
    """The units (a gang's pending pods, or a pod) among the `waiting` pod keys, first in line first: priority,
    then age (creation time), then name."""
    pods = {p.key: p for p in cluster.pending}
    units: dict[str, list[Pod]] = {}
    for key in waiting:
        pod = pods.get(key)
        if pod is not None:
            units.setdefault(pod.gang or pod.key, []).append(pod)
    return sorted((tuple(members) for members in units.values()),
                  key=lambda u: (-max(p.priority for p in u), min(p.created for p in u), u[0].key))


def reservation(holder: str, unit: tuple[Pod, ...], found: Shadow, scope: str = "") -> Reservation:
    """A reservation for `unit` at its shadow: its pods' nodes and what they need on each; `scope`: the `reserve`
    statement it counts under."""
    need: dict[str, dict[str, int]] = {}
    for pod in unit:
        node = found.where.get(pod.key)
        if node is None:
            continue
        for resource, amount in pod.requests.items():
            need.setdefault(node, {})[resource] = need.get(node, {}).get(resource, 0) + amount
    return Reservation(holder, tuple(sorted(found.where.items())), found.start,
                       tuple((node, tuple(sorted(amounts.items()))) for node, amounts in sorted(need.items())), scope)


# a unit's reservation limits (engine.ir.ReserveRules: a `reserve` statement in scope), or None for the defaults
Limits = Callable[[Pod], tuple[str, int, int] | None]
DEFAULT_LIMITS = ("", DEFAULT_RESERVATIONS, DEFAULT_HORIZON)


def reserve(cluster: Cluster, waiting: Iterable[str], now: float, room: Room, limits: Limits | None = None,
            kept: tuple[Reservation, ...] = (), placed: Iterable[str] = (), prior: Iterable[Reservation] = (),
            earlier: bool = True) -> tuple[Reservation, ...]:
    """Reservations for the units first in line that wait, each beside the ones before it: where it fits alone now,
    from now, if it lost its room to smaller pods `placed` now or to ones behind it in line (a stream of them must not
    keep the head of the line waiting for ever; one that lost to pods like it and before it waits on competition),
    else where and when it will fit within its horizon (its shadow): at most `most`
    for the units a `reserve` statement covers (its pods share the count; the rest: 2 within 7 days), only the
    first units in line looked at (LOOKED_AT per reservation the defaults allow). `kept`: reservations held already
    (the last cycle's, for units not planned now), first among them and counted; `prior`: the last cycle's for
    units planned now, each kept while its room is still there at its start (a reservation moves only when the
    cluster changes under it, and costs no search meanwhile), their units first among those of their priority (an
    older unit back in line does not take the place of a promise made; a higher priority does), and from now if
    they fit now; with `earlier` False, one still holding is kept without asking whether its unit could start any
    earlier (the loop asks only now and then)."""
    held: list[Reservation] = list(kept)
    before = {r.holder: r for r in prior}
    pods = {p.key: p for p in cluster.pending}
    count: dict[str, int] = {}
    for r in kept:  # (their pods are not in this batch: each says what it counts under)
        count[r.scope] = count.get(r.scope, 0) + 1
    now_placed = set(placed)
    others = [pods[k] for k in now_placed if k in pods]
    line = in_line(cluster, waiting)  # those holding one first among their priority: a promise is kept while it can
    line.sort(key=lambda u: (-max(p.priority for p in u), (u[0].gang or u[0].key) not in before))
    for unit in line[:DEFAULT_RESERVATIONS * LOOKED_AT]:
        scope, most, horizon = _limits(unit[0], limits)
        if count.get(scope, 0) >= most:
            continue
        alone = fits(room, now, held, unit)
        promised = before.get(unit[0].gang or unit[0].key)
        if alone is not None and promised is None and (all(p.key in now_placed for p in unit)
                                                       or not _passed_over(unit, others)):
            continue  # it starts now, or lost to pods like it and before it in line: competition, not starvation
        found = _reservation(room, unit, now, alone, horizon, tuple(held), promised, scope, earlier)
        if found is not None:
            held.append(found)
            count[scope] = count.get(scope, 0) + 1
    return tuple(held)


def _reservation(room: Room, unit: tuple[Pod, ...], now: float, alone: dict[str, str] | None, horizon: float,
                 held: tuple[Reservation, ...], prior: Reservation | None, scope: str, earlier: bool = True
                 ) -> Reservation | None:
    """A unit's reservation: from now where it fits alone now; else its last one while that still holds and
    capacity alone could not take the unit any earlier (pods that ended early: then it moves earlier; asked only
    with `earlier`); else at its shadow (None: none within the horizon)."""
    holder = unit[0].gang or unit[0].key
    if alone is not None:
        return reservation(holder, unit, Shadow(now, alone), scope)
    if prior is not None and prior.start > now and {key for key, _ in prior.pods} == {p.key for p in unit}:
        before = room.before(prior.start) if earlier else None
        if (before is None or before <= now or not room.enough(before, held, unit)) and room.holds(prior, held):
            return prior
    found = shadow(room, unit, horizon, held)
    return None if found is None else reservation(holder, unit, found, scope)


def _passed_over(unit: tuple[Pod, ...], placed: list[Pod]) -> bool:
    """Whether a unit that fits alone now lost its room to pods placed now that should not come first: it is a
    gang, or some placed pod asks for no more of anything it asks for and is smaller (less of one) or behind it in
    line (a lower priority, or the same and younger). Kept waiting by them, a stream of small or newer pods could
    keep it waiting for ever (the starvation reservations are for), or start it later than it was promised."""
    if len(unit) > 1:
        return True
    pod = unit[0]
    wants = pod.requests
    place = (-pod.priority, pod.created, pod.key)
    return any(all(p.requests.get(r, 0) <= v for r, v in wants.items()) and
               (any(p.requests.get(r, 0) < v for r, v in wants.items() if r != "pods")
                or (-p.priority, p.created, p.key) > place) for p in placed)


def _limits(pod: Pod | None, limits: Limits | None) -> tuple[str, int, int]:
    found = limits(pod) if limits is not None and pod is not None else None
    return found if found is not None else DEFAULT_LIMITS


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a waiting pod is expected to start (None: it cannot be estimated), and the words that say so."""

    start: float | None
    why: str


def sweep_times(times: list[float], steps: int) -> list[float]:
    """At most `steps` of the running pods' end `times`, spread over them (the last one always): the times the
    estimate sweep plans at."""
    if len(times) <= steps:
        return times
    return sorted({times[min(len(times) - 1, (k + 1) * len(times) // steps - 1)] for k in range(steps)})


def estimate(cluster: Cluster, waiting: Iterable[str], now: float, room: Room, held: tuple[Reservation, ...],
             started: dict[str, str], horizon: float = DEFAULT_HORIZON, steps: int = ESTIMATE_STEPS
             ) -> dict[str, Estimate]:
    """An estimated start for each waiting pod that holds no reservation, by sweeping time forward: at now (beside
    the pods `started` now) and then at up to `steps` of the running pods' end times, the waiting pods are planned
    together as a batch, beside the reservations held and the pods estimated to start earlier (while they run);
    a pod placed at a time is expected to start then (at the latest: the sweep steps over some end times). The
    batch decides among them as it does now (priority, gangs whole)."""
    reserved = {key for r in held for key, _ in r.pods}
    wanted = set(waiting) - reserved
    left = [p for p in cluster.pending if p.key in wanted]
    out: dict[str, Estimate] = {}
    if not left:
        return out
    pods = {p.key: p for p in cluster.pending}
    begun: list[tuple[Pod, float]] = [(replace(pods[k], node_name=n, gang=None), now) for k, n in started.items()
                                      if k in pods]
    for t in [now, *sweep_times(room.times(horizon), steps)]:
        if not left:
            break
        running = [p for p, begin in begun if p.runtime is None or begin + p.runtime > t]
        if not any(room.enough(t, held, [p], running) for p in _shapes(left)):
            continue  # no waiting pod's requests fit anywhere yet: no plan
        got = room.place(t, held, left, running)
        for pod in left:
            if pod.key in got:
                out[pod.key] = Estimate(t, "expected to start in the next cycle (pods of this batch took the room "
                                           "first)" if t == now else f"expected to start by {rfc3339(t)}, when "
                                           "enough running pods have ended (their runtime bounds)")
                begun.append((replace(pod, node_name=got[pod.key], gang=None), t))
        left = [p for p in left if p.key not in got]
    for pod in left:
        out[pod.key] = Estimate(None, "not estimated: it does not fit even once every running pod with a runtime "
                                      "bound has ended (pods without activeDeadlineSeconds or a policy's runtime "
                                      f"are taken as never ending), within {horizon / 3600:g} h")
    return out


def _shapes(pods: list[Pod]) -> list[Pod]:
    """One pod per distinct request shape."""
    return list({tuple(sorted(p.requests.items())): p for p in pods}.values())
