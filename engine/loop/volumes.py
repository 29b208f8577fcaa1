"""Before a pod is bound, its unbound claims are prepared as upstream's VolumeBinding PreBind does: a chosen
static PersistentVolume gets the claim in `spec.claimRef` (the PV controller then completes the claim's side),
a claim left to a provisioner gets `volume.kubernetes.io/selected-node`. Each write is conditional on the
object's resourceVersion in the store, so a volume another scheduler took meanwhile answers 409. When a step
fails, or the binding itself does, the steps done are undone: nothing is left half bound, and the pod is
requeued."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..devices.storage import VolumeStep
from .ports import ApiResult, ClusterAPI, Obj
from .store import Store, meta

log = logging.getLogger("policy_scheduler.volumes")
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


@dataclass(frozen=True, slots=True)
class Done:
    """A write made, and the patch that takes it back (None: the object was created; deleting takes it back)."""

    kind: str
    namespace: str
    name: str
    undo: Obj | None


class VolumePreBind:
    def __init__(self, api: ClusterAPI, store: Store):
        self.api = api
        self.store = store

    def prepare(self, steps: tuple[VolumeStep, ...], node: str) -> tuple[list[Done], ApiResult | None]:
        """Run `steps` in order; on the first failure undo the rest and return why."""
        done: list[Done] = []
        for step in steps:
            outcome = self._bind_volume(step) if step.volume else self._select_node(step, node)
            if isinstance(outcome, ApiResult):
                self.undo(done)
                return [], outcome
            done.append(outcome)
        return done, None

    def undo(self, done: list[Done]) -> None:
        for d in reversed(done):
            result = self.api.patch(d.kind, d.namespace, d.name, d.undo or {})
            if not result.ok and result.status != 404:
                log.warning("undoing a volume step failed kind=%s name=%s status=%s message=%r", d.kind, d.name,
                            result.status, result.message)

    def _bind_volume(self, step: VolumeStep) -> Done | ApiResult:
        namespace, name = step.claim.split("/", 1)
        pv = self.store.get("PersistentVolume", "", step.volume)
        pvc = self.store.get("PersistentVolumeClaim", namespace, name)
        if pv is None or pvc is None:
            return ApiResult(False, 404, f"persistentvolume {step.volume} or claim {step.claim} is gone", prebind=True)
        if (pv.get("spec") or {}).get("claimRef"):
            return ApiResult(False, 409, f"persistentvolume {step.volume} was taken meanwhile", prebind=True)
        ref = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": name,
               "uid": meta(pvc).get("uid"), "resourceVersion": meta(pvc).get("resourceVersion")}
        body = {"metadata": {"resourceVersion": meta(pv).get("resourceVersion"), "annotations": {BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"claimRef": ref}}
        result = self.api.patch("PersistentVolume", "", step.volume, body)
        if not result.ok:
            return ApiResult(False, result.status, f"binding persistentvolume {step.volume} to {step.claim}: {result.message}",
                              prebind=True)
        return Done("PersistentVolume", "", step.volume,
                    {"metadata": {"annotations": {BOUND_BY_CONTROLLER: None}}, "spec": {"claimRef": None}})

    def _select_node(self, step: VolumeStep, node: str) -> Done | ApiResult:
        namespace, name = step.claim.split("/", 1)
        pvc = self.store.get("PersistentVolumeClaim", namespace, name)
        if pvc is None:
            return ApiResult(False, 404, f"persistentvolumeclaim {step.claim} is gone", prebind=True)
        body = {"metadata": {"resourceVersion": meta(pvc).get("resourceVersion"), "annotations": {SELECTED_NODE: node}}}
        result = self.api.patch("PersistentVolumeClaim", namespace, name, body)
        if not result.ok:
            return ApiResult(False, result.status, f"selecting node {node} for claim {step.claim}: {result.message}",
                              prebind=True)
        return Done("PersistentVolumeClaim", namespace, name, {"metadata": {"annotations": {SELECTED_NODE: None}}})
