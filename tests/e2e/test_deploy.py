"""deploy/ (kustomize) as a user installs it: safe defaults, opt-in components, and against the real apiserver: it
applies, and its RBAC is enough.

The RBAC tests run the scheduler with a token of exactly deploy/'s ServiceAccount and the Deployment's own
arguments (as `kustomize build` makes them): it lists, watches, binds, patches conditions, posts events and holds
its Lease with nothing more; it may delete pods (preemption, on by default), and with components/no-preemption it
may not and does not try.
"""
from __future__ import annotations

from testkit.controlplane import ControlPlane
from testkit.deploytools import container_args, served_elsewhere
from testkit.manifests import api_pod, priority_class
from testkit.scheduling import Kube, apply, condition, deploy_manifests, node_of, refusals, wait_for

NAMESPACE = "policy-scheduler"
COMPONENTS = ("example-policies", "no-preemption", "podgroup-crd", "elasticquota-crd")
PREEMPTION = "policy-scheduler-preemption"  # deploy/preemption.yaml's ClusterRole and ClusterRoleBinding
POLICIES = "policy-scheduler-policies"  # the policy ConfigMap both installs read, and `policy-scheduler configmap` writes
KEPT = "policy-scheduler-policies-last-valid"  # where the scheduler keeps the set in force


def _rules(docs: list[dict]) -> list[dict]:
    return [r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d.get("rules", [])]


def _grants_pod_delete(docs: list[dict]) -> bool:
    return any("pods" in r.get("resources", []) and "delete" in r.get("verbs", []) for r in _rules(docs))


def test_the_default_install_places_by_pod_specs_only_and_preempts() -> None:
    docs = deploy_manifests()
    kinds = {d["kind"] for d in docs}
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment",
            "Service", "PodDisruptionBudget"} <= kinds
    assert "CustomResourceDefinition" not in kinds  # no CRD
    # no policy: the one ConfigMap is the empty copy the scheduler keeps its policies in, once there are some
    assert [(d["metadata"]["name"], d.get("data")) for d in docs if d["kind"] == "ConfigMap"] == [(KEPT, None)]
    assert _grants_pod_delete(docs)  # preemption, as kube-scheduler's (run's default: no flag needed)
    args = container_args(docs)
    assert not any("preemption" in a for a in args)
    # the README's ConfigMap once it exists (pod specs only until then)
    assert [a for a in args if a.startswith("--policy-configmap")] == [f"--policy-configmap={NAMESPACE}/{POLICIES},optional"]
    assert "--lease-namespace=policy-scheduler" in args  # where the Role grants the Lease
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    term = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname" and term["labelSelector"]["matchLabels"].items() <= labels.items()
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items() and pdb["spec"]["maxUnavailable"] == 1
    assert deployment["spec"]["replicas"] == 2


def test_each_component_adds_what_it_says() -> None:
    base = deploy_manifests()
    policies = deploy_manifests("policies")
    assert container_args(policies)[-1] == "--policy-configmap=policy-scheduler/policy-scheduler-policies"
    assert {d["kind"] for d in policies} == {d["kind"] for d in base}  # the ConfigMap is the user's own
    examples = deploy_manifests("example-policies")
    configmap = next(d for d in examples if d["kind"] == "ConfigMap" and d["metadata"]["name"] == POLICIES)
    assert configmap["metadata"]["namespace"] == NAMESPACE
    assert "lowest-price.policy" in configmap["data"] and container_args(examples) == container_args(policies)
    off = deploy_manifests("no-preemption")
    assert not _grants_pod_delete(off) and container_args(off)[-1] == "--no-preemption"  # the last flag wins
    assert PREEMPTION not in {d["metadata"]["name"] for d in off}
    assert [d for d in off if d["kind"] == "ClusterRole"] == [d for d in base if d["kind"] == "ClusterRole"
                                                              and d["metadata"]["name"] != PREEMPTION]
    crd = [d for d in deploy_manifests("podgroup-crd") if d["kind"] == "CustomResourceDefinition"]
    assert [d["metadata"]["name"] for d in crd] == ["podgroups.scheduling.x-k8s.io"]
    opt_in = deploy_manifests("opt-in")  # the admission policy and its two bindings, nothing else changed
    assert [d for d in opt_in if d["kind"] not in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")] == base
    assert sorted(d["kind"] for d in opt_in if d not in base) == [
        "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingAdmissionPolicyBinding"]
    assert not {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} & {d["kind"] for d in base}


def _tls_mount(docs: list[dict]) -> tuple[dict, dict, list[str]]:
    spec = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    container = spec["containers"][0]
    return (next(m for m in container["volumeMounts"] if m["name"] == "tls"),
            next(v for v in spec["volumes"] if v["name"] == "tls"), container["args"])


def test_the_serving_components_add_what_they_say() -> None:
    """The base serves HTTPS with its certificate made in memory; tls-secret mounts Secret policy-scheduler-tls as a
    directory (renewals reach the pod) and passes it; cert-manager adds the Certificate that writes it; a
    ServiceMonitor listed before either checks the certificate against the Secret's CA, else skips verifying it."""
    base = deploy_manifests()
    assert "--secure-port=10259" in container_args(base) and not [a for a in container_args(base) if "tls" in a]
    bindings = [d for d in base if d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == "system:auth-delegator"]
    assert [b["subjects"] for b in bindings] == [[{"kind": "ServiceAccount", "name": NAMESPACE, "namespace": NAMESPACE}]]
    reader = next(d for d in base if d["metadata"]["name"] == "policy-scheduler-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    monitor = next(d for d in deploy_manifests("servicemonitor") if d["kind"] == "ServiceMonitor")["spec"]["endpoints"][0]
    assert monitor["scheme"] == "https" and monitor["tlsConfig"] == {"insecureSkipVerify": True}
    for components in (("tls-secret",), ("servicemonitor", "cert-manager")):
        docs = deploy_manifests(*components)
        mount, volume, args = _tls_mount(docs)
        assert mount == {"name": "tls", "mountPath": "/etc/policy-scheduler/tls", "readOnly": True}  # no subPath
        assert volume["secret"]["secretName"] == "policy-scheduler-tls"
        assert args[-2:] == ["--tls-cert-file=/etc/policy-scheduler/tls/tls.crt",
                             "--tls-private-key-file=/etc/policy-scheduler/tls/tls.key"]
    certificate = next(d for d in docs if d["kind"] == "Certificate")["spec"]
    assert certificate["secretName"] == "policy-scheduler-tls"
    assert "policy-scheduler-metrics.policy-scheduler.svc" in certificate["dnsNames"]
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")["spec"]["endpoints"][0]
    assert monitor["tlsConfig"] == {"ca": {"secret": {"name": "policy-scheduler-tls", "key": "ca.crt"}},
                                    "serverName": "policy-scheduler-metrics.policy-scheduler.svc"}


def test_check_reads_every_rendered_deployment() -> None:
    """`policy-scheduler check --kubeconfig` parses a deployed scheduler's arguments with `run`'s own parser, on the
    user's machine: a rendered install with every option (a mounted certificate's paths among them, which exist only
    in the pod) must parse there."""
    from engine.loop.policy_sources import readers
    from testkit.deploytools import renders

    for name, docs in renders().items():
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        found = readers(deployment)
        assert isinstance(found, list) and found, f"{name}: {found}"


def test_the_network_policies_are_valid_server_side(control_plane: ControlPlane, kube: Kube) -> None:
    """components/networkpolicy's and the chart's NetworkPolicy, created with dryRun=All: the apiserver validates
    them (selectors, CIDRs, ports). The other serving components make kinds whose CRDs it lacks (ServiceMonitor,
    Certificate): checked as rendered above."""
    from testkit.deploytools import helm_template

    control_plane.ensure_namespace(NAMESPACE)
    chart = helm_template(NAMESPACE, NAMESPACE, "--set", "networkPolicy.enabled=true")
    for docs in (deploy_manifests("networkpolicy"), chart):
        policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
        status, body = kube.request("POST", f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/networkpolicies", policy,
                                    query=[("dryRun", "All")])
        assert status == 201, body


def test_every_component_applies_server_side(kube: Kube) -> None:
    docs = deploy_manifests(*COMPONENTS)
    # objects inside the namespace can only be dry-run once it exists, as `kubectl apply` would have made it
    namespace = next(d for d in docs if d["kind"] == "Namespace")
    assert apply(kube, namespace)[0] in (200, 201)
    for doc in docs:
        status, body = apply(kube, doc, dry_run=True)
        assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"


def _deployment_args(docs: list[dict]) -> list[str]:
    args = container_args(docs)
    assert args[0] == "run"
    return served_elsewhere(args[1:])  # testkit serves the test's own port


def _install(kube: Kube, docs: list[dict]) -> None:
    for doc in docs:
        if doc["kind"] not in ("Deployment", "Service"):  # no kubelet would run them
            status, body = apply(kube, doc)
            assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"


def may_delete_pods(kube: Kube) -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": "delete", "resource": "pods", "namespace": "any"}}}
    status, body = kube.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review)
    assert status == 201, body
    return bool(body["status"].get("allowed"))


def test_the_default_install_service_account_is_enough(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    docs = deploy_manifests()
    _install(kube, docs)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    pod_of_template = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"], "name": "template-check",
                       "namespace": NAMESPACE}, "spec": template["spec"]}
    status, body = kube.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_of_template,
                                query=[("dryRun", "All")])
    assert status == 201, f"the Deployment's pod is not admitted: {status} {body}"  # priority class, SA, security
    token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
    assert may_delete_pods(Kube(token_config))  # preemption's victims
    ns, sel = "sched-rbac", {"e2e": "rbac"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("rbac-1", labels=sel)
    s = schedulers.start(*_deployment_args(docs), kubeconfig=token_config, name="rbac-scheduler")
    wait_for("leadership with the Role's lease rights", lambda: "became leader" in s.log())
    assert s.get("/leaderz")[0] == 200
    standby = schedulers.start(*_deployment_args(docs), kubeconfig=token_config, name="rbac-standby")  # /readyz
    assert "became leader" not in standby.log()  # ready while standing by: rollouts proceed
    assert standby.get("/readyz") == (200, b"ok: standby\n") and standby.get("/leaderz")[0] == 503
    kube.create(api_pod("fits", ns, nodeSelector=sel))
    kube.create(api_pod("huge", ns, cpu="64", nodeSelector=sel))
    wait_for("bound with the ServiceAccount's rights", lambda: node_of(kube.pods(ns)["fits"]) == "rbac-1")
    wait_for("condition patched", lambda: condition(kube.pods(ns)["huge"]))
    wait_for("events posted", lambda: {e["reason"] for e in kube.events(ns)} >= {"Scheduled", "FailedScheduling"})
    log = s.log()
    assert not refusals(log), log[-3000:]
    assert "scheduling profiles=policy-scheduler" in log and "policies loaded" not in log
    assert s.metric("policy_scheduler_leader") == 1 and standby.metric("policy_scheduler_leader") == 0


def test_with_the_policies_component_pods_wait_for_the_configmap_and_are_told(control_plane: ControlPlane, kube: Kube,
                                                                             schedulers) -> None:
    docs = deploy_manifests("policies")
    _install(kube, docs)
    token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
    ns, sel = "sched-policies", {"e2e": "policies"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("policies-1", labels=sel)
    s = schedulers.start(*_deployment_args(docs), kubeconfig=token_config, name="policies-scheduler", ready=False)
    kube.create(api_pod("waits", ns, nodeSelector=sel))
    told = wait_for("an event on the waiting pod", lambda: [e for e in kube.events(ns)
                                                            if "no valid policy set" in e["message"]])
    assert told[0]["type"] == "Warning" and "policy-scheduler/policy-scheduler-policies does not exist" in told[0]["message"]
    assert s.get("/readyz")[0] == 503 and node_of(kube.pods(ns)["waits"]) is None
    assert "not scheduling profile=policy-scheduler" in s.log() and "scheduling profiles=" not in s.log()
    assert s.metric("policy_scheduler_policies_loaded", profile="policy-scheduler") == 0
    configmap = next(d for d in deploy_manifests("example-policies")
                     if d["kind"] == "ConfigMap" and d["metadata"]["name"] == POLICIES)
    try:
        assert apply(kube, configmap)[0] in (200, 201)
        wait_for("bound once the policies load", lambda: node_of(kube.pods(ns)["waits"]) == "policies-1")
        assert "policies loaded configmap=policy-scheduler/policy-scheduler-policies" in s.log()
        wait_for("the set kept beside it, with the ServiceAccount's rights", lambda: _kept(kube) == configmap["data"])
        assert not refusals(s.log()), s.log()[-3000:]
    finally:
        _forget_policies(kube)


def _kept(kube: Kube) -> dict | None:
    return kube.ok("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{KEPT}").get("data")


def _forget_policies(kube: Kube) -> None:
    """The policy ConfigMap deleted and its kept copy emptied: later tests of the session start without policies."""
    kube.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{POLICIES}")
    kube.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{KEPT}")
    _install(kube, [d for d in deploy_manifests() if d["kind"] == "ConfigMap" and d["metadata"]["name"] == KEPT])


def test_the_readme_workflow_with_the_default_install(control_plane: ControlPlane, kube: Kube, schedulers) -> None:
    """One policy workflow: `policy-scheduler configmap DIR | kubectl apply -f -` (the README's) writes the ConfigMap a
    default install reads; it loads without a restart, and `check --kubeconfig` says it is read, checked clean."""
    import subprocess
    import sys

    import yaml

    docs = deploy_manifests()
    _install(kube, docs)
    token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
    ns, sel = "sched-readme", {"e2e": "readme"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("readme-big", cpu="8", labels=sel)
    control_plane.create_ready_node("readme-small", cpu="2", labels=sel)
    s = schedulers.start(*_deployment_args(docs), kubeconfig=token_config, name="readme-scheduler")
    wait_for("leadership", lambda: "became leader" in s.log())
    policy = 'policy big-nodes {\n  applies to pods where namespace == "sched-readme"\n  require node allocatable "cpu" >= 4\n}\n'
    try:
        (tmp := control_plane.workdir / "readme-policies").mkdir(exist_ok=True)
        (tmp / "big-nodes.policy").write_text(policy)
        made = subprocess.run([sys.executable, "-m", "engine", "configmap", str(tmp)], capture_output=True, text=True)
        assert made.returncode == 0, made.stderr
        assert apply(kube, yaml.safe_load(made.stdout))[0] in (200, 201)  # kubectl apply -f -
        wait_for("loaded by the default install", lambda: f"policies loaded configmap={NAMESPACE}/{POLICIES}" in s.log())
        kube.create(api_pod("placed", ns, nodeSelector=sel))
        wait_for("placed by the policy", lambda: node_of(kube.pods(ns)["placed"]) == "readme-big")
        checked = subprocess.run([sys.executable, "-m", "engine", "check", "--kubeconfig", str(control_plane.kubeconfig)],
                                 capture_output=True, text=True)
        assert f"ConfigMap {NAMESPACE}/{POLICIES} looks like a policy set (big-nodes.policy) but no policy-scheduler " \
               "reads it" in checked.stderr, checked.stderr  # no Deployment of it exists here: nothing is known to read it
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        assert apply(kube, deployment)[0] in (200, 201)  # the Deployment object (no controller runs it here)
        checked = subprocess.run([sys.executable, "-m", "engine", "check", "--kubeconfig", str(control_plane.kubeconfig)],
                                 capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr
        assert f"note: ConfigMap {NAMESPACE}/{POLICIES} checks clean: Deployment {NAMESPACE}/policy-scheduler reads " \
               f"{NAMESPACE}/{POLICIES} (profile policy-scheduler, once it exists)" in checked.stderr, checked.stderr
        assert f"ConfigMap {NAMESPACE}/{POLICIES} looks like a policy set" not in checked.stderr
        assert not refusals(s.log()), s.log()[-3000:]
    finally:
        kube.request("DELETE", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/policy-scheduler")
        _forget_policies(kube)


def test_with_no_preemption_the_scheduler_may_not_delete_pods_and_does_not_try(control_plane: ControlPlane, kube: Kube,
                                                                              schedulers) -> None:
    """A fresh install with components/no-preemption: no right to delete pods, and a pod that only fits by evicting
    a lower-priority one waits, told why, with nothing refused."""
    rbac = "/apis/rbac.authorization.k8s.io/v1"
    for kind in ("clusterrolebindings", "clusterroles"):  # what a fresh install of this overlay would not have
        kube.request("DELETE", f"{rbac}/{kind}/{PREEMPTION}")
    try:
        docs = deploy_manifests("no-preemption")
        _install(kube, docs)
        token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
        assert not may_delete_pods(Kube(token_config))
        ns, sel = "sched-no-preemption", {"e2e": "no-preemption"}
        control_plane.ensure_namespace(ns)
        control_plane.create_ready_node("no-preemption-1", cpu="1", labels=sel)
        for name, value in (("e2e-np-low", 0), ("e2e-np-high", 1000)):
            status, _ = kube.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value))
            assert status in (201, 409), status
        kube.create(api_pod("low", ns, cpu="1", nodeName="no-preemption-1", priorityClassName="e2e-np-low"))
        s = schedulers.start(*_deployment_args(docs), kubeconfig=token_config, name="no-preemption-scheduler")
        wait_for("leadership", lambda: "became leader" in s.log())
        kube.create(api_pod("high", ns, cpu="1", nodeSelector=sel, priorityClassName="e2e-np-high"))
        wait_for("the high-priority pod told it waits", lambda: condition(kube.pods(ns)["high"]))
        pods = kube.pods(ns)
        assert not node_of(pods["high"]) and not pods["low"]["metadata"].get("deletionTimestamp")
        assert not refusals(s.log()), s.log()[-3000:]
    finally:  # the later tests of the session expect the default install's rights
        _install(kube, [d for d in deploy_manifests() if d["metadata"]["name"] == PREEMPTION])


def test_a_lease_namespace_without_rights_is_an_error_with_the_fix(control_plane: ControlPlane, kube: Kube,
                                                                   schedulers) -> None:
    _install(kube, deploy_manifests())
    token_config = control_plane.service_account_kubeconfig(NAMESPACE, "policy-scheduler")
    args = [a for a in _deployment_args(deploy_manifests()) if not a.startswith("--lease-namespace")]
    s = schedulers.start(*args, "--lease-namespace=kube-system", kubeconfig=token_config, name="wrong-lease")
    line = wait_for("the refusal at error level", lambda: next((x for x in s.log().splitlines()
                                                                if "level=ERROR" in x and "lease=kube-system/" in x), None))
    assert "status=403" in line and "fix: grant this ServiceAccount get, update and create on leases" in line, line
    assert s.get("/leaderz")[0] == 503
