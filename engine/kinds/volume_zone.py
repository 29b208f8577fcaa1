"""VolumeZone: a bound PersistentVolume's zone and region labels (GA or the legacy beta ones) must name the
node's; a node without any zone or region label takes anything (single-zone clusters)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..devices.storage import zone_ok
from ..model.reasons import Code
from ..model.rejections import Rejection, Rejections
from .base import Action, ClusterEvent, Filter, Requeue, Resource

if TYPE_CHECKING:
    from .context import Batch, ClassSpec

ERR_REASON = "node(s) had no available volume zone"


class VolumeZone(Filter, Requeue):
    name, code = "VolumeZone", Code.VOLUME
    events = (ClusterEvent(Resource.NODE, Action.ADD | Action.UPDATE_NODE_LABEL),
              ClusterEvent(Resource.PERSISTENT_VOLUME_CLAIM, Action.ADD | Action.UPDATE),
              ClusterEvent(Resource.PERSISTENT_VOLUME, Action.ADD | Action.UPDATE))

    def filter(self, spec: ClassSpec, batch: Batch, out: Rejections) -> None:
        zones = spec.sample.volumes.zones
        if zones:
            bad = [i for i, node in enumerate(batch.view.nodes) if not zone_ok(zones, node)]
            if bad:
                out.add(Rejection(self.name, (ERR_REASON,), resolvable=False), bad)


KIND = VolumeZone()
