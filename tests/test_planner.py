"""The one planning entry point (engine.planning.planner.plan_batch): policy test cases plan as the dry-run does
(preemption included), and preemption's trials and re-plans read views of one table instead of reading the
cluster again (a view with pods moved answers as a fresh view of the moved cluster would, settled or not)."""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.model import tables
from engine.model.cluster import PodAffinityTerm
from engine.model.view import View
from engine.planning.planner import Options, plan_batch
from engine.policy.testing import run_file
from engine.reading.load import build_cluster
from strategies import clusters
from testkit.manifests import node, pod


def test_a_policy_test_case_plans_with_preemption_as_the_dry_run_does(tmp_path: Path) -> None:
    cluster = [node("n1", cpu="2"), pod("low", cpu="2", node_name="n1", priority=0), pod("high", cpu="1", priority=100)]
    case = {"cases": [{"name": "the important pod evicts", "cluster": cluster,
                       "expect": {"placed": {"default/high": "n1"}}}]}
    path = tmp_path / "preempt_test.yaml"
    path.write_text(yaml.safe_dump(case))
    [result] = run_file(path, time_limit=2)
    assert result.passed, result.failures
    dry_run = plan_batch(build_cluster([("t", d) for d in cluster]), options=Options(time_limit=2, workers=1))
    assert dry_run.assignments == {"default/high": "n1"}


def test_preemption_reads_the_cluster_into_tables_once(monkeypatch) -> None:
    """Several preemptors, several priority levels and give-back trials: many trials and re-plans, one node table and
    one pod table read from the cluster; every later one is a view of them (its changes settled from the table)."""
    docs = [node(f"n{i}", cpu="2") for i in range(4)]
    docs += [pod(f"low{i}", cpu="1", node_name=f"n{i % 4}", priority=i % 3) for i in range(8)]
    docs += [pod(f"high{i}", cpu="1", priority=100 + 10 * (i % 2)) for i in range(5)]
    cluster = build_cluster([("t", d) for d in docs])
    calls = {"nodes": 0, "pods": 0}
    nodes_init, pods_of = tables.NodeTable.__init__, tables.PodTable.of.__func__

    def count_nodes(self, nodes):
        calls["nodes"] += 1
        nodes_init(self, nodes)

    def count_pods(cls, nodes, bound):
        calls["pods"] += 1
        return pods_of(cls, nodes, bound)

    monkeypatch.setattr(tables.NodeTable, "__init__", count_nodes)
    monkeypatch.setattr(tables.PodTable, "of", classmethod(count_pods))
    plan = plan_batch(cluster, options=Options(time_limit=5, workers=1))
    assert len(plan.assignments) == 5 and plan.evictions
    assert calls == {"nodes": 1, "pods": 1}


def _answers(view: View, terms: list[PodAffinityTerm]) -> dict:
    """What compile and the trials ask of a view, as comparable values."""
    names, free = view.free_matrix()
    every = range(len(view.nodes))
    return {
        "pods": sorted((p.key, view.nodes[i].name) for i, p in view.placed()),
        "free": {r: free[:, k].tolist() for r, k in names.items() if r in ("cpu", "memory", "pods")},
        "free per node": [[view.free(i, r) for r in ("cpu", "memory", "pods")] for i in every],
        "used": [{r: v for r, v in view.used_on(i).items() if v} for i in every],
        "on": [sorted(p.key for p in view.pods_on(i)) for i in every],
        "ports": [sorted(map(str, view.ports_on(i))) for i in every],
        "with ports": view.with_ports(),
        "anti": sorted((str(t.selector), t.topology_key, i) for t, i in view.anti_terms()),
        "anti held": sorted((str(t.selector), t.topology_key, v) for (t, v), k in view.anti_holders().items() if k > 0),
        "anti domains": sorted((str(t.selector), t.topology_key, sorted(d)) for t, d in view.anti_domains()),
        "empty": view.empty().tolist(),
        "domains": [{k: v for k, v in view.domain_counts(t).items() if v} for t in terms],
        "nodes": [{k: v for k, v in view.node_counts(t).items() if v} for t in terms],
        "matching": [sorted(p.key for _, p in view.matching(t)) for t in terms],
        "supported": [sorted(view.domains_matching((t,), t.topology_key)) for t in terms],
        "short": {k: v.tolist() for k, v in view.short_of({"cpu": 1000, "pods": 1}).items()},
        "short on each": [{k: v.tolist() for k, v in view.short_of({"cpu": 1000}, np.array([i])).items()}
                          for i in every],
    }


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=5, max_pods=6), st.integers(0, 2**16))
def test_a_view_with_pods_moved_answers_as_a_fresh_one(docs, seed) -> None:
    cluster = build_cluster([("t", d) for d in docs])
    rng = random.Random(seed)
    gone = [p for p in cluster.bound if rng.random() < 0.5]
    added = tuple(replace(p, node_name=rng.choice(cluster.nodes).name) for p in cluster.pending
                  if rng.random() < 0.5)
    terms = [t for p in cluster.pending for t in p.affinity_required + p.anti_affinity_required]
    base = View.of(cluster.nodes, cluster.bound)
    _answers(base, terms)  # the table's caches are warm: a view must not answer from them alone
    view = base.moved(added=added, removed=gone)
    keys = {p.key for p in gone}
    fresh = View.of(cluster.nodes, [p for p in cluster.bound if p.key not in keys] + list(added))
    assert _answers(view, terms) == _answers(fresh, terms)
    settled = view.settled()
    assert not settled.changed and _answers(settled, terms) == _answers(fresh, terms)
    assert view.node_table is base.node_table and np.array_equal(settled.usage.allocatable, fresh.usage.allocatable)
    back = view.moved(removed=added[:1], added=[g for g in gone[:1] if g.node_name])  # changes taken back
    keys = {p.key for p in gone[1:]}
    again = View.of(cluster.nodes, [p for p in cluster.bound if p.key not in keys] + list(added[1:]))
    assert _answers(back, terms) == _answers(again, terms)
    both = base.moved(added=added, removed=[*gone, *added[:1]])  # added and removed in one call: removed last
    assert _answers(both, terms) == _answers(View.of(cluster.nodes, [p for p in cluster.bound if p.key not in
                                                                      {g.key for g in gone}] + list(added[1:])), terms)
