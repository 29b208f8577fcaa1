"""DRA through the loop against the real apiserver (resource.k8s.io/v1, on by default in 1.36): the tests publish
ResourceSlices as a driver would; the scheduler places pods claiming GPUs where the GPUs are, and before the bind
each claim carries the delete-protection finalizer, its allocation and its pods in reservedFor, as upstream's
DynamicResources PreBind leaves it. A claim from a template is made by kube-controller-manager's resource-claim
controller; a bind the apiserver refuses (a ValidatingAdmissionPolicy on pods/binding) leaves the claim as it
was; a claim several pods share is allocated once, for all of them. The scheduler runs as the Helm chart's
ServiceAccount with exactly the chart's RBAC (`chart_schedulers`): a right it lacks fails the test."""
from __future__ import annotations

import time

import pytest

from testkit.controlplane import ControlPlane, controllers
from testkit.manifests import (
    api_pod,
    claim_template,
    claims,
    counter_slice,
    created,
    device_class,
    gpu,
    partition,
    resource_claim,
    resource_slice,
)
from testkit.quantity import exact
from testkit.scheduling import Kube, node_of, wait_for

SCHEDULER = "dra-scheduler"
CLAIMS = "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"


def _claim(kube: Kube, ns: str, name: str) -> dict:
    return kube.ok("GET", f"{CLAIMS.format(ns=ns)}/{name}")


def test_a_gpu_claim_is_allocated_and_reserved_before_the_bind(control_plane: ControlPlane, kube: Kube,
                                                              chart_schedulers) -> None:
    ns, sel = "sched-dra", {"e2e": "dra"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-cpu", labels=sel)
    control_plane.create_ready_node("dra-gpu", labels=sel)
    kube.create(created(device_class("e2e-gpu")))
    kube.create(created(resource_slice("dra-gpu", [gpu("g0"), gpu("g1", model="h100")])))
    big = {"name": "gpu", "exactly": {"deviceClassName": "e2e-gpu", "count": 1, "selectors": [
        {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]}}
    kube.create(created(resource_claim("train", big, ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("trainer", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("train")))
    wait_for("bound", lambda: node_of(kube.pods(ns)["trainer"]) == "dra-gpu")
    claim = _claim(kube, ns, "train")
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("dra-gpu", "g1")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["trainer"]


def test_a_claim_from_a_template_is_made_by_the_controller_then_allocated(control_plane: ControlPlane, kube: Kube,
                                                                         chart_schedulers, tmp_path) -> None:
    ns, sel = "sched-dra-tmpl", {"e2e": "dra-tmpl"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-tmpl-cpu", labels=sel)
    control_plane.create_ready_node("dra-tmpl-gpu", labels=sel)
    kube.create(created(device_class("e2e-tmpl-gpu")))
    kube.create(created(resource_slice("dra-tmpl-gpu", [gpu("g0")])))
    kube.create(claim_template("one-gpu", {"name": "gpu", "exactly": {"deviceClassName": "e2e-tmpl-gpu"}}, ns=ns))
    with controllers(control_plane, ("resourceclaim-controller",), tmp_path / "kcm"):
        chart_schedulers.start("--scheduler-name", SCHEDULER)
        kube.create(api_pod("worker", ns, scheduler=SCHEDULER, nodeSelector=sel,
                            resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]))
        wait_for("bound", lambda: node_of(kube.pods(ns)["worker"]) == "dra-tmpl-gpu", timeout=60)
    (status,) = kube.pods(ns)["worker"]["status"]["resourceClaimStatuses"]
    claim = _claim(kube, ns, status["resourceClaimName"])
    assert claim["metadata"]["ownerReferences"][0]["name"] == "worker"  # the controller's, from the template
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("dra-tmpl-gpu", "g0")
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["worker"]


def _deny_binds_to(kube: Kube, node: str, ns: str) -> str:
    """A ValidatingAdmissionPolicy refusing every Binding to `node`; returns when the apiserver applies it."""
    name = f"deny-binds-{node}"
    kube.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
                 "metadata": {"name": name},
                 "spec": {"failurePolicy": "Fail",
                          "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                  "operations": ["CREATE"], "resources": ["pods/binding"]}]},
                          "validations": [{"expression": f"object.target.name != '{node}'",
                                           "message": f"e2e: no binds to {node}"}]}})
    kube.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
                 "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    kube.create(api_pod("probe", ns, scheduler="nobody"))

    def refused() -> bool:  # a dry run: admission judges it, nothing is bound
        status, _ = kube.request("POST", f"/api/v1/namespaces/{ns}/pods/probe/binding",
                                 {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "probe"},
                                  "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
                                 query=[("dryRun", "All")])
        return status in (400, 403, 422)
    wait_for("the policy in force", refused, timeout=30, every=0.5)
    kube.ok("DELETE", f"/api/v1/namespaces/{ns}/pods/probe", {"apiVersion": "v1", "kind": "DeleteOptions",
                                                              "gracePeriodSeconds": 0})
    return name


def test_a_refused_bind_leaves_the_claim_as_it_was(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    ns, sel = "sched-dra-deny", {"e2e": "dra-deny"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-deny-gpu", labels=sel)
    kube.create(created(device_class("e2e-deny-gpu")))
    kube.create(created(resource_slice("dra-deny-gpu", [gpu("g0")])))
    kube.create(created(resource_claim("c", {"name": "gpu", "exactly": {"deviceClassName": "e2e-deny-gpu"}}, ns=ns)))
    policy = _deny_binds_to(kube, "dra-deny-gpu", ns)
    scheduler = chart_schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("p", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("c")))
    wait_for("the bind refused", lambda: any("binding to dra-deny-gpu failed" in (e.get("message") or "")
                                             for e in kube.events(ns)), timeout=60)
    scheduler.stop()  # no retry in flight while the claim is read
    claim = _claim(kube, ns, "c")
    assert not (claim.get("status") or {}).get("allocation")
    assert not (claim.get("status") or {}).get("reservedFor")
    assert not claim["metadata"].get("finalizers")
    assert not node_of(kube.pods(ns)["p"])
    kube.ok("DELETE", f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/{policy}")
    time.sleep(1.0)
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    wait_for("bound once binds are allowed", lambda: node_of(kube.pods(ns)["p"]) == "dra-deny-gpu", timeout=60)
    assert _claim(kube, ns, "c")["status"]["allocation"]


def test_a_claim_shared_by_three_pods_is_allocated_once_for_all(control_plane: ControlPlane, kube: Kube,
                                                               chart_schedulers) -> None:
    ns, sel = "sched-dra-shared", {"e2e": "dra-shared"}
    control_plane.ensure_namespace(ns)
    for name in ("dra-shared-a", "dra-shared-b"):
        control_plane.create_ready_node(name, cpu="2", labels=sel)
        kube.create(created(resource_slice(name, [gpu("g0")])))
    kube.create(created(device_class("e2e-shared-gpu")))
    kube.create(created(resource_claim("shared", {"name": "gpu", "exactly": {"deviceClassName": "e2e-shared-gpu"}},
                                       ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(3):
        kube.create(api_pod(f"p{i}", ns, scheduler=SCHEDULER, cpu="500m", nodeSelector=sel,
                            resourceClaims=claims("shared")))
    wait_for("all bound", lambda: all(node_of(p) for p in kube.pods(ns).values()) and len(kube.pods(ns)) == 3,
             timeout=60)
    nodes = {node_of(p) for p in kube.pods(ns).values()}
    assert len(nodes) == 1  # every pod where the one allocated device is
    claim = _claim(kube, ns, "shared")
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["pool"] == nodes.pop()
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["p0", "p1", "p2"]


def test_an_extended_resource_is_served_by_a_device_class(control_plane: ControlPlane, kube: Kube,
                                                          chart_schedulers) -> None:
    """DRAExtendedResource (beta, on in 1.36): no node advertises example.com/gpu; a DeviceClass serves it. The
    scheduler makes the pod's claim as upstream does and names it in pod.status.extendedResourceClaimStatus."""
    ns, sel = "sched-dra-ext", {"e2e": "dra-ext"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-ext-cpu", labels=sel)
    control_plane.create_ready_node("dra-ext-gpu", labels=sel)
    cls = created(device_class("e2e-ext-gpu"))
    cls["spec"]["extendedResourceName"] = "example.com/e2e-gpu"
    kube.create(cls)
    kube.create(created(resource_slice("dra-ext-gpu", [gpu("g0")])))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    gpus = {"example.com/e2e-gpu": "1"}
    kube.create(api_pod("ext", ns, scheduler=SCHEDULER, nodeSelector=sel, requests=gpus, limits=gpus))
    wait_for("bound", lambda: node_of(kube.pods(ns)["ext"]) == "dra-ext-gpu", timeout=60)
    status = kube.pods(ns)["ext"]["status"]["extendedResourceClaimStatus"]
    claim = _claim(kube, ns, status["resourceClaimName"])
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    assert claim["metadata"]["ownerReferences"][0]["name"] == "ext"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert (result["pool"], result["device"]) == ("dra-ext-gpu", "g0")
    assert status["requestMappings"] == [{"containerName": "main", "resourceName": "example.com/e2e-gpu",
                                          "requestName": result["request"]}]


def test_a_partitioned_gpu_is_never_promised_twice(control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    """Partitionable devices (beta, on in 1.36 and 1.37): one 40Gi GPU publishes its counters in one slice and a
    whole device and two 20Gi halves consuming them in another. Three pods, each claiming one device: two are
    bound, with the halves (as kube-scheduler v1.37.2 decides), the third waits; the allocated devices never
    consume more than the counters hold."""
    ns, sel = "sched-dra-parts", {"e2e": "dra-parts"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-parts-gpu", labels=sel)
    kube.create(created(device_class("e2e-parts-gpu")))
    kube.create(created(counter_slice("dra-parts-gpu", {"gpu-0": {"memory": "40Gi"}}, node="dra-parts-gpu")))
    kube.create(created(resource_slice("dra-parts-gpu", [partition("whole", "gpu-0", "40Gi"),
                                                         partition("half-0", "gpu-0", "20Gi"),
                                                         partition("half-1", "gpu-0", "20Gi")], slices=2)))
    for i in range(3):
        kube.create(created(resource_claim(f"c{i}", {"name": "gpu", "exactly": {"deviceClassName": "e2e-parts-gpu"}},
                                           ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(3):
        kube.create(api_pod(f"p{i}", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims(f"c{i}")))
    wait_for("two bound", lambda: sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 2, timeout=60)
    wait_for("the third told why", lambda: any("cannot allocate all claims" in (e.get("message") or "")
                                               or "Insufficient devices" in (e.get("message") or "")
                                               for e in kube.events(ns)), timeout=60)
    time.sleep(2.0)  # another cycle or two: still no third device
    assert sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 2
    assert _allocated(kube, ns, 3) == ["half-0", "half-1"]


def test_device_taint_rules_where_the_apiserver_serves_them(control_plane: ControlPlane, kube: Kube,
                                                            chart_schedulers) -> None:
    """DeviceTaintRule (GA in 1.37, resource.k8s.io/v1; off by default in 1.36, where this test is skipped): a rule
    without `deviceSelector` taints no device (1.37.1+), a rule naming a device keeps it from being allocated but to
    a request tolerating its taint, whose allocation result carries a copy of the request's tolerations."""
    status, body = kube.request("GET", "/apis/resource.k8s.io/v1")
    if status != 200 or "devicetaintrules" not in str(body):
        pytest.skip("the apiserver does not serve resource.k8s.io/v1 DeviceTaintRules")
    ns, sel = "sched-dra-taint", {"e2e": "dra-taint"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-taint-gpu", labels=sel)
    kube.create(created(device_class("e2e-taint-gpu")))
    kube.create(created(resource_slice("dra-taint-gpu", [gpu("g0"), gpu("g1"), gpu("g2"), gpu("g3")])))
    for name, spec in (("no-selector", {}), ("drain-g3", {"deviceSelector": {"device": "g3"}})):
        kube.create({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
                     "spec": {**spec, "taint": {"key": "maintenance", "effect": "NoSchedule"}}})
    for i in range(4):
        kube.create(created(resource_claim(f"c{i}", {"name": "gpu", "exactly": {"deviceClassName": "e2e-taint-gpu"}},
                                           ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(4):
        kube.create(api_pod(f"p{i}", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims(f"c{i}")))
    wait_for("three bound", lambda: sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 3, timeout=60)
    time.sleep(2.0)
    assert sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 3
    assert _allocated(kube, ns, 4) == ["g0", "g1", "g2"]
    tolerate = {"key": "maintenance", "operator": "Exists", "effect": "NoSchedule"}
    kube.create(created(resource_claim("c4", {"name": "gpu", "exactly": {"deviceClassName": "e2e-taint-gpu",
                                                                         "tolerations": [tolerate]}}, ns=ns)))
    kube.create(api_pod("p4", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("c4")))
    wait_for("the tolerating pod bound", lambda: node_of(kube.pods(ns)["p4"]) == "dra-taint-gpu", timeout=60)
    (result,) = _claim(kube, ns, "c4")["status"]["allocation"]["devices"]["results"]
    assert (result["device"], result.get("tolerations")) == ("g3", [tolerate])


def test_a_shared_gpu_serves_claims_within_its_capacity(control_plane: ControlPlane, kube: Kube,
                                                        chart_schedulers) -> None:
    """Consumable capacity (beta, on in 1.36 and 1.37): a GPU with allowMultipleAllocations and 40Gi of memory;
    five pods each claiming 10Gi of it. Four are bound to it, each claim a share (its own shareID, consumedCapacity
    10Gi, as upstream's allocator writes them, accepted by the apiserver); the fifth waits."""
    ns, sel = "sched-dra-shares", {"e2e": "dra-shares"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-shares-gpu", labels=sel)
    kube.create(created(device_class("e2e-shares-gpu")))
    shared = {"name": "g0", "allowMultipleAllocations": True,
              "capacity": {"memory": {"value": "40Gi",
                                      "requestPolicy": {"default": "10Gi",
                                                        "validRange": {"min": "5Gi", "step": "5Gi"}}}}}
    kube.create(created(resource_slice("dra-shares-gpu", [shared])))
    for i in range(5):
        kube.create(created(resource_claim(f"c{i}", {"name": "gpu", "exactly": {
            "deviceClassName": "e2e-shares-gpu", "capacity": {"requests": {"memory": "8Gi"}}}}, ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    for i in range(5):
        kube.create(api_pod(f"p{i}", ns, scheduler=SCHEDULER, cpu="100m", nodeSelector=sel,
                            resourceClaims=claims(f"c{i}")))
    wait_for("four bound", lambda: sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 4, timeout=60)
    time.sleep(2.0)
    assert sum(bool(node_of(p)) for p in kube.pods(ns).values()) == 4
    results = [r for i in range(5) for r in ((_claim(kube, ns, f"c{i}").get("status") or {}).get("allocation") or {})
               .get("devices", {}).get("results", [])]
    assert len(results) == 4 and {r["device"] for r in results} == {"g0"}
    assert len({r["shareID"] for r in results}) == 4
    assert all(exact(r["consumedCapacity"]["memory"]) == exact("10Gi") for r in results)  # 8Gi up to 5Gi steps


def test_prebind_waits_for_the_device_binding_conditions(control_plane: ControlPlane, kube: Kube,
                                                         chart_schedulers) -> None:
    """Device binding conditions (beta, on in 1.36 and 1.37): the device must be attached before the pod may use
    it. The claim is allocated with the device's conditions in its result and the pod waits, unbound, until the
    driver (this test) sets the condition true in the claim's status.devices; then it is bound."""
    ns, sel = "sched-dra-bind", {"e2e": "dra-bind"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-bind-gpu", labels=sel)
    kube.create(created(device_class("e2e-bind-gpu")))
    fabric = {**gpu("g0"), "bindingConditions": ["example.com/attached"],
              "bindingFailureConditions": ["example.com/failed"]}
    kube.create(created(resource_slice("dra-bind-gpu", [fabric])))
    kube.create(created(resource_claim("c", {"name": "gpu", "exactly": {"deviceClassName": "e2e-bind-gpu"}}, ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("p", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("c")))
    wait_for("allocated", lambda: bool((_claim(kube, ns, "c").get("status") or {}).get("allocation")), timeout=60)
    (result,) = _claim(kube, ns, "c")["status"]["allocation"]["devices"]["results"]
    assert result["bindingConditions"] == ["example.com/attached"]
    time.sleep(2.0)
    assert not node_of(kube.pods(ns)["p"])  # waiting for the device
    claim = _claim(kube, ns, "c")
    claim["status"]["devices"] = [{"driver": result["driver"], "pool": result["pool"], "device": result["device"],
                                   "conditions": [{"type": "example.com/attached", "status": "True",
                                                   "reason": "Attached", "message": "by the e2e test",
                                                   "lastTransitionTime": "2026-11-27T00:00:00Z"}]}]
    kube.ok("PUT", f"{CLAIMS.format(ns=ns)}/c/status", claim)
    wait_for("bound once attached", lambda: node_of(kube.pods(ns)["p"]) == "dra-bind-gpu", timeout=30)
    assert any(e.get("reason") == "BindingConditionsPending" for e in kube.events(ns))


def _allocated(kube: Kube, ns: str, claims: int) -> list[str]:
    """The devices allocated to claims c0 … c{claims-1} of `ns`, sorted."""
    return sorted(r["device"] for i in range(claims)
                  for r in ((_claim(kube, ns, f"c{i}").get("status") or {}).get("allocation") or {})
                  .get("devices", {}).get("results", []))


def test_waiting_pods_are_told_a_missing_device_class_and_devices_their_selectors_exclude(
        control_plane: ControlPlane, kube: Kube, chart_schedulers) -> None:
    """The apiserver takes a claim naming a DeviceClass that does not exist; its pod is told so in upstream's PreFilter
    words, with no node counts, and is placed once the class is created (a DeviceClass event wakes it). A pod whose
    request's selector excludes the node's only GPU is told that, not only "cannot allocate all claims". Each event is
    one line without a full stop before a separator."""
    ns, sel = "sched-dra-reasons", {"e2e": "dra-reasons"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("dra-reasons-gpu", labels=sel)
    kube.create(created(device_class("e2e-reasons-gpu")))
    kube.create(created(resource_slice("dra-reasons-gpu", [gpu("g0", model="a100")], pool="dra-reasons-gpu")))
    kube.create(created(resource_claim("later", {"name": "gpu", "exactly": {"deviceClassName": "e2e-reasons-late"}},
                                       ns=ns)))
    h100 = {"name": "gpu", "exactly": {"deviceClassName": "e2e-reasons-gpu", "selectors": [
        {"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}}]}}
    kube.create(created(resource_claim("h100", h100, ns=ns)))
    chart_schedulers.start("--scheduler-name", SCHEDULER)
    kube.create(api_pod("late", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("later")))
    kube.create(api_pod("picky", ns, scheduler=SCHEDULER, nodeSelector=sel, resourceClaims=claims("h100")))

    def message(pod: str) -> str:
        return next((e.get("message") or "" for e in kube.events(ns)
                     if e["involvedObject"]["name"] == pod and e["reason"] == "FailedScheduling"), "")

    wait_for("the missing class told", lambda: "request gpu: device class e2e-reasons-late does not exist"
             in message("late"), timeout=60)
    assert message("late").startswith("0/") and " 1 request gpu" not in message("late")
    wait_for("the selector told", lambda: "its selectors exclude every device of device class e2e-reasons-gpu on the "
             "node" in message("picky"), timeout=60)
    assert ".;" not in message("late") + message("picky")
    kube.create(created(device_class("e2e-reasons-late")))
    wait_for("placed once the class exists", lambda: node_of(kube.pods(ns)["late"]) == "dra-reasons-gpu", timeout=60)


def test_a_gang_within_a_device_attribute_gets_its_gpus_in_one_clique(control_plane: ControlPlane, kube: Kube,
                                                                      chart_schedulers, chart_identity) -> None:
    """A policy's `gang … within device attribute "gpu.example.com/clique"` (issue 49, point 2), from a policy
    ConfigMap: two members of two GPUs fit split across cliques A and B (one node each with two free), or whole
    in B's two nodes; the loop binds them to B's nodes and allocates their claims B's GPUs only."""
    ns, sel = "sched-dra-clique", {"e2e": "dra-clique"}
    control_plane.ensure_namespace(ns)
    cliques = {"clq-a1": ("A", "A"), "clq-a2": ("A",), "clq-b1": ("B", "B"), "clq-b2": ("B", "B")}
    for name, values in cliques.items():
        control_plane.create_ready_node(name, labels=sel)
        kube.create(created(resource_slice(name, [gpu(f"g{i}", clique=v) for i, v in enumerate(values)])))
    kube.create(created(device_class("e2e-clique-gpu")))
    text = ('policy cliques {\n  applies to pods where label "job" exists\n'
            '  gang by label "job" min 2 within device attribute "gpu.example.com/clique"\n}\n')
    kube.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "policies", "namespace": ns},
                 "data": {"cliques.policy": text}})
    two = {"name": "gpu", "exactly": {"deviceClassName": "e2e-clique-gpu", "count": 2}}
    identity = chart_identity("clique-chart", ns, {"profiles": [{"name": SCHEDULER, "existingConfigMap": "policies"}]})
    chart_schedulers.start("--scheduler-name", SCHEDULER, "--policy-configmap", f"{ns}/policies", kubeconfig=identity)
    for k in range(2):
        kube.create(created(resource_claim(f"train-{k}", two, ns=ns)))
        kube.create(api_pod(f"train-{k}", ns, scheduler=SCHEDULER, nodeSelector=sel, labels={"job": "train"},
                            resourceClaims=claims(f"train-{k}")))
    wait_for("the gang bound in clique B", lambda: {node_of(kube.pods(ns)[f"train-{k}"]) for k in range(2)}
             == {"clq-b1", "clq-b2"}, timeout=30)
    for k in range(2):
        results = _claim(kube, ns, f"train-{k}")["status"]["allocation"]["devices"]["results"]
        node = node_of(kube.pods(ns)[f"train-{k}"])
        assert sorted((r["pool"], r["device"]) for r in results) == [(node, "g0"), (node, "g1")]
