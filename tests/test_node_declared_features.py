"""NodeDeclaredFeatures (issue 28 point 3; GA in Kubernetes 1.37, beta and on in 1.36): a pod whose spec needs a
kubelet feature goes only to nodes whose `status.declaredFeatures` lists it, in upstream's words, and a node
starting to declare it wakes the waiting pod (its queueing hint)."""

from __future__ import annotations

import threading

import pytest

from engine.reading.convert.features import required_features
from engine.reading.convert.fields import InputError
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from loopfake import node as fake_node
from loopfake import pod as fake_pod
from runner import run
from testkit.checker import check_plan
from testkit.manifests import node, pod

RESTART_ALL = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]


def declaring(doc: dict, *features: str) -> dict:
    doc["status"]["declaredFeatures"] = list(features)
    return doc


def restarting_pod(name: str) -> dict:
    doc = pod(name)
    doc["spec"]["containers"][0]["restartPolicyRules"] = RESTART_ALL
    return doc


@pytest.mark.parametrize(("spec", "expected"), [
    ({"containers": [{"name": "c", "restartPolicyRules": RESTART_ALL}]}, ("RestartAllContainersOnContainerExits",)),
    ({"initContainers": [{"name": "i", "restartPolicyRules": RESTART_ALL}], "containers": []},
     ("RestartAllContainersOnContainerExits",)),
    ({"containers": [{"name": "c", "restartPolicyRules": [{"action": "Restart"}]}]}, ()),
    ({"hostNetwork": True, "hostUsers": False, "containers": []}, ("UserNamespacesHostNetworkSupport",)),
    ({"hostNetwork": True, "containers": []}, ()),  # hostUsers unset: the host's user namespace
    ({"hostUsers": False, "containers": []}, ()),
    ({"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}]}],
      "hostNetwork": True, "hostUsers": False},
     ("UserNamespacesHostNetworkSupport", "VolumeBindMountOptions")),
    ({"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}, ()),
])
def test_required_features_are_inferred_as_upstream_infers_them(spec: dict, expected: tuple[str, ...]) -> None:
    assert required_features(spec) == expected


def test_a_pod_needing_a_feature_goes_only_where_a_node_declares_it() -> None:
    docs = [node("old"), declaring(node("new"), "RestartAllContainersOnContainerExits", "SomethingElse"),
            restarting_pod("p"), pod("plain")]
    plan = run(docs)
    assert plan.assignments["default/p"] == "new"
    assert check_plan(docs, plan.assignments) == []
    assert check_plan(docs, {**plan.assignments, "default/p": "old"}) != []  # the checker sees it too


def test_no_node_declaring_it_leaves_the_pod_out_in_upstream_s_words() -> None:
    docs = [node("n1"), declaring(node("n2"), "UserNamespacesHostNetworkSupport"), restarting_pod("p")]
    plan = run(docs)
    assert plan.unschedulable["default/p"][0] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's required features.")


def test_pods_needing_different_features_are_not_one_class() -> None:
    """Pods alike but for what they need of the node: each is filtered by its own needs."""
    docs = [declaring(node("n1", cpu="1"), "RestartAllContainersOnContainerExits"), node("n2", cpu="1")]
    for name in ("q", "p"):
        doc = pod(name, cpu="600m")
        if name == "p":
            doc["spec"]["containers"][0]["restartPolicyRules"] = RESTART_ALL
        docs.append(doc)
    plan = run(docs)
    assert plan.assignments == {"default/p": "n1", "default/q": "n2"}
    host = run([*docs[:2], pod("host", hostNetwork=True, hostUsers=False)])
    assert "didn't match Pod's required features" in host.unschedulable["default/host"][0]


def test_a_malformed_declared_features_list_refuses_the_node_by_name() -> None:
    bad = declaring(node("n1"), "A")
    bad["status"]["declaredFeatures"] = "A"
    with pytest.raises(InputError, match=r"(?s)Node.*n1.*status.declaredFeatures must be a list"):
        build_cluster([("test", bad)], "policy-scheduler")


def test_a_node_starting_to_declare_the_feature_wakes_the_pod_and_another_change_does_not() -> None:
    api = FakeAPI()
    api.put("Node", fake_node("n1"))
    waiting = fake_pod("p")
    waiting["spec"]["containers"][0]["restartPolicyRules"] = RESTART_ALL
    api.put("Pod", waiting)
    s, loop = synced_loop(api, backoff=0.0)
    loop.cycle(loop.queue.next_batch(threading.Event(), idle=0.1)).result()
    assert loop.queue.unschedulable() == 1
    relabelled = fake_node("n1", labels={"x": "y"})
    s.store.apply("Node", "MODIFIED", api.put("Node", relabelled))
    assert loop.queue.unschedulable() == 1
    s.store.apply("Node", "MODIFIED", api.put("Node", declaring(fake_node("n1"), "RestartAllContainersOnContainerExits")))
    assert loop.queue.unschedulable() == 0
    s.events.close()
