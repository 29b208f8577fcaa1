"""The restricted Pod Security profile holds for the scheduler's pod (issue 50, point 5): the pod template of every
render (the chart by default and with its options, kustomize's base and with its components) is created as a Pod,
server-side dry run, in a namespace that enforces `restricted`, and is admitted by the apiserver's own PodSecurity
admission; the same pod with one of its guards taken away is refused, so the check can fail."""
from __future__ import annotations

import copy

import pytest

from testkit.controlplane import ControlPlane
from testkit.deploytools import renders
from testkit.scheduling import Kube

NAMESPACE = "pss-restricted"


@pytest.fixture
def restricted(control_plane: ControlPlane, kube: Kube) -> str:
    """A namespace enforcing the restricted profile at the running release's version (made once; 409 after)."""
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted",
                                                            "pod-security.kubernetes.io/enforce-version": "latest"}}}
    status, body = kube.request("POST", "/api/v1/namespaces", namespace)
    assert status in (201, 409), body
    return NAMESPACE


def _pod(docs: list[dict], name: str) -> dict:
    """The Deployment's pod template as a Pod of the restricted namespace."""
    template = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": name, "namespace": NAMESPACE},
            "spec": copy.deepcopy(template["spec"])}


def _create(kube: Kube, pod: dict) -> tuple[int, dict]:
    """Create `pod` with dryRun=All (its ServiceAccount made first: the ServiceAccount admission asks for it)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": pod["spec"]["serviceAccountName"], "namespace": NAMESPACE}}
    status, body = kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", account)
    assert status in (201, 409), body
    return kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod, query=[("dryRun", "All")])


def test_every_rendered_pod_is_admitted_under_restricted(restricted: str, kube: Kube) -> None:
    for name, docs in renders().items():
        status, body = _create(kube, _pod(docs, f"template-{name}"))
        assert status == 201, f"{name}: the pod is not admitted under restricted: {status} {body}"


def _container(pod: dict) -> dict:
    return pod["spec"]["containers"][0]


@pytest.mark.parametrize("weaken, refused_for", [
    (lambda pod: _container(pod)["securityContext"].pop("allowPrivilegeEscalation"), "allowPrivilegeEscalation != false"),
    (lambda pod: _container(pod)["securityContext"].pop("capabilities"), "unrestricted capabilities"),
    (lambda pod: pod["spec"]["securityContext"].pop("seccompProfile"), "seccompProfile"),
    (lambda pod: (pod["spec"]["securityContext"].pop("runAsNonRoot"), _container(pod)["securityContext"].pop("runAsNonRoot")),
     "runAsNonRoot != true"),
], ids=["allowPrivilegeEscalation", "capabilities", "seccompProfile", "runAsNonRoot"])
def test_a_weakened_pod_is_refused(restricted: str, kube: Kube, weaken, refused_for: str) -> None:
    """The check can fail: the chart's pod with one guard taken away is refused, naming it."""
    pod = _pod(renders()["helm-default"], "weakened")
    weaken(pod)
    status, body = _create(kube, pod)
    assert status == 403 and 'violates PodSecurity "restricted' in body["message"], (status, body)
    assert refused_for in body["message"], body["message"]
