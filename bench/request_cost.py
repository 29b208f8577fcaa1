#!/usr/bin/env python3
"""What one apiserver request costs the scheduler's process: CPU (the calling thread's) and wall time per request,
through each way the loop could send it, against a real kube-apiserver (testkit's control plane) on this machine.

The request is an Event create (a pod's Scheduled event: the loop sends one beside each Binding), ``-n`` of them per
way, the ways interleaved round by round so a noisy neighbour hits them alike; medians over all rounds.

- ``loop``: `KubeAPI._request`, as the loop sends it now (engine/loop/transport.py: kept-alive `http.client`);
- ``client``: the Kubernetes client's own path (`param_serialize` + `call_api`, its urllib3 pool), as before;
- ``urllib3``: the client's urllib3 pool, called directly with the body already encoded;
- ``http.client``: one kept-alive `http.client.HTTPSConnection`, nothing else.

    python bench/request_cost.py [-n 400] [--rounds 3]
"""
from __future__ import annotations

import argparse
import http.client
import json
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.loop.api import KubeAPI, event_body, load_client  # noqa: E402
from testkit.controlplane import start_control_plane  # noqa: E402

PATH = "/api/v1/namespaces/default/events"


def event(i: int) -> dict:
    """A pod's Scheduled event, built as the loop builds it."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default", "uid": "u"}}
    return event_body(pod, "Normal", "Scheduled", f"Successfully assigned default/p{i} to node-1")


def ways(api: KubeAPI, server: str, ca_file: Path, token: str) -> dict[str, Callable[[int], int]]:
    headers = {"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {token}"}
    client, pool = api.client, api.client.rest_client.pool_manager
    host, port = server.removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=ssl.create_default_context(cafile=str(ca_file)))

    def loop(i: int) -> int:
        return api._request("POST", PATH, body=event(i))[0]

    def through_client(i: int) -> int:
        params = client.param_serialize("POST", PATH, header_params=dict(headers), body=event(i),
                                        auth_settings=["BearerToken"])
        response = client.call_api(*params, _request_timeout=30)
        response.read()
        return response.status

    def urllib3(i: int) -> int:
        return pool.request("POST", server + PATH, body=json.dumps(event(i)).encode(), headers=headers).status

    def plain(i: int) -> int:
        conn.request("POST", PATH, body=json.dumps(event(i)).encode(), headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    return {"loop": loop, "client": through_client, "urllib3": urllib3, "http.client": plain}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=400, help="requests per way and round")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with start_control_plane(Path(tempfile.mkdtemp(prefix="request-cost-"))) as cp:
        api = KubeAPI(load_client(str(cp.kubeconfig)))
        found = ways(api, cp.server, cp.ca_file, cp.token)
        cpu: dict[str, list[float]] = {name: [] for name in found}
        wall: dict[str, list[float]] = {name: [] for name in found}
        for name, send in found.items():  # every way's connection open before the first round
            assert send(-1) == 201, name
        for _ in range(args.rounds):
            for name, send in found.items():
                for i in range(args.n):
                    c, w = time.thread_time(), time.perf_counter()
                    status = send(i)
                    cpu[name].append(time.thread_time() - c)
                    wall[name].append(time.perf_counter() - w)
                    assert status == 201, (name, status)
    base = statistics.median(cpu["client"])
    print(f"{args.rounds} rounds × {args.n} Event creates per way; medians")
    print(f"{'way':<12} {'CPU ms':>8} {'wall ms':>8} {'CPU vs client':>14}")
    for name in found:
        print(f"{name:<12} {1000 * statistics.median(cpu[name]):8.3f} {1000 * statistics.median(wall[name]):8.3f} "
              f"{statistics.median(cpu[name]) / base:13.2f}×")


if __name__ == "__main__":
    main()
