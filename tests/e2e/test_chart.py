"""The Helm chart (deploy/helm/policy-scheduler): `helm lint`, `helm template` with its values, and the rendered
chart applied to the real apiserver with the scheduler running under the chart's ServiceAccount and arguments.
helm is built from its Go module (tests/e2e/helm/build.sh)."""
from __future__ import annotations

import pytest
import yaml

from testkit.controlplane import ControlPlane
from testkit.deploytools import CHART, container_args, helm_template, kustomize, run_tool, served_elsewhere
from testkit.manifests import api_pod
from testkit.scheduling import Kube, apply, node_of, refusals, wait_for

POLICY = 'policy cheap {\n  applies to all pods\n  minimize node annotation "price" weight 10\n}\n'


def _kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("values", [[], ["--set", "preemption.enabled=false", "--set", "crd.install=true"],
                                    ["--set", "replicas=3", "--set", "profiles[0].name=web", "--set-string", "profiles[0].policies.a\\.policy=x"],
                                    ["--set", "tls.certManager.enabled=true", "--set", "tls.certManager.issuerRef.name=ca",
                                     "--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=true"],
                                    ["--set", "optIn.enabled=true"]])
def test_helm_lint_is_clean(values: list[str]) -> None:
    out = run_tool("helm", "lint", "--strict", str(CHART), *values)
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout + out.stderr
    assert out.stderr == "", out.stderr  # no warning (a symlink in the chart made one per file, per command)
    out = run_tool("helm", "template", "ps", str(CHART), *values)
    assert out.stderr == "", out.stderr


def _rules(docs: list[dict]) -> dict[str, list[dict]]:
    """Each ClusterRole's rules, by its name (policy-scheduler, -preemption and -metrics-reader in both installs)."""
    return {d["metadata"]["name"]: d["rules"] for d in _kind(docs, "ClusterRole")}


def _deletes_pods(docs: list[dict]) -> bool:
    return any("pods" in r.get("resources", ()) and "delete" in r["verbs"] for rules in _rules(docs).values() for r in rules)


def _run_settings(args: list[str]) -> dict:
    """What `policy-scheduler run` makes of a Deployment's arguments (click's own parser: the last flag wins)."""
    from engine.cli import main
    from engine.loop.command import parse_profiles

    assert args[0] == "run"
    params = main.commands["run"].make_context("run", args[1:]).params
    profiles = parse_profiles(params.pop("scheduler_name"), params.pop("policy_configmap"), params.pop("profiles"))
    return {**params, "profiles": profiles}


def test_the_chart_defaults_are_the_kustomize_defaults() -> None:
    docs, base = helm_template(), kustomize()
    kinds = {d["kind"] for d in docs}
    assert "CustomResourceDefinition" not in kinds
    assert not {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"} & kinds  # opt-in is off
    # no policy: the one ConfigMap is the empty copy the scheduler keeps its policies in, as kustomize's
    assert [(d["metadata"]["name"], d.get("data")) for d in _kind(docs, "ConfigMap")] == [
        (d["metadata"]["name"], d.get("data")) for d in _kind(base, "ConfigMap")] == [
        ("policy-scheduler-policies-last-valid", None)]
    assert _deletes_pods(docs)
    args = container_args(docs)
    # preempting; pod specs only until the README's ConfigMap exists
    assert "--preemption" in args and "--profile=policy-scheduler=policy-scheduler/policy-scheduler-policies,optional" in args
    assert "--lease-namespace=policy-scheduler" in args and "--lease-name=policy-scheduler" in args
    # the same run, whichever way it is written (tests/test_deploy_defaults.py: the same as the CLI's defaults)
    assert _run_settings(args) == _run_settings(container_args(base))
    # one list of rules for both installs (files/clusterrole.yaml is deploy/clusterrole.yaml)
    assert _rules(docs) == _rules(base)
    assert _kind(docs, "PodDisruptionBudget") and _kind(docs, "Deployment")[0]["spec"]["replicas"] == 2
    spec = _kind(docs, "Deployment")[0]["spec"]["template"]["spec"]
    assert spec["affinity"]["podAntiAffinity"] and spec["topologySpreadConstraints"]


def test_the_values_reach_the_objects(tmp_path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "profiles": [{"name": "web", "policies": {"cheap.policy": POLICY}}, {"name": "batch", "existingConfigMap": "mine"},
                     {"name": "plain"}],
        "preemption": {"enabled": False}, "crd": {"install": True}, "replicas": 3,
        "image": {"repository": "registry.example/ps", "tag": "1.2.3"},
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}}))
    docs = helm_template("ps", "ops", "-f", str(values))
    configmaps = {d["metadata"]["name"]: d for d in _kind(docs, "ConfigMap")}
    assert configmaps["ps-web-policies"]["metadata"]["namespace"] == "ops"
    assert configmaps["ps-web-policies"]["data"] == {"cheap.policy": POLICY}
    kept = ["ps-web-policies-last-valid", "mine-last-valid", "plain-policies-last-valid"]
    assert sorted(configmaps) == sorted(["ps-web-policies", *kept])  # and one empty copy each to keep their sets in
    args = container_args(docs)
    assert [a for a in args if a.startswith("--profile")] == [
        "--profile=web=ops/ps-web-policies", "--profile=batch=ops/mine", "--profile=plain=ops/plain-policies,optional"]
    assert args.count("--no-preemption") == 1 and "--preemption" not in args
    assert "--lease-namespace=ops" in args and "--lease-name=ps" in args
    role = next(d for d in _kind(docs, "Role") if d["metadata"]["name"] == "ps")
    assert {"resources": ["configmaps"], "resourceNames": ["ps-web-policies", "mine", "plain-policies", *kept],
            "verbs": ["list", "watch"], "apiGroups": [""]} in role["rules"]
    assert {"resources": ["configmaps"], "resourceNames": kept, "verbs": ["patch"], "apiGroups": [""]} in role["rules"]
    assert list(_rules(docs)) == ["ps", "ps-metrics-reader"] and not _deletes_pods(docs)
    assert [d["metadata"]["name"] for d in _kind(docs, "CustomResourceDefinition")] == ["podgroups.scheduling.x-k8s.io"]
    deployment = _kind(docs, "Deployment")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert deployment["spec"]["replicas"] == 3 and container["image"] == "registry.example/ps:1.2.3"
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "4Gi"}}


def _pod_spec(docs: list[dict]) -> dict:
    return _kind(docs, "Deployment")[0]["spec"]["template"]["spec"]


def test_the_secure_port_by_default() -> None:
    """HTTPS on 10259 with the certificate made in memory: nothing mounted, no certificate in the chart, probes over
    HTTPS, the auth-delegator binding, a metrics-reader role bound to no one, the ServiceAccount's token explicit."""
    docs = helm_template("ps", "ops")
    spec = _pod_spec(docs)
    container = spec["containers"][0]
    assert "--secure-port=10259" in container["args"] and not [a for a in container["args"] if a.startswith("--tls-")]
    assert container["ports"] == [{"name": "https", "containerPort": 10259}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    assert [v["name"] for v in spec["volumes"]] == ["tmp"]
    assert not {"Secret", "Certificate", "ServiceMonitor", "NetworkPolicy"} & {d["kind"] for d in docs}
    service = _kind(docs, "Service")[0]
    assert service["spec"]["ports"] == [{"name": "https", "port": 10259, "targetPort": "https"}]
    bindings = {d["metadata"]["name"]: d for d in _kind(docs, "ClusterRoleBinding")}
    assert bindings["ps-auth-delegator"]["roleRef"]["name"] == "system:auth-delegator"
    assert bindings["ps-auth-delegator"]["subjects"] == [{"kind": "ServiceAccount", "name": "ps", "namespace": "ops"}]
    assert _rules(docs)["ps-metrics-reader"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert not [b for b in bindings.values() if b["roleRef"]["name"] == "ps-metrics-reader"]
    assert spec["automountServiceAccountToken"] is True
    assert _kind(docs, "ServiceAccount")[0]["automountServiceAccountToken"] is True


def _mounted_secret(docs: list[dict]) -> str:
    """The Secret the scheduler serves from, checked mounted read-only as a directory and passed as its flags."""
    spec = _pod_spec(docs)
    container = spec["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    assert mount == {"name": "tls", "mountPath": "/etc/policy-scheduler/tls", "readOnly": True}  # no subPath
    assert {"--tls-cert-file=/etc/policy-scheduler/tls/tls.crt",
            "--tls-private-key-file=/etc/policy-scheduler/tls/tls.key"} <= set(container["args"])
    return next(v for v in spec["volumes"] if v["name"] == "tls")["secret"]["secretName"]


def test_the_certificate_from_a_secret_or_cert_manager() -> None:
    docs = helm_template("ps", "ops", "--set", "tls.existingSecret=mine", "--set", "serviceMonitor.enabled=true")
    assert _mounted_secret(docs) == "mine" and not _kind(docs, "Certificate")
    monitor = _kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"][0]
    assert monitor["scheme"] == "https" and monitor["port"] == "https"
    assert monitor["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert monitor["tlsConfig"] == {"ca": {"secret": {"name": "mine", "key": "ca.crt"}}, "serverName": "ps-metrics.ops.svc"}
    docs = helm_template("ps", "ops", "--set", "tls.certManager.enabled=true", "--set", "tls.certManager.issuerRef.name=ca",
                         "--set", "tls.certManager.issuerRef.kind=ClusterIssuer")
    certificate = _kind(docs, "Certificate")[0]["spec"]
    assert _mounted_secret(docs) == certificate["secretName"] == "ps-tls"
    assert certificate["dnsNames"] == ["ps-metrics", "ps-metrics.ops", "ps-metrics.ops.svc", "ps-metrics.ops.svc.cluster.local"]
    assert certificate["issuerRef"] == {"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "ca"}
    # the in-memory certificate: nothing to verify it against
    docs = helm_template("ps", "ops", "--set", "serviceMonitor.enabled=true")
    assert _kind(docs, "ServiceMonitor")[0]["spec"]["endpoints"][0]["tlsConfig"] == {"insecureSkipVerify": True}


def test_the_network_policy_and_the_digest() -> None:
    digest = "sha256:" + "ab" * 32
    docs = helm_template("ps", "ops", "--set", "networkPolicy.enabled=true", "--set", "metrics.port=9443",
                         "--set", "networkPolicy.apiServer.cidrs={203.0.113.10/32}", "--set", f"image.digest={digest}")
    policy = _kind(docs, "NetworkPolicy")[0]["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
                                  "ports": [{"port": 9443, "protocol": "TCP"}]}]
    api, dns = policy["egress"]
    assert api == {"to": [{"ipBlock": {"cidr": "203.0.113.10/32"}}],
                   "ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}
    assert {p["port"] for p in dns["ports"]} == {53}
    assert _pod_spec(docs)["containers"][0]["image"] == f"policy-scheduler@{digest}"


OPT_IN = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")


def _opt_in(docs: list[dict]) -> dict[str, dict]:
    """The opt-in policy and bindings by kind and what their name adds to the policy's (-namespaces, -pods)."""
    policy = _kind(docs, "MutatingAdmissionPolicy")[0]["metadata"]["name"]
    return {d["kind"] + d["metadata"]["name"].removeprefix(policy): d for d in docs if d["kind"] in OPT_IN}


def test_opt_in_is_the_kustomize_component() -> None:
    """With its defaults, in release and namespace policy-scheduler, the chart's opt-in is components/opt-in's."""
    chart = _opt_in(helm_template("policy-scheduler", "policy-scheduler", "--set", "optIn.enabled=true"))
    component = _opt_in([d for d in kustomize("opt-in") if d["kind"] in OPT_IN])
    assert sorted(chart) == sorted(component) == ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding-namespaces",
                                                  "MutatingAdmissionPolicyBinding-pods"]
    assert {k: d["spec"] for k, d in chart.items()} == {k: d["spec"] for k, d in component.items()}
    assert [d["metadata"]["name"] for d in kustomize("opt-in") if d["kind"] in OPT_IN] == [
        "policy-scheduler-opt-in", "policy-scheduler-opt-in-namespaces", "policy-scheduler-opt-in-pods"]


def test_the_opt_in_values_reach_the_policy(tmp_path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"profiles": [{"name": "web"}, {"name": "batch"}],
                                      "optIn": {"enabled": True, "namespaceLabel": "example.com/team-scheduler",
                                                "podLabel": "example.com/scheduler", "profile": "batch",
                                                "excludeNamespaces": ["kube-system", "ingress"]}}))
    found = _opt_in(helm_template("ps", "ops", "-f", str(values)))
    policy, namespaces, pods = (found[k]["spec"] for k in ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding-"
                                                           "namespaces", "MutatingAdmissionPolicyBinding-pods"))
    assert namespaces["policyName"] == pods["policyName"] == "ps-opt-in"
    excluded = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "ingress", "ops"]}
    opted = ["true", "web", "batch"]
    assert namespaces["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        excluded, {"key": "example.com/team-scheduler", "operator": "In", "values": opted}]
    assert namespaces["matchResources"]["objectSelector"]["matchExpressions"] == [
        {"key": "example.com/scheduler", "operator": "DoesNotExist"}]
    assert pods["matchResources"]["namespaceSelector"]["matchExpressions"] == [excluded]
    assert pods["matchResources"]["objectSelector"]["matchExpressions"] == [
        {"key": "example.com/scheduler", "operator": "In", "values": opted}]
    variables = {v["name"]: v["expression"] for v in policy["variables"]}
    assert 'object.metadata.labels["example.com/scheduler"]' in variables["optIn"]
    assert 'namespaceObject.metadata.labels["example.com/team-scheduler"]' in variables["optIn"]
    assert variables["profile"] == 'variables.optIn == "true" ? "batch" : variables.optIn'
    assert policy["failurePolicy"] == "Fail" and policy["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]


@pytest.mark.parametrize("values, message", [
    (["--set", "optIn.enabled=true", "--set", "optIn.profile=nobody"],
     'optIn.profile: "nobody" is none of the profiles (policy-scheduler)'),
    (["--set", "optIn.enabled=true", "--set", f"profiles[0].name={'a' * 64}"], "cannot be named by a label value"),
    (["--set", "optIn.podLabel=not a label"], "at '/optIn/podLabel'"),
    (["--set", "optIn.excludeNamespaces={Kube-System}"], "at '/optIn/excludeNamespaces/0'"),
    (["--set", "tls.existingSecret=mine", "--set", "tls.certManager.enabled=true", "--set", "tls.certManager.issuerRef.name=ca"],
     "tls: set either existingSecret or certManager.enabled, not both"),
    (["--set", "tls.certManager.enabled=true"], "tls.certManager.issuerRef.name: cert-manager needs the Issuer"),
    (["--set", "image.digest=latest"], "at '/image/digest'"),
    (["--set", "metrics.insecurePort=8080"], "metrics"),
    (["--set", "preemption.enabled=yes"], "at '/preemption/enabled': got string, want boolean"),
    (["--set", "profiles[0].name=Web"], "at '/profiles/0/name': 'Web' does not match pattern"),
    (["--set", "replicas=0"], "at '/replicas'"),
    (["--set", "profiles=null"], "profiles"),
    (["--set-json", 'profiles=[{"name": "web", "existingConfigMap": "mine", "policies": {"a.policy": "x"}}]'],
     'profile "web" sets both existingConfigMap and policies; the scheduler would read ConfigMap "mine" only'),
])
def test_bad_values_are_refused(values: list[str], message: str) -> None:
    out = run_tool("helm", "template", "ps", str(CHART), *values, check=False)
    assert out.returncode != 0 and message in out.stderr, out.stderr


def test_the_rendered_chart_runs_the_scheduler_under_its_service_account(control_plane: ControlPlane, kube: Kube,
                                                                         schedulers, tmp_path) -> None:
    release = namespace = "ps-helm"
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"profiles": [{"name": "helm-web", "policies": {"cheap.policy": POLICY}}]}))
    docs = helm_template(release, namespace, "-f", str(values))
    control_plane.ensure_namespace(namespace)  # helm install --create-namespace
    for doc in docs:  # the Deployment too: the apiserver validates it (no kubelet runs it)
        status, body = apply(kube, doc)
        assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"
    token_config = control_plane.service_account_kubeconfig(namespace, release)
    args = served_elsewhere(container_args(docs)[1:])
    s = schedulers.start(*args, kubeconfig=token_config, name="helm-scheduler")
    wait_for("leadership with the chart's Role", lambda: "became leader" in s.log())
    ns, sel = "sched-helm", {"e2e": "helm"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("helm-1", labels=sel, cpu="2")
    kube.create(api_pod("web-1", ns, scheduler="helm-web", nodeSelector=sel))
    wait_for("bound under the chart's ServiceAccount", lambda: node_of(kube.pods(ns)["web-1"]) == "helm-1")
    log = s.log()
    assert "policies loaded configmap=ps-helm/ps-helm-helm-web-policies" in log and "scheduling profiles=helm-web" in log
    assert not refusals(log), log[-3000:]
    assert s.get("/leaderz")[0] == 200 and s.metric("policy_scheduler_policies_valid", profile="helm-web") == 1


def _readme_configmap(policy: str, tmp_path) -> dict:
    """`policy-scheduler configmap DIR` as the README runs it (its defaults: no --name, no --namespace)."""
    import subprocess
    import sys

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "cheap.policy").write_text(policy)
    made = subprocess.run([sys.executable, "-m", "engine", "configmap", str(tmp_path / "mine")], capture_output=True,
                          text=True)
    assert made.returncode == 0, made.stderr
    return yaml.safe_load(made.stdout)


def test_the_readme_configmap_is_read_by_a_default_helm_install(control_plane: ControlPlane, kube: Kube, schedulers,
                                                                tmp_path) -> None:
    """One policy workflow (issue 47, point 8): the chart with its default values, installed as the README says
    (`-n policy-scheduler`), reads what `policy-scheduler configmap DIR | kubectl apply -f -` writes, without a
    restart, under its own ServiceAccount; a release in another namespace does not, and `check --kubeconfig` says so."""
    import subprocess
    import sys

    release, namespace = "readme-helm", "policy-scheduler"
    docs = helm_template(release, namespace)
    control_plane.ensure_namespace(namespace)
    for doc in docs:
        if doc["kind"] not in ("Deployment", "Service"):
            status, body = apply(kube, doc)
            assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"
    token_config = control_plane.service_account_kubeconfig(namespace, release)
    args = served_elsewhere(container_args(docs)[1:])
    s = schedulers.start(*args, kubeconfig=token_config, name="readme-helm")
    wait_for("leadership", lambda: "became leader" in s.log())
    ns, sel = "sched-readme-helm", {"e2e": "readme-helm"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("readme-helm-cheap", labels={**sel, "cost": "low"})
    control_plane.create_ready_node("readme-helm-dear", labels={**sel, "cost": "high"})
    policy = f'policy cheap {{\n  applies to pods where namespace == "{ns}"\n  require node label "cost" == "low"\n}}\n'
    configmap = _readme_configmap(policy, tmp_path)
    assert (configmap["metadata"]["namespace"], configmap["metadata"]["name"]) == (namespace, "policy-scheduler-policies")
    elsewhere = next(d for d in helm_template("elsewhere", "ps-elsewhere") if d["kind"] == "Deployment")
    control_plane.ensure_namespace("ps-elsewhere")
    try:
        assert apply(kube, configmap)[0] in (200, 201)  # kubectl apply -f -
        wait_for("loaded by the default install", lambda: "policies loaded configmap=policy-scheduler/policy-scheduler-"
                 "policies" in s.log())
        for i in range(3):
            kube.create(api_pod(f"cheap-{i}", ns, nodeSelector=sel))
        wait_for("placed by the policy", lambda: {node_of(p) for p in kube.pods(ns).values()} == {"readme-helm-cheap"})
        assert apply(kube, elsewhere)[0] in (200, 201)  # a release in another namespace (no controller runs it)
        checked = subprocess.run([sys.executable, "-m", "engine", "check", "--kubeconfig", str(control_plane.kubeconfig)],
                                 capture_output=True, text=True)
        reads = "Deployment ps-elsewhere/elsewhere reads ps-elsewhere/policy-scheduler-policies (profile policy-scheduler, " \
                "once it exists)"
        assert f"note: ConfigMap ps-elsewhere/policy-scheduler-policies does not exist: {reads}" in checked.stderr, \
            checked.stderr
        # the README's ConfigMap beside a release elsewhere: nothing deployed reads it (this process is no Deployment)
        warned = next(line for line in checked.stderr.splitlines() if "policy-scheduler/policy-scheduler-policies looks" in line)
        assert warned.startswith("warning: ConfigMap policy-scheduler/policy-scheduler-policies looks like a policy set "
                                 "(cheap.policy) but no policy-scheduler reads it") and reads in warned, warned
        assert not refusals(s.log()), s.log()[-3000:]
    finally:
        kube.request("DELETE", "/apis/apps/v1/namespaces/ps-elsewhere/deployments/elsewhere")
        kube.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/policy-scheduler-policies")
        kube.request("DELETE", f"/api/v1/namespaces/{namespace}/configmaps/policy-scheduler-policies-last-valid")
        apply(kube, next(d for d in docs if d["kind"] == "ConfigMap"))  # empty again: later tests start without policies
