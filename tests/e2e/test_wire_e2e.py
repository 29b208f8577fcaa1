"""Protobuf on the wire (engine.loop.wire) against a real kube-apiserver: every kind the loop lists reads into the
same model in protobuf as in JSON, a watch streams protobuf frames, binds and events are written in protobuf, and
where the apiserver answers JSON (CRDs) the same calls read it."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import yaml

from engine.loop import wire
from engine.loop.api import KubeAPI, load_client
from engine.loop.ports import Conflict, WatchTarget
from engine.reading.load import build_cluster
from engine.reading.objects import BY_NAME
from testkit.controlplane import ControlPlane
from testkit.every_kind import KINDS, NS, OBJECTS
from testkit.scheduling import Kube, apply, install_podgroup_crd

pytestmark = pytest.mark.e2e

@pytest.fixture(scope="module")
def objects(control_plane: ControlPlane) -> None:
    kube = Kube(control_plane.kubeconfig)
    control_plane.ensure_namespace(NS)
    for obj in yaml.safe_load_all(OBJECTS):
        status, data = apply(kube, obj)
        assert status in (200, 201), (obj["kind"], status, data.get("message") if isinstance(data, dict) else data)
    node = kube.ok("GET", "/api/v1/nodes/wire-node")
    node["status"] = {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/widget": "4"},
                      "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "example.com/widget": "4"},
                      "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}
    kube.ok("PUT", "/api/v1/nodes/wire-node/status", node)


@pytest.fixture
def decoded(monkeypatch) -> list[str]:
    """The kinds each protobuf answer held (every object the codec decoded)."""
    seen: list[str] = []
    decode = wire.Codec.decode

    def spy(self: wire.Codec, data: bytes) -> dict[str, Any]:
        found = decode(self, data)
        seen.append(found["kind"])
        return found
    monkeypatch.setattr(wire.Codec, "decode", spy)
    return seen


def _ours(obj: dict) -> bool:
    meta = obj["metadata"]
    return meta.get("namespace") == NS or (not meta.get("namespace") and str(meta.get("name", "")).startswith(NS))


def _apis(control_plane: ControlPlane) -> tuple[KubeAPI, KubeAPI]:
    client = load_client(str(control_plane.kubeconfig))
    return KubeAPI(client), KubeAPI(client, protobuf=False)


def test_every_kind_reads_into_the_same_model_in_protobuf_as_in_json(control_plane: ControlPlane, objects,
                                                                     decoded) -> None:
    protobuf, json_api = _apis(control_plane)
    docs: dict[str, list[tuple[str, dict]]] = {"protobuf": [], "json": []}
    for kind in KINDS:
        before = len(decoded)
        for name, api in (("protobuf", protobuf), ("json", json_api)):
            items, version = api.list(WatchTarget(kind))
            assert version
            docs[name].extend((f"{kind}/{i}", obj) for i, obj in enumerate(items))
        assert decoded[before:] == [f"{BY_NAME[kind].manifest_kind}List"], kind  # answered in protobuf
    # this test's objects only: the session's control plane holds other tests' too, which may change between lists
    mine = {name: [(src, obj) for src, obj in found if _ours(obj)] for name, found in docs.items()}
    assert {obj["kind"] for _, obj in mine["json"]} == set(KINDS)
    assert [obj["metadata"]["name"] for _, obj in mine["protobuf"]] == [obj["metadata"]["name"] for _, obj in mine["json"]]
    from_protobuf, from_json = build_cluster(mine["protobuf"], strict=False), build_cluster(mine["json"], strict=False)
    assert from_protobuf == from_json
    assert any(p.name == "rich" for p in from_json.pending) and any(p.name == "bound" for p in from_json.bound)


def test_a_watch_streams_protobuf_frames(control_plane: ControlPlane, objects, decoded) -> None:
    protobuf, json_api = _apis(control_plane)
    _, version = protobuf.list(WatchTarget("Pod", NS))
    seen: list[tuple[str, dict]] = []

    def watch() -> None:
        for event in protobuf.watch(WatchTarget("Pod", NS), version, timeout_seconds=20):
            seen.append((event.type, event.obj))
            if event.type == "ADDED" and event.obj["metadata"]["name"] == "watched":
                return
    reader = threading.Thread(target=watch, daemon=True)
    reader.start()
    kube = Kube(control_plane.kubeconfig)
    kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "watched", "namespace": NS, "labels": {"a": "b"}},
                 "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1500m"}}}]}})
    reader.join(30)
    assert seen and seen[-1][0] == "ADDED"
    assert "Pod" in decoded  # the frames' objects
    (listed,), _ = json_api.list(WatchTarget("Pod", NS, "watched"))
    event_pod = {"kind": "Pod", "apiVersion": "v1", **{k: v for k, v in seen[-1][1].items() if k not in ("kind", "apiVersion")}}
    assert build_cluster([("watch", event_pod)], strict=False) == build_cluster([("list", listed)], strict=False)
    assert event_pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "1500m"


def test_binds_and_events_are_written_in_protobuf(control_plane: ControlPlane, objects, monkeypatch) -> None:
    """A Binding and an Event sent as protobuf bodies; a refused bind's and a refused create's Status read from
    protobuf answers (the message and the status say why)."""
    protobuf, _ = _apis(control_plane)
    kube = Kube(control_plane.kubeconfig)
    pod = kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "to-bind", "namespace": NS},
                       "spec": {"containers": [{"name": "c", "image": "x"}]}})
    sent: list[str] = []
    encode = wire.Codec.encode

    def spy(self: wire.Codec, obj: dict) -> bytes:
        sent.append(obj["kind"])
        return encode(self, obj)
    monkeypatch.setattr(wire.Codec, "encode", spy)
    result = protobuf.bind(NS, "to-bind", pod["metadata"]["uid"], "wire-node")
    assert result.ok, result.message
    assert kube.ok("GET", f"/api/v1/namespaces/{NS}/pods/to-bind")["spec"]["nodeName"] == "wire-node"
    again = protobuf.bind(NS, "to-bind", pod["metadata"]["uid"], "wire-node")  # a Status in protobuf says why not
    assert not again.ok and again.status == 409 and "already assigned" in again.message
    protobuf.create_event(pod, "Normal", "Scheduled", "Successfully assigned wire/to-bind to wire-node")
    assert sent == ["Binding", "Binding", "Event"]
    events = [e for e in kube.events(NS) if e["involvedObject"]["name"] == "to-bind"]
    assert [e["reason"] for e in events] == ["Scheduled"] and events[0]["source"]["component"] == "policy-scheduler"
    assert events[0]["firstTimestamp"].endswith("Z")
    protobuf.set_unschedulable(NS, "gated", "0/1 nodes are available")
    assert kube.ok("GET", f"/api/v1/namespaces/{NS}/pods/gated")["status"]["conditions"][0]["reason"] == "Unschedulable"
    with pytest.raises(Conflict):  # the Status of a refused protobuf-answered write names the conflict
        protobuf._json("POST", f"/api/v1/namespaces/{NS}/pods", body={"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "gated"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
                       accept=protobuf._answers())


def test_what_the_apiserver_answers_in_json_is_read_as_json(control_plane: ControlPlane, decoded, monkeypatch) -> None:
    """CRDs have no protobuf: asked protobuf-first, the apiserver answers JSON, and lists and watches read it."""
    kube = Kube(control_plane.kubeconfig)
    install_podgroup_crd(kube)
    status, _ = apply(kube, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                             "metadata": {"name": "crd-group", "namespace": NS}, "spec": {"minMember": 2}})
    assert status in (200, 201)
    protobuf, _ = _apis(control_plane)
    monkeypatch.setattr(wire.Codec, "serves", lambda self, api_version, kind: True)  # ask protobuf-first for it too
    assert protobuf._accept("scheduling.x-k8s.io/v1alpha1", "PodGroup") == "application/vnd.kubernetes.protobuf, application/json"
    items, _ = protobuf.list(WatchTarget("PodGroup", NS))
    assert [i["metadata"]["name"] for i in items] == ["crd-group"] and items[0]["spec"]["minMember"] == 2
    events = []
    for event in protobuf.watch(WatchTarget("PodGroup", NS), "0", timeout_seconds=5):
        events.append(event)
        break
    assert events and events[0].obj["metadata"]["name"] == "crd-group"
    assert decoded == []
