"""Volumes as upstream's VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions decide them: each
test places pods that would go elsewhere (or at all) if the rule were ignored, and the independent checker
(testkit/volumes.py) judges every plan."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from runner import run
from testkit.checker import check_plan
from testkit.manifests import ZONE_KEY, claim, csinode, mounts, node, pod, storage_class, volume

ZONES = ("a", "b", "c")


def zonal_nodes(cpu: str = "4") -> list[dict]:
    return [node(f"n-{z}", cpu=cpu, labels={ZONE_KEY: z}) for z in ZONES]


def planned(docs: list[dict]):
    plan = run(docs)
    assert check_plan(docs, plan.assignments) == []
    return plan


def reasons(plan, pod_name: str) -> str:
    return " ".join(plan.unschedulable[f"default/{pod_name}"])


def test_a_bound_volume_pinned_to_a_zone_takes_its_pod_there() -> None:
    docs = zonal_nodes() + [volume("pv-c", zone="c", claim_ref=("default", "data")), claim("data", volume="pv-c"),
                            pod("db", volumes=mounts("data"))]
    assert planned(docs).assignments == {"default/db": "n-c"}


def test_a_full_zone_leaves_the_pod_pending_with_the_volume_named() -> None:
    docs = zonal_nodes() + [volume("pv-c", zone="c", claim_ref=("default", "data")), claim("data", volume="pv-c"),
                            pod("hog", cpu="4", node_name="n-c"), pod("db", volumes=mounts("data"))]
    plan = planned(docs)
    assert plan.assignments == {}
    assert "didn't match PersistentVolume's node affinity" in reasons(plan, "db")


def test_a_missing_claim_keeps_the_pod_pending_and_names_the_claim() -> None:
    plan = planned(zonal_nodes() + [pod("db", volumes=mounts("nope"))])
    assert plan.assignments == {}
    assert 'persistentvolumeclaim "nope" not found' in reasons(plan, "db")


def test_a_snapshot_without_claims_says_so() -> None:
    plan = planned(zonal_nodes() + [pod("db", volumes=mounts("data"))])
    assert any("mount PersistentVolumeClaims but the snapshot has none" in n for n in plan.notes)


def test_an_unbound_immediate_claim_keeps_the_pod_pending() -> None:
    docs = zonal_nodes() + [storage_class("fast", provisioner="csi.example.com", wait=False),
                            claim("data", storage_class="fast"), pod("db", volumes=mounts("data"))]
    plan = planned(docs)
    assert plan.assignments == {}
    assert "unbound immediate PersistentVolumeClaims (data)" in reasons(plan, "db")


def test_a_claim_bound_to_a_missing_volume_keeps_the_pod_pending() -> None:
    plan = planned(zonal_nodes() + [claim("data", volume="gone"), pod("db", volumes=mounts("data"))])
    assert plan.assignments == {}
    assert "bound to non-existent pv(s)" in reasons(plan, "db")


def statefulset(replicas: int, size: str = "1Gi", cls: str = "local") -> list[dict]:
    out = []
    for i in range(replicas):
        out += [claim(f"data-db-{i}", size=size, storage_class=cls), pod(f"db-{i}", labels={"app": "db"},
                                                                         volumes=mounts(f"data-db-{i}"))]
    return out


def test_local_volumes_take_each_replica_to_a_node_with_a_pv_of_its_own() -> None:
    docs = [node("n1"), node("n2"), node("n3"), storage_class("local"),
            volume("pv-1a", node="n1"), volume("pv-1b", node="n1"), volume("pv-2a", node="n2"), volume("pv-2b", node="n2")]
    docs += statefulset(5)
    plan = planned(docs)
    per_node = Counter(plan.assignments.values())
    assert per_node == {"n1": 2, "n2": 2}  # never two claims on one PV, never a node without one
    assert len(plan.unschedulable) == 1
    assert "didn't find available persistent volumes to bind" in " ".join(next(iter(plan.unschedulable.values())))


def test_replicas_with_alike_claims_share_one_class() -> None:
    docs = [node("n1")] + [storage_class("local")] + [volume(f"pv-{i}", node="n1") for i in range(30)] + statefulset(30)
    plan = planned(docs)
    assert len(plan.assignments) == 30
    assert len(plan.details.compiled.classes) == 1


def test_a_claim_takes_only_a_volume_big_enough() -> None:
    docs = [node("n1"), node("n2"), storage_class("local"), volume("small", size="1Gi", node="n1"),
            volume("big", size="10Gi", node="n1"), volume("big2", size="10Gi", node="n2")]
    docs += statefulset(2, size="5Gi")
    plan = planned(docs)
    assert sorted(plan.assignments.values()) == ["n1", "n2"]


def test_mixed_sizes_on_one_node_are_matched_as_upstream_would() -> None:
    """A 1Gi and a 10Gi PV on one node serve a 1Gi and a 5Gi claim, not two 5Gi claims (sizes nest)."""
    docs = [node("n1"), storage_class("local"), volume("small", size="1Gi", node="n1"), volume("big", size="10Gi", node="n1"),
            claim("a", size="1Gi"), claim("b", size="5Gi"), claim("c", size="5Gi"),
            pod("pa", volumes=mounts("a")), pod("pb", volumes=mounts("b")), pod("pc", volumes=mounts("c"))]
    plan = planned(docs)
    assert "default/pa" in plan.assignments and len(plan.assignments) == 2


def test_a_provisioner_places_claims_where_its_allowed_topologies_say() -> None:
    docs = zonal_nodes() + [storage_class("zonal", provisioner="csi.example.com", zones=["b"])] + statefulset(3, cls="zonal")
    assert set(planned(docs).assignments.values()) == {"n-b"}


def test_csi_attach_limits_count_bound_pods_volumes() -> None:
    docs = [node("n1", cpu="8"), node("n2", cpu="8"), csinode("n1", {"ebs.csi.aws.com": 2}),
            storage_class("ebs", provisioner="ebs.csi.aws.com"),
            volume("held", storage_class="ebs", claim_ref=("default", "held"), csi=("ebs.csi.aws.com", "vol-1")),
            claim("held", storage_class="ebs", volume="held"), pod("old", node_name="n1", volumes=mounts("held")),
            pod("hog", cpu="8", node_name="n2")]
    docs += statefulset(3, cls="ebs")
    plan = planned(docs)
    assert Counter(plan.assignments.values()) == {"n1": 1}
    assert all("Insufficient attachable volumes: ebs.csi.aws.com" in " ".join(r) for r in plan.unschedulable.values())


def test_a_node_at_its_attach_limit_is_rejected_in_upstream_words() -> None:
    docs = [node("n1"), csinode("n1", {"ebs.csi.aws.com": 1}), storage_class("ebs", provisioner="ebs.csi.aws.com"),
            volume("held", storage_class="ebs", claim_ref=("default", "held"), csi=("ebs.csi.aws.com", "vol-1")),
            claim("held", storage_class="ebs", volume="held"), pod("old", node_name="n1", volumes=mounts("held")),
            pod("again", volumes=mounts("held"))]  # the same volume again adds nothing: it fits
    docs += statefulset(1, cls="ebs")
    plan = planned(docs)
    assert plan.assignments == {"default/again": "n1"}
    assert "exceed max volume count" in reasons(plan, "db-0")


def test_a_read_write_once_pod_claim_in_use_blocks_a_second_user() -> None:
    docs = zonal_nodes() + [volume("pv", claim_ref=("default", "solo"), modes=("ReadWriteOncePod",)),
                            claim("solo", modes=("ReadWriteOncePod",), volume="pv"),
                            pod("first", node_name="n-a", volumes=mounts("solo")), pod("second", volumes=mounts("solo"))]
    plan = planned(docs)
    assert plan.assignments == {}
    assert "ReadWriteOncePod access mode already in-use" in reasons(plan, "second")


def test_pending_pods_sharing_a_read_write_once_pod_claim_place_one() -> None:
    docs = zonal_nodes() + [volume("pv", claim_ref=("default", "solo"), modes=("ReadWriteOncePod",)),
                            claim("solo", modes=("ReadWriteOncePod",), volume="pv")]
    docs += [pod(f"p{i}", volumes=mounts("solo")) for i in range(3)]
    assert len(planned(docs).assignments) == 1


def test_legacy_zone_labels_on_a_bound_volume_pin_its_pod() -> None:
    pv = volume("pv", claim_ref=("default", "data"), labels={"failure-domain.beta.kubernetes.io/zone": "b"})
    docs = zonal_nodes() + [pv, claim("data", volume="pv"), pod("db", volumes=mounts("data"))]
    assert planned(docs).assignments == {"default/db": "n-b"}


@settings(max_examples=40, deadline=None)
@given(pvs=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["1Gi", "5Gi", "10Gi"])), max_size=8),
       claims=st.lists(st.sampled_from(["1Gi", "5Gi", "10Gi"]), min_size=1, max_size=8),
       provisioned=st.booleans())
def test_every_plan_meets_every_claim(pvs, claims, provisioned) -> None:
    """Random local PVs and claims: every plan is valid to the checker, and a pod is left out only when the
    PVs cannot serve one more (no better matching exists: the checker's matching agrees on the count)."""
    docs = [node(f"n{i}", labels={ZONE_KEY: ZONES[i % 3]}) for i in range(4)]
    docs += [storage_class("local"), storage_class("zonal", provisioner="csi.example.com", zones=["a"])]
    docs += [volume(f"pv{k}", size=size, node=f"n{i}") for k, (i, size) in enumerate(pvs)]
    for k, size in enumerate(claims):
        cls = "zonal" if provisioned and k % 2 else "local"
        docs += [claim(f"c{k}", size=size, storage_class=cls), pod(f"p{k}", volumes=mounts(f"c{k}"))]
    plan = planned(docs)
    local_claims = sorted((s for k, s in enumerate(claims) if not (provisioned and k % 2)), key=_bytes, reverse=True)
    assert len(plan.assignments) == (len(claims) - len(local_claims)) + _most_served(local_claims, [s for _, s in pvs])


def _bytes(size: str) -> int:
    return int(size[:-2])


def _most_served(claims: list[str], pvs: list[str]) -> int:
    """Smallest claims first, each the smallest PV left that fits: optimal for nested sizes."""
    left = sorted(_bytes(s) for s in pvs)
    served = 0
    for c in sorted(_bytes(s) for s in claims):
        fit = next((p for p in left if p >= c), None)
        if fit is not None:
            left.remove(fit)
            served += 1
    return served


def test_pods_without_claims_leave_local_volume_nodes_to_the_claims() -> None:
    """Ours, not upstream's: among equal plans a pod that claims nothing stays off nodes with unclaimed local PVs,
    so a StatefulSet replica created later still finds room beside its volume."""
    docs = [node("n-pv", cpu="1"), node("n-plain", cpu="1"), node("n-other", cpu="1"), storage_class("local"),
            volume("pv-1", node="n-pv"), pod("web", cpu="1")]
    assert planned(docs).assignments == {"default/web": "n-plain"}
    later = docs[:-1] + [pod("web", cpu="1", node_name="n-plain"), claim("data"),
                         pod("db", cpu="1", volumes=mounts("data"))]
    assert planned(later).assignments == {"default/db": "n-pv"}
    just_created = volume("pv-1", node="n-pv")
    just_created["status"]["phase"] = "Pending"  # the PV controller has not made it Available yet
    assert planned(docs[:-2] + [just_created, pod("web", cpu="1")]).assignments == {"default/web": "n-plain"}
