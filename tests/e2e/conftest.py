"""End-to-end tests against a real control plane (etcd + kube-apiserver built from Go modules).

The first run on a machine builds the binaries (about 8 minutes, cached under
~/.cache/policy-scheduler/controlplane/<version>/); a build or startup failure fails the
tests loudly, it never skips them. Every test here is marked `e2e` (`-m "not e2e"` leaves
them out for a quick local loop).
"""
from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testkit import controlplane
from testkit.controlplane import LOOPBACK_NO_PROXY, ControlPlane, major_minor, start_control_plane
from testkit.scheduling import Kube, Schedulers, install_chart_identity

E2E_DIR = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: needs the real control plane (tests/e2e/); builds it on first use")
    config.addinivalue_line("markers", "kube_versions(min=None, max=None, reason=''): runs only against Kubernetes "
                                       "releases min <= major.minor <= max (e.g. min=\"1.37\"); skipped on others")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything under tests/e2e, so no test there can forget the marker; skip what the selected
    Kubernetes version is outside of (`kube_versions`)."""
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(pytest.mark.e2e)
        marker = item.get_closest_marker("kube_versions")
        if marker is not None:
            why = version_mismatch(controlplane.kube_version(), marker.kwargs)
            if why:
                item.add_marker(pytest.mark.skip(reason=why))


def version_mismatch(version: str, bounds: dict) -> str:
    """Why `version` (e.g. v1.37.2) is outside `kube_versions` bounds (min/max "1.36", reason), or ""."""
    running = major_minor(version)
    low, high = bounds.get("min"), bounds.get("max")
    if (low is None or running >= major_minor(low)) and (high is None or running <= major_minor(high)):
        return ""
    wanted = " and ".join(part for part in (low and f">= {low}", high and f"<= {high}") if part)
    reason = bounds.get("reason", "")
    return f"needs Kubernetes {wanted}, running {version}" + (f": {reason}" if reason else "")


def _with_loopback(value: str | None) -> str:
    """`value` (a NO_PROXY list) plus the loopback names, so clients never proxy to us."""
    return ",".join(part for part in (value, LOOPBACK_NO_PROXY) if part)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running etcd + kube-apiserver for the whole session, stopped at its end even when
    tests fail. While it runs, NO_PROXY includes 127.0.0.1 and localhost, so that
    `kubernetes.config.load_kube_config(config_file=cp.kubeconfig)` clients (which read
    HTTPS_PROXY from the environment) reach it directly."""
    workdir = tmp_path_factory.mktemp("control-plane")
    with pytest.MonkeyPatch.context() as env:
        for name in ("NO_PROXY", "no_proxy"):
            env.setenv(name, _with_loopback(os.environ.get(name)))
        with start_control_plane(workdir) as cp:
            sys.stderr.write(f"\ncontrol plane up in {cp.startup_seconds:.1f} s at {cp.server} "
                             f"(kubeconfig {cp.kubeconfig}, logs in {workdir})\n")
            yield cp


@pytest.fixture(scope="session")
def kube_version(control_plane: ControlPlane) -> tuple[int, int]:
    """(major, minor) of the running control plane, e.g. (1, 37), for tests whose expectations differ by release."""
    return control_plane.minor_version


@pytest.fixture
def kube(control_plane: ControlPlane) -> Kube:
    """Raw API calls as the admin."""
    return Kube(control_plane.kubeconfig)


@pytest.fixture
def schedulers(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Schedulers]:
    """Scheduler processes a test starts; all stopped when it ends."""
    started = Schedulers(control_plane, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


CHART_RELEASE = "e2e-chart"  # the chart's default install, as release e2e-chart in namespace e2e-chart


@pytest.fixture(scope="session")
def chart_identity(control_plane: ControlPlane) -> Callable[..., Path]:
    """`chart_identity(release, namespace, values)`: a kubeconfig for the Helm chart's ServiceAccount with exactly the
    RBAC the chart renders with `values` (applied once per release in the session; one set of values per release)."""
    made: dict[tuple[str, str], tuple[str, Path]] = {}

    def identity(release: str = CHART_RELEASE, namespace: str = CHART_RELEASE, values: dict | None = None) -> Path:
        key, rendered = (release, namespace), json.dumps(values, sort_keys=True)
        if key not in made:
            made[key] = rendered, install_chart_identity(control_plane, release, namespace, values)
        assert made[key][0] == rendered, f"release {release} was installed with other values: {made[key][0]}"
        return made[key][1]
    return identity


@pytest.fixture
def chart_schedulers(control_plane: ControlPlane, chart_identity: Callable[..., Path],
                     tmp_path: Path) -> Iterator[Schedulers]:
    """Scheduler processes running as the chart's ServiceAccount with the chart's default RBAC (preemption
    included), all stopped when the test ends; a test whose scheduler was refused anything for want of rights
    fails, even if what it checks went through."""
    started = Schedulers(control_plane, tmp_path, kubeconfig=chart_identity())
    try:
        yield started
    finally:
        started.stop_all()
    refused = started.refusals()
    assert not refused, "the chart's RBAC refused the scheduler:\n" + "\n".join(refused[:20])
