"""A pod that fits nowhere while nodes join (issue 17): the joining nodes too small for it do not wake it, and what
it is told is one FailedScheduling Event object, counted, not an Event per retry."""
from __future__ import annotations

import time

from testkit.controlplane import ControlPlane
from testkit.manifests import api_pod
from testkit.scheduling import Kube, wait_for


def _failed(kube: Kube, ns: str, name: str) -> list[dict]:
    return [e for e in kube.events(ns) if e["involvedObject"]["name"] == name and e["reason"] == "FailedScheduling"]


def test_a_waiting_pod_gets_one_counted_event_while_nodes_join(control_plane: ControlPlane, kube: Kube,
                                                             schedulers) -> None:
    ns, sel = "quiet-events", {"e2e": "quiet"}
    control_plane.ensure_namespace(ns)
    control_plane.create_ready_node("quiet-0", cpu="2", labels=sel)
    schedulers.start("--scheduler-name", "quiet-scheduler")
    kube.create(api_pod("huge", ns, scheduler="quiet-scheduler", cpu="16", nodeSelector=sel))
    wait_for("the first FailedScheduling", lambda: _failed(kube, ns, "huge"))
    for i in range(1, 61):  # 60 nodes, too small for it, at 10/s
        control_plane.create_ready_node(f"quiet-{i}", cpu="2", labels=sel)
        time.sleep(0.1)
    # another, told too; too big even for quiet-big below: when both wake into one batch, the plan places as many
    # pods of a priority as it can whatever their age, and a 32-cpu `other` there would leave `huge` out (a tie)
    kube.create(api_pod("other", ns, scheduler="quiet-scheduler", cpu="48", nodeSelector=sel))
    wait_for("the other pod told", lambda: _failed(kube, ns, "other"))
    events = _failed(kube, ns, "huge")
    assert len(events) <= 5, [(e["metadata"]["name"], e.get("count"), e["message"]) for e in events]
    assert len(events) == 1 and "Insufficient cpu" in events[0]["message"]
    control_plane.create_ready_node("quiet-big", cpu="32", labels=sel)  # one that fits: it wakes, and is placed
    wait_for("huge bound", lambda: kube.pods(ns)["huge"].get("spec", {}).get("nodeName") == "quiet-big")
