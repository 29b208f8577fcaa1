"""Every text a plan tells about pods reads as written, never as joined by accident (issue 47, point 3): no ".;" where a
reason ending in a full stop met a separator, no ": ." where a list of reasons was empty, no "..". Swept over many
plans: the bundled demo (alone, under each library policy, and with a clock), every case of the policy library's tests,
the rich 300-node snapshot, and hand-made snapshots of the cases whose words are put together from parts (devices,
volumes, gangs, quotas, preemption, no nodes at all). Each plan's reasons are read one by one, and as the scheduler
loop puts them in one event message (`engine.model.rejections.joined`)."""
from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from engine.model.ir import Rules
from engine.model.rejections import joined
from engine.planning.explain import node_table
from engine.planning.planner import Options, TimeInputs, plan_batch
from engine.policy.lower import lower
from engine.policy.sources import load_policies
from engine.reading.load import build_cluster
from engine.reading.manifests import parse_objects, read_objects
from engine.time import timeline
from testkit.manifests import (
    claim,
    claim_template,
    claims,
    device_class,
    device_request,
    gpu,
    in_group,
    mounts,
    native_group,
    node,
    pod,
    podgroup,
    resource_claim,
    resource_slice,
)

ROOT = Path(__file__).parent.parent
DEMO = ROOT / "engine" / "data" / "demo-cluster.yaml"
POLICIES = sorted((ROOT / "policies").glob("*/*.policy"))
# a full stop met by a separator; a colon before nothing; a doubled full stop (not an ellipsis); empty separators
ARTEFACT = re.compile(r"\.;|:\s*\.(?!\d)|(?<!\.)\.\.(?!\.)|;\s*[;.]|,\s*[,;.]|\(\s*\)|[:;,]\s*$")
NOW = datetime.fromisoformat("2026-01-01T12:00:00+00:00").timestamp()


def texts(plan, cluster) -> Iterator[tuple[str, str]]:
    """(pod or where, text) for every text the plan tells: reasons one by one and joined as an event says them, the
    pods skipped, estimates, notes, why each victim goes, and the node-by-node table of each pod left out."""
    for key, reasons in plan.unschedulable.items():
        yield from ((key, r) for r in reasons)
        yield key, joined(reasons)
    yield from plan.skipped.items()
    yield from ((key, e.why) for key, e in plan.estimates.items())
    yield from (("note", n) for n in plan.notes)
    yield from ((v.pod, v.why) for p in plan.preemptions.values() for v in p.victims if v.why)
    compiled = plan.details.compiled
    if compiled is not None:
        for c, info in enumerate(compiled.classes):
            if any(p.key in plan.unschedulable for p in info.pods):
                yield from ((f"{info.sample.key} on {row[0]}", row[2]) for row in node_table(compiled, c) if row[2])


def artefacts(objects: list[tuple[str, dict]], rules: Rules = Rules(), now: float | None = None) -> list[str]:
    cluster = build_cluster(objects, gangs=rules.gangs)
    plan = plan_batch(cluster, rules, Options(time_limit=2, workers=1), time_inputs=TimeInputs(now))
    said = list(texts(plan, cluster))
    assert said or plan.assignments, "a plan that tells nothing and places nothing sweeps nothing"
    return [f"{who}: {text!r}" for who, text in said if ARTEFACT.search(text)]


def _objects(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(f"doc{i}", d) for i, d in enumerate(docs)]


def _library_cases() -> Iterator[tuple[str, list[tuple[str, dict]], list[str]]]:
    for path in sorted((ROOT / "policies").glob("*/*_test.yaml")):
        for i, case in enumerate(yaml.safe_load(path.read_text())["cases"]):
            if "cluster" not in case:
                continue
            docs = parse_objects(yaml.safe_dump_all(case["cluster"]), str(path))
            yield f"{path.parent.name}#{i}", docs, [str(path.parent / p) for p in case.get("policies", [])]


def _from_template(name: str) -> dict:
    waiting = pod(name)
    waiting["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    return waiting


def _running(name: str, node_name: str, **extra) -> dict:
    """A running pod started at 11:30 that ends within the hour (activeDeadlineSeconds)."""
    out = pod(name, node_name=node_name, activeDeadlineSeconds=3600, **extra)
    out["status"]["startTime"] = "2026-01-01T11:30:00Z"
    return out


H100 = 'device.attributes["gpu.example.com"].model == "h100"'
HAND_MADE = {
    "devices told apart": [
        node("cpu-1"), node("gpu-a"), node("gpu-h"), device_class(),
        resource_slice("gpu-a", [gpu("g0", model="a100")]), resource_slice("gpu-h", [gpu("g0", model="h100")]),
        resource_claim("held", allocated=[("gpu-h", "g0")], node="gpu-h"),
        pod("r", node_name="gpu-h", resourceClaims=claims("held")),
        resource_claim("c", device_request(selectors=(H100,))), pod("p", resourceClaims=claims("c")),
        resource_claim("two", device_request(count=2)), pod("q", resourceClaims=claims("two")),
        resource_claim("nope", device_request(device_class_name="nope")), pod("s", resourceClaims=claims("nope"))],
    "claims not there": [
        node("n1"), node("n2"), device_class(), resource_slice("n1", [gpu("g0")]), claim_template("t"),
        _from_template("p"), pod("m", resourceClaims=claims("gone")), pod("v", volumes=mounts("data")), claim("other")],
    "no DRA objects": [node("n1"), pod("p", resourceClaims=claims("c"))],
    "no nodes": [pod("p"), podgroup("g", 2), pod("g0", labels={"scheduling.x-k8s.io/pod-group": "g"}),
                 pod("g1", labels={"scheduling.x-k8s.io/pod-group": "g"})],
    "groups missing or short": [
        node("n1"), pod("a", schedulingGroup=in_group("gone")), pod("b", labels={"scheduling.x-k8s.io/pod-group": "gone"}),
        native_group("short", 3), pod("c", schedulingGroup=in_group("short"))],
    "preemption that cannot help": [
        node("n1", cpu="2"), pod("low", cpu="1500m", node_name="n1", priority=0),
        pod("high", cpu="4", priority=100), pod("mid", cpu="1", priority=50, nodeSelector={"disk": "ssd"})],
}
TIMED = {
    "waiting for devices and a claim, with a clock": [
        node("n1"), device_class(), resource_slice("n1", [gpu("g0")]),
        resource_claim("held", allocated=[("n1", "g0")], node="n1"),
        _running("r", "n1", resourceClaims=claims("held")), resource_claim("c"), pod("p", resourceClaims=claims("c")),
        claim_template("t"), _from_template("w"), pod("big", cpu="8")],
    "waiting for room, with a clock": [
        node("n1", cpu="2"), _running("r", "n1", cpu="2"), pod("p", cpu="1"), pod("q", cpu="1", priority=10)],
}


def test_the_demo_alone_and_under_each_library_policy() -> None:
    found = artefacts(read_objects(str(DEMO)))
    for policy in POLICIES:
        found += artefacts(read_objects(str(DEMO)), lower(load_policies([str(policy)])))
    assert found == []


def test_the_demo_with_a_clock() -> None:
    objects = read_objects(str(DEMO))
    now = timeline.snapshot_time(build_cluster(objects))
    assert artefacts(objects, now=now) == []


def test_every_case_of_the_policy_library() -> None:
    found = []
    for name, objects, policies in _library_cases():
        rules = lower(load_policies(policies)) if policies else Rules()
        found += [f"{name}: {a}" for a in artefacts(objects, rules)]
    assert found == []


def test_the_rich_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "rich.yaml"
    path.write_bytes(gzip.decompress((ROOT / "tests" / "cases" / "rich-300x1500.yaml.gz").read_bytes()))
    assert artefacts(read_objects(str(path))) == []


@pytest.mark.parametrize("name", sorted(HAND_MADE))
def test_hand_made_snapshots(name: str) -> None:
    assert artefacts(_objects(HAND_MADE[name])) == []


@pytest.mark.parametrize("name", sorted(TIMED))
def test_hand_made_snapshots_with_a_clock(name: str) -> None:
    assert artefacts(_objects(TIMED[name]), now=NOW) == []


def test_joined_reasons_drop_the_full_stop_before_each_separator() -> None:
    assert joined(["0/3 nodes are available: 3 Insufficient cpu.", "the room went to 2 pods", ""]) == \
        "0/3 nodes are available: 3 Insufficient cpu; the room went to 2 pods"
    assert joined(["a.", "b."]) == "a; b."


def test_no_nodes_is_said_without_an_empty_list() -> None:
    plan = plan_batch(build_cluster(_objects([pod("p")])), Rules(), Options(time_limit=1, workers=1))
    assert plan.unschedulable["default/p"] == ["0/0 nodes are available: the cluster has no Nodes."]


def test_the_loop_says_a_pods_reasons_in_one_event_line_without_artefacts() -> None:
    """The FailedScheduling event and the PodScheduled condition carry every reason of a pod in one line."""
    from loopfake import FakeAPI, synced_loop
    api = FakeAPI()
    api.put("Node", node("n1", cpu="2"))
    api.put("Pod", pod("low", cpu="1500m", node_name="n1", priority=0))
    api.put("Pod", pod("high", cpu="4", priority=100))
    scheduler, loop = synced_loop(api)
    loop.cycle(["default/high"]).result()
    scheduler.events.close()
    (message,) = [e[3] for e in api.events if e[0] == "Pod/default/high"]
    assert message.startswith("0/1 nodes are available: 1 Insufficient cpu; preemption: ")
    assert not ARTEFACT.search(message) and not ARTEFACT.search(api.conditions["default/high"])
