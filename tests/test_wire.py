"""Kubernetes' protobuf encoding (engine.loop.wire): upstream's messages, read into the dict JSON would give (so both
encodings make one model), written back, a watch stream's frames, and the answers that are not protobuf."""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.loop.api import PROTOBUF_FIRST, KubeAPI, _message
from engine.loop.command import PROTOBUF
from engine.loop.ports import ApiError
from engine.loop.wire import MAGIC, MEDIA, STATUS, UNKNOWN, WATCH_EVENT, Codec, WireError, go_duration, message_name
from engine.reading.load import build_cluster
from testkit.every_kind import OBJECTS
from testkit.schemas import module_cache

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec()


def _frame(codec: Codec, type_: str, obj: dict) -> bytes:
    event = codec.from_dict(WATCH_EVENT, {"type": type_})
    event.object.raw = codec.encode(obj)
    body = event.SerializeToString()
    return struct.pack(">I", len(body)) + body


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_the_messages_are_what_protoc_makes_of_the_release(tmp_path: Path) -> None:
    """The committed descriptor set and inline list are scripts/kube_proto.py's output for k8s.io/api v0.37.2, byte
    for byte: nothing in them was written by hand."""
    cache = module_cache()
    if importlib.util.find_spec("grpc_tools") is None \
            or not (cache / "k8s.io/api@v0.37.2").is_dir() or not (cache / "k8s.io/apimachinery@v0.37.2").is_dir():
        pytest.skip("needs grpcio-tools (the test extra) and k8s.io/api, k8s.io/apimachinery v0.37.2 in the Go module "
                    "cache (go mod download)")
    out = tmp_path / "kube-api.binpb"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "kube_proto.py"), "--out", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    data = ROOT / "engine" / "data"
    assert out.read_bytes() == (data / "kube-api.binpb").read_bytes()
    assert (tmp_path / "kube-api-inline.json").read_text() == (data / "kube-api-inline.json").read_text()
    inline = json.loads((data / "kube-api-inline.json").read_text())
    assert inline["version"] == "v0.37.2" and inline["inline"]["k8s.io.api.core.v1.Volume"] == ["volumeSource"]


@pytest.mark.parametrize("obj", list(yaml.safe_load_all(OBJECTS)), ids=lambda o: o["kind"])
def test_every_kind_reads_back_as_its_json(codec: Codec, obj: dict) -> None:
    data = codec.encode(obj)
    assert data.startswith(MAGIC)
    assert codec.decode(data) == obj


GO_ZEROS = {  # (section, field, Go's zero value) of plain Go fields JSON omits when empty
    "Pod": [("spec", "nodeName", ""), ("spec", "hostNetwork", False), ("spec", "hostname", ""),
            ("metadata", "generateName", ""), ("metadata", "generation", 0), ("metadata", "selfLink", "")],
    "Node": [("spec", "unschedulable", False), ("spec", "podCIDR", ""), ("spec", "providerID", ""),
             ("metadata", "namespace", "")],
    "PriorityClass": [(None, "globalDefault", False), (None, "description", "")],
    "PersistentVolumeClaim": [("spec", "volumeName", "")],
    "ResourceSlice": [("metadata", "namespace", ""), ("spec", "allNodes", False)]}


def test_what_go_writes_of_unset_fields_makes_the_same_model(codec: Codec) -> None:
    """Go's protobuf writes a struct's plain fields even when empty (nodeName "", a Node's unschedulable false,
    a PriorityClass's globalDefault false), where JSON leaves them out: the dicts differ, the model does not."""
    objects = list(yaml.safe_load_all(OBJECTS))
    as_go = []
    for obj in objects:
        message = codec.from_dict(message_name(obj["apiVersion"], obj["kind"]),
                                  {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")})
        for section, field, zero in GO_ZEROS.get(obj["kind"], ()):
            part = message if section is None else getattr(message, section)
            if not part.HasField(field):
                setattr(part, field, zero)
        envelope = codec.from_dict(UNKNOWN, {})
        envelope.typeMeta.apiVersion, envelope.typeMeta.kind = obj["apiVersion"], obj["kind"]
        envelope.raw = message.SerializeToString()
        as_go.append(codec.decode(MAGIC + envelope.SerializeToString()))
    pods = [o for o in as_go if o["kind"] == "Pod"]
    assert all(p["spec"]["nodeName"] == "" for p in pods if p["metadata"]["name"] != "bound")
    assert next(o for o in as_go if o["kind"] == "Node")["spec"]["unschedulable"] is False
    docs = lambda objs: [(f"{o['kind']}/{i}", o) for i, o in enumerate(objs)]  # noqa: E731
    assert as_go != objects
    from_go, from_json = build_cluster(docs(as_go), strict=False), build_cluster(docs(objects), strict=False)
    assert from_go == from_json
    assert [p.name for p in from_json.pending] == ["rich"] and [p.name for p in from_json.bound] == ["bound"]


def test_types_with_their_own_json(codec: Codec) -> None:
    """Quantity, Time, MicroTime, IntOrString, RawExtension, bytes and Go's inlined structs read as JSON says them."""
    pod = codec.to_dict(codec.from_dict("k8s.io.api.core.v1.Pod", {
        "metadata": {"name": "p", "creationTimestamp": "2026-11-29T23:50:37Z",
                     "deletionTimestamp": "2026-11-30T00:00:00+00:00"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                                 "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}],
                 "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}))
    assert pod["metadata"]["creationTimestamp"] == "2026-11-29T23:50:37Z"
    assert pod["metadata"]["deletionTimestamp"] == "2026-11-30T00:00:00Z"
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "250m", "memory": "1Gi"}
    assert pod["spec"]["containers"][0]["livenessProbe"]["httpGet"]["port"] == "http"  # a Probe's inlined handler
    assert pod["spec"]["volumes"] == [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]  # inlined source
    raw = codec.from_dict("k8s.io.api.core.v1.Pod", {"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/x"}}]}})
    assert raw.spec.volumes[0].volumeSource.hostPath.path == "/x"  # in protobuf, one field holds the source
    port = codec.from_dict("k8s.io.api.core.v1.ServicePort", {"port": 80, "targetPort": 8080})
    assert codec.to_dict(port) == {"port": 80, "targetPort": 8080} and port.targetPort.type == 0
    event = codec.to_dict(codec.from_dict("k8s.io.api.core.v1.Event", {"eventTime": "2026-11-29T23:50:37.123456Z"}))
    assert event["eventTime"] == "2026-11-29T23:50:37.123456Z"
    secret = codec.from_dict("k8s.io.api.core.v1.Secret", {"data": {"k": "aGVsbG8="}})
    assert secret.data["k"] == b"hello" and codec.to_dict(secret) == {"data": {"k": "aGVsbG8="}}
    claim = codec.to_dict(codec.from_dict("k8s.io.api.resource.v1.DeviceClaimConfiguration", {
        "requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}))
    assert claim == {"requests": ["gpu"], "opaque": {"driver": "d", "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}


@pytest.mark.parametrize(("nanos", "text"), [  # Go's time_test.go durationTests
    (0, "0s"), (1, "1ns"), (1100, "1.1µs"), (2_200_000, "2.2ms"), (3_300_000_000, "3.3s"),
    (4 * 60 * 10**9 + 5 * 10**9, "4m5s"), (4 * 60 * 10**9 + 5_001_000_000, "4m5.001s"),
    (5 * 3600 * 10**9 + 6 * 60 * 10**9 + 7_001_000_000, "5h6m7.001s"), (8 * 60 * 10**9 + 1, "8m0.000000001s"),
    (2**63 - 1, "2562047h47m16.854775807s"), (-(2**63), "-2562047h47m16.854775808s"), (3600 * 10**9, "1h0m0s")])
def test_durations_read_as_go_prints_them(nanos: int, text: str) -> None:
    assert go_duration(nanos) == text


def test_a_watch_stream_is_read_frame_by_frame(codec: Codec) -> None:
    pod = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "n", "resourceVersion": "7"},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}
    gone = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410, "reason": "Expired",
            "message": "too old resource version"}
    stream = _frame(codec, "ADDED", pod) + _frame(codec, "BOOKMARK", bookmark) + _frame(codec, "ERROR", gone)
    expected = [("ADDED", pod), ("BOOKMARK", bookmark), ("ERROR", gone)]
    for size in (1, 3, 4, 5, 64, len(stream)):  # frames split across chunks, and several in one
        assert list(codec.watch_events(_chunks(stream, size))) == expected, size
    assert list(codec.watch_events([])) == []
    with pytest.raises(WireError, match="inside a frame"):
        list(codec.watch_events(_chunks(stream[:-3], 7)))
    with pytest.raises(WireError, match="inside a frame"):
        list(codec.watch_events([stream, b"\x00\x01"]))


def test_bytes_that_are_not_what_they_say_are_refused(codec: Codec) -> None:
    with pytest.raises(WireError, match="prefix"):
        codec.decode(b'{"kind": "Pod"}')
    envelope = codec.from_dict(UNKNOWN, {"typeMeta": {"apiVersion": "example.com/v1", "kind": "Widget"}})
    with pytest.raises(WireError, match="no protobuf message"):
        codec.decode(MAGIC + envelope.SerializeToString())
    with pytest.raises(WireError):
        codec.decode(MAGIC + b"\xff\xff\xff")
    with pytest.raises(WireError, match="no field"):
        codec.encode({"apiVersion": "v1", "kind": "Pod", "spec": {"notAField": 1}})
    assert not codec.serves("scheduling.x-k8s.io/v1alpha1", "PodGroup") and codec.serves("v1", "PodList")


def test_a_status_answer_says_why_in_either_encoding(codec: Codec) -> None:
    status = codec.encode({"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 409,
                           "reason": "Conflict", "message": 'pod "p" is already assigned to node "n"'})
    assert codec.message(STATUS) is not None
    assert _message(status, codec) == 'pod "p" is already assigned to node "n"'
    assert _message(b'{"kind": "Status", "message": "in JSON"}', codec) == "in JSON"


class _Client:
    """Just what KubeAPI's constructor reads of an ApiClient: a configuration that asks for the client's transport."""

    class configuration:
        host = "http://127.0.0.1:1"
        proxy = None
        assert_hostname = None
        socket_options = None


def test_the_encoding_asked_for_and_the_one_read() -> None:
    """Lists and watches ask protobuf first only for kinds with a message; the answer is read in whatever encoding
    the apiserver chose (JSON for CRDs); with protobuf off, JSON throughout."""
    api, plain = KubeAPI(_Client()), KubeAPI(_Client(), protobuf=False)  # type: ignore[arg-type]
    assert api._accept("v1", "Pod") == PROTOBUF_FIRST == f"{MEDIA}, application/json"
    assert PROTOBUF == MEDIA  # `run --kube-api-content-type`'s name for it, kept apart so the CLI loads no protobuf
    assert api._accept("scheduling.x-k8s.io/v1alpha1", "PodGroup") == "application/json"
    assert plain._accept("v1", "Pod") == "application/json"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    assert api._decode(json.dumps(pod).encode(), "application/json") == pod
    assert api._decode(api._codec.encode(pod), MEDIA) == pod  # type: ignore[union-attr]
    with pytest.raises(ApiError, match="undecodable"):
        api._decode(b"k8s\x00\xff", MEDIA)
    assert api._encoded({"apiVersion": "v1", "kind": "Binding", "target": {"name": "n"}})[1] == MEDIA
    assert plain._encoded({"apiVersion": "v1", "kind": "Binding"})[1] == "application/json"
    assert api._encoded({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup"})[1] == "application/json"
