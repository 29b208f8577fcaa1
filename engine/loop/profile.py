"""What a profile is and how it is run: its name and policy ConfigMap, the loop's settings, and the queue's unit."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.cluster import Pod
from ..model.gangs import gang_key
from ..model.ir import GangRules
from ..reading.convert.pods import pod_identity
from .ports import Obj
from .queue import QueueConfig
from .store import pod_key

CYCLE_BASE_SECONDS = 0.2
PREFERENCE_SHARE = 0.2  # of a cycle's time limit, for preferences once every pod is placed


KEPT_SUFFIX = "-last-valid"  # the set in force is kept in ConfigMap NAME-last-valid beside policy ConfigMap NAME


@dataclass(frozen=True, slots=True)
class Profile:
    """A scheduler name served by this process, and where its policies live (namespace, name). An `optional`
    ConfigMap may be absent: until it first exists the profile places pods by their own specs (the installs'
    default); a required one that has never loaded leaves the profile scheduling nothing."""

    name: str
    policy_configmap: tuple[str, str] | None = None
    optional: bool = False

    @property
    def kept_configmap(self) -> tuple[str, str] | None:
        """Where the policy set in force is kept for the next start (engine.loop.policies), beside its ConfigMap."""
        if self.policy_configmap is None:
            return None
        namespace, name = self.policy_configmap
        return namespace, name + KEPT_SUFFIX


@dataclass(frozen=True, slots=True)
class Settings:
    profiles: tuple[Profile, ...]
    queue: QueueConfig = QueueConfig()
    time_limit: float = 5.0  # a cycle's plan at most…
    time_per_pod: float = 0.0  # …and, when set, 0.2 s plus this per pod of the batch (a lone pod is placed at once)
    solver_workers: int = 1
    bind_workers: int = 16
    preemption: bool = True
    victims_timeout: float = 120.0  # seconds a preemptor waits for its victims to leave before giving up
    own_pod: tuple[str, str] | None = None  # the scheduler's pod (namespace, name): its condition says what it schedules with

    def limit_for(self, pods: int) -> float:
        """A cycle's time limit, sized to its batch: what a starting plan and a short CP-SAT run need for a few
        pods, more for more, never beyond `time_limit`."""
        if not self.time_per_pod:
            return self.time_limit
        return min(self.time_limit, CYCLE_BASE_SECONDS + self.time_per_pod * pods)

    def preferences_for(self, pods: int) -> float | None:
        """Once a starting plan has placed every pod of the batch, what is left is preferences: a fifth of the
        batch's time for them (the pods wait for their binds meanwhile); None: no cap (`time_per_pod` 0)."""
        if not self.time_per_pod:
            return None
        return min(self.time_limit, PREFERENCE_SHARE * (CYCLE_BASE_SECONDS + self.time_per_pod * pods))


def head_rank(pod: Pod | None) -> tuple:
    """A pending pod's place in a large batch's head (engine.loop.queue's `head`): the highest priority first, then
    the largest (cpu, then memory), as the batch's first fit would take them; a pod not converted yet, last."""
    if pod is None:
        return (1,)
    return (0, -pod.priority, -pod.requests.get("cpu", 0), -pod.requests.get("memory", 0))


def unit_of(obj: Obj, gangs: GangRules | None = None) -> str:
    """The queue's unit (batched and backed off together): a pod's gang (engine.model.gangs: its PodGroup, or a
    policy's `gang by label`), else the pod itself."""
    key = gang_key(pod_identity(obj), gangs)
    return f"gang:{key}" if key else pod_key(obj)
