"""Quotas written in the policy language (issue 19): `quota min/max/weight` lines, their errors with file, line
and column, and their meaning — a tenant over the pods in scope, a cap over several tenants (a parent), and
the ElasticQuotas of a namespace before any policy's."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.planning.planner import Options, plan_batch, with_quotas
from engine.policy.check import check
from engine.policy.lower import lower
from engine.policy.parse import PolicyError, parse
from engine.quotas.tenants import Membership
from engine.reading.load import build_cluster
from testkit.checker import check_plan
from testkit.manifests import node, pod

TEAMS = '''
policy team-a {
  applies to pods where namespace == "team-a"
  quota min "cpu" 4
  quota max "cpu" 6
}
policy team-b {
  applies to pods where namespace == "team-b"
  quota min "cpu" 4
}
'''


def problems(text: str, file: str = "q.policy") -> list[str]:
    try:
        policies = parse(text, file)
    except PolicyError as exc:
        return [d.render() for d in exc.diagnostics]
    return [d.render() for d in check(policies, {file: text})]


def plan(text: str, docs: list[dict]):
    policies = parse(text, "q.policy")
    assert check(policies, {"q.policy": text}) == []
    result = plan_batch(build_cluster([("t", d) for d in docs]), lower(policies), Options(time_limit=5, workers=1))
    assert check_plan(docs, result.assignments) == []
    return result


def per_namespace(assignments: dict[str, str]) -> Counter[str]:
    return Counter(key.split("/", 1)[0] for key in assignments)


def pods(ns: str, k: int, cpu: str = "1", **kw) -> list[dict]:
    return [pod(f"{ns}-{i}", cpu=cpu, ns=ns, **kw) for i in range(k)]


def test_quota_lines_lower_to_tenants_and_caps() -> None:
    text = TEAMS + '''
policy org {
  applies to pods where namespace in ["team-a", "team-b"]
  quota max "cpu" 7, "memory" "64Gi"
}
policy gpus {
  applies to pods where label "team" == "vision"
  quota weight 2.5
}
'''
    quotas = {q.name: q for q in lower(parse(text, "q.policy")).quotas}
    assert quotas["policy/team-a"].min == (("cpu", 4000),) and quotas["policy/team-a"].max == (("cpu", 6000),)
    assert quotas["policy/team-a"].tenant and quotas["policy/team-b"].tenant and quotas["policy/gpus"].tenant
    assert not quotas["policy/org"].tenant  # max only: a cap over the pods in scope
    assert quotas["policy/org"].max == (("cpu", 7000), ("memory", 64 * 2**30))
    assert quotas["policy/gpus"].weight == 2.5 and quotas["policy/team-a"].source == "policy team-a (q.policy:4)"


@pytest.mark.parametrize("body, expected", [
    ('quota min "cpu" 4, "cpu" 2', "q.policy:3:22: quota min of 'cpu' is given twice"),
    ('quota max "memory" "lots"', "q.policy:3:13: quota max of 'memory' is 'lots', which is not a quantity"),
    ('quota min "cpu" -1', "q.policy:3:13: quota min of 'cpu' must not be negative"),
    ('quota min "Not A Resource" 1', "q.policy:3:13: invalid resource name 'Not A Resource': a resource is cpu, "
                                     "memory, ephemeral-storage, pods, storage, hugepages-<size> or an extended resource"),
    ('quota max "cpus" 4', "q.policy:3:13: invalid resource name 'cpus' (did you mean 'cpu'?)"),
    ('quota min "cpu" 4, "memroy" "1Gi"', "q.policy:3:22: invalid resource name 'memroy' (did you mean 'memory'?)"),
    ('quota min "requests.cpu" 4', "q.policy:3:13: invalid resource name 'requests.cpu' (did you mean 'cpu'?)"),
    ('quota max "gpu" 1', "q.policy:3:13: invalid resource name 'gpu': a resource is cpu, memory"),
    ('quota max "NVIDIA.com/gpu" 1', "q.policy:3:13: invalid resource name 'NVIDIA.com/gpu' (did you mean 'nvidia.com/gpu'?)"),
    ('quota max "hugepages-huge" 1', "q.policy:3:13: invalid resource name 'hugepages-huge': the size of "
                                     "hugepages-<size> is a quantity above 0, as in 'hugepages-2Mi'"),
    ('quota max "hugepage-2Mi" 1', "q.policy:3:13: invalid resource name 'hugepage-2Mi' (did you mean 'hugepages-2Mi'?)"),
    ('quota weight 0', "q.policy:3:3: quota weight must be above 0 and at most 1000, got 0"),
    ('quota min "cpu" 8\n  quota max "cpu" 4', "q.policy:3:13: quota min of 'cpu' (8000) is above its max (4000, line 4)"),
    ('quota weight 1\n  quota weight 2', "q.policy:4:3: policy 'p' has a second 'quota weight' line"),
])
def test_quota_errors_have_file_line_and_column(body: str, expected: str) -> None:
    found = problems(f'policy p {{\n  applies to all pods\n  {body}\n}}\n')
    assert any(f.startswith(expected) for f in found), found


@pytest.mark.parametrize("line", [
    'quota min "cpu" 1, "memory" "1Gi", "ephemeral-storage" "1Gi", "pods" 10, "storage" "1Gi", "hugepages-2Mi" "1Gi"',
    'quota max "nvidia.com/gpu" 2, "example.com/foo" 1, "deviceclass.resource.kubernetes.io/gpu.example.com" 1',
    'require node allocatable "hugepages-1Gi" exists and node allocatable "nvidia.com/gpu" >= 1',
    'minimize node allocatable "ephemeral-storage" weight 2',
    'minimize cost "cpu" at node label "price/cpu", "example.com/fpga" at node label "price/fpga" weight 1',
])
def test_kubernetes_resource_names_are_accepted_everywhere_the_language_names_a_resource(line: str) -> None:
    assert problems(f'policy p {{\n  applies to all pods\n  {line}\n}}\n') == []


@pytest.mark.parametrize("line, expected", [
    ('require node allocatable "cpus" > 2', "q.policy:3:11: invalid resource name 'cpus' (did you mean 'cpu'?)"),
    ('prefer node allocatable "memroy" exists weight 2', "q.policy:3:10: invalid resource name 'memroy'"),
    ('minimize node allocatable "ephemeral-storge" weight 2',
     "q.policy:3:3: invalid resource name 'ephemeral-storge' (did you mean 'ephemeral-storage'?)"),
    ('minimize cost "cpus" at node label "price/cpu" weight 1', "q.policy:3:17: invalid resource name 'cpus'"),
])
def test_a_misspelt_resource_is_an_error_wherever_the_language_names_one(line: str, expected: str) -> None:
    found = problems(f'policy p {{\n  applies to all pods\n  {line}\n}}\n')
    assert any(f.startswith(expected) for f in found), found


def test_a_misspelt_quota_resource_stops_the_dry_run(tmp_path) -> None:
    from click.testing import CliRunner

    from engine.cli import main

    policy = tmp_path / "team.policy"
    policy.write_text('policy team-a {\n  applies to pods where namespace == "team-a"\n  quota max "cpus" 4\n}\n')
    out = CliRunner().invoke(main, ["dry-run", "--policy", str(policy), "-o", "json"])
    assert out.exit_code == 2 and out.stdout == ""
    assert f"{policy}:3:13: invalid resource name 'cpus' (did you mean 'cpu'?)" in out.stderr


def test_a_misspelt_quota_line_is_a_positioned_syntax_error() -> None:
    found = problems('policy p {\n  applies to all pods\n  quota maximum "cpu" 4\n}\n')
    assert found and found[0].startswith("q.policy:3:")


def test_policy_tenants_keep_their_max_and_lend_only_idle_mins() -> None:
    """The issue's case written as policies: team-b asks for 2 of its 4, team-a borrows the other 2 up to 6."""
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), *pods("team-a", 8), *pods("team-b", 2)]
    assert per_namespace(plan(TEAMS, docs).assignments) == {"team-a": 6, "team-b": 2}


def test_a_cap_over_two_tenants_is_their_parent() -> None:
    """org caps team-a and team-b together at 7 cpu, whatever each may take alone."""
    text = TEAMS + '''
policy org {
  applies to pods where namespace in ["team-a", "team-b"]
  quota max "cpu" 7
}
'''
    docs = [node("n1", cpu="4"), node("n2", cpu="4"), *pods("team-a", 8), *pods("team-b", 2)]
    result = plan(text, docs)
    assert per_namespace(result.assignments) == {"team-a": 5, "team-b": 2}
    reason = " ".join(result.unschedulable["team-a/team-a-7"])
    assert "the max of policy org (q.policy:" in reason and ": cpu used 7 / no min / max 7 with the plan" in reason


def test_a_tenant_selected_by_label_across_namespaces() -> None:
    """A tenant is whatever the policy's scope selects: pods labelled team=vision in two namespaces share a max."""
    text = '''
policy vision {
  applies to pods where label "team" == "vision"
  quota max "cpu" 3
}
'''
    docs = [node("n1", cpu="16"), *pods("ns1", 3, labels={"team": "vision"}), *pods("ns2", 3, labels={"team": "vision"}),
            *pods("other", 3)]
    placed = per_namespace(plan(text, docs).assignments)
    assert placed["ns1"] + placed["ns2"] == 3 and placed["other"] == 3


def test_fair_share_follows_the_weights() -> None:
    """Two borrowers of an idle min of 8, weights 3 and 1: shares divided by the weights even out at 6 and 2."""
    text = '''
policy idle {
  applies to pods where namespace == "idle"
  quota min "cpu" 8
}
policy heavy {
  applies to pods where namespace == "heavy"
  quota weight 3
}
policy light {
  applies to pods where namespace == "light"
  quota weight 1
}
'''
    docs = [node("n1", cpu="16"), *pods("heavy", 10), *pods("light", 10)]
    result = plan(text, docs)
    assert per_namespace(result.assignments) == {"heavy": 6, "light": 2}
    assert result.stats.status == "OPTIMAL"


def test_an_elastic_quota_comes_before_a_policy_over_the_same_namespace() -> None:
    """A namespace's ElasticQuota is its pods' tenant; a policy tenant over the same pods still caps them."""
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
             "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"min": {"cpu": "4"}, "max": {"cpu": "5"}}}
    text = '''
policy a {
  applies to pods where namespace == "team-a"
  quota weight 2
  quota max "cpu" 3
}
'''
    cluster = build_cluster([("t", d) for d in [quota, *pods("team-a", 1)]])
    quotas = with_quotas(cluster, lower(parse(text, "q.policy")).quotas).quotas
    assert Membership(quotas).tenant(cluster.pending[0]).source == "ElasticQuota team-a/q"
    docs = [node("n1", cpu="16"), quota, *pods("team-a", 8)]
    assert per_namespace(plan(text, docs).assignments) == {"team-a": 3}  # the policy's max, below the min of 4
