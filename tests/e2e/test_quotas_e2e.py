"""Tenant quotas in the cluster (issue 19): ElasticQuota objects and quotas written in a policy ConfigMap, both
hot-reloaded by the running scheduler against the real kube-apiserver.

Same conventions as test_scheduler.py: a namespace per tenant, `e2e: quotas` nodes, the scheduler as a separate
process with its own scheduler name.
"""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod
from testkit.scheduling import Kube, install_elasticquota_crd, node_of, wait_for

SCHEDULER = "quota-sched"
SELECTOR = {"e2e": "quotas"}
QUOTAS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/elasticquotas"


def _quota(ns: str, low: str, high: str) -> dict:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": "quota", "namespace": ns}, "spec": {"min": {"cpu": low}, "max": {"cpu": high}}}


def _policies(most: str) -> dict:
    text = (f'policy team-c {{\n  applies to pods where namespace == "quota-c"\n  quota max "cpu" {most}\n}}\n')
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policies", "namespace": "quota-c"},
            "data": {"quotas.policy": text}}


def _bound(kube: Kube, ns: str) -> int:
    return sum(1 for p in kube.pods(ns).values() if node_of(p))


def _pods(kube: Kube, ns: str, k: int) -> None:
    for i in range(k):
        kube.create(api_pod(f"p{i}", ns, scheduler=SCHEDULER, cpu="1", nodeSelector=SELECTOR))


def _quota_event(kube: Kube, ns: str, words: str) -> list[dict]:
    return [e for e in kube.events(ns) if e["reason"] == "FailedScheduling" and words in e["message"]]


def test_quotas_from_elastic_quotas_and_a_policy_configmap_hot_reloaded(control_plane: ControlPlane, kube: Kube,
                                                                         chart_schedulers, chart_identity) -> None:
    install_elasticquota_crd(kube)
    for ns in ("quota-a", "quota-b", "quota-c"):
        control_plane.ensure_namespace(ns)
    for i in range(2):
        control_plane.create_ready_node(f"quota-{i}", cpu="4", labels=SELECTOR)
    kube.create(_quota("quota-a", "4", "5"))
    kube.create(_quota("quota-b", "4", "8"))  # asks for nothing: its min is idle, team-a may borrow it
    kube.create(_policies("1"))
    # the chart installed in quota-c with a profile reading ConfigMap policies there: its Role may read that one
    profile = {"name": SCHEDULER, "existingConfigMap": "policies"}
    identity = chart_identity("quota-chart", "quota-c", {"profiles": [profile]})
    s = chart_schedulers.start("--scheduler-name", SCHEDULER, "--policy-configmap", "quota-c/policies", kubeconfig=identity)

    _pods(kube, "quota-a", 7)
    wait_for("team-a at its max of 5 (4 of its min, 1 borrowed)", lambda: _bound(kube, "quota-a") == 5)
    wait_for("the rest told which quota holds them",
             lambda: _quota_event(kube, "quota-a", "ElasticQuota quota-a/quota"))

    quota = kube.ok("GET", QUOTAS.format(ns="quota-a") + "/quota")
    quota["spec"]["max"]["cpu"] = "6"
    kube.ok("PUT", QUOTAS.format(ns="quota-a") + "/quota", quota)
    wait_for("a raised max binds one more", lambda: _bound(kube, "quota-a") == 6)

    _pods(kube, "quota-c", 2)
    wait_for("team-c at its policy's max of 1", lambda: _bound(kube, "quota-c") == 1)
    wait_for("the other told it is the policy's quota",
             lambda: _quota_event(kube, "quota-c", "policy team-c (quota-c/policies[quotas.policy]:"))
    kube.ok("PUT", "/api/v1/namespaces/quota-c/configmaps/policies", _policies("2"))
    wait_for("the reloaded policy binds the second", lambda: _bound(kube, "quota-c") == 2)
    assert _bound(kube, "quota-a") == 6  # nothing else moved
    assert s.metric("policy_scheduler_policy_reloads_total", result="ok") == 2
