"""One scheduling cycle, pure: store snapshot → build_cluster → compile → solve → plan. No API calls.

It is the dry-run's pipeline unchanged; the only addition is that objects the model refuses (the apiserver
accepted them, but the engine cannot read them) do not stop everyone else from being scheduled: the one pass
of build_cluster leaves them out, and a refused pod of the batch is reported unschedulable with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..dra import ClaimAllocation
from ..ir import Rules
from ..load import build_cluster
from ..model import SCHEDULING_GROUP, Cluster, Refusal
from ..plan import Plan
from ..planner import Options, plan_batch
from ..storage import VolumeStep, volume_steps
from .devices import KIND as DEVICES_KIND
from .ports import Obj


@dataclass(slots=True)
class CycleResult:
    plan: Plan
    cluster: Cluster
    refused: list[Refusal] = field(default_factory=list)  # objects the model could not read, left out

    def unplaced(self) -> dict[str, list[str]]:
        """Every batch pod without a node, with its reasons: unschedulable or not pending at all."""
        out = {key: list(reasons) for key, reasons in self.plan.unschedulable.items()}
        for key, reason in self.plan.skipped.items():
            out.setdefault(key, [reason])
        return out

    def volume_steps(self) -> dict[str, tuple[VolumeStep, ...] | None]:
        """Each placed pod's PreBind writes for its unbound claims, PVs chosen in placement order so two claims
        of the batch never get the same one (None: the claims cannot be met on its node)."""
        pods = {p.key: p for p in self.cluster.pending}
        nodes = {n.name: n for n in self.cluster.nodes}
        taken: set[str] = set()
        out: dict[str, tuple[VolumeStep, ...] | None] = {}
        for key, node in sorted(self.plan.assignments.items()):
            if pods[key].claims:
                steps = volume_steps(pods[key], nodes[node], self.cluster.storage, taken)
                out[key] = None if steps is None else tuple(steps)
        return out

    def group_conditions(self) -> dict[str, tuple[bool, str]]:
        """For each scheduling.k8s.io PodGroup gang with pods in this batch: whether it was placed (its
        PodGroupScheduled condition), and the plan's word on it (a member's reasons when it was not)."""
        out: dict[str, tuple[bool, str]] = {}
        for key, gang in self.cluster.gangs.items():
            if gang.label != SCHEDULING_GROUP:
                continue
            members = [p.key for p in self.cluster.pending if p.gang == key]
            left = [k for k in members if k in self.plan.unschedulable]
            if not left:
                out[key] = (True, f"{len(members)} pod(s) of the group placed")
            else:
                out[key] = (False, "; ".join(self.plan.unschedulable[left[0]]) or "no node fits")
        return out

    def claim_steps(self) -> dict[str, tuple[tuple[str, ...], dict[str, ClaimAllocation]]]:
        """Each placed pod's ResourceClaims to reserve for it (keys) and the devices Reserve gave those it
        allocates (the binder writes both before the bind)."""
        out = {}
        for pod in self.cluster.pending:
            if pod.key in self.plan.assignments and pod.resource_claims:
                keys = tuple(f"{pod.namespace}/{name}" for _, name in pod.resource_claims if name)
                devices: Any = self.plan.reserved.get(pod.key, {}).get(DEVICES_KIND) or {}
                out[pod.key] = (keys, dict(devices))
        return out

    def refused_pods(self) -> dict[str, str]:
        """Refused pods by key (namespace/name), with why: the batch's are told they cannot be read."""
        return {f"{r.ref.namespace or 'default'}/{r.ref.name}": r.message for r in self.refused
                if r.ref is not None and r.ref.kind == "Pod"}


def run_cycle(objects: list[tuple[str, Obj]], scheduler_name: str, rules: Rules, options: Options) -> CycleResult:
    """Plan the batch in `objects` ((source name, manifest) pairs, as Store.snapshot gives them)."""
    cluster = build_cluster(objects, scheduler_name, rules.gangs, strict=False)
    plan = plan_batch(cluster, rules, options)
    return CycleResult(plan, cluster, cluster.refused)
