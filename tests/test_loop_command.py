"""`policy-scheduler run`: user mistakes are one line and exit 2, never a traceback."""
from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner

from engine.cli import main
from engine.loop.leader import LeaderElector
from loopfake import FakeAPI


@pytest.mark.parametrize("args, message", [
    (["--kubeconfig", "/nonexistent/kubeconfig"], "cannot load kubeconfig /nonexistent/kubeconfig"),
    (["--policy-configmap", "no-slash"], "--policy-configmap must be NAMESPACE/NAME"),
    (["--profile", "a=ns/cm", "--profile", "a=ns/other"], "--profile 'a' is given twice"),
    (["--profile", "a=ns/cm", "--policy-configmap", "ns/cm"], "with --profile give each profile its ConfigMap"),
    (["--batch-window", "-1"], "Invalid value for '--batch-window'"),
])
def test_user_mistakes_exit_2_with_one_line(args: list[str], message: str, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    result = CliRunner().invoke(main, ["run", "--metrics-port", "0", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_run_is_listed_in_the_cli() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert " run " in result.output


def test_leadership_is_lost_when_renewal_fails_past_the_deadline() -> None:
    api = FakeAPI()
    elector = LeaderElector(api, "ns", "lease", "me", lease_seconds=1, renew_deadline=0.3, retry_seconds=0.05)
    stop = threading.Event()
    assert elector.acquire(stop)
    api.down = True
    lost = threading.Event()
    thread = threading.Thread(target=elector.hold, args=(stop, lost.set), daemon=True)
    thread.start()
    assert lost.wait(5)
    stop.set()
    thread.join(5)
