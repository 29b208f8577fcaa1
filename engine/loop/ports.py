"""The small interface between the scheduler loop and the Kubernetes API.

Everything in the loop codes against `ClusterAPI`; `api.KubeAPI` is the real implementation, and the
tests use an in-memory one. Objects cross this boundary as plain dicts (manifests), as `build_cluster` takes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]




@dataclass(frozen=True, slots=True)
class WatchTarget:
    """What a reflector lists and watches: a kind, optionally one namespace and one object name."""

    kind: str  # Node, Pod, PodGroup, PriorityClass, PodDisruptionBudget, ConfigMap
    namespace: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    obj: Obj


class ApiUnavailable(Exception):
    """The apiserver could not be reached or answered 5xx/429: retry with backoff."""


class Gone(Exception):
    """410 Gone: the resourceVersion is too old; list again."""


class NotFound(Exception):
    """404: the object (or, for PodGroups, the CRD) does not exist."""


class Conflict(Exception):
    """409: already exists, already bound, or a stale resourceVersion (optimistic concurrency)."""


class ApiError(Exception):
    """Any other refusal (403, 422, ...); the message is the apiserver's."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass(frozen=True, slots=True)
class ApiResult:
    """What the apiserver answered to a write (bind, evict, patch, create, delete): done or refused, and why."""

    ok: bool
    status: int  # HTTP status; 0 when the apiserver was not reached
    message: str = ""
    prebind: bool = False  # failed before the Binding (a volume step): the pod is retried, not left to the watch
    obj: Obj | None = None  # a patch's answer: the object as it is now


class ClusterAPI(Protocol):
    """What the loop needs from Kubernetes, and nothing more."""

    def list(self, resource: WatchTarget) -> tuple[list[Obj], str]:
        """All objects (each with kind and apiVersion) and the list's resourceVersion."""
        ...

    def watch(self, resource: WatchTarget, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        """Changes after `resource_version` until the server ends the watch; raises Gone, ApiUnavailable."""
        ...

    def warm(self, connections: int) -> int:
        """Open this many connections ahead of the first binds and events (how many opened)."""
        ...

    def server_version(self) -> tuple[int, int] | None:
        """The apiserver's release (major, minor) from /version; None when it cannot be read: where a status write
        differs between releases (a refused PodGroup's reason), the older one's is written."""
        ...

    def bind(self, namespace: str, name: str, uid: str, node: str) -> ApiResult:
        """POST a Binding (with the pod's UID as precondition)."""
        ...

    def evict(self, namespace: str, name: str, uid: str, message: str) -> ApiResult:
        """Preempt a victim: DisruptionTarget condition, then delete with its UID as precondition (404: gone)."""
        ...

    def patch(self, kind: str, namespace: str, name: str, body: Obj, subresource: str = "") -> ApiResult:
        """Merge-patch one object (a volume's claimRef, a claim's selected node) or its `subresource` (a pod
        group's status); conditional on metadata.resourceVersion when `body` carries it."""
        ...

    def create_object(self, kind: str, namespace: str, body: Obj) -> ApiResult:
        """POST one object (a pod's extended-resource claim); the answer, with its generated name, in `obj`."""
        ...

    def delete_object(self, kind: str, namespace: str, name: str) -> ApiResult:
        """DELETE one object (404 counts as done)."""
        ...

    def nominate(self, namespace: str, name: str, node: str) -> None:
        """Set the preemptor's status.nominatedNodeName while its victims leave."""
        ...

    def set_unschedulable(self, namespace: str, name: str, message: str, reason: str = "Unschedulable") -> None:
        """Patch the pod's PodScheduled condition to False / `reason` (Unschedulable, or SchedulerError for an
        error rather than a lack of room, as kube-scheduler words them) / message."""
        ...

    def set_condition(self, namespace: str, name: str, condition: Obj) -> None:
        """Merge one condition (by type) into a pod's status: the scheduler's own pod tells what it schedules with."""
        ...

    def create_event(self, involved: Obj, type_: str, reason: str, message: str, name: str | None = None,
                     count: int = 1) -> None:
        """Record an Event about `involved` (a manifest with kind, metadata): named `name` (else a fresh name),
        seen `count` times."""
        ...

    def update_event(self, namespace: str, name: str, message: str, count: int) -> bool:
        """Patch an Event of a series (count, lastTimestamp, message); False when it no longer exists."""
        ...

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        ...

    def create_lease(self, namespace: str, lease: Obj) -> Obj:
        """Raises Conflict when it exists already."""
        ...

    def update_lease(self, namespace: str, lease: Obj) -> Obj:
        """PUT with the lease's resourceVersion; raises Conflict when someone else wrote first."""
        ...
