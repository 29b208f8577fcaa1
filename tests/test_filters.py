"""The bulk static filter must give exactly the per-node answers `explain` prints."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from engine.compile import compile_cluster
from engine.filters import rejection
from engine.load import build_cluster
from strategies import clusters


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=6, max_pods=8))
def test_bulk_rejections_equal_per_node_rejections(docs):
    compiled = compile_cluster(build_cluster([("test", d) for d in docs]))
    for info in compiled.classes:
        one_by_one = {i: why for i in range(len(compiled.cluster.nodes))
                      if (why := rejection(info.facts, i, compiled.bound)) is not None}
        assert info.rejected.as_dict() == one_by_one
        assert all(info.rejected.get(i) == why for i, why in one_by_one.items())
