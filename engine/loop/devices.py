"""Before a pod is bound, the devices the plan reserved for its ResourceClaims are written as upstream's
DynamicResources PreBind writes them: the claim gets the `resource.kubernetes.io/delete-protection` finalizer,
then its status gets `allocation` (the devices, and the node selector they are usable from) and the pod in
`reservedFor`. A claim another pod allocated already only gains the pod in `reservedFor`. Every write is
conditional on the resourceVersion the store has (a conflict is retried once from the store's newer copy, as
upstream retries); when a step or the binding fails, what was written is taken back and the pod requeued."""

from __future__ import annotations

import logging
import time

from .ports import BindResult, ClusterAPI, Obj
from .store import Store, meta
from .volumes import Done

log = logging.getLogger("policy_scheduler.devices")
KIND = "DynamicResources"  # the kind whose Reserve recorded the allocation (plan.reserved[pod][KIND])
FINALIZER = "resource.kubernetes.io/delete-protection"
CLAIM = "ResourceClaim"
CONFLICT = 409


class ClaimPreBind:
    def __init__(self, api: ClusterAPI, store: Store):
        self.api = api
        self.store = store

    def prepare(self, pod: Obj, node: str, allocation: dict[str, tuple[tuple[str, str], ...]],
                claims: tuple[str, ...]) -> tuple[list[Done], BindResult | None]:
        """Allocate `allocation`'s claims and reserve every claim in `claims` (keys) for `pod`; on the first
        failure undo the rest and return why."""
        done: list[Done] = []
        for key in claims:
            steps = self._claim(pod, node, key, allocation.get(key))
            if isinstance(steps, BindResult):
                self.undo(done)
                return [], steps
            done += steps
        return done, None

    def undo(self, done: list[Done]) -> None:
        for d in reversed(done):
            result = self.api.patch(d.kind, d.namespace, d.name, d.undo, "status" if "status" in d.undo else "")
            if not result.ok and result.status != 404:
                log.warning("undoing a claim step failed name=%s status=%s message=%r", d.name, result.status,
                            result.message)

    def _claim(self, pod: Obj, node: str, key: str, devices: tuple[tuple[str, str], ...] | None) -> list[Done] | BindResult:
        namespace, name = key.split("/", 1)
        for attempt in range(2):
            claim = self.store.get(CLAIM, namespace, name)
            if claim is None:
                return BindResult(False, 404, f"resourceclaim {key} is gone", prebind=True)
            outcome = self._write(claim, pod, node, devices)
            if not isinstance(outcome, BindResult) or outcome.status != CONFLICT or attempt:
                return outcome
            time.sleep(0.05)  # the watch brings the newer claim; try once more from it
        raise AssertionError("unreachable")

    def _write(self, claim: Obj, pod: Obj, node: str, devices: tuple[tuple[str, str], ...] | None) -> list[Done] | BindResult:
        m, status = meta(claim), claim.get("status") or {}
        namespace, name = str(m.get("namespace") or "default"), str(m["name"])
        done: list[Done] = []
        version = m.get("resourceVersion")
        if devices is not None and FINALIZER not in (m.get("finalizers") or []):
            body = {"metadata": {"resourceVersion": version, "finalizers": [*(m.get("finalizers") or []), FINALIZER]}}
            result = self.api.patch(CLAIM, namespace, name, body)
            if not result.ok:
                return BindResult(False, result.status, f"protecting resourceclaim {name}: {result.message}", prebind=True)
            done.append(Done(CLAIM, namespace, name, {"metadata": {"finalizers": m.get("finalizers") or None}}))
            version = None  # the finalizer write changed it; the status write below is then unconditional
        pm = meta(pod)
        reserved = [*(status.get("reservedFor") or []),
                    {"resource": "pods", "name": pm["name"], "uid": pm.get("uid")}]
        new_status: dict = {"reservedFor": reserved}
        if devices is not None:
            new_status["allocation"] = _allocation(devices, node)
        body = {"metadata": {"resourceVersion": version}, "status": new_status}
        result = self.api.patch(CLAIM, namespace, name, body, "status")
        if not result.ok:
            self.undo(done)
            return BindResult(False, result.status, f"allocating resourceclaim {name}: {result.message}", prebind=True)
        undo = {"status": {"reservedFor": status.get("reservedFor") or None}}
        if devices is not None:
            undo["status"]["allocation"] = None
        return [*done, Done(CLAIM, namespace, name, undo)]


def _allocation(devices: tuple[tuple[str, str], ...], node: str) -> Obj:
    """status.allocation: each request's device, usable from `node` (the allocator only gives a pod devices
    its node reaches)."""
    results = []
    for request, key in devices:
        driver, rest = key.split("/", 1)  # driver names and device names have no "/"; pool names may
        pool, device = rest.rsplit("/", 1)
        results.append({"request": request, "driver": driver, "pool": pool, "device": device})
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return {"devices": {"results": results}, "nodeSelector": selector,
            "allocationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
