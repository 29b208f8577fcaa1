"""One store of raw objects, fed only by the watches, plus assumed pods (kube-scheduler's assume/forget).

A placed pod is *assumed* on its node until the watch shows it bound (or gone), or it is forgotten when its
binding fails: every snapshot in between shows it bound, so the next batch cannot double-book its node. The
assumptions are held in one place, `Assumptions`: the store settles them on every watch delta before its
listeners hear of it, and the cluster cache reads the same ledger (it keeps only each assumed pod's model).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .ports import Obj, WatchTarget

ObjKey = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name


@dataclass(frozen=True, slots=True)
class Change:
    """One object changed: `old` is None when it was added, `new` None when it was deleted."""

    kind: str
    old: Obj | None
    new: Obj | None


@dataclass(frozen=True, slots=True)
class Assumed:
    uid: str
    node: str
    claims: tuple[tuple[str, Obj], ...] = ()  # (claim key, status.allocation) it allocates, until written


def meta(obj: Obj) -> dict[str, Any]:
    return obj.get("metadata") or {}


def obj_key(kind: str, obj: Obj) -> ObjKey:
    m = meta(obj)
    return kind, m.get("namespace") or "", m.get("name") or ""


def pod_key(obj: Obj) -> str:
    m = meta(obj)
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


def node_of(obj: Obj) -> str | None:
    return (obj.get("spec") or {}).get("nodeName") or None


def assumption_over(new: Obj | None, uid: object) -> bool:
    """The one rule that ends an assumption, the store's and the cache's: the watch shows the pod bound, deleted,
    or replaced by another pod of its name (`new` has another UID than `uid`: the one the store assumed, or the
    one the cache last saw)."""
    return new is None or bool(node_of(new)) or meta(new).get("uid") != uid


def version(obj: Obj) -> int:
    """resourceVersion as a number (etcd's revision; opaque by contract, but ordered in practice)."""
    text = str(meta(obj).get("resourceVersion") or "0")
    return int(text) if text.isdigit() else 0


def _in_scope(key: ObjKey, resource: WatchTarget) -> bool:
    kind, namespace, name = key
    return (kind == resource.kind and (resource.namespace is None or namespace == resource.namespace)
            and (resource.name is None or name == resource.name))


def allocations(assumed: dict[str, Assumed]) -> dict[str, Obj]:
    """Claim key -> the allocation an assumed pod writes to it."""
    return {claim: allocation for a in assumed.values() for claim, allocation in a.claims}


class Assumptions:
    """The one record of assumed pods (uid, node, the claims they allocate), thread-safe. An assumption ends by
    the one rule (`assumption_over`, applied by the store as the watch shows each pod) or by `forget`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, Assumed] = {}

    def add(self, key: str, assumed: Assumed) -> None:
        with self._lock:
            self._held[key] = assumed

    def end(self, key: str) -> None:
        with self._lock:
            self._held.pop(key, None)

    def settle(self, old: Obj | None, new: Obj | None) -> None:
        """A pod changed: its assumption ends once the watch shows it bound, deleted or replaced (another UID)."""
        obj = new or old
        if obj is None:
            return
        key = pod_key(obj)
        with self._lock:
            assumed = self._held.get(key)
            if assumed is not None and assumption_over(new, assumed.uid):
                del self._held[key]

    def get(self, key: str) -> Assumed | None:
        with self._lock:
            return self._held.get(key)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._held

    def all(self) -> dict[str, Assumed]:
        with self._lock:
            return dict(self._held)

    def allocating(self) -> dict[str, Obj]:
        """Claim key -> the allocation an assumed pod writes to it (upstream's in-flight allocations)."""
        with self._lock:
            return allocations(self._held)


class Store:
    """Thread-safe; listeners hear every change after the store has applied it (outside its lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._objects: dict[ObjKey, Obj] = {}
        self.assumptions = Assumptions()
        self._listeners: list[Callable[[Change], None]] = []
        self._forgetters: list[Callable[[str], None]] = []
        self._synced: set[WatchTarget] = set()

    def subscribe(self, listener: Callable[[Change], None]) -> None:
        self._listeners.append(listener)

    def on_forget(self, listener: Callable[[str], None]) -> None:
        """Hear every `forget` (the cluster cache drops the pod's capacity with it)."""
        self._forgetters.append(listener)

    def apply(self, kind: str, event_type: str, obj: Obj) -> None:
        """One watch event (ADDED, MODIFIED, DELETED)."""
        key = obj_key(kind, obj)
        with self._lock:
            old = self._objects.get(key)
            if event_type != "DELETED" and old is not None and version(obj) < version(old):
                return  # older than our own write's answer (`apply_written`): a claim's finalizer patch arriving
                # after its allocation was stored would show the claim free while its pod binds
            if event_type == "DELETED":
                self._objects.pop(key, None)
            else:
                self._objects[key] = obj
            new = None if event_type == "DELETED" else obj
            if kind == "Pod":
                self.assumptions.settle(old, new)
        self._notify([Change(kind, old, new)])

    def apply_written(self, kind: str, obj: Obj) -> None:
        """An object as the apiserver answered our own write: taken now, unless the watch brought a newer one
        already (the next cycle must not see a claim we allocated as free)."""
        with self._lock:
            old = self._objects.get(obj_key(kind, obj))
        if old is None or version(old) < version(obj):
            self.apply(kind, "MODIFIED", obj)

    def replace(self, resource: WatchTarget, objs: Iterable[Obj]) -> None:
        """A (re)list: the objects in `resource`'s scope are exactly `objs`; changes are announced."""
        fresh = {obj_key(resource.kind, o): o for o in objs}
        changes = []
        with self._lock:
            for key in [k for k in self._objects if _in_scope(k, resource) and k not in fresh]:
                changes.append(Change(resource.kind, self._objects.pop(key), None))
            for key, obj in fresh.items():
                old = self._objects.get(key)
                if old is None or meta(old).get("resourceVersion") != meta(obj).get("resourceVersion"):
                    changes.append(Change(resource.kind, old, obj))
                self._objects[key] = obj
            for change in changes:
                if change.kind == "Pod":
                    self.assumptions.settle(change.old, change.new)
        self._notify(changes)
        self.mark_synced(resource)  # once everyone heard the list: a backlog waiting at start is one batch

    def _notify(self, changes: list[Change]) -> None:
        for change in changes:
            for listener in self._listeners:
                listener(change)

    def mark_synced(self, resource: WatchTarget) -> None:
        with self._lock:
            self._synced.add(resource)

    def synced(self, resources: Iterable[WatchTarget]) -> bool:
        with self._lock:
            return all(r in self._synced for r in resources)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((kind, namespace, name))

    def objects(self, kind: str) -> list[Obj]:
        with self._lock:
            return [o for (k, _, _), o in self._objects.items() if k == kind]

    def assume(self, key: str, uid: str, node: str, claims: dict[str, Obj] | None = None) -> None:
        """`key` holds `node` until the watch shows it bound or it is forgotten; `claims` (claim key ->
        status.allocation) hold their devices the same way (upstream's in-flight allocations): the next cycle,
        planned while this one binds, must not give them away."""
        self.assumptions.add(key, Assumed(uid, node, tuple((claims or {}).items())))

    def forget(self, key: str) -> None:
        self.assumptions.end(key)
        for listener in self._forgetters:
            listener(key)

    def is_assumed(self, key: str) -> bool:
        return key in self.assumptions

    def assumed(self) -> dict[str, Assumed]:
        return self.assumptions.all()

    def snapshot(self, batch: set[str]) -> list[tuple[str, Obj]]:
        """(source name, manifest) pairs for build_cluster: assumed pods shown bound (the claims they allocate
        allocated), and of the pods without a node only those in `batch` (the rest wait for a later cycle and hold
        nothing). What a cycle plans comes from the cluster cache (cache.py) instead; this is the whole-store
        reference the cache is tested against (tests/test_cluster_cache.py) and the benchmark's old way."""
        with self._lock:
            items = list(self._objects.items())
        assumed = self.assumptions.all()
        allocating = allocations(assumed)
        out = []
        for (kind, namespace, name), obj in with_allocations(items, allocating):
            if kind == "ConfigMap":
                continue
            if kind == "Pod" and not node_of(obj):
                key = f"{namespace}/{name}"
                if key in assumed:
                    obj = on_node(obj, assumed[key].node)
                elif key not in batch:
                    continue
            out.append((source_name(kind, namespace, name), obj))
        return out


CLAIM = "ResourceClaim"


def on_node(pod: Obj, node: str) -> Obj:
    """A pending pod's manifest as it will be once bound to `node` (what an assumption shows)."""
    return {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node}}


def with_allocations(items: Iterable[tuple[ObjKey, Obj]], allocating: dict[str, Obj]) -> Iterator[tuple[ObjKey, Obj]]:
    """`items` with the claims of `allocating` (claim key -> status.allocation, assumed pods' allocations on their way)
    shown allocated, and those not made yet (a pod's extended-resource claim) added at the end."""
    left = dict(allocating)
    for key, obj in items:
        kind, namespace, name = key
        if kind == CLAIM and left and f"{namespace}/{name}" in left:
            obj = _allocated(obj, left.pop(f"{namespace}/{name}"))
        yield key, obj
    for claim, allocation in left.items():
        namespace, name = claim.split("/", 1)
        made = {"apiVersion": "resource.k8s.io/v1", "kind": CLAIM, "metadata": {"name": name, "namespace": namespace},
                "spec": {"devices": {"requests": []}}}
        yield (CLAIM, namespace, name), _allocated(made, allocation)


def _allocated(claim: Obj, allocation: Obj) -> Obj:
    """The claim as the next cycle must see it while its allocation is on its way (unless it has one)."""
    status = claim.get("status") or {}
    return claim if status.get("allocation") else {**claim, "status": {**status, "allocation": allocation}}


def source_name(kind: str, namespace: str, name: str) -> str:
    """How a stored object is named in build_cluster's error messages (which start with it)."""
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"
