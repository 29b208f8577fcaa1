"""The queue view (`policy-scheduler queue`, engine/loop/queue_view.py and queue_command.py): rows made from the
objects a `kubectl get` lists — gang progress, the dominant reason, the expected start read back from the loop's
condition message, tenants and their quota use — and the command's table, JSON, watch, errors and kubectl plugin."""

from __future__ import annotations

import json
import threading
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.cli import KUBECTL_PLUGIN, kubectl_plugin, main
from engine.loop.queue_command import _watch, profile_names
from engine.loop.queue_view import Listed, queue_view
from engine.model.reasons import Code, ExpectedStart, prefixed
from engine.reading.objects import NATIVE_POD_GROUP
from loopfake import FakeAPI
from testkit.manifests import POD_GROUP_LABEL, in_group, native_group, pod, podgroup

T = 1_800_000_000.0  # 2027-01-15T08:00:00Z
QUOTA_API = "scheduling.x-k8s.io/v1alpha1"


def told(obj: dict, code: Code, words: str = "0/3 nodes are available: 3 Insufficient cpu.",
         expected: ExpectedStart | None = None) -> dict:
    """`obj` with the PodScheduled=False condition the loop writes."""
    obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                    "message": prefixed(code, words, expected)}]
    return obj


def owned(obj: dict, kind: str, name: str) -> dict:
    obj["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u",
                                           "controller": True}]
    return obj


def quota(name: str, ns: str, used: dict | None = None, **spec: dict) -> dict:
    return {"apiVersion": QUOTA_API, "kind": "ElasticQuota", "metadata": {"name": name, "namespace": ns},
            "spec": spec, **({"status": {"used": used}} if used is not None else {})}


def test_a_gang_shows_its_members_created_against_its_minimum() -> None:
    gang = [told(pod(f"train-{i}", labels={POD_GROUP_LABEL: "train"}), Code.GANG_INCOMPLETE) for i in range(6)]
    view = queue_view(Listed(gang, groups=[podgroup("train", 8)]))
    [row] = view.rows
    assert (row.kind, row.name, len(row.pods)) == ("PodGroup", "train", 6)
    assert row.gang is not None and row.gang.words() == "6/8 members created"
    assert row.reason == "GangIncomplete"
    bound = pod("train-6", labels={POD_GROUP_LABEL: "train"}, node_name="n1")  # a bound member counts as created
    [row] = queue_view(Listed([*gang, bound], groups=[podgroup("train", 8)])).rows
    assert row.gang is not None and row.gang.words() == "7/8 members created, 1 bound" and len(row.pods) == 6
    [row] = queue_view(Listed(gang)).rows  # no PodGroup object: said so, never a made-up minimum
    assert row.gang is not None and row.gang.minimum is None and "no PodGroup object" in row.gang.words()


def test_a_native_group_shows_its_min_count_and_its_conditions_code_first() -> None:
    group = native_group("g", 4)
    group["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
                                       "message": prefixed(Code.TOPOLOGY, "no rack holds the group")}]}
    members = [told(pod(f"g-{i}", schedulingGroup=in_group("g")), Code.CAPACITY) for i in range(3)]
    [row] = queue_view(Listed(members, native_groups=[group])).rows
    assert row.kind == "PodGroup.scheduling.k8s.io" and row.gang is not None
    assert row.gang.words() == "3/4 members created"
    assert row.reason == "Topology" and row.reasons() == {"Capacity": 3}  # the group's word on the gang first


def test_the_dominant_reason_is_the_one_most_pods_wait_for_and_an_untried_pod_has_none() -> None:
    pods = [owned(told(pod("a"), Code.CAPACITY), "ReplicaSet", "web"),
            owned(told(pod("b"), Code.POLICY), "ReplicaSet", "web"),
            owned(told(pod("c"), Code.POLICY), "ReplicaSet", "web"), pod("lone")]
    rows = {r.name: r for r in queue_view(Listed(pods)).rows}
    assert rows["web"].kind == "ReplicaSet" and rows["web"].reason == "Policy"
    assert rows["web"].reasons() == {"Capacity": 1, "Policy": 2}
    assert rows["lone"].kind == "Pod" and rows["lone"].reason is None
    gated = pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    assert queue_view(Listed([gated])).rows[0].reason == "SchedulingGated"


def test_the_expected_start_and_reservation_are_read_back_from_the_condition() -> None:
    gang = [told(pod(f"t-{i}", labels={POD_GROUP_LABEL: "t"}), Code.CAPACITY,
                 expected=ExpectedStart(T + 60 * i, f"n{i}")) for i in range(2)]
    later = [told(pod("soon"), Code.CAPACITY, expected=ExpectedStart(T, next_cycle=True)),
             told(pod("plain"), Code.CAPACITY, words="not estimated: it does not fit")]
    rows = {r.name: r.to_dict() for r in queue_view(Listed([*gang, *later], groups=[podgroup("t", 2)])).rows}
    assert rows["t"]["estimatedStart"] == "2027-01-15T08:01:00Z" and rows["t"]["reserved"] == ["n0", "n1"]
    assert rows["t"]["pods"][0] == {"name": "t-0", "reason": "Capacity", "estimatedStart": "2027-01-15T08:00:00Z",
                                    "reserved": "n0", "message": "0/3 nodes are available: 3 Insufficient cpu."}
    assert rows["soon"]["estimatedStart"] == "next-cycle" and rows["soon"]["reserved"] == []
    assert rows["plain"]["estimatedStart"] is None


def test_tenants_are_the_namespaces_elastic_quotas_and_their_use_says_where_it_is_from() -> None:
    running = pod("done", ns="team-a", cpu="2", node_name="n1")
    waiting = told(pod("w", ns="team-a", cpu="2"), Code.QUOTA)
    other = told(pod("x", ns="team-b"), Code.CAPACITY)
    quotas = [quota("b", "team-a", max={"cpu": "8"}), quota("a", "team-a", min={"cpu": "4"}, max={"cpu": "6"}),
              quota("q", "team-b", used={"cpu": "3"}, max={"cpu": "5"})]
    view = queue_view(Listed([running, waiting, other], quotas=quotas))
    assert [(r.namespace, r.tenant) for r in view.rows] == [("team-a", "team-a/a"), ("team-b", "team-b/q")]
    uses = {q.tenant: q for q in view.quotas}
    assert uses["team-a/a"].source == "pods" and uses["team-a/a"].words() == ["cpu used 2 / min 4 / max 6"]
    assert uses["team-b/q"].source == "status" and uses["team-b/q"].words() == ["cpu used 3 / no min / max 5"]
    assert queue_view(Listed([other])).rows[0].tenant is None and not queue_view(Listed([other])).quotas


def test_only_the_profiles_asked_for_and_pods_without_a_node_are_shown() -> None:
    pods = [pod("mine"), pod("theirs", scheduler="other"), pod("bound", node_name="n1"),
            pod("done", phase="Succeeded"), pod("nameless", scheduler=None)]
    assert [r.name for r in queue_view(Listed(pods), frozenset({"policy-scheduler"})).rows] == ["mine"]
    assert {r.profile for r in queue_view(Listed(pods)).rows} == {"policy-scheduler", "other", "default-scheduler"}
    assert profile_names(("gpu=kube-system/gpu-policies", "cpu")) == frozenset({"gpu", "cpu"})


# --- the command -------------------------------------------------------------------------------------------------

@pytest.fixture()
def cluster(monkeypatch) -> FakeAPI:
    """The command's client replaced by an in-memory apiserver holding a waiting gang."""
    import engine.loop.api as api_module
    api = FakeAPI(absent_kinds={NATIVE_POD_GROUP})  # a cluster that does not serve scheduling.k8s.io groups
    api.put("PodGroup", podgroup("train", 8))
    for i in range(6):
        api.put("Pod", told(pod(f"train-{i}", labels={POD_GROUP_LABEL: "train"}), Code.GANG_INCOMPLETE))
    api.put("Pod", told(pod("web-1", ns="web"), Code.CAPACITY, expected=ExpectedStart(T, "n2")))
    monkeypatch.setattr(api_module, "load_client", lambda kubeconfig, pool_size=4: object())
    monkeypatch.setattr(api_module, "KubeAPI", lambda client: api)
    return api


def test_the_json_lists_each_workload_with_its_progress_reason_and_start(cluster) -> None:
    result = CliRunner().invoke(main, ["queue", "--kubeconfig", "k", "-o", "json"])
    assert result.exit_code == 0, result.output
    got = {w["workload"]["name"]: w for w in json.loads(result.output)["workloads"]}
    assert got["train"]["gang"]["progress"] == "6/8 members created" and got["train"]["reason"] == "GangIncomplete"
    assert got["train"]["pending"] == 6 and got["train"]["profile"] == "policy-scheduler"
    assert got["web-1"]["estimatedStart"] == "2027-01-15T08:00:00Z" and got["web-1"]["reserved"] == ["n2"]
    only = CliRunner().invoke(main, ["queue", "--kubeconfig", "k", "-o", "json", "-n", "web"])
    assert [w["workload"]["name"] for w in json.loads(only.output)["workloads"]] == ["web-1"]


def test_the_table_has_a_row_per_workload(cluster) -> None:
    result = CliRunner().invoke(main, ["queue", "--kubeconfig", "k"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "6/8 members created" in result.output and "GangIncomplete" in result.output
    assert "PodGroup default/train" in result.output and "2027-01-15T08:00:00Z" in result.output
    none = CliRunner().invoke(main, ["queue", "--kubeconfig", "k", "--scheduler-name", "nobody"])
    assert none.exit_code == 0 and none.output.strip() == "No pending pods."


def test_without_a_usable_kubeconfig_it_says_so_in_one_line_and_exits_2(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for args in (["queue"], ["queue", "--kubeconfig", str(tmp_path / "missing")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2 and result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith("policy-scheduler: error: cannot load ") and "Traceback" not in result.stderr
    both = CliRunner().invoke(main, ["queue", "-n", "a", "-A"])
    assert both.exit_code == 2 and "cannot be used together" in both.stderr


def test_an_apiserver_that_says_no_is_one_line_and_exit_2(cluster) -> None:
    cluster.down = True
    result = CliRunner().invoke(main, ["queue", "--kubeconfig", "k"])
    assert result.exit_code == 2 and result.stderr.startswith("policy-scheduler: error: k: fake apiserver down")


def test_watch_prints_the_view_again_when_a_pod_changes(cluster) -> None:
    from engine.loop.queue_view import queue_view as view_of
    seen: list[set[str]] = []
    changed = threading.Event()
    stop = threading.Event()

    def show(found: Listed) -> None:
        seen.append({r.name for r in view_of(found).rows})
        changed.set()
    thread = threading.Thread(target=_watch, args=(cluster, None, show, stop), daemon=True)
    thread.start()
    assert changed.wait(10) and seen[0] == {"train", "web-1"}
    changed.clear()
    cluster.put("Pod", told(pod("late"), Code.CAPACITY))
    assert changed.wait(10)
    stop.set()
    thread.join(10)
    assert seen[-1] == {"train", "web-1", "late"} and not thread.is_alive()


def test_the_kubectl_plugin_takes_the_words_after_its_name(monkeypatch, capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as done:
        kubectl_plugin(["queue", "--help"])
    assert done.value.code == 0 and f"Usage: {KUBECTL_PLUGIN} queue [OPTIONS]" in capsys.readouterr().out
    monkeypatch.setattr("sys.argv", ["/usr/local/bin/kubectl-policy_scheduler", "queue", "--kubeconfig",
                                     str(tmp_path / "missing")])  # as kubectl runs it: argv[0], then the words
    with pytest.raises(SystemExit) as done:
        kubectl_plugin()
    assert done.value.code == 2 and "cannot load kubeconfig" in capsys.readouterr().err
    scripts = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-policy_scheduler"] == "engine.cli:kubectl_plugin"  # kubectl's name for `policy-scheduler`


def test_a_workloads_pods_show_under_the_workload_with_its_gang_size() -> None:
    """`gang by workload`'s kinds: a JobSet's pods (owned by its child Jobs) show under the JobSet, its progress
    against the size the scheduler reads off the object; a LeaderWorkerSet's under each group; without the object,
    said so."""
    from testkit.workloads import jobset, jobset_pod, leaderworkerset, lws_pod

    pods = [told(jobset_pod(f"js-w-{i}", "js", "workers", i), Code.GANG_INCOMPLETE) for i in range(3)]
    pods.append(jobset_pod("js-d-0", "js", "driver", 0, node_name="n1"))
    pods += [told(lws_pod(f"web-1-{w}", "web", 1, w), Code.CAPACITY) for w in range(2)]
    workloads = [("JobSet", jobset("js", [("driver", 1, 1, 1), ("workers", 4, 1, 1)])),
                 ("LeaderWorkerSet", leaderworkerset("web", 3, replicas=2))]
    rows = {(r.kind, r.name): r for r in queue_view(Listed(pods, workloads=workloads)).rows}
    assert set(rows) == {("JobSet", "js"), ("LeaderWorkerSet", "web/1")}
    assert rows["JobSet", "js"].gang is not None and rows["JobSet", "js"].gang.words() == "4/5 members created, 1 bound"
    assert rows["LeaderWorkerSet", "web/1"].gang is not None
    assert rows["LeaderWorkerSet", "web/1"].gang.words() == "2/3 members created"
    [row, _] = sorted(queue_view(Listed(pods)).rows, key=lambda r: r.kind)
    assert row.gang is not None and row.gang.minimum is None and "no JobSet object" in row.gang.words()


def test_a_workload_kind_the_user_may_not_list_is_left_out_and_said(cluster, monkeypatch) -> None:
    """Pods and groups are what the view is; the workload kinds only size gangs: a 403 on one is a note, not an error
    (a 403 on pods still is one)."""
    from engine.loop.ports import ApiError

    real = cluster.list

    def refusing(resource):
        if resource.kind in ("JobSet", "Pod" if refusing.pods else ""):
            raise ApiError(403, f'{resource.kind.lower()}s is forbidden: User "u" cannot list resource')
        return real(resource)
    refusing.pods = False
    monkeypatch.setattr(cluster, "list", refusing)
    result = CliRunner().invoke(main, ["queue", "--kubeconfig", "k", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert "note: cannot list JobSet objects (403" in result.stderr
    assert {w["workload"]["name"] for w in json.loads(result.stdout)["workloads"]} == {"train", "web-1"}
    refusing.pods = True
    refused = CliRunner().invoke(main, ["queue", "--kubeconfig", "k"])
    assert refused.exit_code == 2 and "pods is forbidden" in refused.stderr
