"""An in-memory `ClusterAPI` for testing the scheduler loop's logic without an apiserver.

It keeps objects with resourceVersions and a watch history (compactable, to provoke 410 Gone), binds by
setting spec.nodeName (UID-checked, 409 when already bound), and records every write for assertions.
"""
from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from engine.loop.ports import ApiResult, ApiUnavailable, Conflict, Gone, NotFound, Obj, WatchEvent, WatchTarget
from testkit import manifests

Key = tuple[str, str, str]


def _key(kind: str, obj: Obj) -> Key:
    m = obj["metadata"]
    return kind, m.get("namespace") or "", m["name"]


@dataclass
class FakeAPI:
    emit_binds: bool = True  # False: a bind succeeds but the watch does not show it (yet)
    fail_binds: dict[str, int] = field(default_factory=dict)  # pod key -> HTTP status to answer
    fail_patches: dict[str, int] = field(default_factory=dict)  # "Kind name" -> HTTP status to answer a patch
    patches: list[tuple[str, str, Obj]] = field(default_factory=list)  # kind, name, body of each patch applied
    down: bool = False  # every call raises ApiUnavailable
    version: tuple[int, int] | None = (1, 37)  # /version's (major, minor)
    absent_kinds: set[str] = field(default_factory=set)  # e.g. {"PodGroup"}: the CRD is not installed
    objects: dict[Key, Obj] = field(default_factory=dict)
    history: list[tuple[int, str, str, Obj]] = field(default_factory=list)  # rv, kind, type, obj
    compacted: int = 0  # watches from before this resourceVersion get 410 Gone
    binds: list[tuple[str, str]] = field(default_factory=list)
    conditions: dict[str, str] = field(default_factory=dict)
    condition_reasons: dict[str, str] = field(default_factory=dict)  # PodScheduled=False's reason, per pod
    pod_conditions: list[tuple[str, Obj]] = field(default_factory=list)  # pod key, condition: every set_condition
    events: list[tuple[str, str, str, str]] = field(default_factory=list)  # created: kind/name, type, reason, message
    event_objects: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> count, message (as patched)
    leases: dict[tuple[str, str], Obj] = field(default_factory=dict)
    evictions: list[tuple[str, str]] = field(default_factory=list)  # pod key, message
    nominated: dict[str, str] = field(default_factory=dict)
    created: list[tuple[str, str, str]] = field(default_factory=list)  # kind, namespace, name of each create_object
    hold_evictions: bool = False  # True: evictions are accepted but the pods stay (no kubelet finishing them)
    rv: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)

    # --- test side

    def put(self, kind: str, obj: Obj, type_: str | None = None) -> Obj:
        with self.cond:
            key = _key(kind, obj)
            obj = copy.deepcopy(obj)
            obj.setdefault("kind", kind)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            obj["metadata"].setdefault("uid", f"uid-{'-'.join(key)}")
            type_ = type_ or ("MODIFIED" if key in self.objects else "ADDED")
            self.objects[key] = obj
            self.history.append((self.rv, kind, type_, obj))
            self.cond.notify_all()
            return obj

    def delete(self, kind: str, namespace: str, name: str) -> None:
        with self.cond:
            obj = self.objects.pop((kind, namespace, name))
            self.rv += 1
            self.history.append((self.rv, kind, "DELETED", obj))
            self.cond.notify_all()

    def compact(self) -> None:
        with self.cond:
            self.compacted = self.rv + 1
            self.history.clear()
            self.cond.notify_all()

    # --- ClusterAPI

    def _check(self, kind: str | None = None) -> None:
        if self.down:
            raise ApiUnavailable("fake apiserver down")
        if kind in self.absent_kinds:
            raise NotFound(f"no {kind}")

    def list(self, resource: WatchTarget) -> tuple[list[Obj], str]:
        self._check(resource.kind)
        with self.cond:
            items = [copy.deepcopy(o) for k, o in self.objects.items() if _match(k, resource)]
            return items, str(self.rv)

    def watch(self, resource: WatchTarget, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
        self._check(resource.kind)
        since = int(resource_version or 0)
        if since < self.compacted - 1:
            raise Gone("too old")
        with self.cond:
            self.cond.wait_for(lambda: self.down or any(rv > since for rv, *_ in self.history), timeout=timeout_seconds)
            self._check()
            if since < self.compacted - 1:
                raise Gone("too old")
            events = [(rv, t, o) for rv, k, t, o in self.history if rv > since and _match(_key(k, o), resource)]
        for _, type_, obj in events:
            yield WatchEvent(type_, copy.deepcopy(obj))
        if not events:  # a quiet watch ends with a bookmark at the current version
            yield WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": str(max(since, self.rv))}})

    def warm(self, connections: int) -> int:
        return 0  # no connections to open

    def server_version(self) -> tuple[int, int] | None:
        return None if self.down else self.version

    def bind(self, namespace: str, name: str, uid: str, node: str) -> ApiResult:
        key = f"{namespace}/{name}"
        if self.down:
            return ApiResult(False, 0, "down")
        if key in self.fail_binds:
            return ApiResult(False, self.fail_binds[key], "injected failure")
        with self.cond:
            pod = self.objects.get(("Pod", namespace, name))
            if pod is None or pod["metadata"]["uid"] != uid or pod["spec"].get("nodeName"):
                return ApiResult(False, 409, "conflict")
            self.binds.append((key, node))
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = node
            if self.emit_binds:
                self.put("Pod", bound)
            else:
                self.objects[("Pod", namespace, name)] = bound
        return ApiResult(True, 201)

    def patch(self, kind: str, namespace: str, name: str, body: Obj, subresource: str = "") -> ApiResult:
        """Merge patch (RFC 7386), conditional on metadata.resourceVersion when the body has one."""
        if self.down:
            return ApiResult(False, 0, "down")
        if f"{kind} {name}" in self.fail_patches:
            return ApiResult(False, self.fail_patches[f"{kind} {name}"], "injected failure")
        with self.cond:
            current = self.objects.get((kind, namespace, name))
            if current is None:
                return ApiResult(False, 404, "not found")
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want is not None and want != current["metadata"]["resourceVersion"]:
                return ApiResult(False, 409, "the object has been modified")
            self.patches.append((kind, name, copy.deepcopy(body)))
            now = self.put(kind, _merge(copy.deepcopy(current), body))
        return ApiResult(True, 200, obj=copy.deepcopy(now))

    def evict(self, namespace: str, name: str, uid: str, message: str) -> ApiResult:
        """Like the apiserver with a kubelet behind it: the victim is gone at once (grace period 0)."""
        key = ("Pod", namespace, name)
        with self.cond:
            pod = self.objects.get(key)
            if pod is None:
                return ApiResult(True, 404)
            if pod["metadata"]["uid"] != uid:
                return ApiResult(False, 409, "uid precondition failed")
            self.evictions.append((f"{namespace}/{name}", message))
            if self.hold_evictions:
                return ApiResult(True, 200)
            self.delete("Pod", namespace, name)
        return ApiResult(True, 200)

    def create_object(self, kind: str, namespace: str, body: Obj) -> ApiResult:
        if self.down:
            return ApiResult(False, 0, "down")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", namespace)
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName', '')}{self.rv:05d}"
        with self.cond:
            if (kind, namespace, meta["name"]) in self.objects:
                return ApiResult(False, 409, "already exists")
            self.created.append((kind, namespace, meta["name"]))
            return ApiResult(True, 201, obj=copy.deepcopy(self.put(kind, obj)))

    def delete_object(self, kind: str, namespace: str, name: str) -> ApiResult:
        with self.cond:
            if (kind, namespace, name) not in self.objects:
                return ApiResult(True, 404)
            self.delete(kind, namespace, name)
        return ApiResult(True, 200)

    def nominate(self, namespace: str, name: str, node: str) -> None:
        self.nominated[f"{namespace}/{name}"] = node

    def set_unschedulable(self, namespace: str, name: str, message: str, reason: str = "Unschedulable") -> None:
        self.conditions[f"{namespace}/{name}"] = message
        self.condition_reasons[f"{namespace}/{name}"] = reason

    def set_condition(self, namespace: str, name: str, condition: Obj) -> None:
        self._check()
        self.pod_conditions.append((f"{namespace}/{name}", copy.deepcopy(condition)))

    def create_event(self, involved: Obj, type_: str, reason: str, message: str, name: str | None = None,
                     count: int = 1) -> None:
        m = involved["metadata"]
        self.events.append((f"{involved.get('kind')}/{m.get('namespace')}/{m['name']}", type_, reason, message))
        self.event_objects[name or f"{m['name']}.{len(self.events)}"] = (count, message)

    def update_event(self, namespace: str, name: str, message: str, count: int) -> bool:
        if name not in self.event_objects:
            return False
        self.event_objects[name] = (count, message)
        return True

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        self._check()
        return copy.deepcopy(self.leases.get((namespace, name)))

    def create_lease(self, namespace: str, lease: Obj) -> Obj:
        self._check()
        key = (namespace, lease["metadata"]["name"])
        with self.cond:
            if key in self.leases:
                raise Conflict("exists")
            return self._store_lease(key, lease)

    def update_lease(self, namespace: str, lease: Obj) -> Obj:
        self._check()
        key = (namespace, lease["metadata"]["name"])
        with self.cond:
            current = self.leases.get(key)
            if current is None:
                raise NotFound("no lease")
            if lease["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                raise Conflict("stale")
            return self._store_lease(key, lease)

    def _store_lease(self, key: tuple[str, str], lease: Obj) -> Obj:
        self.rv += 1
        lease = copy.deepcopy(lease)
        lease["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[key] = lease
        return copy.deepcopy(lease)


def _merge(target: Any, patch: Any) -> Any:
    """JSON merge patch: mappings merge, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _match(key: Key, resource: WatchTarget) -> bool:
    kind, namespace, name = key
    return (kind == resource.kind and (resource.namespace is None or namespace == resource.namespace)
            and (resource.name is None or name == resource.name))


# the loop tests' manifests: 1-cpu nodes and pods (the kit's builders)
node = partial(manifests.node, cpu="1", memory="8Gi")
pod = partial(manifests.pod, cpu="1")


def synced_loop(api: FakeAPI, backoff: float = 0.2):
    """A Scheduler over `api` with one profile, its store filled as the watches would fill it (no threads), and
    that profile's loop: what the loop tests drive one cycle at a time."""
    from engine.loop.queue import QueueConfig
    from engine.loop.scheduler import Profile, Scheduler, Settings
    s = Scheduler(api, Settings((Profile("policy-scheduler"),), QueueConfig(batch_window=0.0, backoff_initial=backoff),
                                time_limit=2))
    s.server = api.server_version()  # as start_watches reads it
    for r in s.resources:
        s.store.replace(r, api.list(r)[0] if r.kind not in api.absent_kinds else [])
    assert s.wait_synced(threading.Event(), timeout=1.0)  # synced, and the cache's model built, as `run` does
    return s, s.loops[0]
