#!/usr/bin/env python3
"""A local Kubernetes control plane for trying `policy-scheduler run`: etcd and kube-apiserver on loopback, a few
Ready nodes, and the kubeconfig to reach them — the end-to-end tests' control plane (testkit/controlplane.py), for a
person at a terminal.

    python scripts/local_control_plane.py [--nodes 3] [--gpus 0] [--workdir DIR] [--version v1.36.3]

The first run builds etcd and kube-apiserver from Go modules (Go >= 1.26 on PATH; 12-22 minutes on 2 cores, then
cached under ~/.cache/policy-scheduler/, so later runs start in seconds). No kubelet runs: the nodes are API objects
whose status says Ready, and a pod the scheduler binds stays Pending on its node (it is never started), which is
all a scheduler sees. No controller-manager either: namespaces `default` and `policy-scheduler` are made with their
`default` ServiceAccount. It prints the kubeconfig and the commands to try, and runs until Ctrl-C (or SIGTERM),
then stops both processes.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test kit (testkit/), which is not installed with the package

from testkit.controlplane import (  # noqa: E402
    DEFAULT_KUBE_VERSION,
    KUBE_VERSION_ENV,
    ControlPlaneError,
    start_control_plane,
    supported_versions,
)

GPU = "nvidia.com/gpu"
EXAMPLE_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  schedulerName: policy-scheduler
  containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources: {requests: {cpu: 500m, memory: 256Mi}}
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=3, help="Ready nodes to create (default 3)")
    ap.add_argument("--cpu", default="8", help="each node's cpu (default 8)")
    ap.add_argument("--memory", default="32Gi", help="each node's memory (default 32Gi)")
    ap.add_argument("--gpus", type=int, default=0, help=f"each node's {GPU} (default 0: none)")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where etcd's data, the logs and the kubeconfig go (default: a new temporary directory)")
    ap.add_argument("--version", choices=supported_versions(), default=None,
                    help=f"the Kubernetes release (default: ${KUBE_VERSION_ENV}, else {DEFAULT_KUBE_VERSION})")
    args = ap.parse_args(argv)
    if args.nodes < 0 or args.gpus < 0:
        ap.error("--nodes and --gpus must be 0 or more")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="policy-scheduler-cp-"))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        with start_control_plane(workdir, version=args.version) as cp:
            for ns in ("default", "policy-scheduler"):
                cp.ensure_namespace(ns)
            extra = {GPU: str(args.gpus)} if args.gpus else None
            for i in range(args.nodes):
                cp.create_ready_node(f"node-{i}", cpu=args.cpu, memory=args.memory, extra_resources=extra,
                                     labels={"topology.kubernetes.io/zone": f"zone-{i % 3}"})
            (workdir / "hello-pod.yaml").write_text(EXAMPLE_POD)
            print(f"Kubernetes {cp.kube_version} is up at {cp.server} with {args.nodes} Ready node(s) (no kubelet).\n"
                  f"KUBECONFIG={cp.kubeconfig}\n"
                  "Try, in another terminal:\n"
                  f"  policy-scheduler run --kubeconfig {cp.kubeconfig}\n"
                  f"  policy-scheduler dry-run --kubeconfig {cp.kubeconfig}\n"
                  f"  kubectl --kubeconfig {cp.kubeconfig} apply -f {workdir / 'hello-pod.yaml'}\n"
                  f"Logs in {workdir}. Ctrl-C stops it.", flush=True)
            stop.wait()
    except ControlPlaneError as exc:
        print(f"local_control_plane: error: {exc}", file=sys.stderr)
        return 1
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
