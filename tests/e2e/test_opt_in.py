"""Opting namespaces and workloads in (issue 51, point 2): the MutatingAdmissionPolicy that the chart (`optIn`) and
kustomize (components/opt-in) install, applied to the real apiserver, which then mutates the pods created: a pod of
an opted-in namespace that names no scheduler is sent to ours, one naming another scheduler is left alone, a pod
labelled itself is sent to ours in any namespace but the excluded ones, and the scheduler binds what it was sent."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from testkit.controlplane import ControlPlane
from testkit.deploytools import helm_template_values, kustomize
from testkit.manifests import api_pod
from testkit.scheduling import Kube, apply, collection, node_of, wait_for

LABEL = "policy-scheduler.io/scheduler"  # both installs' default, on namespaces and on pods
OURS, SECOND = "policy-scheduler", "batch"  # the chart's two profiles here (kustomize: the first only)
RELEASE = "ps-opt-in"  # the chart's release and its namespace (never opted in)
ADMISSION = ("MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")


def _policies(source: str) -> list[dict]:
    """The policy and its bindings as `source` renders them with opt-in on (and nothing else of the install)."""
    if source == "kustomize":
        docs = kustomize("opt-in")
    else:
        docs = helm_template_values(RELEASE, RELEASE, {"profiles": [{"name": OURS}, {"name": SECOND}],
                                                       "optIn": {"enabled": True}})
    return [d for d in docs if d["kind"] in ADMISSION]


def _namespace(control_plane: ControlPlane, kube: Kube, name: str, labels: dict | None = None) -> str:
    """Namespace `name` with `labels` (and its `default` ServiceAccount: no controller makes it)."""
    status, body = apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    assert status in (200, 201), body
    control_plane.ensure_namespace(name)
    return name


def _scheduler_of(kube: Kube, pod: dict) -> str:
    """The schedulerName the apiserver gives `pod` on a server-side dry-run create: what admission made of it."""
    status, body = kube.request("POST", collection(pod), pod, query=[("dryRun", "All")])
    assert status == 201, body
    return body["spec"]["schedulerName"]


def _pod(name: str, ns: str, scheduler: str | None = None, labels: dict | None = None, **spec) -> dict:
    """A pod as a user writes it: no schedulerName unless `scheduler` names one."""
    pod = api_pod(name, ns, labels=labels, **spec)
    del pod["spec"]["schedulerName"]
    if scheduler:
        pod["spec"]["schedulerName"] = scheduler
    return pod


@pytest.fixture(params=["kustomize", "helm"])
def opted_in(request, control_plane: ControlPlane, kube: Kube) -> Iterator[str]:
    """The policy and bindings of one install applied, and in force (the apiserver picks bindings up a moment
    after they are made: a dry-run pod of an opted-in namespace shows when); removed after the test."""
    docs = _policies(request.param)
    assert sorted(d["kind"] for d in docs) == ["MutatingAdmissionPolicy", *["MutatingAdmissionPolicyBinding"] * 2]
    probe = _namespace(control_plane, kube, "opt-in-probe", {LABEL: "true"})
    try:
        for doc in docs:
            status, body = apply(kube, doc)
            assert status in (200, 201), f"{doc['kind']} {doc['metadata']['name']}: {status} {body}"
        wait_for("the opt-in policy in force", lambda: _scheduler_of(kube, _pod("probe", probe)) == OURS, timeout=60)
        yield request.param
    finally:
        for doc in docs:
            kube.request("DELETE", f"{collection(doc)}/{doc['metadata']['name']}")
        wait_for("the opt-in policy gone", lambda: _scheduler_of(kube, _pod("probe", probe)) == "default-scheduler",
                 timeout=60)


def test_opted_in_namespaces_and_pods_are_sent_to_this_scheduler(opted_in: str, control_plane: ControlPlane,
                                                                  kube: Kube) -> None:
    ns = _namespace(control_plane, kube, "opt-in-team", {LABEL: "true"})
    plain = _namespace(control_plane, kube, "opt-in-plain")
    assert _scheduler_of(kube, _pod("unset", ns)) == OURS  # defaulted to default-scheduler, then ours
    assert _scheduler_of(kube, _pod("default", ns, "default-scheduler")) == OURS
    assert _scheduler_of(kube, _pod("volcano", ns, "volcano")) == "volcano"  # names its own: left alone
    assert _scheduler_of(kube, _pod("bound", ns, nodeName="somewhere")) == "default-scheduler"  # placed already
    assert _scheduler_of(kube, _pod("unset", plain)) == "default-scheduler"  # namespace not opted in
    # a workload's pod template label: its pods carry it, in any namespace
    assert _scheduler_of(kube, _pod("labelled", plain, labels={LABEL: "true"})) == OURS
    assert _scheduler_of(kube, _pod("labelled-volcano", plain, "volcano", labels={LABEL: "true"})) == "volcano"
    # the pod's own label decides over its namespace's: any other value keeps it out
    assert _scheduler_of(kube, _pod("opted-out", ns, labels={LABEL: "no"})) == "default-scheduler"
    assert _scheduler_of(kube, _pod("other-label", plain, labels={"app": "x"})) == "default-scheduler"
    # never in kube-system nor the scheduler's own namespace (its pods must not wait for themselves)
    own = "policy-scheduler" if opted_in == "kustomize" else RELEASE
    for excluded in ("kube-system", own):
        control_plane.ensure_namespace(excluded)
        assert _scheduler_of(kube, _pod("labelled", excluded, labels={LABEL: "true"})) == "default-scheduler", excluded
    labelled_own = _namespace(control_plane, kube, own, {LABEL: "true"})
    try:
        assert _scheduler_of(kube, _pod("unset", labelled_own)) == "default-scheduler"
    finally:
        apply(kube, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": own, "labels": {LABEL: None}}})


def test_a_label_value_names_the_profile(opted_in: str, control_plane: ControlPlane, kube: Kube) -> None:
    """`true` is the default profile; a profile's name picks it (the chart knows its profiles; kustomize has one)."""
    profiles = (OURS, SECOND) if opted_in == "helm" else (OURS,)
    plain = _namespace(control_plane, kube, "opt-in-plain")
    for profile in profiles:
        ns = _namespace(control_plane, kube, f"opt-in-{profile}", {LABEL: profile})
        assert _scheduler_of(kube, _pod("unset", ns)) == profile
        assert _scheduler_of(kube, _pod("labelled", plain, labels={LABEL: profile})) == profile
    ns = _namespace(control_plane, kube, "opt-in-unknown", {LABEL: "nobody"})  # no such profile: not opted in
    assert _scheduler_of(kube, _pod("unset", ns)) == "default-scheduler"


def test_the_scheduler_binds_the_pods_it_was_sent(opted_in: str, control_plane: ControlPlane, kube: Kube,
                                                   schedulers) -> None:
    """The whole path: pods created without a schedulerName in an opted-in namespace (and a labelled one elsewhere)
    are bound by the scheduler running under the profile they were sent to; a pod of a plain namespace is not."""
    sel, node = {"e2e": f"opt-in-{opted_in}"}, f"opt-in-{opted_in}"
    control_plane.create_ready_node(node, labels=sel, cpu="4")
    ns = _namespace(control_plane, kube, "opt-in-run", {LABEL: "true"})
    plain = _namespace(control_plane, kube, "opt-in-run-plain")
    s = schedulers.start("--profile", f"{OURS}=", "--profile", f"{SECOND}=", name="opt-in-scheduler")
    kube.create(_pod(f"job-{opted_in}", ns, nodeSelector=sel))
    kube.create(_pod(f"labelled-{opted_in}", plain, labels={LABEL: "true"}, nodeSelector=sel))
    kube.create(_pod(f"plain-{opted_in}", plain, nodeSelector=sel))
    wait_for("the opted-in pods bound", lambda: node_of(kube.pods(ns)[f"job-{opted_in}"]) == node
             and node_of(kube.pods(plain)[f"labelled-{opted_in}"]) == node)
    left = kube.pods(plain)[f"plain-{opted_in}"]
    assert left["spec"]["schedulerName"] == "default-scheduler" and node_of(left) is None, s.log()[-2000:]
    for name, where in ((f"job-{opted_in}", ns), (f"labelled-{opted_in}", plain), (f"plain-{opted_in}", plain)):
        kube.request("DELETE", f"/api/v1/namespaces/{where}/pods/{name}")
