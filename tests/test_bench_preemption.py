"""bench/preemption.py's workloads, judged by the independent checker without a control plane: the
constraint workloads of issue 26 block every pending pod on every node until something is evicted (and not for
cpu), and a plan with the workload's fewest victims exists, places every pod and breaks no budget."""
from __future__ import annotations

import math

import pytest

from bench import preemption as bench
from testkit.checker import check_plan
from testkit.manifests import node, priority_class
from testkit.quantity import amount

SCHEDULER = "policy-scheduler"
BLOCKED = ("anti-affinity-existing", "anti-affinity-own", "zone-spread")


def _docs(w: bench.Workload, nodes: int, evicted: frozenset[str] = frozenset()) -> list[dict]:
    docs = [priority_class(name, value) for name, value in bench.PRIORITIES.items()]
    for i in range(nodes):
        labels, taints = w.node(i, nodes)
        docs.append(node(bench.node_name(i), cpu=w.node_cpu, labels=labels, taints=taints))
    docs += [p for name, p in bench.running_pods(w, nodes).items() if name not in evicted]
    return docs + bench.pending_pods(w, nodes, SCHEDULER)


def _free_cpu(w: bench.Workload, nodes: int, i: int) -> int:
    return amount("cpu", w.node_cpu) - sum(amount("cpu", s.cpu) for s in w.running(i, nodes))


@pytest.mark.parametrize("nodes", [2, 3, 8, 20])
@pytest.mark.parametrize("name", BLOCKED)
def test_no_pending_pod_fits_anywhere_before_an_eviction_though_cpu_would(name: str, nodes: int) -> None:
    w = bench.WORKLOADS[name]
    docs = _docs(w, nodes)
    for k, s in enumerate(w.pending(nodes)):
        for i in range(nodes):
            assert _free_cpu(w, nodes, i) >= amount("cpu", s.cpu)
            assert check_plan(docs, {f"{bench.NS}/high-{k:04d}": bench.node_name(i)}, SCHEDULER), (k, i)


def _fewest_plan(name: str, nodes: int) -> tuple[set[str], dict[int, int]]:
    """A plan with the workload's fewest victims: (victims, pending pod index -> node index)."""
    w = bench.WORKLOADS[name]
    pending = len(w.pending(nodes))
    if name in ("anti-affinity-existing", "anti-affinity-own"):  # empty the first nodes, fill each with 8
        return ({f"run-{i:04d}-0" for i in range(math.ceil(pending / bench.WEB_ROOM))},
                {k: k // bench.WEB_ROOM for k in range(pending)})
    if name == "zone-spread":  # one replica off every zone-a node, one pending pod on each
        zone_a = range(nodes // 2, nodes)
        return {f"run-{i:04d}-0" for i in zone_a}, dict(enumerate(zone_a))
    if name == "budgets-batch":  # one db pod and the cache pod off each node
        return {f"run-{i:04d}-{j}" for i in range(nodes) for j in (1, 2)}, {0: 0, 1: 1}
    if name == "full-cluster":  # the 2-cpu pod off the first half of the nodes
        return {f"run-{i:04d}-2" for i in range(pending)}, {k: k for k in range(pending)}
    if name == "mixed-sizes":  # a 3-cpu pod where a 2- and a 1-cpu pod went, two 1-cpu pods where a 2-cpu pod went
        big = math.ceil(nodes / 2)
        victims = {f"run-{i:04d}-{j}" for i in range(big) for j in (1, 2)}
        victims |= {f"run-{big + i:04d}-2" for i in range(math.ceil(nodes // 2 / 2))}
        return victims, {k: k // 2 if k % 2 == 0 else big + k // 4 for k in range(pending)}
    if name == "shared-room":  # four pods on each emptied node
        return {f"run-{i:04d}-0" for i in range(math.ceil(pending / 4))}, {k: k // 4 for k in range(pending)}
    raise AssertionError(name)


@pytest.mark.parametrize("nodes", [2, 3, 8, 20])
@pytest.mark.parametrize("name", [*BLOCKED, "budgets-batch", "shared-room", "full-cluster", "mixed-sizes"])
def test_a_plan_with_the_fewest_victims_places_every_pod_within_the_budgets(name: str, nodes: int) -> None:
    w = bench.WORKLOADS[name]
    nodes = w.size(nodes)
    victims, where = _fewest_plan(name, nodes)
    assert w.fewest_victims is not None and len(victims) == w.fewest_victims(nodes)
    assert len(where) == len(w.pending(nodes))
    running = bench.running_pods(w, nodes)
    assert victims <= set(running)
    assignments = {f"{bench.NS}/high-{k:04d}": bench.node_name(i) for k, i in where.items()}
    assert check_plan(_docs(w, nodes, frozenset(victims)), assignments, SCHEDULER) == []
    for budget, selector, _ in w.budgets:
        hit = sum(1 for v in victims if bench._selects(selector, running[v]["metadata"]["labels"]))
        assert hit <= bench._allowed(w, budget, nodes)


def test_the_budget_of_budgets_batch_allows_two_and_every_node_needs_two_victims() -> None:
    w = bench.WORKLOADS["budgets-batch"]
    assert bench._covered(w, "db", 2) == 4 and bench._allowed(w, "db", 2) == 2
    docs = _docs(w, 2, frozenset({"run-0000-2", "run-0001-2"}))  # the uncovered pod alone is not enough
    assert check_plan(docs, {f"{bench.NS}/high-0000": bench.node_name(0)}, SCHEDULER)
