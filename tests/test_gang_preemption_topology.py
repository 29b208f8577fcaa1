"""A big gang that preempts keeps to its topology (issue 49, point 4): victims in one rack only, a `disruptionMode:
all` group evicted whole or not at all, budgets respected where the rack allows, the fewest and lowest victims
(upstream's order) — by the batch model and by the stage's default order."""
from __future__ import annotations

import pytest

from preempting import DEFAULT, MODEL, preempted
from testkit.checker import check_evictions, check_plan
from testkit.manifests import budget, in_group, native_group, node, pod

GPU = "nvidia.com/gpu"


def gpu_node(name: str, rack: str) -> dict:
    return node(name, cpu="64", labels={"rack": rack}, **{GPU: "4"})


def running(name: str, where: str, gpus: int, priority: int, **extra) -> dict:
    return pod(name, cpu="1", requests={GPU: str(gpus)}, node_name=where, priority=priority, **extra)


def cluster() -> list[dict]:
    """Racks r1 (n1, n2) and r2 (n3, n4), 4 GPUs a node, all taken. In r1: a training group of priority 10 (disruption
    `all`, one 4-GPU member on each node). In r2: 2-GPU batch pods of priority 10 on n3, and on n4 two of priority 5."""
    docs = [gpu_node("n1", "r1"), gpu_node("n2", "r1"), gpu_node("n3", "r2"), gpu_node("n4", "r2"),
            native_group("train", 2, priority=10, disruption="PodGroup")]
    docs += [running(f"train-{i}", n, 4, 10, schedulingGroup=in_group("train")) for i, n in enumerate(("n1", "n2"))]
    docs += [running(f"b3-{i}", "n3", 2, 10) for i in range(2)] + [running(f"b4-{i}", "n4", 2, 5) for i in range(2)]
    return docs


def hero(size: int = 2) -> list[dict]:
    """The hero: a group of `size` 4-GPU members, priority 1000, every member in one rack."""
    return [native_group("hero", size, topology="rack", priority=1000),
            *[pod(f"hero-{i}", cpu="1", requests={GPU: "4"}, priority=1000, schedulingGroup=in_group("hero"))
              for i in range(size)]]


def valid(docs: list[dict], plan) -> list[str]:
    gone = {v.pod for v in plan.evictions}
    remaining = [d for d in docs if f"{d['metadata'].get('namespace', 'default')}/{d['metadata']['name']}" not in gone]
    return check_plan(remaining, plan.assignments) + check_evictions(docs, gone)


@pytest.mark.parametrize("strategy", [MODEL, DEFAULT])
def test_the_hero_evicts_in_one_rack_only_the_lowest_it_can(strategy) -> None:
    """r2 frees 8 GPUs by evicting four batch pods (two of priority 10, two of 5); r1 by evicting the training group
    whole (two pods of priority 10). Upstream's order: the lowest highest-victim priority first — equal (10) — then
    the smallest priority sum (20 for r1's group, 30 for r2's four), so r1: the group, whole, and nothing in r2."""
    docs = [*cluster(), *hero()]
    plan = preempted(docs, strategy)
    assert valid(docs, plan) == []
    assert set(plan.assignments.values()) == {"n1", "n2"}
    assert {v.pod for v in plan.evictions} == {"default/train-0", "default/train-1"}


@pytest.mark.parametrize("strategy", [MODEL, DEFAULT])
def test_a_budget_moves_the_hero_to_the_other_rack(strategy) -> None:
    """A budget allowing no disruption of the training group: the hero evicts r2's four batch pods instead, still in
    one rack, and the group keeps running whole."""
    docs = [*cluster(), budget("train", {}, allowed=0), *hero()]
    docs[-4]["spec"]["selector"] = {"matchLabels": {"app": "train"}}
    for d in docs:
        if d["metadata"]["name"].startswith("train-"):
            d["metadata"].setdefault("labels", {})["app"] = "train"
    plan = preempted(docs, strategy)
    assert valid(docs, plan) == []
    assert set(plan.assignments.values()) == {"n3", "n4"}
    assert {v.pod.split("/")[1] for v in plan.evictions} == {"b3-0", "b3-1", "b4-0", "b4-1"}
    assert plan.stats.preemption.budget_violations == 0


def test_a_budget_with_an_empty_selector_covers_every_pod_of_its_namespace() -> None:
    """policy/v1: `selector: {}` selects every pod of the namespace (kube-scheduler's preemption reads it so from 1.38;
    1.36 and 1.37 skipped it). Allowing no disruption, every choice breaks it: the hero takes the one with the fewest
    violations (r1's group, 2 victims, not r2's 4), and the plan says each victim goes over the budget; a missing
    selector covers nothing."""
    docs = [*cluster(), budget("all", {}, allowed=0), *hero()]
    docs[-4]["spec"]["selector"] = {}
    plan = preempted(docs, DEFAULT)
    assert {v.pod for v in plan.evictions} == {"default/train-0", "default/train-1"}
    assert all(v.over_budget == ("default/all",) for v in plan.evictions)
    del docs[-4]["spec"]["selector"]
    plan = preempted(docs, DEFAULT)
    assert plan.evictions and not any(v.over_budget for v in plan.evictions)
