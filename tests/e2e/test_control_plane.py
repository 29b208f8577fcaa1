"""Smoke test of the e2e control plane: it is the real thing, and usable from the Python client."""
from __future__ import annotations

import os
from pathlib import Path

import kubernetes
import pytest

from testkit.controlplane import ControlPlane, ControlPlaneError, start_control_plane

NOT_READY_TAINT = "node.kubernetes.io/not-ready"


@pytest.fixture
def core(control_plane: ControlPlane):
    """A CoreV1Api built the way tests and the scheduler do it: load_kube_config + ApiClient."""
    config = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(control_plane.kubeconfig), client_configuration=config)
    with kubernetes.client.ApiClient(config) as api:
        yield kubernetes.client.CoreV1Api(api)


def test_version_is_the_selected_release(control_plane: ControlPlane, kube_version: tuple[int, int]) -> None:
    """The apiserver is the release $POLICY_SCHEDULER_KUBE_VERSION asked for (default v1.36.3), built from its module."""
    version = control_plane.version()
    assert version["gitVersion"] == (os.environ.get("POLICY_SCHEDULER_KUBE_VERSION") or "v1.36.3")
    assert version["gitVersion"] == control_plane.kube_version
    assert (int(version["major"]), int(version["minor"])) == kube_version


def test_native_gang_api_version_follows_the_release(kube_version: tuple[int, int], control_plane: ControlPlane) -> None:
    """The apiserver serves KEP-4671's PodGroups in the API version of its release, and only that one: v1alpha2 in
    1.36, v1beta1 in 1.37 (its flags are testkit.controlplane.VERSION_FLAGS)."""
    served = "v1beta1" if kube_version >= (1, 37) else "v1alpha2"
    for api_version in ("v1alpha2", "v1beta1"):
        status, _ = control_plane.get(f"/apis/scheduling.k8s.io/{api_version}/podgroups", control_plane.token)
        assert status == (200 if api_version == served else 404), api_version


@pytest.mark.kube_versions(min="1.37", reason="checks the marker itself")
def test_kube_versions_marker_skips_older_releases(kube_version: tuple[int, int]) -> None:
    assert kube_version >= (1, 37)


def test_namespace_node_and_pod_round_trip(control_plane: ControlPlane, core) -> None:
    control_plane.ensure_namespace("smoke")
    control_plane.ensure_namespace("smoke")  # idempotent
    assert core.read_namespaced_service_account("default", "smoke").metadata.name == "default"

    control_plane.create_ready_node("smoke-node-1", cpu="4", memory="8Gi", pods="110")
    node = core.read_node("smoke-node-1")
    assert node.status.allocatable == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert node.status.capacity == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", "True")]
    assert not [t for t in node.spec.taints or [] if t.key == NOT_READY_TAINT]

    pod = {"metadata": {"name": "smoke-pod"},
           "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}
    core.create_namespaced_pod("smoke", pod)

    pods = core.list_namespaced_pod("smoke").items
    assert [p.metadata.name for p in pods] == ["smoke-pod"]
    assert pods[0].spec.node_name is None  # no scheduler runs: it stays pending
    assert pods[0].spec.service_account_name == "default"
    assert "smoke-node-1" in [n.metadata.name for n in core.list_node().items]


def test_default_client_setup_ignores_proxy_and_ca_bundle_variables(control_plane: ControlPlane,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain `load_kube_config(config_file=...)` + `ApiClient()` path, with a dead proxy
    and a missing CA bundle in the environment: loopback bypasses the one, the kubeconfig's
    CA replaces the other."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # discard port: nothing listens
    for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        monkeypatch.setenv(name, "/nonexistent/ca.pem")
    # load_kube_config sets the process-wide default Configuration: put the old one back after
    monkeypatch.setattr(kubernetes.client.Configuration, "_default", kubernetes.client.Configuration._default)
    kubernetes.config.load_kube_config(config_file=str(control_plane.kubeconfig))
    with kubernetes.client.ApiClient() as api:
        assert api.configuration.proxy == "http://127.0.0.1:9"  # it was picked up, and bypassed:
        assert kubernetes.client.VersionApi(api).get_code().git_version == control_plane.kube_version


@pytest.mark.parametrize("token", [None, "not-a-known-token"])
def test_unknown_callers_are_refused(control_plane: ControlPlane, token: str | None) -> None:
    status, _ = control_plane.get("/api/v1/namespaces", token=token)
    assert status in (401, 403)


def test_rbac_limits_a_service_account(control_plane: ControlPlane) -> None:
    """RBAC is on: an authenticated identity without bindings may not list nodes."""
    kubeconfig = control_plane.service_account_kubeconfig("rbac", "nobody")
    with (kubernetes.config.new_client_from_config(config_file=str(kubeconfig)) as api,
          pytest.raises(kubernetes.client.ApiException) as refused):
        kubernetes.client.CoreV1Api(api).list_node()
    assert refused.value.status == 403


def test_restart_apiserver_keeps_state_and_kubeconfig(control_plane: ControlPlane) -> None:
    control_plane.ensure_namespace("restart")
    control_plane.restart_apiserver()
    with control_plane.api_client() as api:  # same port, same CA: the old kubeconfig still works
        core = kubernetes.client.CoreV1Api(api)
        assert core.read_namespaced_service_account("default", "restart").metadata.name == "default"


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that contain `text` (e.g. a work directory)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(text.encode() in arg for arg in args):
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def test_a_failing_apiserver_fails_loudly_and_leaves_nothing_running(control_plane: ControlPlane,
                                                                      tmp_path: Path) -> None:
    """Startup errors carry the log tail, and etcd (already up) is stopped again."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "etcd").symlink_to(control_plane.bin_dir / "etcd")
    fake = bin_dir / "kube-apiserver"
    fake.write_text("#!/bin/sh\necho 'E0000 fake apiserver: cannot start' >&2\nexit 3\n")
    fake.chmod(0o755)
    workdir = tmp_path / "cp"
    with (pytest.raises(ControlPlaneError, match=r"(?s)exited \(code 3\).*fake apiserver: cannot start"),
          start_control_plane(workdir, bin_dir=bin_dir)):
        pass
    assert _processes_mentioning(str(workdir)) == []
