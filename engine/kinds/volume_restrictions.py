"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at most. A claim a bound pod uses already
rejects every node; within the batch, the pods sharing such a claim place one pod among them."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

import numpy as np

from ..rejections import Rejection, Rejections
from ..solve.problem import Limit
from .base import Action, ClusterEvent, Kind, Moves, Resource

if TYPE_CHECKING:
    from ..model import Pod
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_REASON = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
              "by another pod")


class VolumeRestrictions(Kind):
    name = "VolumeRestrictions"
    events = (ClusterEvent(Resource.POD, Action.DELETE),
              ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        claims = spec.sample.volumes.read_write_once_pod
        if claims and any(c in self._in_use(batch) for c in claims):
            out.add(Rejection(self.name, (ERR_REASON,)), np.ones(len(batch.index.nodes), dtype=bool))

    def after(self, spec: ClassSpec, batch: Batch, i: int, moves: Moves) -> Rejection | None:
        """A ReadWriteOncePod claim is free once every bound pod using it is gone (upstream's RemovePod), and taken
        again by an arriving pod that uses it."""
        claims = spec.sample.volumes.read_write_once_pod
        if not claims:
            return None
        users = self._users(batch)
        for claim in claims:
            held = users.get(claim, 0) + sum(claim in p.volumes.read_write_once_pod for _, p in moves.come_pods()) - sum(
                claim in p.volumes.read_write_once_pod for _, p in moves.gone_pods())
            if held > 0:
                return Rejection(self.name, (ERR_REASON,))
        return None

    def wide(self, spec: ClassSpec, batch: Batch, moves: Moves) -> bool:
        return bool(spec.sample.volumes.read_write_once_pod)

    def sways(self, spec: ClassSpec, batch: Batch, pod: Pod) -> bool:
        return not set(spec.sample.volumes.read_write_once_pod).isdisjoint(pod.volumes.read_write_once_pod)

    def _users(self, batch: Batch) -> Counter[str]:
        memo = batch.memo.setdefault(self.name, {})
        if "users" not in memo:
            memo["users"] = Counter(c for pod in batch.index.pods for c in pod.volumes.read_write_once_pod)
        return memo["users"]

    def _in_use(self, batch: Batch) -> frozenset[str]:
        memo = batch.memo.setdefault(self.name, {})
        if "in_use" not in memo:
            memo["in_use"] = frozenset(c for pod in batch.index.pods for c in pod.volumes.read_write_once_pod)
        return memo["in_use"]

    def emit(self, build: ProblemBuilder) -> None:
        """At most one pod, cluster-wide, among the classes sharing a ReadWriteOncePod claim."""
        users: dict[str, list[int]] = defaultdict(list)
        for a, info in build.checked():
            for claim in info.sample.volumes.read_write_once_pod:
                users[claim].append(a)
        if not users:
            return
        whole = build.partitions.whole()
        for claim, classes in users.items():
            for a in classes:
                build.problem.limits.append(Limit(whole, a, tuple(classes), {}, 1,
                                                  f"ReadWriteOncePod claim {claim} serves one pod"))


KIND = VolumeRestrictions()
