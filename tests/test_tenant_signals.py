"""Issue 19 point 4, explanations and signals: a pod held by a quota names it with used / min / max; dry-run's
per-tenant table and `tenants` key (engine.quotas.tenant_report); the loop's per-tenant gauges — and none of it
without quotas."""

from __future__ import annotations

import json

from prometheus_client import generate_latest
from rich.console import Console

from engine.output import print_tenants
from engine.planning.planner import Options, plan_batch
from engine.quotas.tenant_report import Amounts, of_plan, report
from engine.quotas.tenants import cluster_allocatable, figures, shown
from engine.reading.load import build_cluster
from loopfake import FakeAPI, synced_loop
from test_cli_output import cli, snapshot
from test_quotas import elastic_quota
from testkit.manifests import node, pod

OPTIONS = Options(time_limit=5, workers=1)


def issue_case() -> list[dict]:
    """The issue's case: team-a min 4 / max 6 cpu, team-b min 4 / max 8, 8 cpu of nodes, 8 one-cpu pods each."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    return docs + [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)] + [pod(f"b{i}", cpu="1", ns="team-b")
                                                                              for i in range(8)]


def planned(docs: list[dict]):
    cluster = build_cluster([("t", d) for d in docs])
    result = plan_batch(cluster, options=OPTIONS)
    return cluster, result


# --- the report's numbers ----------------------------------------------------------------------------------

def test_the_issue_case_reports_each_tenant_at_its_min_with_half_the_cluster() -> None:
    cluster, result = planned(issue_case())
    lines = {line.name: line for line in of_plan(result, cluster)}
    assert set(lines) == {"team-a/quota", "team-b/quota"}
    a, b = lines["team-a/quota"], lines["team-b/quota"]
    # hand-checked: the mins (4 + 4) fill the 8 cpu, nobody borrows, each holds 4/8 of the cluster's cpu
    assert a.resources == (Amounts("cpu", 0, 4000, 4000, 6000, 0),)
    assert b.resources == (Amounts("cpu", 0, 4000, 4000, 8000, 0),)
    assert a.share == b.share == 500
    assert len(a.placed) == len(b.placed) == 4 and len(a.left) == len(b.left) == 4
    assert set(a.placed) | set(a.left) == {f"team-a/a{i}" for i in range(8)}


def test_bound_pods_borrowing_and_evictions_count_as_the_plan_leaves_them() -> None:
    """16 cpu; team-a (min 4 / max 8) runs 5 cpu and gets 1 more: 6 used, 2 borrowed, 6/16 of the cluster;
    team-b (min 4, no max) runs 2 and loses one to an eviction: 1 used, nothing borrowed."""
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "4", "8"), elastic_quota("team-b", "4", None),
            pod("ra", cpu="5", ns="team-a", node_name="n1"), pod("rb1", cpu="1", ns="team-b", node_name="n1"),
            pod("rb2", cpu="1", ns="team-b", node_name="n1"), pod("new", cpu="1", ns="team-a"),
            pod("free", cpu="1", ns="other", node_name="n1")]
    cluster = build_cluster([("t", d) for d in docs])
    lines = {line.name: line for line in report(cluster.quotas, cluster.bound, cluster.pending,
                                                cluster_allocatable(cluster.nodes), evicted=frozenset({"team-b/rb1"}))}
    a, b = lines["team-a/quota"], lines["team-b/quota"]
    assert a.resources == (Amounts("cpu", 5000, 6000, 4000, 8000, 2000),)
    assert b.resources == (Amounts("cpu", 2000, 1000, 4000, None, 0),)
    assert (a.share, b.share) == (375, 63)  # ⌈1000 · 6/16⌉, ⌈1000 · 1/16⌉ (the cluster's memory is barely used)
    assert a.placed == ("team-a/new",) and b.placed == () and b.left == ()


def test_amounts_read_as_kubernetes_quantities() -> None:
    assert [shown("cpu", v) for v in (0, 4000, 1500)] == ["0", "4", "1500m"]
    assert [shown("memory", v) for v in (2**30, 3 * 2**29, 1000)] == ["1Gi", "1536Mi", "1000"]
    assert shown("nvidia.com/gpu", 2) == "2"
    quota = build_cluster([("t", elastic_quota("team-a", None, "6"))]).quotas[0]
    assert figures(quota, "cpu", 2000) == "ElasticQuota team-a/quota: cpu used 2 / no min / max 6"


# --- explanations: every quota refusal names the quota with used / min / max ---------------------------------

def reasons(result, key: str) -> str:
    return " ".join(result.unschedulable[key])


def test_a_pod_over_a_max_in_the_batch_names_the_quota_and_how_far_it_is() -> None:
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)]  # team-b's idle min lends team-a up to its max
    _, result = planned(docs)
    assert len(result.assignments) == 6
    for key in result.unschedulable:
        assert ("would go over the max of ElasticQuota team-a/quota: cpu used 6 / min 4 / max 6 with the plan, "
                "0 before it") in reasons(result, key)


def test_a_pod_alone_over_its_max_names_the_quota_with_used_min_and_max() -> None:
    docs = [node("n1", cpu="8"), elastic_quota("team-a", "2", "3"), pod("running", cpu="2", ns="team-a", node_name="n1"),
            pod("big", cpu="2", ns="team-a")]
    _, result = planned(docs)
    assert "exceeds ElasticQuota team-a/quota: cpu used 2 + 2 asked > max 3 (min 2)" in reasons(result, "team-a/big")


def test_the_mins_total_names_the_pods_own_tenant() -> None:
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "2", "10"), elastic_quota("team-b", "2", "10")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(4)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(4)]
    _, result = planned(docs)
    for key in result.unschedulable:
        team = key.split("/")[0]
        said = reasons(result, key)
        assert "the tenants' total min of cpu (4 in all, 0 used before this batch)" in said
        assert f"its tenant ElasticQuota {team}/quota: cpu used 2 / min 2 / max 10 with the plan, 0 before it" in said


def test_borrowing_refused_names_the_pods_tenant() -> None:
    """team-b asks for its whole min (its pods fit no node, but they ask): team-a may not borrow it."""
    docs = [node("n1", cpu="16"), elastic_quota("team-a", "2", "10"), elastic_quota("team-b", "4", "10")]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(4)]
    docs += [pod(f"b{i}", cpu="1", ns="team-b", nodeSelector={"pool": "none"}) for i in range(4)]
    _, result = planned(docs)
    assert sum(k.startswith("team-a/") for k in result.assignments) == 2
    left = [k for k in result.unschedulable if k.startswith("team-a/")]
    assert left and all("the cpu other tenants' mins leave idle (0 to lend)" in reasons(result, k) for k in left)
    assert all("its tenant ElasticQuota team-a/quota: cpu used 2 / min 2 / max 10 with the plan, 0 before it"
               in reasons(result, k) for k in left)


HELD = ("the room on those nodes is held by pods the tenants' mins serve, which come before any pod that borrows: "
        "4 by the min of ElasticQuota team-b/quota (cpu used 4 / min 4 / max 8 with the plan)")
BORROWS = ("this pod would borrow beyond the min of its tenant ElasticQuota team-a/quota (cpu used 4 / min 4 / max 6 "
           "with the plan)")


def test_a_pod_held_back_by_another_tenants_min_names_both_quotas() -> None:
    """team-a (min 4 / max 6 cpu) runs 4 cpu; team-b's min (4) serves its 4 pending pods first; 8 cpu in all: team-a's
    pending pods would borrow, and the room is team-b's min's — not "pods of equal priority"."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), elastic_quota("team-a", "4", "6"), elastic_quota("team-b", "4", "8")]
    docs += [pod(f"ra{i}", cpu="1", ns="team-a", node_name="n1") for i in range(4)]
    docs += [pod(f"a{i}", cpu="1", ns="team-a") for i in range(2)] + [pod(f"b{i}", cpu="1", ns="team-b") for i in range(4)]
    _, result = planned(docs)
    assert sorted(result.assignments) == [f"team-b/b{i}" for i in range(4)]
    for key in ("team-a/a0", "team-a/a1"):
        said = reasons(result, key)
        assert f"{HELD}; {BORROWS}" in said and "equal priority" not in said, said


def test_the_dry_run_json_says_whose_min_holds_the_room(tmp_path) -> None:
    """The issue's case through the CLI: team-a's pods beyond its min are told team-b's min (and its own) holds the
    room, with used / min / max."""
    out = json.loads(cli("dry-run", "--cluster", snapshot(tmp_path, *issue_case()), "-o", "json", "-q").stdout)
    left = [k for k in out["unschedulable"] if k.startswith("team-a/")]
    assert len(left) == 4
    for key in left:
        said = " ".join(out["unschedulable"][key])
        assert f"{HELD}; 4 by its own tenant's min; {BORROWS}" in said and "equal priority" not in said, said


# --- dry-run: the table and the `tenants` key ------------------------------------------------------------------

def test_dry_run_json_and_yaml_carry_the_tenants(tmp_path) -> None:
    path = snapshot(tmp_path, *issue_case())
    out = json.loads(cli("dry-run", "--cluster", path, "-o", "json", "-q").stdout)
    assert list(out)[-2:] == ["tenants", "stats"]
    a = out["tenants"]["team-a/quota"]
    assert a["source"] == "ElasticQuota team-a/quota" and a["tenant"] is True and a["share"] == 0.5
    assert a["resources"] == {"cpu": {"before": 0, "used": 4000, "min": 4000, "max": 6000, "borrowed": 0}}
    assert len(a["placed"]) == 4 and len(a["unschedulable"]) == 4
    assert "tenants:" in cli("dry-run", "--cluster", path, "-o", "yaml", "-q").stdout


def test_dry_run_prints_the_tenant_table(tmp_path) -> None:
    table = cli("dry-run", "--cluster", snapshot(tmp_path, *issue_case()), "-q", columns=100).stdout
    assert "Tenants after the plan (2 quotas)" in table
    tenants = table[table.index("Tenants after the plan"):]  # (the unschedulable pods' reasons name quotas too)
    rows = [line for line in tenants.splitlines() if "/quota" in line]
    cells = [[c.strip() for c in row.split("│")[1:-1]] for row in rows]
    assert cells == [["team-a/quota", "cpu", "0 → 4", "4", "6", "0", "50.0%", "4", "4"],
                     ["team-b/quota", "cpu", "0 → 4", "4", "8", "0", "50.0%", "4", "4"]]


def test_the_table_fits_80_columns() -> None:
    cluster, result = planned(issue_case())
    console = Console(width=80, record=True, highlight=False)
    print_tenants(of_plan(result, cluster), console)
    assert max(len(line) for line in console.export_text().splitlines()) <= 80


def test_quota_names_stay_readable_at_80_columns() -> None:
    """Long names and an extended resource: at 80 columns the names' column is at least 12 wide, a name folds after
    its '/' and '-' (never a number cut); the last columns go (named under the table) before a name goes below 12."""
    gpus = {**elastic_quota("gpu-team", "4", "6"), "spec": {"min": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
                                                          "max": {"cpu": "6", "memory": "16Gi", "nvidia.com/gpu": "4"}}}
    docs = [*issue_case(), elastic_quota("machine-learning-research", "1", "2"), gpus]
    cluster, result = planned(docs)
    console = Console(width=80, record=True, highlight=False)
    print_tenants(of_plan(result, cluster), console)
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in text
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in lines if line.startswith("│")]
    assert min(len(line.split("│")[1]) - 2 for line in lines if line.startswith("│")) >= 12  # the names' column
    names: list[str] = []
    for row in cells:  # a quota's first row starts its name, lines with no resource continue it
        if row[0] and row[1]:
            names.append(row[0])
        elif row[0]:
            names[-1] += row[0]
    assert names == ["team-a/quota", "team-b/quota", "machine-learning-research/quota", "gpu-team/quota"]
    assert [row[0] for row in cells if "research" in row[0]
                                                      or "machine" in row[0]] == ["machine-learning-", "research/quota"]
    assert next(row[1:7] for row in cells if row[0] == "team-a/quota") == ["cpu", "0 → 4", "4", "6", "0", "50.0%"]
    assert next(row[1:7] for row in cells if row[1] == "nvidia.com/gpu") == ["nvidia.com/gpu", "0 → 0", "2", "4", "0", ""]
    assert "not shown at this width: placed, left" in text


def test_without_quotas_neither_the_table_nor_the_key_appears(tmp_path) -> None:
    path = snapshot(tmp_path, node("n1"), pod("p"))
    assert "tenants" not in json.loads(cli("dry-run", "--cluster", path, "-o", "json", "-q").stdout)
    assert "Tenants" not in cli("dry-run", "--cluster", path, "-q").stdout
    cluster = build_cluster([("t", node("n1")), ("t", pod("p"))])
    assert of_plan(plan_batch(cluster, options=OPTIONS), cluster) == []


# --- the loop's gauges ---------------------------------------------------------------------------------------

def samples(s, prefix: str = "policy_scheduler_tenant") -> dict[str, float]:
    """Every sample whose name starts with `prefix`, by its name and labels as /metrics prints them."""
    text = generate_latest(s.metrics.registry).decode()
    return {key: float(value) for key, _, value in (line.rpartition(" ") for line in text.splitlines())
            if key.startswith(prefix)}


def test_a_cycle_sets_the_tenant_gauges_and_a_quota_gone_takes_its_series() -> None:
    api = FakeAPI()
    for doc in issue_case():
        api.put(doc["kind"], doc)
    s, loop = synced_loop(api)
    assert samples(s, "policy_scheduler_tenant") == {}  # no cycle yet: nothing to say
    batch = [f"team-a/a{i}" for i in range(8)] + [f"team-b/b{i}" for i in range(8)]
    loop.cycle(batch).result(timeout=30)
    got = samples(s)
    for team, most in (("team-a", 6.0), ("team-b", 8.0)):
        labels = f'resource="cpu",tenant="{team}/quota"'
        assert got[f"policy_scheduler_tenant_used{{{labels}}}"] == 4.0  # cores
        assert got[f"policy_scheduler_tenant_min{{{labels}}}"] == 4.0
        assert got[f"policy_scheduler_tenant_max{{{labels}}}"] == most
        assert got[f"policy_scheduler_tenant_borrowed{{{labels}}}"] == 0.0
        assert got[f'policy_scheduler_tenant_share{{tenant="{team}/quota"}}'] == 0.5
        assert got[f'policy_scheduler_tenant_pods_waiting{{tenant="{team}/quota"}}'] == 4.0
    waiting_b = sorted(k for k in batch if k.startswith("team-b/") and k not in {key for key, _ in api.binds})
    api.delete("Pod", "team-b", waiting_b[0].split("/")[1])
    relist(s, api, "Pod")  # the watch shows it deleted: it waits no more
    assert samples(s)['policy_scheduler_tenant_pods_waiting{tenant="team-b/quota"}'] == 3.0
    api.delete("ElasticQuota", "team-b", "quota")
    relist(s, api, "ElasticQuota")
    loop.cycle(waiting_b[1:]).result(timeout=30)
    assert not any("team-b" in key for key in samples(s))
    assert samples(s)['policy_scheduler_tenant_pods_waiting{tenant="team-a/quota"}'] == 4.0


def test_no_tenant_gauges_without_quotas() -> None:
    api = FakeAPI()
    api.put("Node", node("n1"))
    api.put("Pod", pod("a"))
    s, loop = synced_loop(api)
    loop.cycle(["default/a"]).result(timeout=30)
    assert "policy_scheduler_tenant" not in generate_latest(s.metrics.registry).decode()


def relist(s, api: FakeAPI, kind: str) -> None:
    resource = next(r for r in s.resources if r.kind == kind)
    s.store.replace(resource, api.list(resource)[0])


def test_a_pod_gone_while_its_cycle_ran_is_not_counted_waiting() -> None:
    from engine.loop.metrics import TenantBoard
    cluster, result = planned(issue_case())
    lines = of_plan(result, cluster)
    board = TenantBoard()
    board.record(lines, list(result.assignments) + list(result.unschedulable), waits=lambda key: key != "team-a/a7")
    waiting = board.read()[1]
    assert waiting["team-a/quota"] == len(lines[0].left) - ("team-a/a7" in lines[0].left)
    for key in lines[1].left:
        board.forget(key)
    assert board.read()[1]["team-b/quota"] == 0


def test_policies_quotas_are_reported_from_the_cluster_the_plan_was_made_for(tmp_path) -> None:
    """plan_batch adds the policies' quotas to the cluster it plans: the report reads them from the plan, and a
    cap over two tenants (a parent) has used and max only."""
    policies = tmp_path / "q.policy"
    policies.write_text('''
policy team-a {
  applies to pods where namespace == "team-a"
  quota min "cpu" 4
  quota max "cpu" 6
}
policy org {
  applies to pods where namespace in ["team-a", "team-b"]
  quota max "cpu" 5
}
''')
    docs = [node("n1", cpu="8")] + [pod(f"a{i}", cpu="1", ns="team-a") for i in range(8)]
    out = json.loads(cli("dry-run", "--cluster", snapshot(tmp_path, *docs), "--policy", str(policies), "-o", "json",
                         "-q").stdout)
    org = out["tenants"]["policy/org"]
    assert org["tenant"] is False and org["share"] is None and org["placed"] == []
    assert org["resources"] == {"cpu": {"before": 0, "used": 4000, "min": None, "max": 5000, "borrowed": None}}
    assert out["tenants"]["policy/team-a"]["resources"]["cpu"] == {"before": 0, "used": 4000, "min": 4000, "max": 6000,
                                                            "borrowed": 0}
