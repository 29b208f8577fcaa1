"""Before a pod is bound, the devices the plan reserved for its ResourceClaims are written as upstream's
DynamicResources PreBind writes them: the claim gets the `resource.kubernetes.io/delete-protection` finalizer,
then its status gets `allocation` (the devices, and the node selector they are usable from) and the pod in
`reservedFor`. A claim another pod allocated already only gains the pod in `reservedFor`. Every write is
conditional on the resourceVersion the store has (a conflict is retried once from the store's newer copy, as
upstream retries); when a step or the binding fails, what was written is taken back and the pod requeued.
Devices with binding conditions (an attachment a driver prepares) are waited for before the bind, as upstream's
PreBind waits: their conditions true on the claim's status, or the binding fails (a failure condition, or the
timeout) and is taken back."""

from __future__ import annotations

import logging
import threading
import time
import uuid

from ..devices.dra import ClaimAllocation
from ..devices.dra_capacity import quantity
from ..model.cluster import EXTENDED_CLAIM_ANNOTATION, Toleration
from .ports import ApiResult, ClusterAPI, Obj
from .store import Store, meta, version
from .volumes import Done

log = logging.getLogger("policy_scheduler.devices")
KIND = "DynamicResources"  # the kind whose Reserve recorded the allocation (plan.details.reserved[pod][KIND])
FINALIZER = "resource.kubernetes.io/delete-protection"
CLAIM = "ResourceClaim"
CONFLICT = 409
BINDING_TIMEOUT = 600.0  # upstream's DynamicResourcesBindingTimeoutDefault
BINDING_POLL = 5.0  # upstream polls the claims this often while PreBind waits


class ClaimPreBind:
    """The writes, and the claims as this binder last wrote them: pods sharing a claim are bound one after the
    other, each writing over what the one before wrote, before the watch brings it to the store."""

    def __init__(self, api: ClusterAPI, store: Store, binding_timeout: float = BINDING_TIMEOUT,
                 binding_poll: float = BINDING_POLL):
        self.api = api
        self.store = store
        self.written: dict[str, Obj] = {}  # claim key -> the claim as the apiserver answered our last write
        self.lock = threading.Lock()
        self.binding_timeout = binding_timeout
        self.binding_poll = binding_poll

    def waits(self, claims: tuple[str, ...]) -> bool:
        """Some claim of the pod, as last written or stored, has a device with binding conditions."""
        return any(_binding_results(self._stored(key)) for key in claims)

    def await_binding(self, claims: tuple[str, ...]) -> ApiResult | None:
        """Upstream's PreBind wait (DRADeviceBindingConditions): until every device of the pod's claims that has
        bindingConditions has them all true in the claim's status.devices (None), one of its
        bindingFailureConditions is true ("device binding failed"), or the binding timeout passes ("device
        binding timeout"; upstream's default 600 s, polled every 5 s); the claims are read from the store, which
        the watch keeps current. A failure undoes the claims' writes, as upstream's Unreserve does."""
        deadline = time.monotonic() + self.binding_timeout
        while True:
            pending = ""
            for key in claims:
                verdict = _binding_verdict(self._stored(key))
                if verdict.startswith("failed"):
                    return ApiResult(False, 0, f"device binding failed: claim={key.split('/', 1)[1]}, {verdict[7:]}",
                                     prebind=True)
                pending = pending or (key if verdict == "pending" else "")
            if not pending:
                return None
            if time.monotonic() >= deadline:
                return ApiResult(False, 0, f"device binding timeout: claim={pending.split('/', 1)[1]}", prebind=True)
            time.sleep(min(self.binding_poll, max(0.0, deadline - time.monotonic())))

    def _stored(self, key: str) -> Obj | None:
        namespace, name = key.split("/", 1)
        return self._newest(key, self.store.get(CLAIM, namespace, name))

    def _patch(self, kind: str, namespace: str, name: str, body: Obj, subresource: str = "") -> ApiResult:
        return self._answered(kind, self.api.patch(kind, namespace, name, body, subresource))

    def _answered(self, kind: str, result: ApiResult) -> ApiResult:
        """Keep a claim as the apiserver answered our write (here, and in the store for the next cycle)."""
        if kind == CLAIM and result.ok and result.obj is not None:
            m = meta(result.obj)
            with self.lock:
                self.written[f"{m.get('namespace') or 'default'}/{m.get('name')}"] = result.obj
            self.store.apply_written(kind, result.obj)
        return result

    def _newest(self, key: str, stored: Obj | None) -> Obj | None:
        """The store's claim, or the one we wrote last if the store has not seen it yet."""
        with self.lock:
            ours = self.written.get(key)
        if stored is None or ours is None:
            return stored or ours
        if version(ours) > version(stored):
            return ours
        with self.lock:  # the store has caught up: forget our copy
            if self.written.get(key) is ours:
                del self.written[key]
        return stored

    def prepare(self, pod: Obj, node: str, allocation: dict[str, ClaimAllocation],
                claims: tuple[str, ...]) -> tuple[list[Done], ApiResult | None]:
        """Allocate `allocation`'s claims and reserve every claim in `claims` (keys) for `pod` (creating first the
        pod's extended-resource claim, then telling the pod its name); on the first failure undo the rest and
        return why."""
        done: list[Done] = []
        for key in claims:
            allocated = allocation.get(key)
            if allocated is not None and allocated.create is not None:
                made = self._create(pod, allocated)
                if isinstance(made, ApiResult):
                    self.undo(done)
                    return [], made
                done.append(made)
                key = f"{made.namespace}/{made.name}"
            steps = self._claim(pod, key, allocated)
            if isinstance(steps, ApiResult):
                self.undo(done)
                return [], steps
            done += steps
            if allocated is not None and allocated.create is not None:
                told = self._tell_pod(pod, key.split("/", 1)[1], allocated)
                if isinstance(told, ApiResult):
                    self.undo(done)
                    return [], told
                done.append(told)
        return done, None

    def _create(self, pod: Obj, allocated: ClaimAllocation) -> Done | ApiResult:
        """Upstream's special claim for a pod's extended resources: generated name, the pod as its controlling
        owner, the annotation that marks it."""
        m = meta(pod)
        namespace = str(m.get("namespace") or "default")
        body = {"apiVersion": "resource.k8s.io/v1", "kind": CLAIM, "spec": allocated.create,
                "metadata": {"generateName": f"{m['name']}-extended-resources-", "namespace": namespace,
                             "annotations": {EXTENDED_CLAIM_ANNOTATION: "true"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": m["name"],
                                                  "uid": m.get("uid"), "controller": True}]}}
        result = self._answered(CLAIM, self.api.create_object(CLAIM, namespace, body))
        if not result.ok or result.obj is None:
            return ApiResult(False, result.status, f"creating the claim for its extended resources: {result.message}",
                              prebind=True)
        return Done(CLAIM, namespace, str(meta(result.obj)["name"]), None)

    def _tell_pod(self, pod: Obj, claim: str, allocated: ClaimAllocation) -> Done | ApiResult:
        """pod.status.extendedResourceClaimStatus: the claim's name and which request serves which container."""
        m = meta(pod)
        namespace = str(m.get("namespace") or "default")
        mappings = [{"containerName": c, "resourceName": r, "requestName": q} for c, r, q in allocated.mappings]
        body = {"status": {"extendedResourceClaimStatus": {"requestMappings": mappings, "resourceClaimName": claim}}}
        result = self.api.patch("Pod", namespace, m["name"], body, "status")
        if not result.ok:
            return ApiResult(False, result.status, f"recording its extended-resource claim: {result.message}",
                              prebind=True)
        return Done("Pod", namespace, m["name"], {"status": {"extendedResourceClaimStatus": None}})

    def undo(self, done: list[Done]) -> None:
        for d in reversed(done):
            if d.undo is None:  # a claim made for the pod: deleted (its finalizer went first)
                result = self.api.delete_object(d.kind, d.namespace, d.name)
                with self.lock:
                    ours = self.written.pop(f"{d.namespace}/{d.name}", None)
                if result.ok and ours is not None:
                    self.store.apply(d.kind, "DELETED", ours)  # the next cycle makes a new one
            else:
                result = self._patch(d.kind, d.namespace, d.name, d.undo, "status" if "status" in d.undo else "")
            if not result.ok and result.status != 404:
                log.warning("undoing a claim step failed name=%s status=%s message=%r", d.name, result.status,
                            result.message)

    def _claim(self, pod: Obj, key: str, devices: ClaimAllocation | None) -> list[Done] | ApiResult:
        namespace, name = key.split("/", 1)
        for attempt in range(2):
            claim = self._newest(key, self.store.get(CLAIM, namespace, name))
            if claim is None:
                return ApiResult(False, 404, f"resourceclaim {key} is gone", prebind=True)
            outcome = self._write(claim, pod, devices)
            if not isinstance(outcome, ApiResult) or outcome.status != CONFLICT or attempt:
                return outcome
            time.sleep(0.05)  # the watch brings the newer claim; try once more from it
        raise AssertionError("unreachable")

    def _write(self, claim: Obj, pod: Obj, devices: ClaimAllocation | None) -> list[Done] | ApiResult:
        m, status = meta(claim), claim.get("status") or {}
        namespace, name = str(m.get("namespace") or "default"), str(m["name"])
        done: list[Done] = []
        version = m.get("resourceVersion")
        if devices is not None and FINALIZER not in (m.get("finalizers") or []):
            body = {"metadata": {"resourceVersion": version, "finalizers": [*(m.get("finalizers") or []), FINALIZER]}}
            result = self._patch(CLAIM, namespace, name, body)
            if not result.ok:
                return ApiResult(False, result.status, f"protecting resourceclaim {name}: {result.message}", prebind=True)
            done.append(Done(CLAIM, namespace, name, {"metadata": {"finalizers": m.get("finalizers") or None}}))
            version = None  # the finalizer write changed it; the status write below is then unconditional
        pm = meta(pod)
        reserved = [*(status.get("reservedFor") or []),
                    {"resource": "pods", "name": pm["name"], "uid": pm.get("uid")}]
        new_status: dict = {"reservedFor": reserved}
        if devices is not None:
            new_status["allocation"] = allocation_status(devices)
        body = {"metadata": {"resourceVersion": version}, "status": new_status}
        result = self._patch(CLAIM, namespace, name, body, "status")
        if not result.ok:
            self.undo(done)
            return ApiResult(False, result.status, f"allocating resourceclaim {name}: {result.message}", prebind=True)
        undo = {"status": {"reservedFor": status.get("reservedFor") or None}}
        if devices is not None:
            undo["status"]["allocation"] = None
        return [*done, Done(CLAIM, namespace, name, undo)]


def _binding_results(claim: Obj | None) -> list[Obj]:
    allocation = ((claim or {}).get("status") or {}).get("allocation") or {}
    return [r for r in (allocation.get("devices") or {}).get("results") or [] if r.get("bindingConditions")]


def _binding_verdict(claim: Obj | None) -> str:
    """"ready", "pending", or "failed <reason and message>" for one claim (upstream's isClaimReadyForBinding):
    each result with bindingConditions is judged by the claim's status.devices entry for its device (and share)."""
    status = (claim or {}).get("status") or {}
    if claim is None or not status.get("allocation"):
        return "pending"
    for result in _binding_results(claim):
        entry = next((d for d in status.get("devices") or []
                      if all(d.get(k) == result.get(k) for k in ("driver", "pool", "device", "shareID"))), None)
        if entry is None:
            return "pending"
        conditions = {c.get("type"): c for c in entry.get("conditions") or []}
        for name in result.get("bindingFailureConditions") or []:
            if (conditions.get(name) or {}).get("status") == "True":
                c = conditions[name]
                return f"failed reason={c.get('reason')}, message={str(c.get('message') or '')!r}"
        if any((conditions.get(name) or {}).get("status") != "True" for name in result["bindingConditions"]):
            return "pending"
    return "ready"


def allocation_status(allocated: ClaimAllocation) -> Obj:
    """status.allocation as upstream's allocator fills it: each request's device (a share of a device allowing
    multiple allocations with a new shareID and its consumedCapacity; the request's device tolerations copied), the
    class's and the claim's config for the requests served, and the node selector the devices are usable from
    (none: every node)."""
    results = []
    shares = {(request, key): amount for request, key, amount in allocated.shares}
    binding = {key: (conditions, failures) for key, conditions, failures in allocated.binding}
    tolerations = dict(allocated.tolerations)
    for request, key in allocated.devices:
        driver, rest = key.split("/", 1)  # driver names and device names have no "/"; pool names may
        pool, device = rest.rsplit("/", 1)
        result: Obj = {"request": request, "driver": driver, "pool": pool, "device": device}
        if request in allocated.admin:
            result["adminAccess"] = True
        if request in tolerations:  # a copy of the request's device tolerations when it got the device
            result["tolerations"] = [_toleration(t) for t in tolerations[request]]
        if key in binding:  # DRADeviceBindingConditions: copied from the device, PreBind waits for them
            result["bindingConditions"] = list(binding[key][0])
            if binding[key][1]:
                result["bindingFailureConditions"] = list(binding[key][1])
        if (request, key) in shares:  # a share of a device allowing multiple allocations: its own ID and amounts
            result["shareID"] = str(uuid.uuid4())
            result["consumedCapacity"] = {(name if domain == driver else f"{domain}/{name}"): quantity(milli)
                                          for domain, name, milli in shares[(request, key)]}
        results.append(result)
    devices: Obj = {"results": results}
    if allocated.config:
        devices["config"] = list(allocated.config)
    out: Obj = {"devices": devices, "allocationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if allocated.node_selector is not None:
        out["nodeSelector"] = allocated.node_selector
    return out


def _toleration(t: Toleration) -> Obj:
    """A DeviceToleration as the API stores it (operator defaulted, empty fields left out)."""
    out: Obj = {"operator": t.operator}
    out.update({k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect)) if v})
    if t.seconds is not None:
        out["tolerationSeconds"] = t.seconds
    return out
