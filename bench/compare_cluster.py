"""The API side of the side-by-side benchmark: fill a control plane with a Scenario, watch bindings, reset.

Everything goes through the real kube-apiserver of testkit/controlplane.py (raw JSON, as the e2e tests do).
Binding times are observed by one watch on the pending pods (the harness's own clock for every scheduler alike,
finer than the one-second timestamps the API records), and the final placement is read back with a list.
"""
from __future__ import annotations

import contextlib
import http.client
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlparse

import urllib3

from compare_measure import overcommitted
from compare_workloads import PENDING, PENDING_LABEL, PRESET, NodeSpec, Scenario
from engine.loop.wire import MEDIA, Codec
from testkit.controlplane import ControlPlane, verifying_context
from testkit.manifests import ZONE_KEY, created, priority_class, ready_node, volume
from testkit.scheduling import Kube, collection, install_podgroup_crd

CLIENTS = 16           # threads creating objects (as bench/loop_e2e.py)
DELETE_TIMEOUT_S = 300.0
SELECTED_NODE = "volume.kubernetes.io/selected-node"


def in_parallel(fn: Callable[[Any], Any], items: Iterable[Any], clients: int = CLIENTS) -> list[Any]:
    """``fn`` over ``items`` from ``clients`` threads; the first exception is raised."""
    with ThreadPoolExecutor(clients) as pool:
        return list(pool.map(fn, items))


def ok(kube: Kube, method: str, path: str, body: Any = None, allow: tuple[int, ...] = (), **kw: Any) -> Any:
    """A call that must succeed (or answer one of ``allow``): a setup failure stops the benchmark loudly."""
    status, data = kube.request(method, path, body, **kw)
    if not (200 <= status < 300 or status in allow):
        raise RuntimeError(f"{method} {path}: {status} {str(data)[:500]}")
    return data


# --- filling the cluster ----------------------------------------------------------------------------------

def create_node(kube: Kube, spec: NodeSpec) -> None:
    """A Node whose status says Ready (written through the status subresource: a create ignores it)."""
    body, status = ready_node(spec.name, spec.allocatable, {"kubernetes.io/os": "linux", **spec.labels},
                              list(spec.taints), spec.annotations, message="bench: a Node without a kubelet")
    if spec.unschedulable:
        body["spec"]["unschedulable"] = True
    ok(kube, "POST", "/api/v1/nodes", body)
    ok(kube, "PATCH", f"/api/v1/nodes/{spec.name}/status", status, content_type="application/merge-patch+json")


def populate(cp: ControlPlane, kube: Kube, scenario: Scenario, crd_file: Path, quota_crd_file: Path) -> None:
    """Everything but the pending pods and PodGroups: CRDs, namespaces, ElasticQuotas, PriorityClasses, nodes,
    running pods, StorageClasses, ReplicaSets and Services."""
    install_podgroup_crd(kube, crd_file, timeout=60)  # scheduler-plugins' own (ours reads the same fields)
    for ns in scenario.namespaces:
        cp.ensure_namespace(ns)
    if scenario.quotas:
        install_crd(kube, quota_crd_file, QUOTAS)
        for quota in scenario.quotas:
            ok(kube, "POST", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{quota['metadata']['namespace']}"
                             "/elasticquotas", quota)
    for name, value in scenario.priority_classes.items():
        ok(kube, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", priority_class(name, value), allow=(409,))
    in_parallel(lambda n: create_node(kube, n), scenario.nodes)
    in_parallel(lambda p: ok(kube, "POST", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p),
                scenario.running)
    for sc in scenario.storage_classes:
        ok(kube, "POST", "/apis/storage.k8s.io/v1/storageclasses", sc)
    for obj in scenario.workloads:
        ns, plural = obj["metadata"]["namespace"], f"{obj['kind'].lower()}s"
        base = "/api/v1" if obj["apiVersion"] == "v1" else f"/apis/{obj['apiVersion']}"
        ok(kube, "POST", f"{base}/namespaces/{ns}/{plural}", obj)
    in_parallel(lambda d: ok(kube, "POST", collection(d), d), scenario.devices)  # the harness as a DRA driver


QUOTAS = "/apis/scheduling.x-k8s.io/v1alpha1/elasticquotas"


def install_crd(kube: Kube, crd_file: Path, served: str, timeout: float = 60.0) -> None:
    """A CustomResourceDefinition from its YAML file (idempotent), waited for until `served` (a list path) answers."""
    import yaml

    ok(kube, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", yaml.safe_load(crd_file.read_text()),
       allow=(409,))
    deadline = time.monotonic() + timeout
    while kube.request("GET", served)[0] != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{served} not served {timeout:.0f} s after creating its CRD")
        time.sleep(0.2)


def create_preset(kube: Kube, scenario: Scenario) -> None:
    """The pods created bound before every run (a scheduler may evict them; the reset deletes what is left)."""
    in_parallel(lambda p: ok(kube, "POST", f"/api/v1/namespaces/{p['metadata']['namespace']}/pods", p), scenario.preset)


CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


def create_claims(kube: Kube, scenario: Scenario) -> None:
    """The run's ResourceClaims, afresh (the last run's scheduler allocated them)."""
    in_parallel(lambda c: ok(kube, "POST", collection(c), c), scenario.claims)


def delete_claims(kube: Kube, scenario: Scenario) -> None:
    """Claims go, their delete-protection finalizers removed (no resource-claim controller runs to clear them)."""
    if not scenario.claims:
        return
    for ns in scenario.namespaces:
        ok(kube, "DELETE", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", {})
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while claims := ok(kube, "GET", CLAIMS)["items"]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(claims)} ResourceClaims still there {DELETE_TIMEOUT_S:.0f} s after deleting them")
        paths = [f"/apis/resource.k8s.io/v1/namespaces/{c['metadata']['namespace']}/resourceclaims/"
                 f"{c['metadata']['name']}" for c in claims if c["metadata"].get("finalizers")]
        in_parallel(lambda path: ok(kube, "PATCH", path, {"metadata": {"finalizers": None}}, allow=(404,),
                                    content_type="application/merge-patch+json"), paths)
        time.sleep(0.2)


def devices_overcommitted(kube: Kube) -> int:
    """Physical devices (counter sets) or devices promised beyond what their slices publish by the claims allocated
    at the end (compare_measure.overcommitted)."""
    return overcommitted(ok(kube, "GET", "/apis/resource.k8s.io/v1/resourceslices")["items"],
                         ok(kube, "GET", CLAIMS)["items"])


def devices_used(kube: Kube) -> int:
    """Devices allocated to claims reserved for some pod, at the end of a run."""
    return sum(len(((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])
               for c in ok(kube, "GET", CLAIMS)["items"] if (c.get("status") or {}).get("reservedFor"))


def create_volumes(kube: Kube, scenario: Scenario) -> None:
    """The run's PersistentVolumes and claims, afresh (the last run's scheduler bound them), then wait until the
    PV controller has made every PV Available: in a cluster local volumes exist long before their pods, and
    no scheduler matches a PV still in phase Pending."""
    in_parallel(lambda v: ok(kube, "POST", collection(v), v), scenario.volumes)
    expected = sum(1 for v in scenario.volumes if v["kind"] == "PersistentVolume")
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while expected:
        pvs = ok(kube, "GET", "/api/v1/persistentvolumes")["items"]
        if sum(1 for v in pvs if (v.get("status") or {}).get("phase") == "Available") >= expected:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"PersistentVolumes not Available {DELETE_TIMEOUT_S:.0f} s after creating them")
        time.sleep(0.2)


def delete_volumes(kube: Kube, scenario: Scenario) -> None:
    """Claims and PVs go (their protection finalizers removed: no controller runs to clear them)."""
    if not scenario.volumes:
        return
    for ns in scenario.namespaces:
        ok(kube, "DELETE", f"/api/v1/namespaces/{ns}/persistentvolumeclaims", {})
    ok(kube, "DELETE", "/api/v1/persistentvolumes", {})
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    unfinalize = {"metadata": {"finalizers": None}}
    while True:
        claims = ok(kube, "GET", "/api/v1/persistentvolumeclaims")["items"]
        pvs = ok(kube, "GET", "/api/v1/persistentvolumes")["items"]
        if not claims and not pvs:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(claims) + len(pvs)} claims and volumes still there {DELETE_TIMEOUT_S:.0f} s "
                               "after deleting them")
        paths = [f"/api/v1/namespaces/{c['metadata']['namespace']}/persistentvolumeclaims/{c['metadata']['name']}"
                 for c in claims if c["metadata"].get("finalizers")]
        paths += [f"/api/v1/persistentvolumes/{v['metadata']['name']}" for v in pvs if v["metadata"].get("finalizers")]
        in_parallel(lambda path: ok(kube, "PATCH", path, unfinalize, allow=(404,),
                                    content_type="application/merge-patch+json"), paths)
        time.sleep(0.2)


def claims_bound(kube: Kube, expected: int, settle_s: float = 300.0) -> int:
    """Claims the PV controller has bound once `expected` are (the placed pods' claims), or after `settle_s`:
    a scheduler that binds without waiting for the controller (its claim sync runs every 15 s) is not judged
    before the controller had its turn (it binds some 5 claims a second at its default client QPS)."""
    deadline = time.monotonic() + settle_s
    while True:
        bound = sum(1 for c in ok(kube, "GET", "/api/v1/persistentvolumeclaims")["items"]
                    if (c.get("status") or {}).get("phase") == "Bound")
        if bound >= expected or time.monotonic() > deadline:
            return bound
        time.sleep(1.0)


@dataclass
class Provisioner:
    """The harness as a CSI provisioner: every claim of a class it provisions that a scheduler annotated with
    `volume.kubernetes.io/selected-node` gets a PV pre-bound to it in that node's zone (what external-provisioner
    does), polled every `every` seconds."""

    kube: Kube
    name: str
    every: float = 0.25
    made: set[str] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="provisioner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        classes = {c["metadata"]["name"] for c in ok(self.kube, "GET", "/apis/storage.k8s.io/v1/storageclasses")["items"]
                   if c.get("provisioner") == self.name}
        while not self._stop.wait(self.every):
            for c in ok(self.kube, "GET", "/api/v1/persistentvolumeclaims")["items"]:
                node = (c["metadata"].get("annotations") or {}).get(SELECTED_NODE)
                if node and c["spec"].get("storageClassName") in classes and c["metadata"]["uid"] not in self.made:
                    self._provision(c, node)

    def _provision(self, c: dict, node: str) -> None:
        zone = ok(self.kube, "GET", f"/api/v1/nodes/{node}")["metadata"]["labels"].get(ZONE_KEY)
        pv = volume(f"pvc-{c['metadata']['uid']}", size=c["spec"]["resources"]["requests"]["storage"],
                    storage_class=c["spec"]["storageClassName"], zone=zone,
                    claim_ref=(c["metadata"]["namespace"], c["metadata"]["name"]), csi=(self.name, c["metadata"]["uid"]))
        pv["spec"]["claimRef"]["uid"] = c["metadata"]["uid"]
        ok(self.kube, "POST", "/api/v1/persistentvolumes", created(pv), allow=(409,))
        self.made.add(c["metadata"]["uid"])


def native_paths(scenario: Scenario) -> list[str]:
    """The API paths of the scenario's scheduling.k8s.io PodGroups (v1alpha2 on 1.36, v1beta1 on 1.37)."""
    versions = {str(g.get("apiVersion", "")) for g in scenario.pod_groups}
    return sorted(f"/apis/{v}" for v in versions if v.startswith("scheduling.k8s.io/"))


def create_pod_groups(kube: Kube, scenario: Scenario) -> None:
    """Coscheduling's PodGroups and Kubernetes' own (scheduling.k8s.io), each through its API."""
    for group in scenario.pod_groups:
        ns = group["metadata"]["namespace"]
        api = f"/apis/{group.get('apiVersion') or 'scheduling.x-k8s.io/v1alpha1'}"
        ok(kube, "POST", f"{api}/namespaces/{ns}/podgroups", group)


def pending_for(scenario: Scenario, scheduler_name: str) -> list[dict[str, Any]]:
    """The scenario's pending pods addressed to one scheduler and labelled for the reset."""
    out = []
    for pod in scenario.pending:
        meta = {**pod["metadata"], "labels": {**pod["metadata"].get("labels", {}), PENDING_LABEL: PENDING}}
        out.append({**pod, "metadata": meta, "spec": {**pod["spec"], "schedulerName": scheduler_name}})
    return out


def create_pods(kube: Kube, pods: list[dict[str, Any]], rate: float | None = None) -> dict[str, float]:
    """Create pods from CLIENTS threads, in order, as fast as they go or (``rate``) the k-th at k/rate seconds after
    the first; ``namespace/name`` -> monotonic time its create returned. In protobuf, as scheduler_perf's client-go
    clients (and every controller that creates pods) send them."""
    start = time.monotonic()
    codec = Codec()
    bodies = [codec.encode({"apiVersion": "v1", "kind": "Pod", **pod}) for pod in pods]

    def one(item: tuple[int, dict[str, Any]]) -> tuple[str, float]:
        k, pod = item
        if rate and (wait := start + k / rate - time.monotonic()) > 0:
            time.sleep(wait)
        ns = pod["metadata"]["namespace"]
        status, data = protobuf_request(kube, "POST", f"/api/v1/namespaces/{ns}/pods", bodies[k])
        if not 200 <= status < 300:
            raise RuntimeError(f"POST pod {ns}/{pod['metadata']['name']}: {status} {data[:300]!r}")
        return f"{ns}/{pod['metadata']['name']}", time.monotonic()
    return dict(in_parallel(one, list(enumerate(pods))))


def protobuf_request(kube: Kube, method: str, path: str, body: bytes) -> tuple[int, bytes]:
    """One request with a protobuf body, asking for a protobuf answer (not decoded: only its status is read)."""
    params = kube.client.param_serialize(method, path, header_params={"Accept": MEDIA, "Content-Type": MEDIA},
                                         body=body, auth_settings=["BearerToken"])
    response = kube.client.call_api(*params, _request_timeout=30)
    return response.status, response.read()


def reset(kube: Kube, scenario: Scenario) -> None:
    """Delete the pending pods (bound or not: gracePeriodSeconds 0, no kubelet to wait for), the pods created bound
    for the run, and the PodGroups, and wait until they are gone, so the next scheduler starts from the same state."""
    selector = PENDING_LABEL  # both values
    query = [("labelSelector", selector), ("gracePeriodSeconds", "0")]
    native = native_paths(scenario)
    for ns in scenario.namespaces:
        # 50,000 pods take the apiserver longer than the client waits (a 1.37 run's default-topology-spreading): it
        # goes on deleting them, and the wait below sees them gone
        with contextlib.suppress(urllib3.exceptions.HTTPError):
            ok(kube, "DELETE", f"/api/v1/namespaces/{ns}/pods", {"gracePeriodSeconds": 0}, query=query)
        ok(kube, "DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{ns}/podgroups", {})
        for api in native:
            ok(kube, "DELETE", f"{api}/namespaces/{ns}/podgroups", {})
    deadline = time.monotonic() + DELETE_TIMEOUT_S
    while ok(kube, "GET", "/api/v1/pods", query=[("labelSelector", selector), ("limit", "1")])["items"] or \
            ok(kube, "GET", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups", query=[("limit", "1")])["items"] or \
            any([_unprotect_groups(kube, api) for api in native]):  # noqa: C419 (every API, no short cut)
        if time.monotonic() > deadline:
            raise RuntimeError(f"pending pods still there {DELETE_TIMEOUT_S:.0f} s after deleting them")
        time.sleep(0.2)


def _unprotect_groups(kube: Kube, api: str) -> bool:
    """Native PodGroups left (their podgroup-protection finalizer waits for a controller that does not run
    here): the finalizers removed; whether any were left."""
    groups = ok(kube, "GET", f"{api}/podgroups")["items"]
    paths = [f"{api}/namespaces/{g['metadata']['namespace']}/podgroups/{g['metadata']['name']}"
             for g in groups if g["metadata"].get("finalizers")]
    in_parallel(lambda path: ok(kube, "PATCH", path, {"metadata": {"finalizers": None}}, allow=(404,),
                                content_type="application/merge-patch+json"), paths)
    return bool(groups)


def unplaced_reasons(kube: Kube, scenario: Scenario, unplaced: set[str]) -> dict[str, int]:
    """The last FailedScheduling message of each unplaced pod, counted (what the scheduler told users)."""
    last: dict[str, tuple[str, str]] = {}
    for ns in scenario.namespaces:
        for e in ok(kube, "GET", f"/api/v1/namespaces/{ns}/events")["items"]:
            key = f"{ns}/{e['involvedObject'].get('name')}"
            if e.get("reason") == "FailedScheduling" and key in unplaced:
                when = e.get("lastTimestamp") or e.get("eventTime") or ""
                if key not in last or when >= last[key][0]:
                    last[key] = (when, e.get("message") or "")
    return dict(Counter(message for _, message in last.values()))


def placement(kube: Kube) -> dict[str, str | None]:
    """``namespace/name`` -> node (None: not bound) of every benchmark pod, read once at the end."""
    items = ok(kube, "GET", "/api/v1/pods", query=[("labelSelector", f"{PENDING_LABEL}={PENDING}")])["items"]
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"].get("nodeName") for p in items}


def preset_left(kube: Kube) -> set[str]:
    """``namespace/name`` of the pods created bound for the run that are still there and not being deleted."""
    items = ok(kube, "GET", "/api/v1/pods", query=[("labelSelector", f"{PENDING_LABEL}={PRESET}")])["items"]
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in items
            if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")}


# --- watching pods -----------------------------------------------------------------------------------------

@dataclass
class PodWatch:
    """One watch on the benchmark's pods (those `selector` picks) handing every event to `handle`.

    Started before the pods are created, so nothing is missed; reconnects from the last resourceVersion if the
    server ends the watch."""

    cp: ControlPlane
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _conn: http.client.HTTPSConnection | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    error: str = ""
    codec: Codec = field(default_factory=Codec)
    selector = f"{PENDING_LABEL}={PENDING}"

    def handle(self, kind: str, obj: dict[str, Any]) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError(f"the {type(self).__name__} watch did not start: {self.error}")

    def stop(self) -> None:
        self._stop.set()
        if self._conn is not None and self._conn.sock is not None:
            with contextlib.suppress(OSError):
                self._conn.sock.shutdown(2)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        rv = "0"
        while not self._stop.is_set():
            try:
                rv = self._watch(rv)
            except (OSError, http.client.HTTPException, ValueError) as exc:
                if self._stop.is_set():
                    return
                self.error = repr(exc)
                time.sleep(0.2)

    def _watch(self, rv: str) -> str:
        url = urlparse(self.cp.server)
        self._conn = http.client.HTTPSConnection(url.hostname, url.port, context=verifying_context(self.cp.ca_file),
                                                 timeout=None)
        query = urlencode({"watch": "true", "labelSelector": self.selector, "resourceVersion": rv,
                           "timeoutSeconds": "3600"})
        # in protobuf, as the kubelets and controllers watching pods in a real cluster do (the apiserver encodes
        # each event once per encoding its watchers ask for: a JSON watch here would cost a protobuf-speaking
        # scheduler an encoding no real cluster makes for it)
        self._conn.request("GET", f"/api/v1/pods?{query}", headers={"Authorization": f"Bearer {self.cp.token}",
                                                                     "Accept": MEDIA})
        response = self._conn.getresponse()
        if response.status != 200:
            raise ValueError(f"watch answered {response.status}: {response.read()[:300]!r}")
        self._ready.set()
        for type_, obj in self.codec.watch_events(iter(lambda: response.read1(65536), b"")):
            if self._stop.is_set():
                break
            if type_ == "ERROR":   # 410 Gone: start again from now
                return "0"
            rv = obj.get("metadata", {}).get("resourceVersion", rv)
            self.handle(type_, obj)
        return rv


@dataclass
class BindWatch(PodWatch):
    """When each pending pod is first seen bound (monotonic seconds): the harness's own clock for every scheduler
    alike, finer than the one-second timestamps the API records."""

    bound: dict[str, float] = field(default_factory=dict)

    def handle(self, kind: str, obj: dict[str, Any]) -> None:
        if (obj.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}", time.monotonic())

    def last_bind(self) -> float | None:
        return max(self.bound.values(), default=None)


@dataclass
class Reaper(PodWatch):
    """Plays the kubelets the benchmark does not run, for evictions: a bound pod a scheduler deletes (it then has a
    deletionTimestamp and would wait for its kubelet) is force-deleted at once and remembered as preempted. Watches
    the pending pods and those created bound for the run (the reset's own deletes come after it stopped); a pod
    deleted outright counts too."""

    kube: Kube | None = None
    victims: set[str] = field(default_factory=set)
    selector = PENDING_LABEL

    def handle(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        if key in self.victims or not (kind == "DELETED" or meta.get("deletionTimestamp")):
            return
        self.victims.add(key)
        if kind != "DELETED" and self.kube is not None:
            ok(self.kube, "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
               {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}, allow=(404,))
