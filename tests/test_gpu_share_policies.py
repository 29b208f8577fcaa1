"""GPU sharing (issue 52, point 3): the FGD paper's fragmentation measure and the one-task-at-a-time policies, on
small cases worked out by hand (the arithmetic is in the comments), and a property: no policy ever overcommits."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sharing.fragmentation import TaskShape, cluster_fragmentation, node_fragmentation, typical_shapes
from engine.sharing.gpus import MILLI, GpuChoice, GpuNode, GpuTask, fits, gpu_node, place, release, usable_gpus
from engine.sharing.policies import (
    BEST_FIT,
    DOT_PRODUCT,
    GPU_CLUSTERING,
    GPU_PACKING,
    POLICY_NAMES,
    Fgd,
    KubeDefault,
    RandomFit,
    balanced_allocation_score,
    best_fit_score,
    dot_product_score,
    gpu_clustering_score,
    gpu_packing_score,
    least_allocated_score,
    make_policy,
    schedule,
)


def shared(milli: int, cpu: int = 1000, memory: int = 1000, models: frozenset[str] = frozenset()) -> GpuTask:
    return GpuTask(cpu, memory, 1, milli, models)


def whole(gpus: int, cpu: int = 1000, memory: int = 1000) -> GpuTask:
    return GpuTask(cpu, memory, gpus, MILLI)


def loaded(node: GpuNode, *placed: tuple[GpuTask, tuple[int, ...]]) -> GpuNode:
    for task, gpus in placed:
        node = place(node, task, gpus)
    return node


# --- the model -------------------------------------------------------------------------------------------------

def test_a_shared_task_takes_one_gpu_with_that_much_free_and_whole_gpus_need_idle_ones() -> None:
    node = loaded(gpu_node("n", 8000, 8000, 2, "T4"), (shared(600), (0,)))  # GPU 0 has 400 left
    assert usable_gpus(node, shared(400)) == [0, 1] and usable_gpus(node, shared(401)) == [1]
    assert fits(node, whole(1)) and not fits(node, whole(2))  # a 400-milli GPU is no whole GPU
    assert not fits(node, shared(300, models=frozenset({"V100"})))  # model not allowed
    assert fits(node, shared(300, models=frozenset({"V100", "T4"})))
    assert not fits(gpu_node("cpu", 8000, 8000), shared(100))  # a CPU-only node
    assert fits(gpu_node("cpu", 8000, 8000), GpuTask(1000, 1000))
    assert fits(node, GpuTask(7000, 7000)) and not fits(node, GpuTask(7001, 1000)) and not fits(node, GpuTask(1000, 7001))


def test_shared_and_whole_on_one_gpu_are_never_overcommitted() -> None:
    node = loaded(gpu_node("n", 8000, 8000, 1), (shared(700), (0,)))
    with pytest.raises(ValueError):
        place(node, shared(301), (0,))
    with pytest.raises(ValueError):
        place(node, whole(1), (0,))
    assert release(place(node, shared(300), (0,)), shared(300), (0,)) == node


@pytest.mark.parametrize("bad", [{"num_gpu": 2, "gpu_milli": 500}, {"num_gpu": 1, "gpu_milli": 0},
                                 {"num_gpu": 0, "gpu_milli": 100}, {"num_gpu": 1, "gpu_milli": 1001}])
def test_a_task_shape_the_trace_cannot_have_is_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        GpuTask(1000, 1000, **bad)


# --- fragmentation ---------------------------------------------------------------------------------------------

SHAPES = (TaskShape(shared(500), 0.5), TaskShape(GpuTask(400, 0, 1, MILLI), 0.25), TaskShape(GpuTask(1000, 0), 0.25))


def test_fragmentation_counts_the_free_milli_each_shape_cannot_use() -> None:
    # GPUs free [1000, 300], 10 cores free. The 500-milli shape fits GPU 0: GPU 1's 300 is fragment to it; so for the
    # whole-GPU shape; a task without GPUs uses none: all 1300. 0.5 × 300 + 0.25 × 300 + 0.25 × 1300 = 550.
    node = loaded(gpu_node("n", 11000, 8000, 2), (shared(700, cpu=1000), (1,)))
    assert node_fragmentation(node, SHAPES) == pytest.approx(550)
    # with 500 millicores free the 500-milli shape (1000 millicores) fits nowhere: all 1300 is fragment to it;
    # 0.5 × 1300 + 0.25 × 300 + 0.25 × 1300 = 1050
    short = loaded(gpu_node("n", 1500, 8000, 2), (shared(700, cpu=1000), (1,)))
    assert node_fragmentation(short, SHAPES) == pytest.approx(1050)
    # a shape that may not run on this model sees every free milli as fragment: 1.0 × 1300
    t4_only = (TaskShape(shared(100, models=frozenset({"T4"})), 1.0),)
    assert node_fragmentation(node, t4_only) == 1300
    assert cluster_fragmentation([node, node], SHAPES) == pytest.approx(1100)
    assert node_fragmentation(gpu_node("idle", 8000, 8000, 2), SHAPES) == pytest.approx(0.25 * 2000)


def test_typical_shapes_keep_the_most_frequent_up_to_the_popularity_and_renormalise() -> None:
    x, y, z = shared(500), whole(1), GpuTask(2000, 0)
    tasks = [x] * 6 + [y] * 3 + [z]
    # 95%: 6 → 9 → 10 of 10 tasks before reaching 9.5: all three
    assert {(s.task.num_gpu, s.task.gpu_milli, s.share) for s in typical_shapes(tasks)} == {
        (1, 500, 0.6), (1, 1000, 0.3), (0, 0, 0.1)}
    # 80%: 6 → 9 ≥ 8, stop: two shapes, 6/9 and 3/9; memory is no part of a shape
    kept = typical_shapes(tasks, popularity_percent=80)
    assert [(s.task.gpu_milli, s.share) for s in kept] == [(500, pytest.approx(2 / 3)), (1000, pytest.approx(1 / 3))]
    assert all(s.task.memory_mib == 0 for s in kept)


# --- the policies on hand-checked cases ------------------------------------------------------------------------

def case_shared_onto_a_used_gpu() -> list[GpuNode]:
    """a: 2 GPUs, GPU 1 has a 600-milli task (400 left), 2 cores and 2000 MiB used of 32/64000; b: idle, same size."""
    a = loaded(gpu_node("a", 32000, 64000, 2), (shared(600, cpu=2000, memory=2000), (1,)))
    return [a, gpu_node("b", 32000, 64000, 2)]


def test_best_fit_and_packing_put_a_shared_task_on_the_partly_used_gpu_kube_default_on_the_emptier_node() -> None:
    nodes, task = case_shared_onto_a_used_gpu(), shared(300)
    # Best-fit: a: ½ (30000 − 1000)/128000 + ½ (1400 − 300)/8000 = 0.18203 → 81; b: 0.22734 → 77
    assert [best_fit_score(n, task) for n in nodes] == [81, 77]
    assert BEST_FIT.choose(nodes, task) == GpuChoice(0, (1,))  # the tightest GPU: 400 left
    # Packing: a uses a shared GPU: 100 − (400 × 100 // 1000) // 10 = 96; b is idle: max(33 − 2, 2) = 31
    assert [gpu_packing_score(n, task) for n in nodes] == [96, 31]
    assert GPU_PACKING.choose(nodes, task) == GpuChoice(0, (1,))
    # kube-scheduler: LeastAllocated a: (90 + 95) // 2 = 92, b: (96 + 98) // 2 = 97; BalancedAllocation a: 98 → 97
    # with the task: 50 + (50 + 97 − 98) // 2 = 74; b: 100 → 99: 50 + 49 // 2 = 74. b wins, DRA's first GPU.
    assert [least_allocated_score(n, task) for n in nodes] == [92, 97]
    assert [balanced_allocation_score(n, task) for n in nodes] == [74, 74]
    assert KubeDefault().choose(nodes, task) == GpuChoice(1, (0,))


def test_fgd_keeps_a_gpu_whole_for_the_shape_that_would_not_fit_the_leftover() -> None:
    # a has one GPU with 700 free, b one idle GPU; every task of the workload asks for 500 milli.
    a = loaded(gpu_node("a", 32000, 64000, 1), (shared(300, cpu=1000, memory=1000), (0,)))
    b = loaded(gpu_node("b", 32000, 64000, 1), (GpuTask(1000, 1000), ()))  # the same cpu and memory used
    nodes, task = [a, b], shared(500)
    fgd = Fgd((TaskShape(shared(500), 1.0),))
    # a: 700 fits a 500 (fragment 0); after, 200 does not (fragment 200): sigmoid(−0.2) × 100 = 45.
    # b: 1000 → 500, both fit a 500: fragment 0 → 0, sigmoid(0) × 100 = 50.
    assert [fgd.score(n, task)[0] for n in nodes] == [45, 50]
    assert fgd.choose(nodes, task) == GpuChoice(1, (0,))
    assert BEST_FIT.choose(nodes, task) == GpuChoice(0, (0,))  # tighter: 700 free against 1000
    assert GPU_PACKING.choose(nodes, task) == GpuChoice(0, (0,))
    assert KubeDefault().choose(nodes, task) == GpuChoice(0, (0,))  # equal scores: the smallest name without rng


def test_fgd_picks_the_gpu_within_a_node_that_leaves_the_least_fragment() -> None:
    # GPUs free [1000, 400, 800]; shapes: 300 milli (½), 1 whole GPU (½); the task asks for 300.
    node = loaded(gpu_node("n", 32000, 64000, 3), (shared(600), (1,)), (shared(200), (2,)))
    fgd = Fgd((TaskShape(shared(300), 0.5), TaskShape(whole(1), 0.5)))
    # before: 300-shape fragment 0; whole-shape fragment 400 + 800 → 600.
    # GPU 0 → [700, 400, 800]: whole-shape fits nowhere: 0.5 × 1900 = 950 → sigmoid(−0.35) → 41
    # GPU 1 → [1000, 100, 800]: 300-shape: 100; whole: 900 → 500 → sigmoid(0.1) → 52
    # GPU 2 → [1000, 400, 500]: 300-shape: 0; whole: 900 → 450 → sigmoid(0.15) → 53
    assert fgd.score(node, shared(300)) == (53, (2,))
    assert BEST_FIT.choose([node], shared(300)) == GpuChoice(0, (1,))  # the tightest GPU, 400 free


def test_dot_product_prefers_the_node_whose_free_resources_are_least_aligned_with_the_task() -> None:
    # a: 128 cores, one GPU; b: 32 cores, 8 GPUs. Task: 32 cores and one whole GPU.
    a, b = gpu_node("a", 128000, 256000, 1), gpu_node("b", 32000, 256000, 8)
    nodes, task = [a, b], whole(1, cpu=32000)
    # a: 1 × 0.25 + 0.125 × 0.125 = 0.265625 → 100 × (1 − 0.1328) = 86; b: 0.25 × 0.25 + 1 × 0.125 = 0.1875 → 90
    assert [dot_product_score(n, task) for n in nodes] == [86, 90]
    assert DOT_PRODUCT.choose(nodes, task) == GpuChoice(1, (0,))
    # Best-fit: a: ½ × 96000/128000 = 0.375 → 62; b: ½ × 7000/8000 = 0.4375 → 56
    assert [best_fit_score(n, task) for n in nodes] == [62, 56]
    assert BEST_FIT.choose(nodes, task) == GpuChoice(0, (0,))
    assert KubeDefault().choose(nodes, task).node == 0  # b would be full on cpu: LeastAllocated 0 for cpu


def test_gpu_clustering_puts_a_task_with_its_own_kind() -> None:
    # a: 2 idle GPUs; b: a 1-GPU task on GPU 0 of 4; c: a shared task (500 of GPU 0) of 2. Task: one whole GPU.
    a = gpu_node("a", 32000, 64000, 2)
    b = loaded(gpu_node("b", 32000, 64000, 4), (whole(1), (0,)))
    c = loaded(gpu_node("c", 32000, 64000, 2), (shared(500), (0,)))
    nodes, task = [a, b, c], whole(1)
    # a: no GPU tasks, 25 + 25 × 6000 // 8000 = 43; b: only its kind, 75 + 25 × 5000 // 8000 = 90;
    # c: another kind only, 0 + 25 × 6500 // 8000 = 20
    assert [gpu_clustering_score(n, task) for n in nodes] == [43, 90, 20]
    assert GPU_CLUSTERING.choose(nodes, task) == GpuChoice(1, (1,))
    assert BEST_FIT.choose(nodes, task) == GpuChoice(2, (1,))  # least GPU left: 1500
    # Packing: a idle: max(33 − 2, 2) = 31; b and c must use an idle GPU of a used node: 50 − 1 = 49; tie: "b"
    assert [gpu_packing_score(n, task) for n in nodes] == [31, 49, 49]
    assert GPU_PACKING.choose(nodes, task) == GpuChoice(1, (1,))


def test_kube_default_counts_a_missing_memory_request_as_200_mib_for_least_allocated_only() -> None:
    node = gpu_node("n", 1000, 1000)
    task = GpuTask(500, 0)
    # cpu (1000 − 500) × 100 // 1000 = 50, memory (1000 − 200) × 100 // 1000 = 80: 65
    assert least_allocated_score(node, task) == 65
    # balance on actual requests: fractions 0.5 and 0 → 75; without: 100 → 50 + (50 + 75 − 100) // 2 = 62
    assert balanced_allocation_score(node, task) == 62
    assert balanced_allocation_score(node, GpuTask(0, 0)) == 0  # best effort: skipped


def test_ties_go_to_the_smallest_name_or_at_random_with_a_seed() -> None:
    nodes = [gpu_node("z", 8000, 8000, 1), gpu_node("a", 8000, 8000, 1)]
    assert BEST_FIT.choose(nodes, whole(1)) == GpuChoice(1, (0,))
    picks = {KubeDefault(random.Random(seed)).choose(nodes, whole(1)).node for seed in range(20)}
    assert picks == {0, 1}


def test_random_fit_picks_only_feasible_nodes_and_is_reproducible() -> None:
    nodes = [gpu_node("a", 8000, 8000, 1), gpu_node("b", 8000, 8000), gpu_node("c", 8000, 8000, 2)]
    draws = [RandomFit(random.Random(seed)).choose(nodes, shared(500)) for seed in range(30)]
    assert {d.node for d in draws} == {0, 2}
    assert draws == [RandomFit(random.Random(seed)).choose(nodes, shared(500)) for seed in range(30)]
    assert RandomFit(random.Random(0)).choose(nodes, whole(3)) is None


def test_make_policy_names_every_policy_and_refuses_others() -> None:
    shapes = (TaskShape(shared(500), 1.0),)
    assert [make_policy(name, seed=1, shapes=shapes).name for name in POLICY_NAMES] == list(POLICY_NAMES)
    with pytest.raises(ValueError, match="unknown placement policy 'tetris'"):
        make_policy("tetris")
    with pytest.raises(ValueError, match="task shapes"):
        make_policy("fgd")


# --- never overcommitted ---------------------------------------------------------------------------------------

MODELS = ("T4", "V100")
tasks_st = st.one_of(
    st.builds(GpuTask, st.integers(0, 16000), st.integers(0, 32000)),
    st.builds(GpuTask, st.integers(0, 16000), st.integers(0, 32000), st.just(1), st.integers(1, 1000),
              st.sets(st.sampled_from(MODELS)).map(frozenset)),
    st.builds(GpuTask, st.integers(0, 16000), st.integers(0, 32000), st.sampled_from([1, 2, 4, 8]), st.just(MILLI)),
)
nodes_st = st.lists(st.builds(gpu_node, st.just(""), st.integers(0, 64000), st.integers(0, 128000),
                              st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from(MODELS)), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(nodes_st, st.lists(tasks_st, min_size=1, max_size=25), st.sampled_from(POLICY_NAMES), st.integers(0, 9))
def test_no_policy_ever_overcommits_or_refuses_a_task_that_fits(nodes: list[GpuNode], tasks: list[GpuTask],
                                                                 name: str, seed: int) -> None:
    state = tuple(GpuNode(f"n{i}", n.cpu_milli, n.memory_mib, n.model, n.gpu_free) for i, n in enumerate(nodes))
    policy = make_policy(name, seed=seed, shapes=typical_shapes(tasks))
    for task in tasks:
        fitted = any(fits(node, task) for node in state)
        state, choice = schedule(policy, state, task)
        assert (choice is not None) == fitted
        for node in state:
            assert all(0 <= free <= MILLI for free in node.gpu_free)
            assert node.cpu_free >= 0 and node.memory_free >= 0
