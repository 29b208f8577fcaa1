"""One scheduling cycle, pure: store snapshot → build_cluster → compile → solve → plan. No API calls.

It is the dry-run's pipeline unchanged; the only addition is that one object the model refuses (the
apiserver accepted it, but the engine cannot read it) does not stop everyone else from being scheduled:
it is left out and, if it is one of the batch's pods, reported unschedulable with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Rules
from ..load import InputError, build_cluster
from ..model import Cluster
from ..plan import Plan
from ..planner import Options, plan_batch
from .ports import Obj

MAX_REFUSED = 100  # objects left out of one cycle before it gives up


@dataclass(slots=True)
class CycleResult:
    plan: Plan
    cluster: Cluster
    refused: dict[str, str] = field(default_factory=dict)  # source name -> why the model refused it

    def unplaced(self) -> dict[str, list[str]]:
        """Every batch pod without a node, with its reasons: unschedulable or not pending at all."""
        out = {key: list(reasons) for key, reasons in self.plan.unschedulable.items()}
        for key, reason in self.plan.skipped.items():
            out.setdefault(key, [reason])
        return out


def run_cycle(objects: list[tuple[str, Obj]], scheduler_name: str, rules: Rules, options: Options) -> CycleResult:
    """Plan the batch in `objects` ((source name, manifest) pairs, as Store.snapshot gives them)."""
    refused: dict[str, str] = {}
    remaining = list(objects)
    while True:
        try:
            cluster = build_cluster(remaining, scheduler_name, rules.gangs)
            break
        except InputError as exc:
            source = _culprit(str(exc), remaining)
            if source is None or len(refused) >= MAX_REFUSED:
                raise
            refused[source] = str(exc)
            remaining = [(s, o) for s, o in remaining if s != source]
    plan = plan_batch(cluster, rules, options)
    return CycleResult(plan, cluster, refused)


def _culprit(message: str, objects: list[tuple[str, Obj]]) -> str | None:
    """The source whose name starts build_cluster's error message (it always names the object)."""
    names = {source for source, _ in objects}
    head = message.split(": ", 1)[0]
    return head if head in names else None


def refused_pod_key(source: str) -> str | None:
    """'Pod ns/name' → 'ns/name'; None for other kinds."""
    return source[4:] if source.startswith("Pod ") else None
