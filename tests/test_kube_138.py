"""What Kubernetes 1.38 changed for a scheduler, held here as 1.38 has it (issue 49, point 5): a topology spread's
`labelSelector: {}` counts every pod of the namespace (1.37 counted none: `selector.Empty()`; 1.38
`labels.MatchesNothing`), and PodGroups and CompositePodGroups at `scheduling.k8s.io/v1beta1` read as 1.38's API
types (k8s.io/api v0.38.0-beta.0) spell them. The PodDisruptionBudget with an empty selector is in
test_gang_preemption_topology.py."""
from __future__ import annotations

from engine.model.ir import Rules
from engine.planning.planner import Options, plan_batch
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import ZONE_KEY, composite_group, in_group, native_group, node, pod


def test_an_empty_spread_selector_counts_every_pod_of_the_namespace() -> None:
    """Zone a runs two pods of other apps; a pod spreading over zones with `labelSelector: {}` (max skew 1) goes to
    empty zone b: it counts those two. (Counting none, zone a would do: a comes first.)"""
    docs = [node("a1", cpu="8", labels={ZONE_KEY: "a"}), node("b1", cpu="8", labels={ZONE_KEY: "b"}),
            pod("x", cpu="1", node_name="a1", labels={"app": "x"}), pod("y", cpu="1", node_name="a1"),
            pod("p", cpu="1", labels={"app": "p"}, topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": ZONE_KEY, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}])]
    cluster = build_cluster([(f"d{i}", d) for i, d in enumerate(docs)])
    plan = plan_batch(cluster, Rules(), Options(time_limit=3, workers=1))
    assert plan.assignments == {"default/p": "b1"}
    assert check_plan(docs, plan.assignments) == []


def test_1_38s_v1beta1_group_objects_are_read() -> None:
    """A v1beta1 CompositePodGroup (new in 1.38's v1beta1) with a v1beta1 PodGroup child, fields as 1.38 names them
    (`minGroupCount`, `parentCompositePodGroupName`, `workloadRef.templateName`, `schedulingConstraints.topology`)."""
    docs = [node("n1", cpu="8", labels={"block": "b1"}), composite_group("job", 1, topology="block"),
            native_group("w", 2, api_version="scheduling.k8s.io/v1beta1", parent="job"),
            *[pod(f"w-{i}", cpu="1", schedulingGroup=in_group("w")) for i in range(2)]]
    cluster = build_cluster([(f"d{i}", d) for i, d in enumerate(docs)], strict=True)
    assert cluster.composite_groups["default/job"].min_groups == 1
    assert cluster.native_groups["default/w"].parent == "job"
    assert cluster.gangs["default/w"].composite == "default/job"
