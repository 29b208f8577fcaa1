"""deploy/ against the real apiserver: it applies (server-side dry run), and its RBAC is enough.

The RBAC test runs the scheduler with a token of exactly deploy/'s ServiceAccount and the Deployment's own
arguments: it lists, watches, binds, patches conditions, posts events and holds its Lease with nothing more.
"""
from __future__ import annotations

import re

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod
from testkit.scheduling import Kube, apply, condition, deploy_manifests, node_of, wait_for

NAMESPACE = "policy-scheduler"


def test_kustomization_lists_every_manifest_and_applies_server_side(kube: Kube) -> None:
    docs = deploy_manifests()
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap",
            "Deployment", "Service", "CustomResourceDefinition"} <= kinds
    # objects inside the namespace can only be dry-run once it exists, as `kubectl apply` would have made it
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    assert apply(kube, namespace)[0] in (200, 201)
    for doc in docs:
        status, body = apply(kube, doc, dry_run=True)
        assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"


def _deployment_args() -> list[str]:
    deployment = next(d for d in deploy_manifests() if d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    return [a for a in args[1:] if not a.startswith("--metrics-port")]  # the test picks a free port


def test_the_deploy_service_account_is_enough(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    for doc in deploy_manifests():
        if doc["kind"] not in ("Deployment", "Service"):  # no kubelet would run them
            status, body = apply(kube, doc)
            assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"
    deployment = next(d for d in deploy_manifests() if d["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    pod_of_template = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "template-check",
                       "namespace": NAMESPACE}, "spec": template["spec"]}
    status, body = kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_of_template,
                                query=[("dryRun", "All")])
    assert status == 201, f"the Deployment's pod is not admitted: {status} {body}"  # priority class, SA, security
    token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
    ns, sel = "sched-rbac", {"e2e": "rbac"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("rbac-1", labels=sel)
    s = schedulers.start(*_deployment_args(), kubeconfig=token_config, name="rbac-scheduler")
    wait_for("leadership with the Role's lease rights", lambda: "became leader" in s.log())
    standby = schedulers.start(*_deployment_args(), kubeconfig=token_config, name="rbac-standby")  # waits for /readyz
    assert "became leader" not in standby.log()  # ready (policies loaded) while standing by: rollouts proceed
    kube.create(api_pod("fits", ns, nodeSelector=sel))
    kube.create(api_pod("huge", ns, cpu="64", nodeSelector=sel))
    wait_for("bound with the ServiceAccount's rights", lambda: node_of(kube.pods(ns)["fits"]) == "rbac-1")
    wait_for("condition patched", lambda: condition(kube.pods(ns)["huge"]))
    wait_for("events posted", lambda: {e["reason"] for e in kube.events(ns)} >= {"Scheduled", "FailedScheduling"})
    log = s.log()  # a refusal is logged as error='403: ...' or status=403 (timings like solve_s=0.403 are not)
    assert not re.search(r"'403: |status=403\b", log) and "forbidden" not in log.lower(), log[-3000:]
    assert "policies loaded configmap=kube-system/policy-scheduler-policies" in log
