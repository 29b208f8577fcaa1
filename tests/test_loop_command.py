"""`policy-scheduler run`: user mistakes are one line and exit 2, never a traceback."""
from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner

from clocks import TickingClock
from engine.cli import main
from engine.loop.leader import LeaderElector
from loopfake import FakeAPI


@pytest.mark.parametrize("args, message", [
    (["--kubeconfig", "/nonexistent/kubeconfig"], "cannot load kubeconfig /nonexistent/kubeconfig"),
    (["--policy-configmap", "no-slash"], "'--policy-configmap': must be NAMESPACE/NAME"),
    (["--profile", "a=ns/cm", "--profile", "a=ns/other"], "--profile 'a' is given twice"),
    (["--profile", "a=ns/cm", "--policy-configmap", "ns/cm"], "with --profile give each profile its ConfigMap"),
    (["--profile", "a=ns/cm", "--scheduler-name", "b"], "--scheduler-name 'b' goes with --policy-configmap; with "
     "--profile name every scheduler in a --profile (add --profile b=NAMESPACE/CONFIGMAP, or b= for no policies)"),
    (["--scheduler-name", "policy-scheduler", "--profile", "a="], "--scheduler-name 'policy-scheduler' goes with"),
    (["--profile", "a=", "--kubeconfig", "/nonexistent/kubeconfig"], "cannot load kubeconfig"),  # alone: fine
    (["--batch-window", "-1"], "Invalid value for '--batch-window'"),
    (["--profile", "bad-format"], "--profile must be NAME=NAMESPACE/CONFIGMAP"),
    (["--profile", "Web=ns/cm"], "scheduler name 'Web' must be lowercase"),
    (["--profile", "web=ns/"], "the ConfigMap name '' must not be empty"),
    (["--profile", "web=ns/cm,sometimes"], "the ConfigMap name 'cm,sometimes' must be lowercase"),
    (["--policy-configmap", f"ns/{'a' * 243}"], "is too long: the copy kept beside it, 'aaa"),
    (["--scheduler-name", ""], "'--scheduler-name': '' must not be empty"),
    (["--scheduler-name", "a b"], "'--scheduler-name': 'a b' must be lowercase"),
    (["--policy-configmap", "ns/a/b"], "must be NAMESPACE/NAME, got 'ns/a/b'"),
    (["--lease-namespace", "kube.system"], "'--lease-namespace': 'kube.system' must be lowercase"),
    (["--lease-name", ""], "'--lease-name': '' must not be empty"),
    (["--time-limit", "nan"], "'--time-limit': 'nan' is not a finite number"),
    (["--time-limit", "inf"], "'--time-limit': 'inf' is not a finite number"),
    (["--lease-duration", "-inf"], "'--lease-duration': '-inf' is not a finite number"),
    (["--batch-idle", "soon"], "'--batch-idle': 'soon' is not a number"),
    (["--max-batch", "0"], "Invalid value for '--max-batch'"),
    (["--head", "-1"], "Invalid value for '--head'"),
    (["--metrics-port", "10251"], "the plain-HTTP metrics port is gone"),  # an old install's flag: said, not ignored
    (["--tls-cert-file", __file__], "--tls-cert-file and --tls-private-key-file go together"),
    (["--tls-cert-file", "/nonexistent/c.pem", "--tls-private-key-file", "/nonexistent/key.pem"],
     "--tls-cert-file /nonexistent/c.pem: no such file"),
    (["--secure-port", "70000"], "Invalid value for '--secure-port'"),
    (["--no-such-flag"], "No such option '--no-such-flag'"),
])
def test_user_mistakes_exit_2_with_one_line(args: list[str], message: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = CliRunner().invoke(main, ["run", "--secure-port", "0", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output  # one line, not click's Usage/Try/Error block


def test_profile_with_an_empty_configmap_means_pod_specs_only() -> None:
    from engine.loop.command import parse_profiles
    from engine.loop.scheduler import Profile

    assert parse_profiles("policy-scheduler", None, ("web=", "batch=ml/policies")) == (
        Profile("web"), Profile("batch", ("ml", "policies")))


def test_an_optional_policy_configmap_is_marked_so_and_keeps_its_last_valid_set_beside_it() -> None:
    from engine.loop.command import parse_profiles, run
    from engine.loop.scheduler import Profile

    params = run.make_context("run", ["--policy-configmap", "ps/policies,optional"]).params
    [profile] = parse_profiles(params["scheduler_name"], params["policy_configmap"], params["profiles"])
    assert profile == Profile("policy-scheduler", ("ps", "policies"), optional=True)
    assert profile.kept_configmap == ("ps", "policies-last-valid")
    assert parse_profiles("x", None, ("web=ps/web,optional", "batch=ps/batch")) == (
        Profile("web", ("ps", "web"), True), Profile("batch", ("ps", "batch")))


def test_run_defaults_agree_with_deploy() -> None:
    """The Lease namespace and the ConfigMap that --help shows are deploy/'s (and the Dockerfile's CMD)."""
    import yaml

    from testkit.controlplane import REPO
    out = " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())
    assert "[default: policy-scheduler]" in out.split("--lease-namespace NAMESPACE")[1].split("--lease-name")[0]
    deployment = yaml.safe_load((REPO / "deploy" / "deployment.yaml").read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--lease-namespace=policy-scheduler" in args and deployment["metadata"]["namespace"] == "policy-scheduler"
    dockerfile = (REPO / "deploy" / "Dockerfile").read_text()
    assert 'CMD ["run", "--leader-elect"]' in dockerfile and "kube-system" not in dockerfile
    configmap = CliRunner().invoke(main, ["configmap", "--help"], terminal_width=300).output
    assert "policy-scheduler-policies" in configmap and "kube-system" not in configmap


def test_run_is_listed_in_the_cli() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert " run " in result.output


def test_leadership_is_lost_when_renewal_fails_past_the_deadline() -> None:
    api = FakeAPI()
    stop = threading.Event()
    clock = TickingClock(0.1, at={1010.0: stop.set})  # a holder that never gives up is stopped there (and fails)
    elector = LeaderElector(api, "ns", "lease", "me", lease_seconds=1, renew_deadline=0.3, retry_seconds=0.001,
                            clock=clock)
    assert elector.acquire(stop)
    api.down = True
    lost = threading.Event()
    failing_since = clock.now
    elector.hold(stop, lost.set)  # renews every retry period; returns once leadership is lost
    assert lost.is_set() and not stop.is_set()
    assert clock.now - failing_since > 0.3  # and only past the renew deadline


def test_the_startup_heap_is_frozen_and_threads_switch_sooner_once_the_caches_sync_before_any_loop_starts() -> None:
    """The cyclic collector is paused while the first lists decode and convert (each collection walked the growing
    heap again), what startup made is moved out of its reach before the first cycle (a full collection walked it
    all again, stalling every thread for 0.07–0.12 s at 200 nodes), and a thread waiting for the GIL gets it after
    1 ms, not 5, while few pods are in hand (engine.loop.runtime; BENCHMARKS.md, issue 30). Once `run` stops, the
    process's settings are as they were."""
    import gc
    import sys
    from types import SimpleNamespace

    from engine.loop.command import _serve
    from engine.loop.runtime import NEVER, RuntimePolicy

    seen: dict[str, int] = {}
    stop = threading.Event()

    class Scheduler:
        settings = SimpleNamespace(profiles=[SimpleNamespace(name="policy-scheduler")])
        loops = ()
        leading = threading.Event()
        runtime = RuntimePolicy()

        def start_watches(self, stop):
            seen["collecting while listing"] = gc.isenabled()
        def refresh_policies(self): pass
        def shutdown(self): pass

        def wait_synced(self, stop, timeout):
            seen["synced"] = gc.get_freeze_count()
            seen["collecting while syncing"] = gc.isenabled()
            return True

        def start_loops(self, stop_):
            seen["loops"] = gc.get_freeze_count()
            seen["switch"] = sys.getswitchinterval()
            seen["collecting"] = gc.isenabled()
            seen["full passes"] = gc.get_threshold()[2]
            stop.set()

    gc.unfreeze()
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    try:
        assert _serve(Scheduler(), None, stop, []) == 0  # type: ignore[arg-type]
        after = sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count()
    finally:
        gc.unfreeze()
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert seen["full passes"] == NEVER  # only at quiet moments from then on (RuntimePolicy.tick)
    assert seen["synced"] == 0 and seen["loops"] > 1000
    assert interval == 0.005 and seen["switch"] == 0.001
    assert not seen["collecting while listing"] and not seen["collecting while syncing"] and seen["collecting"]
    assert after == (interval, thresholds, 0) and gc.isenabled()
