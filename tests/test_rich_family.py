"""The held-out rich snapshots of issue 15 point 6 as a generated family (bench/realistic.py's hetero-affinity,
small): stacks of a cache (hard zone spread, hostname anti-affinity), workers (required pod affinity to their
cache's zone, an init container) and an api (hostname anti-affinity, zone spread), three priorities. Every plan
holds under the independent checker and never places fewer pods, per priority, than one-at-a-time scheduling
(the independent oracle)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle import placed_vector
from runner import run
from sequential_oracle import sequential_plan
from testkit.checker import check_plan
from testkit.manifests import ZONE_KEY, affinity, anti, node, pod, spread, term

PRIORITIES = (0, 100, 1000)


def _stack(s: int, cache: int, workers: int, priority: int, cpu: str) -> list[dict]:
    cache_labels, api_labels = {"app": f"cache-{s}"}, {"app": f"api-{s}"}
    init = [{"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
    pods = [pod(f"cache-{s}-{i}", cpu=cpu, labels=cache_labels, priority=priority,
                topologySpreadConstraints=[spread(cache_labels)], affinity=anti(term(cache_labels)))
            for i in range(cache)]
    pods += [pod(f"worker-{s}-{i}", cpu=cpu, labels={"app": f"worker-{s}"}, priority=priority, initContainers=init,
                 affinity=affinity(term(cache_labels, ZONE_KEY))) for i in range(workers)]
    pods.append(pod(f"api-{s}", cpu=cpu, labels=api_labels, priority=priority, affinity=anti(term(api_labels)),
                    topologySpreadConstraints=[spread(api_labels, hard=False)]))
    return pods


@st.composite
def rich_snapshots(draw) -> list[dict]:
    nodes = draw(st.integers(6, 12))
    docs = [node(f"n{i:02d}", cpu=str(draw(st.sampled_from([4, 8]))), labels={ZONE_KEY: f"z{i % 3}"})
            for i in range(nodes)]
    for s in range(draw(st.integers(2, 5))):
        docs += _stack(s, draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.sampled_from(PRIORITIES)),
                       draw(st.sampled_from(["500m", "1", "2"])))
    return docs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rich_snapshots())
def test_rich_snapshots_place_no_fewer_than_one_at_a_time(docs: list[dict]) -> None:
    plan = run(docs)
    assert check_plan(docs, plan.assignments) == []
    assert placed_vector(docs, plan.assignments) >= placed_vector(docs, sequential_plan(docs))
