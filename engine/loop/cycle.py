"""One scheduling cycle, pure: cache snapshot → compile → solve → plan. No API calls.

It is the dry-run's pipeline from the model on; the model comes from the loop's cache (engine/loop/cache.py),
which converts what changed instead of running `build_cluster` over every object. Objects the model refuses (the
apiserver accepted them, but the engine cannot read them) do not stop everyone else from being scheduled: they
are left out, and a refused pod of the batch is reported unschedulable with the reason.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..devices.dra import ClaimAllocation
from ..devices.storage import VolumeStep, volume_steps
from ..kinds import GangSpan, Waiting
from ..model.cluster import SCHEDULING_GROUP, Cluster, Refusal
from ..model.ir import Rules
from ..model.reasons import Code, ExpectedStart, prefixed
from ..model.rejections import Rejections, joined
from ..planning.plan import OnPlaced, Plan
from ..planning.planner import Options, TimeInputs, plan_batch
from ..preempt import OUT_OF_TIME
from ..quotas.tenant_report import TenantLine, of_plan
from .cache import Snapshot
from .devices import KIND as DEVICES_KIND

# a PodGroup's scheduling condition's reasons when False (scheduling.k8s.io PodGroupReason…); a group refused for
# its configuration is SchedulerError up to 1.37, PodGroupError from 1.38 on (its validationError)
GROUP_UNSCHEDULABLE, GROUP_SCHEDULER_ERROR, GROUP_ERROR = "Unschedulable", "SchedulerError", "PodGroupError"


def refused_group_reason(server: tuple[int, int] | None) -> str:
    """The reason a release writes on a PodGroup refused for its configuration (an unknown release: 1.37's)."""
    return GROUP_ERROR if server is not None and server >= (1, 38) else GROUP_SCHEDULER_ERROR


@dataclass(frozen=True, slots=True)
class Rejected:
    """Why a pod of a cycle was left out, for the queue: the kinds that rejected it (None: nothing has to change,
    as when the time limit ran out) and what their queueing hints read."""

    plugins: frozenset[str] | None
    waiting: Waiting | None  # None: not planned at all (skipped, refused, taken out by Reserve): any change may help


ANY_CHANGE = Rejected(frozenset({"(not planned)"}), None)  # an unknown kind: every change may help


@dataclass(slots=True)
class CycleResult:
    plan: Plan
    cluster: Cluster
    refused: list[Refusal] = field(default_factory=list)  # objects the model could not read, left out
    now: float | None = None  # the time the plan was made at (None: no time in the plan)

    def unplaced(self) -> dict[str, list[str]]:
        """Every batch pod without a node, with its reasons: unschedulable or not pending at all."""
        out = {key: list(reasons) for key, reasons in self.plan.unschedulable.items()}
        for key, reason in self.plan.skipped.items():
            out.setdefault(key, [reason])
        return out

    def rejected(self) -> dict[str, Rejected]:
        """Each unplaced batch pod, as the queue keeps it until a change may help: the kinds that kept it out and
        what their hints read (the pod, its rules, the nodes where it could go once a running pod leaves)."""
        compiled = self.plan.details.compiled
        if compiled is None:
            return {}
        names = [n.name for n in self.cluster.nodes]
        # preemption did not reach them in this cycle's time: nothing has to change, they back off and try again
        late = {key for key, reasons in self.plan.unschedulable.items() if OUT_OF_TIME in reasons}
        out: dict[str, Rejected] = {}
        for info in compiled.classes:
            left = [p for p in info.pods if p.key in self.plan.details.explanations]
            if not left:
                continue
            plugins = self.plan.details.explanations[left[0].key].plugins()
            nodes = _reachable(info.rejected, names)
            for pod in left:
                out[pod.key] = Rejected(None if pod.key in late else plugins, Waiting(pod, info.constraints, nodes))
        return out

    def volume_steps(self, chosen: dict[str, tuple[VolumeStep, ...] | None] | None = None
                     ) -> dict[str, tuple[VolumeStep, ...] | None]:
        """Each placed pod's PreBind writes for its unbound claims, PVs chosen in placement order so two claims
        of the batch never get the same one (None: the claims cannot be met on its node). `chosen`: the steps
        given already (placements bound early), kept, their PVs taken."""
        pods = {p.key: p for p in self.cluster.pending}
        out: dict[str, tuple[VolumeStep, ...] | None] = dict(chosen or {})
        claiming = sorted((key, node) for key, node in self.plan.assignments.items()
                          if pods[key].claims and key not in out)
        if not claiming:  # the usual batch: no node is looked up
            return out
        nodes = {n.name: n for n in self.cluster.nodes}
        taken = {step.volume for steps in out.values() for step in steps or () if step.volume}
        for key, node in claiming:
            steps = volume_steps(pods[key], nodes[node], self.cluster.storage, taken)
            out[key] = None if steps is None else tuple(steps)
        return out

    def codes(self, batch: list[str]) -> dict[str, Code]:
        """Each batch pod left waiting, by its dominant reason code (engine.model.reasons): the plan's (the preemptors'
        PreemptionPending among them), and InvalidObject for a pod the model could not read."""
        out = {key: d.code for key, d in self.plan.waiting_reasons().items()}
        out.update(dict.fromkeys((key for key in self.refused_pods() if key in batch), Code.INVALID_OBJECT))
        return out

    def expected_starts(self) -> dict[str, ExpectedStart]:
        """Each waiting pod the plan has a time for: its reservation's start and node, else its estimate (told in its
        condition's message beside its code: `prefixed`). A pod without a time in the plan is not in it."""
        out = {key: ExpectedStart(e.start, next_cycle=e.next_cycle) for key, e in self.plan.estimates.items()
               if e.start is not None}
        out.update((key, ExpectedStart(r.start, node)) for r in self.plan.reservations for key, node in r.pods)
        return out

    def group_conditions(self, refused: str = GROUP_SCHEDULER_ERROR) -> dict[str, tuple[bool, str, str]]:
        """For each scheduling.k8s.io PodGroup with pods in this batch: whether it was placed, the reason when it was
        not and the message (its scheduling condition): a gang's placement or the plan's word on a member, a
        group refused for its members' disagreement (`refused`: upstream's reason, by release) with why. A message of a group not
        placed opens with its reason code, as its pods' PodScheduled do (`prefixed`; the reason stays upstream's)."""
        out: dict[str, tuple[bool, str, str]] = {}
        codes = self.plan.waiting_reasons()
        for key, gang in self.cluster.gangs.items():
            if gang.label != SCHEDULING_GROUP:
                continue
            members = [p.key for p in self.cluster.pending if p.gang == key]
            left = [k for k in members if k in self.plan.unschedulable]
            if not left:
                out[key] = (True, "", f"{len(members)} pod(s) of the group placed{_spans(self.plan.topology.get(key))}")
                continue
            message = joined(self.plan.unschedulable[left[0]]) or "no node fits"
            said = codes.get(left[0])  # the code of the member whose words the message says
            out[key] = (False, GROUP_UNSCHEDULABLE, prefixed(said.code, message) if said is not None else message)
        for key, why in self.cluster.refused_groups.items():
            out[key] = (False, refused, prefixed(Code.INVALID_OBJECT, why))
        return out

    def composite_conditions(self, groups: dict[str, tuple[bool, str, str]]) -> dict[str, tuple[bool, str, str]]:
        """For each CompositePodGroup with a child in this batch, its CompositePodGroupInitiallyScheduled condition,
        read off its children's (`groups`: `group_conditions`): True once its children started (the plan starts them
        together or none), else the plan's word on a member of the first child left out."""
        children: dict[str, list[str]] = defaultdict(list)
        for key, gang in self.cluster.gangs.items():
            if gang.composite is not None and gang.composite in self.cluster.composite_groups:
                children[gang.composite].append(key)
        out: dict[str, tuple[bool, str, str]] = {}
        for key, keys in children.items():
            placed = [k for k in keys if k in groups and groups[k][0]]
            if placed:
                out[key] = (True, "", f"{len(placed)} pod group(s) of the composite placed")
            else:
                out[key] = next((groups[k] for k in keys if k in groups), (False, GROUP_UNSCHEDULABLE, "no node fits"))
        return out

    def claim_steps(self) -> dict[str, tuple[tuple[str, ...], dict[str, ClaimAllocation]]]:
        """Each placed pod's ResourceClaims to reserve for it (keys) and the devices Reserve gave those it
        allocates (the binder writes both before the bind)."""
        out = {}
        for pod in self.cluster.pending:
            if pod.key in self.plan.assignments and pod.resource_claims:
                keys = tuple(f"{pod.namespace}/{name}" for _, name in pod.resource_claims if name)
                devices: Any = self.plan.details.reserved.get(pod.key, {}).get(DEVICES_KIND) or {}
                out[pod.key] = (keys, dict(devices))
        return out

    def tenants(self) -> list[TenantLine]:
        """The quotas around this plan (engine.quotas.tenant_report; [] without quotas): what the cycle's compile
        computed of the bound pods plus the batch, never a pass over the bound pods but for evictions."""
        return of_plan(self.plan, self.cluster)

    def refused_pods(self) -> dict[str, str]:
        """Refused pods by key (namespace/name), with why: the batch's are told they cannot be read."""
        return {f"{r.ref.namespace or 'default'}/{r.ref.name}": r.message for r in self.refused
                if r.ref is not None and r.ref.kind == "Pod"}


def _reachable(rejected: Rejections, names: list[str]) -> frozenset[str]:
    """Nodes that passed every filter, or were rejected only for what running pods leaving can change."""
    ok = np.array([r.resolvable for r in rejected.keys] + [True], dtype=bool)[rejected.code]
    return frozenset(names[i] for i in np.flatnonzero(ok).tolist())


def run_cycle(snapshot: Snapshot, rules: Rules, options: Options, time_inputs: TimeInputs = TimeInputs(),
              on_placed: OnPlaced | None = None) -> CycleResult:
    """Plan the batch of a cache snapshot (made with the same rules' gangs) at `time_inputs` (the loop's: now, its
    carried reservations and last estimates); `on_placed` as for `plan_batch`."""
    cluster = snapshot.cluster
    plan = plan_batch(cluster, rules, options, view=snapshot.view, lowest=snapshot.lowest, usage=snapshot.usage,
                      on_placed=on_placed, time_inputs=time_inputs)
    return CycleResult(plan, cluster, cluster.refused, time_inputs.now)


def _spans(span: GangSpan | None) -> str:
    """Where a started group runs, for its condition: "; rack: r1, r3 (gang … spans 2 rack domains …)"."""
    if span is None:
        return ""
    where = "; ".join(f"{key}: {', '.join(values)}" for key, values in span.levels)
    return f"; {where}" + (f" ({span.note})" if span.note else "")
