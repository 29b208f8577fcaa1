"""VolumeRestrictions: a ReadWriteOncePod claim is used by one pod at most. A claim a bound pod uses already
rejects every node; within the batch, the pods sharing such a claim place one pod among them."""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from ..model.view import Counts
from ..solve.problem import Limit
from .base import Action, ClusterEvent, Emit, ReadsPods, Requeue, Resource

if TYPE_CHECKING:
    from ..model.view import View
    from .context import Batch, ClassSpec, ProblemBuilder

ERR_REASON = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
              "by another pod")


class VolumeRestrictions(ReadsPods, Emit, Requeue):
    name, code = "VolumeRestrictions", Code.VOLUME
    events = (ClusterEvent(Resource.POD, Action.DELETE),
              ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        """A ReadWriteOncePod claim some pod of the view uses anywhere (free once its last user is gone, taken again
        by a pod added that uses it)."""
        claims = spec.sample.volumes.read_write_once_pod
        if claims and any(_users(batch.view).get(c, 0) > 0 for c in claims):
            out.add(Rejection(self.name, (ERR_REASON,)), out.nodes())

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


def _users(view: View) -> Counts:
    """How many of the view's pods use each ReadWriteOncePod claim (a question about the whole cluster)."""
    base = view.memo_of_table((VolumeRestrictions.name,), lambda: Counter(
        c for pod in view.table.pods for c in pod.volumes.read_write_once_pod))
    view.reaching()
    if not view.changed:
        return Counts(base)
    delta: Counter[str] = Counter()
    for moves, sign in ((view.leaving(), -1), (view.arriving(), 1)):
        for _, p in moves:
            for c in p.volumes.read_write_once_pod:
                delta[c] += sign
    return Counts(base, delta.__getitem__, delta.keys)
