"""Explanations name the constraint that blocks a pod in the batch's plan; "no room" only where room lacks."""

from __future__ import annotations

from runner import run
from testkit.manifests import affinity, anti, node, pod, term

ZONE = "topology.kubernetes.io/zone"


def reasons(plan, key: str) -> str:
    return " | ".join(plan.unschedulable[key])


def test_required_affinity_is_named_not_no_room():
    # zone a has room for the cache only; zone b has room but no cache: the worker's affinity blocks it
    docs = [node("a1", cpu="1", labels={ZONE: "a"}), node("b1", cpu="8", labels={ZONE: "b"}),
            pod("cache", cpu="1", labels={"app": "cache"}, priority=100, nodeSelector={ZONE: "a"}),
            pod("worker", cpu="1", labels={"app": "worker"}, affinity=affinity(term({"app": "cache"}, ZONE)))]
    plan = run(docs)
    assert plan.assignments == {"default/cache": "a1"}
    text = reasons(plan, "default/worker")
    assert "1 node(s) had no pod in their domain that its pod required affinity to pods app In [cache]" in text
    assert "1 node(s) had no room left in this batch's plan (Insufficient cpu)" in text  # a1 only


def test_required_anti_affinity_is_named_with_its_side():
    docs = [node("a1", cpu="8", labels={ZONE: "a"}), node("a2", cpu="8", labels={ZONE: "a"})]
    docs += [pod("db", labels={"app": "db"}, priority=100, affinity=anti(term({"app": "web"}, ZONE))),
             pod("web", labels={"app": "web"})]
    plan = run(docs)
    assert plan.assignments == {"default/db": "a1"} or plan.assignments == {"default/db": "a2"}
    text = reasons(plan, "default/web")
    assert "2 node(s) are in a domain holding pods of this batch whose pod required anti-affinity" in text
    assert "no room" not in text


def test_host_ports_are_named_not_no_room():
    port = [{"containerPort": 80, "hostPort": 8080}]
    docs = [node("n1", cpu="8"), pod("a", ports=port, labels={"app": "a"}, priority=10),
            pod("b", ports=port, labels={"app": "b"})]
    plan = run(docs)
    text = reasons(plan, "default/b")
    assert "node(s) didn't have free ports for the requested pod ports in this batch's plan" in text
    assert "no room" not in text


def test_room_taken_says_by_whom():
    docs = [node("n1", cpu="1"), pod("hi", cpu="1", labels={"p": "hi"}, priority=100),
            pod("lo", cpu="1", labels={"p": "lo"})]
    text = reasons(run(docs), "default/lo")
    assert "had no room left in this batch's plan (Insufficient cpu)" in text
    assert "went to 1 higher-priority pod(s)" in text


def test_explain_says_why_this_node(tmp_path):
    import json

    import yaml
    from click.testing import CliRunner

    from engine.cli import main
    from testkit.manifests import expr

    preferred = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 40, "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}}]}}
    docs = [node("hdd", cpu="8", labels={"disk": "hdd"}), node("ssd", cpu="8", labels={"disk": "ssd"}),
            pod("db", labels={"app": "db"}, affinity=preferred)]
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text(yaml.safe_dump_all(docs))
    result = CliRunner().invoke(main, ["explain", "--cluster", str(snapshot), "db", "-o", "json"])
    out = json.loads(result.stdout)
    assert out["node"] == "ssd"
    assert {"term": "preferred node affinity "
                    "[spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]]",
            "points": 40} in out["score"]
    assert out["score"][-1] == {"term": "best score of any candidate node", "points": 40}
