"""The one planning entry point (engine.planner.plan_batch): policy test cases plan as the dry-run does
(preemption included), and preemption's re-plans compile on views of one index instead of indexing the
cluster again (BoundState.changed answers as a fresh index would)."""
from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import index as index_module
from engine.index import BoundState
from engine.load import build_cluster
from engine.model import PodAffinityTerm
from engine.planner import Options, plan_batch
from engine.policy.testing import run_file
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


def test_preemption_indexes_the_cluster_once(monkeypatch) -> None:
    """Several preemptors, several priority levels and give-back trials: many re-plans, one index of the
    nodes and one of the bound pods; every later compile works on a view."""
    docs = [node(f"n{i}", cpu="2") for i in range(4)]
    docs += [pod(f"low{i}", cpu="1", node_name=f"n{i % 4}", priority=i % 3) for i in range(8)]
    docs += [pod(f"high{i}", cpu="1", priority=100 + 10 * (i % 2)) for i in range(5)]
    cluster = build_cluster([("t", d) for d in docs])
    calls = {"facts": 0, "index": 0}
    facts_of, index_of = index_module.NodeFacts.of.__func__, BoundState.of.__func__

    def count_facts(cls, nodes):
        calls["facts"] += 1
        return facts_of(cls, nodes)

    def count_index(cls, nodes, bound, facts=None):
        calls["index"] += 1
        return index_of(cls, nodes, bound, facts)

    monkeypatch.setattr(index_module.NodeFacts, "of", classmethod(count_facts))
    monkeypatch.setattr(BoundState, "of", classmethod(count_index))
    plan = plan_batch(cluster, options=Options(time_limit=5, workers=1))
    assert len(plan.assignments) == 5 and plan.evictions
    assert calls == {"facts": 1, "index": 1}


def _answers(state: BoundState, terms: list[PodAffinityTerm]) -> dict:
    """What compile asks of an index, as comparable values."""
    names, free = state.free_matrix()
    return {
        "pods": sorted((p.key, state.nodes[i].name) for p, i in zip(state.pods, state.node_of)),
        "free": {r: free[:, k].tolist() for r, k in names.items()},
        "used": state.used,
        "ports": [sorted(map(str, p)) for p in state.ports],
        "anti": sorted((str(t.selector), t.topology_key, i) for t, i in state.anti_terms),
        "empty": state.empty().tolist(),
        "domains": [state.domain_counts(t) for t in terms],
        "short": {k: v.tolist() for k, v in state.short_of({"cpu": 1000, "pods": 1}).items()},
    }


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(clusters(max_nodes=5, max_pods=6), st.integers(0, 2**16))
def test_a_changed_index_answers_as_a_fresh_one(docs, seed) -> None:
    cluster = build_cluster([("t", d) for d in docs])
    rng = random.Random(seed)
    gone = frozenset(p.key for p in cluster.bound if rng.random() < 0.5)
    added = tuple(replace(p, node_name=rng.choice(cluster.nodes).name) for p in cluster.pending
                  if rng.random() < 0.5)
    terms = [t for p in cluster.pending for t in p.affinity_required + p.anti_affinity_required]
    base = BoundState.of(cluster.nodes, cluster.bound)
    _answers(base, terms)  # the base's caches are warm: a view must not answer from them
    view = base.changed(added=added, removed=gone)
    fresh = BoundState.of(cluster.nodes, [p for p in cluster.bound if p.key not in gone] + list(added))
    assert _answers(view, terms) == _answers(fresh, terms)
    assert view.facts is base.facts and np.array_equal(view.usage.allocatable, fresh.usage.allocatable)
