"""The model is values (issue 27): pods and nodes are frozen, and what a snapshot derives of its pods together
(gangs, volumes, default spreading, claims) is put on copies, never on the pods it was given."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from engine.model.cluster import Node, Pod
from engine.reading.load import build_cluster
from engine.reading.resolve import resolve_cluster
from testkit import manifests as m


def test_pods_and_nodes_cannot_be_written() -> None:
    p, n = Pod("default", "p"), Node("n1", {}, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.gang = "default/g"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.unschedulable = True  # type: ignore[misc]


def _docs() -> list[tuple[str, dict]]:
    rs = m.replica_set("web", {"app": "web"})
    docs = [m.node("n1"), m.node("n2"), m.podgroup("g1", 2), m.storage_class("local"), m.claim("data"), m.device_class(),
            m.resource_slice("n1", [m.gpu("g0")]), m.resource_claim("gpu-claim"), rs, m.service("web", {"app": "web"}),
            m.pod("member-0", labels={m.POD_GROUP_LABEL: "g1"}, node_name="n1"),
            m.pod("member-1", labels={m.POD_GROUP_LABEL: "g1"}),
            m.pod("mounting", volumes=m.mounts("data")),
            m.pod("gpu-user", resourceClaims=m.claims("gpu-claim")),
            m.owned(m.pod("web-1", labels={"app": "web"}), "ReplicaSet", "web")]
    return [("snapshot.yaml", d) for d in docs]


def test_resolving_a_snapshot_writes_nothing_onto_the_pods_it_was_given() -> None:
    built = build_cluster(_docs())
    by_key = {p.key: p for p in built.pending}
    assert by_key["default/member-1"].gang == "default/g1"
    assert by_key["default/mounting"].volumes.waiting
    assert by_key["default/gpu-user"].dra.to_allocate == ("default/gpu-claim",)
    assert by_key["default/web-1"].default_spread is not None
    assert [p.gang for p in built.bound] == ["default/g1"]
    bare = dataclasses.replace(built, pending=[_bare(p) for p in built.pending], bound=[_bare(p) for p in built.bound],
                               gangs={})
    before = copy.deepcopy((bare.pending, bare.bound, bare.devices))
    again = resolve_cluster(bare, None)
    assert (bare.pending, bare.bound, bare.devices) == before  # the inputs are as they were
    assert again.pending == built.pending and again.bound == built.bound and again.gangs == built.gangs


def _bare(p: Pod) -> Pod:
    """A pod as converted, before the snapshot's facts."""
    from engine.model.cluster import NO_CLAIMS, NO_VOLUMES

    return dataclasses.replace(p, gang=None, volumes=NO_VOLUMES, default_spread=None, dra=NO_CLAIMS)


def test_a_pods_key_is_made_once_and_follows_a_copy_with_another_name() -> None:
    p = Pod("team-a", "web-1")
    assert p.key == "team-a/web-1"
    assert dataclasses.replace(p, name="web-2").key == "team-a/web-2"
    assert dataclasses.replace(p, namespace="team-b").key == "team-b/web-1"
    assert copy.deepcopy(p).key == "team-a/web-1"
    assert p == Pod("team-a", "web-1") and p != Pod("team-a", "web-2")
    assert "key=" not in repr(p)


def test_a_pod_affinity_terms_hash_is_taken_once_and_is_the_hash_of_what_it_holds() -> None:
    """Hashed once when made (every cycle puts each bound pod's anti-affinity terms in a dict): equal terms hash
    alike, a copy with another field hashes as that field says, and an unpickled term hashes in its new process's
    way (a str's hash differs between processes, so the stored one is never carried)."""
    import pickle

    from engine.model.cluster import LabelSelector, PodAffinityTerm, Requirement

    def term(app: str, key: str = "kubernetes.io/hostname") -> PodAffinityTerm:
        return PodAffinityTerm(LabelSelector((Requirement("app", "In", (app,)),)), frozenset({"default"}), key)

    a = term("web")
    assert a == term("web") and hash(a) == hash(term("web")) and len({a, term("web"), term("db")}) == 2
    moved = dataclasses.replace(a, topology_key="zone")
    assert moved == term("web", "zone") and hash(moved) == hash(term("web", "zone")) and moved != a
    assert copy.deepcopy(a) == a and hash(copy.deepcopy(a)) == hash(a)
    assert pickle.loads(pickle.dumps(a)) == a
    assert "_hash" not in pickle.dumps(a).decode("latin-1")  # rebuilt from its fields where it is unpickled
    assert "_hash" not in repr(a)


def test_the_loops_resolve_marks_bound_gang_members_and_passes_the_other_bound_pods_as_they_are() -> None:
    """The loop resolves without the bound pods' volumes (its cache keeps them): a bound pod is copied only to say
    its gang, which has a pending member; with no such gang the bound pods are the very pods it was given."""
    built = build_cluster(_docs())
    bare = dataclasses.replace(built, pending=[_bare(p) for p in built.pending], bound=[_bare(p) for p in built.bound],
                               gangs={})
    again = resolve_cluster(bare, None, bound=False)
    assert [p.gang for p in again.bound] == ["default/g1"]
    no_gang = dataclasses.replace(bare, pending=[p for p in bare.pending if p.name != "member-1"])
    alone = resolve_cluster(no_gang, None, bound=False)
    assert [p.gang for p in alone.bound] == [None]
    assert all(a is b for a, b in zip(alone.bound, no_gang.bound)) and alone.bound is not no_gang.bound
