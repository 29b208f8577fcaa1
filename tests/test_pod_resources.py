"""Pod-level `spec.resources` (PodLevelResources, beta and on by default since Kubernetes 1.34) as upstream's
resourcehelper.PodRequests and the API's defaulting compute it: each test places pods that would go elsewhere,
or all onto one node, if the pod-level figures were ignored; the independent checker judges every plan."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.reading.convert.pods import pod_requests
from runner import run
from testkit.checker import Pod as CheckedPod
from testkit.checker import check_plan
from testkit.manifests import node, pod


def pod_level(doc: dict, requests: dict | None = None, limits: dict | None = None) -> dict:
    doc["spec"]["resources"] = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return doc


def planned(docs: list[dict]):
    plan = run(docs)
    assert check_plan(docs, plan.assignments) == []
    return plan


def test_two_pods_of_three_pod_level_cpus_do_not_share_a_four_cpu_node() -> None:
    docs = [node("n1", cpu="4"), node("n2", cpu="4"),
            pod_level(pod("a", cpu="100m"), requests={"cpu": "3"}),
            pod_level(pod("b", cpu="100m"), requests={"cpu": "3"})]
    assert sorted(planned(docs).assignments.values()) == ["n1", "n2"]


def test_a_pod_level_request_that_fits_nowhere_says_cpu() -> None:
    plan = planned([node("n1", cpu="4"), pod_level(pod("big", cpu="1"), requests={"cpu": "5"})])
    assert plan.assignments == {}
    assert "Insufficient cpu" in " ".join(plan.unschedulable["default/big"])


def test_pod_level_requests_replace_the_containers_sum_only_where_set() -> None:
    spec = pod_level(pod("p", cpu="1", memory="1Gi", requests={"example.com/gpu": "1"}),
                     requests={"memory": "3Gi"})["spec"]
    assert pod_requests(spec) == {"cpu": 1000, "memory": 3 * 2**30, "example.com/gpu": 1, "pods": 1}


def test_pod_level_limits_default_the_request_as_the_api_does() -> None:
    # cpu: the containers request it, so the pod-level request defaults to their sum, not to the limit;
    # memory: no container asks, so the limit is the request; hugepages always take the limit.
    spec = pod_level(pod("p", cpu="500m"), limits={"cpu": "4", "memory": "2Gi", "hugepages-2Mi": "4Mi"})["spec"]
    assert pod_requests(spec) == {"cpu": 500, "memory": 2 * 2**30, "hugepages-2Mi": 4 * 2**20, "pods": 1}


def test_overhead_adds_to_the_pod_level_request() -> None:
    doc = pod_level(pod("p", cpu="100m"), requests={"cpu": "2"})
    doc["spec"]["overhead"] = {"cpu": "250m"}
    assert pod_requests(doc["spec"])["cpu"] == 2250


def test_pod_level_limits_alone_keep_pods_apart() -> None:
    docs = [node("n1", cpu="4", memory="4Gi"), node("n2", cpu="4", memory="4Gi"),
            pod_level(pod("a", cpu=None), limits={"memory": "3Gi"}),
            pod_level(pod("b", cpu=None), limits={"memory": "3Gi"})]
    assert sorted(planned(docs).assignments.values()) == ["n1", "n2"]


QTY = st.sampled_from(["0", "100m", "250m", "1", "2", "3"])
MEM = st.sampled_from(["0", "64Mi", "1Gi", "2Gi"])
RESOURCES = st.fixed_dictionaries({}, optional={"cpu": QTY, "memory": MEM, "hugepages-2Mi": st.just("2Mi")})
CONTAINER = st.fixed_dictionaries({"name": st.just("c")},
                                  optional={"resources": st.fixed_dictionaries(
                                      {}, optional={"requests": RESOURCES, "limits": RESOURCES})})
INIT = st.tuples(CONTAINER, st.booleans()).map(
    lambda cs: {**cs[0], "restartPolicy": "Always"} if cs[1] else cs[0])
SPEC = st.fixed_dictionaries(
    {"containers": st.lists(CONTAINER, min_size=1, max_size=3)},
    optional={"initContainers": st.lists(INIT, max_size=3),
              "resources": st.fixed_dictionaries({}, optional={"requests": RESOURCES, "limits": RESOURCES}),
              "overhead": st.fixed_dictionaries({}, optional={"cpu": QTY})})


@settings(max_examples=300, deadline=None)
@given(SPEC)
def test_requests_agree_with_the_independent_checker(spec: dict) -> None:
    """Containers, sidecars, init containers, pod-level resources and overhead, computed twice: by the engine and
    by testkit's checker, written apart from it."""
    assert pod_requests(spec) == CheckedPod._requests(spec)
