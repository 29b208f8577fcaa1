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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from .model import Cluster, Pod, Reservation

# a unit (a gang's pending pods, or one pod) in a cluster: where each of its pods would start (pod key -> node),
# or None when it does not fit there whole
Fits = Callable[[Cluster, tuple[Pod, ...]], dict[str, str] | None]

DEFAULT_RESERVATIONS = 2  # units holding a reservation at once (a policy sets another number)
DEFAULT_HORIZON = 7 * 24 * 3600  # seconds ahead a reservation or an estimate may reach
ESTIMATED = 16  # waiting units in line given an estimated start at most (each costs a few plans)
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


def ends(pod: Pod, now: float) -> float | None:
    """When a running pod ends at the latest: its start (now, if it has none yet) plus its runtime bound, and not
    before now (a pod past its bound is being stopped); None without a bound."""
    if pod.runtime is None:
        return None
    started = seconds(pod.started)
    return max(now, (now if started is None else started) + pod.runtime)


def ends_after(pod: Pod, now: float, start: float) -> bool:
    """Whether a pending pod started now would still run at `start` (a pod without a bound always would)."""
    return pod.runtime is None or now + pod.runtime > start


def at(cluster: Cluster, now: float, t: float, held: Iterable[Reservation] = (), pods: dict[str, Pod] | None = None
       ) -> Cluster:
    """The cluster at time t: the running pods that end by t gone; the pods of `held` reservations bound where
    they are to start (their room is theirs from t on: a later unit never counts on it)."""
    running = [p for p in cluster.bound if (end := ends(p, now)) is None or end > t]
    by_key = pods if pods is not None else {p.key: p for p in cluster.pending}
    placed = [replace(by_key[key], node_name=node, gang=None) for r in held for key, node in r.pods if key in by_key]
    return replace(cluster, bound=running + placed)


def with_estimates(cluster: Cluster, runtimes: Callable[[Pod], int | None] | None) -> Cluster:
    """The cluster with the policies' runtime estimates on the pods whose spec sets no bound (a `runtime`
    statement in scope; engine.policy.lower.runtime_rules)."""
    if runtimes is None or cluster.now is None:
        return cluster

    def estimated(pods: list[Pod]) -> list[Pod]:
        return [replace(p, runtime=est) if p.runtime is None and (est := runtimes(p)) is not None else p for p in pods]
    return replace(cluster, bound=estimated(cluster.bound), pending=estimated(cluster.pending))


def snapshot_time(cluster: Cluster) -> float | None:
    """A snapshot's time, as near as it says: its newest pod creation or start (None: it has no times)."""
    times = [t for p in (*cluster.bound, *cluster.pending) for t in (seconds(p.created), seconds(p.started))
             if t is not None]
    return max(times, default=None)


def timed(cluster: Cluster) -> bool:
    """Whether time can change the plan: a "now" is known and some running pod has a runtime bound."""
    return cluster.now is not None and any(p.runtime is not None for p in cluster.bound)


def end_times(cluster: Cluster, now: float, horizon: float) -> list[float]:
    """The distinct times within the horizon at which a running pod ends, earliest first."""
    return sorted({end for p in cluster.bound if (end := ends(p, now)) is not None and end <= now + horizon})


@dataclass(frozen=True, slots=True)
class Shadow:
    """When a unit fits whole, and where its pods go then."""

    start: float
    where: dict[str, str]


def shadow(cluster: Cluster, unit: tuple[Pod, ...], now: float, horizon: float, fits: Fits,
           held: tuple[Reservation, ...] = ()) -> Shadow | None:
    """The earliest end time of a running pod (within the horizon) after which `unit` fits whole, beside the room
    `held` reservations keep; None if it does not fit even once every bounded pod has ended. Bisects: room only
    grows as pods end."""
    times = end_times(cluster, now, horizon)
    pods = {p.key: p for p in cluster.pending}
    low, high, found = 0, len(times) - 1, None
    while low <= high:
        mid = (low + high) // 2
        where = fits(at(cluster, now, times[mid], held, pods), unit)
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


def reservation(holder: str, unit: tuple[Pod, ...], found: Shadow) -> Reservation:
    """A reservation for `unit` at its shadow: its pods' nodes and what they need on each."""
    need: dict[str, dict[str, int]] = {}
    for pod in unit:
        node = found.where.get(pod.key)
        if node is None:
            continue
        for resource, amount in pod.requests.items():
            need.setdefault(node, {})[resource] = need.get(node, {}).get(resource, 0) + amount
    return Reservation(holder, tuple(sorted(found.where.items())), found.start,
                       tuple((node, tuple(sorted(amounts.items()))) for node, amounts in sorted(need.items())))


def reserve(cluster: Cluster, waiting: Iterable[str], now: float, fits: Fits, most: int = DEFAULT_RESERVATIONS,
            horizon: float = DEFAULT_HORIZON) -> tuple[Reservation, ...]:
    """Reservations for the first `most` units in line that cannot start now even alone (others wait on the
    batch's competition, not on time) and will fit within the horizon, each beside the ones before it; only the
    first `most` × LOOKED_AT units in line are looked at."""
    held: list[Reservation] = []
    for unit in in_line(cluster, waiting)[:most * LOOKED_AT]:
        if len(held) >= most:
            break
        if fits(cluster, unit) is not None:
            continue
        found = shadow(cluster, unit, now, horizon, fits, tuple(held))
        if found is not None:
            held.append(reservation(unit[0].gang or unit[0].key, unit, found))
    return tuple(held)


@dataclass(frozen=True, slots=True)
class Estimate:
    """When a waiting pod is expected to start (None: it cannot be estimated), and the words that say so."""

    start: float | None
    why: str


def estimate(cluster: Cluster, waiting: Iterable[str], now: float, fits: Fits, held: tuple[Reservation, ...],
             horizon: float = DEFAULT_HORIZON, most: int = ESTIMATED) -> dict[str, Estimate]:
    """An estimated start for each waiting pod that holds no reservation: its unit's shadow time beside the
    reservations held (the room they keep is theirs; units ahead in line that hold none may still take it
    first, so an estimate is the earliest it can start). The first `most` units in line are estimated; the rest
    are said to wait behind them."""
    reserved = {key for r in held for key, _ in r.pods}
    units = [u for u in in_line(cluster, waiting) if not reserved & {p.key for p in u}]
    out: dict[str, Estimate] = {}
    for k, unit in enumerate(units):
        if k >= most:
            found: Estimate = Estimate(None, f"not estimated: {most} units wait ahead of it in line")
        elif fits(at(cluster, now, now, held), unit) is not None:
            found = Estimate(now, "expected to start in the next cycle (pods of this batch took the room first)")
        elif (shadow_of := shadow(cluster, unit, now, horizon, fits, held)) is not None:
            found = Estimate(shadow_of.start, f"expected to start at {rfc3339(shadow_of.start)} at the earliest, "
                                              "when enough running pods have ended (their runtime bounds)")
        else:
            found = Estimate(None, "not estimated: it does not fit even once every running pod with a runtime "
                                   "bound has ended (pods without activeDeadlineSeconds or a policy's runtime "
                                   f"are taken as never ending), within {horizon / 3600:g} h")
        for pod in unit:
            out[pod.key] = found
    return out
