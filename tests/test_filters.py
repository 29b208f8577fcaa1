"""The bulk static filters (every constraint kind's `filter`) must give exactly the per-node answers of the
plain oracle in filter_oracle.py: the same node rejected by the same plugin for the same reason."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from engine.kinds.context import Batch, ClassMatcher
from engine.kinds.pod_affinity import Series
from engine.planning.compile import compile_cluster
from engine.reading.load import build_cluster
from filter_oracle import ClassFacts, gang_pre_filter, rejection
from strategies import clusters


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=6, max_pods=8))
def test_bulk_rejections_equal_per_node_rejections(docs):
    compiled = compile_cluster(build_cluster([("test", d) for d in docs]))
    rules = [info.constraints for info in compiled.classes]
    batch = Batch(compiled.cluster, compiled.view, rules, ClassMatcher([info.sample for info in compiled.classes]))
    for a, info in enumerate(compiled.classes):
        facts = ClassFacts.of(info.sample, info.constraints, compiled.view, Series.of(batch).batch_can_support(a))
        held = gang_pre_filter(info.sample, compiled.cluster)  # a PreFilter: every node, before any filter
        one_by_one = {i: why for i in range(len(compiled.cluster.nodes))
                      if (why := held or rejection(facts, i, compiled.view)) is not None}
        assert info.rejected.as_dict() == one_by_one
        assert all(info.rejected.get(i) == why for i, why in one_by_one.items())
