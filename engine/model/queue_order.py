"""Units and their place in line, written once: compile's queue, the reservations' line, quota order and the
preemptors' re-checks all sort pending pods with it.

A *unit* is what starts together: one pod, or a gang's pending pods (a Coscheduling PodGroup, a native
scheduling.k8s.io PodGroup, or a policy's `gang by label`). Its place in line is kube-scheduler's queue sort:
the highest priority first (PrioritySort), then the time the unit entered the line — a gang with an object of its
own by that object's creationTimestamp (Coscheduling's `Less` reads the PodGroup's), one without (a policy's
`gang by label`), or whose object has none, by its oldest pending member's, a pod by its own — then its key
(namespace/name of the pod or the gang), so equal times are ordered the same way everywhere. A gang's pods follow
each other, oldest first. Victim order (lowest priority first, newest first) is a different order and lives with
preemption.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .cluster import Gang, Pod


class Place(NamedTuple):
    """A unit's place in line; lower is earlier."""

    rank: int  # minus the priority: the highest priority first
    entered: str  # creationTimestamp of the unit (RFC 3339 text sorts as time; "" first)
    key: str  # namespace/name of the gang or the pod: equal times, one order everywhere

    @classmethod
    def of(cls, priority: int, entered: str, key: str) -> Place:
        return cls(-priority, entered, key)


def entered(pods: Iterable[Pod], gangs: Mapping[str, Gang] | None = None) -> dict[str, str]:
    """When each gang among `pods` entered the line (gang key -> creationTimestamp): its object's (`Gang.created`,
    from `gangs`), else its oldest member's among `pods`."""
    out: dict[str, str] = {}
    for pod in pods:
        if pod.gang is not None and (pod.gang not in out or pod.created < out[pod.gang]):
            out[pod.gang] = pod.created
    if gangs:
        for key in out:
            gang = gangs.get(key)
            if gang is not None and gang.created:
                out[key] = gang.created
    return out


def unit_key(pod: Pod) -> str:
    """The unit a pod starts with: its gang's key, or its own."""
    return pod.gang or pod.key


def place_of(pod: Pod, times: Mapping[str, str]) -> Place:
    """A pod's unit's place, by the pod's own priority (`times`: `entered`)."""
    return Place.of(pod.priority, times.get(pod.gang, pod.created) if pod.gang else pod.created, unit_key(pod))


def pod_order(pod: Pod, times: Mapping[str, str]) -> tuple[Place, str, str]:
    """A pod's place in the queue: its unit's, then, within a gang, oldest first, then by name."""
    return (place_of(pod, times), pod.created, pod.name)


def queue_order(pods: Iterable[Pod], gangs: Mapping[str, Gang] | None = None,
                line: Iterable[Pod] | None = None) -> list[Pod]:
    """`pods` in queue order. A gang entered the line when its object was created (`gangs`), else with its oldest
    member among `line` (default: `pods`; a caller ordering some of the pending pods passes them all)."""
    pods = list(pods)
    times = entered(pods if line is None else line, gangs)
    return sorted(pods, key=lambda p: pod_order(p, times))


def in_line(pods: Iterable[Pod], gangs: Mapping[str, Gang] | None = None,
            line: Iterable[Pod] | None = None) -> list[tuple[Pod, ...]]:
    """The units of `pods` (a gang's pods together, a pod alone), first in line first; a unit's priority is its
    highest member's (`gangs`, `line`: as `queue_order`'s)."""
    units: dict[str, list[Pod]] = {}
    for pod in pods:
        units.setdefault(unit_key(pod), []).append(pod)
    times = entered((p for members in units.values() for p in members) if line is None else line, gangs)

    def place(members: list[Pod]) -> Place:
        return place_of(members[0], times)._replace(rank=-max(p.priority for p in members))

    return [tuple(members) for members in sorted(units.values(), key=place)]
