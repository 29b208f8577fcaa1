"""The documented way to try `run` without a cluster (issue 47, point 9): scripts/local_control_plane.py starts a
control plane with Ready nodes and prints its kubeconfig; `policy-scheduler run` against it binds the example pod
it writes; Ctrl-C stops it all."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import yaml

from testkit.controlplane import REPO, free_port, loopback_env
from testkit.scheduling import Kube, node_of, wait_for

SCRIPT = REPO / "scripts" / "local_control_plane.py"


def test_the_local_control_plane_script_serves_run(tmp_path: Path) -> None:
    script = subprocess.Popen([sys.executable, str(SCRIPT), "--workdir", str(tmp_path / "cp"), "--nodes", "2",
                               "--gpus", "4"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env=loopback_env(), start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(script.stdout.readline, "")), daemon=True)
    reader.start()
    scheduler = None
    try:
        said = wait_for("the script's KUBECONFIG line", lambda: next(
            (m for line in lines if (m := re.match(r"KUBECONFIG=(\S+)$", line.strip()))), None) or
            (script.poll() is not None and "exited"), timeout=300)
        assert said != "exited", "".join(lines)
        kubeconfig = Path(said.group(1))
        kube = Kube(kubeconfig)
        nodes = kube.ok("GET", "/api/v1/nodes")["items"]
        assert sorted(n["metadata"]["name"] for n in nodes) == ["node-0", "node-1"]
        assert all(n["status"]["allocatable"]["nvidia.com/gpu"] == "4" for n in nodes)
        scheduler = subprocess.Popen([sys.executable, "-m", "engine", "run", "--kubeconfig", str(kubeconfig),
                                      "--secure-port", "0", "--insecure-port", str(free_port())], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, env=loopback_env(), start_new_session=True)
        hello = tmp_path / "cp" / "hello-pod.yaml"
        assert f"apply -f {hello}" in "".join(lines)
        kube.create(yaml.safe_load(hello.read_text()))
        node = wait_for("the example pod bound", lambda: node_of(kube.pods("default")["hello"]), timeout=60)
        assert node in ("node-0", "node-1")
    finally:
        for process in (scheduler, script):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGINT if process is script else signal.SIGTERM)
                process.wait(timeout=60)
    reader.join(timeout=10)
    assert script.returncode == 0 and "stopped" in "".join(lines), "".join(lines)
