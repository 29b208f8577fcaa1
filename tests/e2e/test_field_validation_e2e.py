"""The unknown fields a snapshot's objects are reported for are exactly those the real apiserver's strict field
validation refuses (issue 47, point 4): each object is sent with `fieldValidation=Strict` and `dryRun=All` (nothing
is stored), and the fields the apiserver names are the fields engine.reading.field_validation names, in the same words;
objects it admits whole have none. Built-in kinds (the client's models), scheduler-plugins' CRDs (their
openAPIV3Schema) and the release's scheduling.k8s.io PodGroups (1.36: v1alpha2, from its OpenAPI)."""
from __future__ import annotations

import re

import pytest

from engine.reading.field_validation import schemas
from testkit.controlplane import ControlPlane
from testkit.manifests import (
    api_pod,
    created,
    device_class,
    device_request,
    native_group,
    podgroup,
    resource_claim,
)
from testkit.scheduling import Kube, collection, install_elasticquota_crd, install_podgroup_crd

NS = "e2e-fields"


def strict_refusal(kube: Kube, obj: dict) -> list[str]:
    """The fields the apiserver's strict validation names for `obj` (none: admitted), as its message gives them."""
    status, body = kube.request("POST", collection(obj), obj, query=[("fieldValidation", "Strict"), ("dryRun", "All")])
    if 200 <= status < 300:
        return []
    message = body.get("message", "") if isinstance(body, dict) else str(body)
    fields = re.findall(r'unknown field "([^"]+)"', message)
    assert fields, f"{status}: {message}"  # refused for something else: the object itself is wrong
    return fields


def _objects(kube: Kube) -> list[dict]:
    """Objects with typos at every depth, and whole objects of the shapes snapshots hold."""
    typo = api_pod("typo", NS, cpu="1", nodeSelectr={"disk": "ssd"})
    typo["metadata"]["labells"] = {"a": "b"}
    typo["spec"]["containers"][0]["resources"]["request"] = {"memory": "1Gi"}
    typo["spec"]["tolerations"] = [{"key": "k", "operator": "Exists", "efect": "NoSchedule"}]
    rich = api_pod("rich", NS, cpu="1", labels={"app": "web", "example.com/x": "y"}, nodeSelector={"disk": "ssd"},
                   affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                       {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                   topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": "web"}}}],
                   tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                   volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    rich["metadata"]["annotations"] = {"note": "anything"}
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": NS},
              "spec": {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "web"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"}}
    budget_typo = {**budget, "metadata": {"name": "b2", "namespace": NS},
                   "spec": {"maxUnavailabel": 1, "selector": {"matchLabels": {"app": "web"}}}}
    claim = created(resource_claim("c", device_request("gpu", f"{NS}-gpu"), ns=NS))
    claim_typo = created(resource_claim("c2", device_request("gpu", f"{NS}-gpu"), ns=NS))
    claim_typo["spec"]["devices"]["requests"][0]["exactly"]["cout"] = 2
    group_typo = {**podgroup("g", 2, ns=NS), "spec": {"minMembr": 2, "minResources": {"cpu": "1"}}}
    quota = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "q", "namespace": NS},
             "spec": {"min": {"cpu": "1"}, "mx": {"cpu": "2"}}}
    native = native_group("n", 2, ns=NS, api_version=kube.podgroups_api())
    native["spec"]["schedulingPolicy"]["gang"]["minCnt"] = 1
    native["spec"]["schedulingConstraint"] = {}
    return [typo, rich, budget, budget_typo, claim, claim_typo, podgroup("ok", 2, ns=NS), group_typo, quota, native,
            created(device_class(f"{NS}-gpu"))]


@pytest.fixture(scope="module")
def objects(control_plane: ControlPlane) -> list[dict]:
    kube = Kube(control_plane.kubeconfig)
    control_plane.ensure_namespace(NS)
    install_podgroup_crd(kube)
    install_elasticquota_crd(kube)
    return _objects(kube)


def test_the_fields_reported_are_those_the_apiservers_strict_validation_refuses(control_plane: ControlPlane,
                                                                                objects: list[dict]) -> None:
    kube = Kube(control_plane.kubeconfig)
    check = schemas()
    refused = {f"{o['kind']} {o['metadata']['name']}": sorted(strict_refusal(kube, o)) for o in objects}
    ours = {f"{o['kind']} {o['metadata']['name']}": sorted(check.unknown_fields(o)) for o in objects}
    assert ours == refused, (ours, refused)
    assert refused["Pod typo"] == ["metadata.labells", "spec.containers[0].resources.request", "spec.nodeSelectr",
                                   "spec.tolerations[0].efect"]
    assert refused["Pod rich"] == refused["PodDisruptionBudget b"] == refused["ResourceClaim c"] == []
    assert refused["PodGroup ok"] == refused["DeviceClass e2e-fields-gpu"] == []
