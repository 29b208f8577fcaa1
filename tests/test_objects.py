"""The one registry of object kinds (engine/reading/objects.py, issue 27 point 2): every reader agrees with it."""

from __future__ import annotations

from engine.kinds.base import Resource
from engine.loop.cache import REST_RESOURCES, SPEC_ONLY
from engine.loop.live import LIVE_KINDS
from engine.loop.profile import Profile
from engine.loop.scheduler import resources
from engine.reading.load import build_cluster
from engine.reading.objects import (
    API_VERSIONS,
    BY_NAME,
    MODEL_KINDS,
    NATIVE_POD_GROUP,
    OBJECT_KINDS,
    WATCHED,
    is_terminal,
    kind_of,
    waits_for,
)
from testkit.manifests import native_group, node, pod, podgroup


def test_every_event_a_kind_raises_is_one_the_queueing_hints_know() -> None:
    assert {k.event for k in OBJECT_KINDS if k.event} <= {r.value for r in Resource}
    assert {r.value for r in Resource} <= {k.event for k in OBJECT_KINDS if k.event}  # and none is never raised


def test_the_loop_watches_and_the_live_dry_run_lists_what_the_registry_says() -> None:
    targets = resources((Profile("policy-scheduler", ("ns", "policies")),))
    watched = [w.kind for w in targets]
    assert watched[:-2] == [k.name for k in WATCHED] == list(LIVE_KINDS)
    # the profile's policies and the copy of the set in force kept beside them, beside the model's kinds
    assert [(w.kind, w.namespace, w.name) for w in targets[-2:]] == [("ConfigMap", "ns", "policies"),
                                                                      ("ConfigMap", "ns", "policies-last-valid")]
    assert LIVE_KINDS[-1] == "Pod"  # pods last: what they read is listed by then
    assert {"Service", "ReplicationController", "ReplicaSet", "StatefulSet", "Job",  # and a Job's succeeded count
            "JobSet", "PyTorchJob", "MPIJob", "RayCluster", "LeaderWorkerSet"} == set(SPEC_ONLY)
    assert SPEC_ONLY["Job"] == ("succeeded",) and not SPEC_ONLY["JobSet"]
    assert REST_RESOURCES[NATIVE_POD_GROUP] is Resource.POD_GROUP and "Node" not in REST_RESOURCES


def test_every_kind_the_model_reads_is_read_at_every_version_the_registry_lists() -> None:
    for entry in MODEL_KINDS:
        for version in entry.versions:
            assert version in API_VERSIONS[entry.manifest_kind]
    group = native_group("g", min_count=2)
    assert kind_of(group) is BY_NAME[NATIVE_POD_GROUP] and kind_of(podgroup("g", 2)) is BY_NAME["PodGroup"]
    assert kind_of({"kind": "ConfigMap", "apiVersion": "v1"}) is None  # the loop's own, not the model's
    cluster = build_cluster([("t", node("n1")), ("t", group), ("t", podgroup("g", 2))])
    assert set(cluster.native_groups) == {"default/g"} and set(cluster.pod_groups) == {"default/g"}


def test_waiting_and_terminal_are_said_once_of_raw_pods() -> None:
    waiting = pod("p", scheduler="policy-scheduler")
    assert waits_for(waiting, "policy-scheduler") and not waits_for(waiting, "other")
    for change in ({"spec": {**waiting["spec"], "nodeName": "n1"}},
                   {"metadata": {**waiting["metadata"], "deletionTimestamp": "2026-11-27T00:00:00Z"}},
                   {"spec": {**waiting["spec"], "schedulingGates": [{"name": "g"}]}},
                   {"status": {"phase": "Succeeded"}}):
        assert not waits_for({**waiting, **change}, "policy-scheduler"), change
    assert is_terminal({"status": {"phase": "Failed"}}) and not is_terminal({"status": {"phase": "Running"}})


def test_the_scheduler_s_role_lets_it_list_and_watch_every_kind_it_watches() -> None:
    """deploy/clusterrole.yaml (the chart renders a copy) grants list and watch on each watched kind, in its group."""
    from pathlib import Path

    import yaml

    role = yaml.safe_load((Path(__file__).parent.parent / "deploy" / "clusterrole.yaml").read_text())
    granted = {(group, resource) for rule in role["rules"] if {"list", "watch"} <= set(rule["verbs"])
               for group in rule["apiGroups"] for resource in rule["resources"]}
    for entry in WATCHED:
        group = entry.api_version.rpartition("/")[0]
        assert (group, entry.plural) in granted, entry.name
