"""The plan checker's volume rules, written from kube-scheduler's VolumeBinding, VolumeZone, NodeVolumeLimits
and VolumeRestrictions (imports nothing of the engine).

``volume_violations(docs, pods, nodes, placed, where)``: ``pods`` maps "ns/name" to pod manifests,
``nodes`` node name to (labels, node manifest), ``placed`` the plan's pending pods -> node, ``where`` every
present pod -> node. Unbound WaitForFirstConsumer claims are checked all at once: some assignment of distinct
available PVs (or a provisioner) must meet every placed pod's claims.
"""
from __future__ import annotations

from .quantity import amount

ZONE_KEYS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region",
             "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region")
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def _meta(d: dict) -> dict:
    return d.get("metadata") or {}


def _req_ok(e: dict, labels: dict) -> bool:
    key, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
    return {"In": lambda: labels.get(key) in vals and key in labels,
            "NotIn": lambda: key not in labels or labels[key] not in vals,
            "Exists": lambda: key in labels,
            "DoesNotExist": lambda: key not in labels}.get(op, lambda: False)()


def _terms_ok(terms: list, labels: dict, name: str) -> bool:
    """NodeSelectorTerms ORed (labels, and metadata.name fields)."""
    for t in terms:
        exprs, fields = t.get("matchExpressions") or [], t.get("matchFields") or []
        if not exprs and not fields:
            continue
        if all(_req_ok(e, labels) for e in exprs) and all(_req_ok(f, {"metadata.name": name}) for f in fields):
            return True
    return False


def _claims_of(pod: dict) -> list[str]:
    out = []
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if v.get("persistentVolumeClaim"):
            out.append(v["persistentVolumeClaim"]["claimName"])
        elif v.get("ephemeral") is not None:
            out.append(f"{_meta(pod)['name']}-{v['name']}")
    return out


class Storage:
    def __init__(self, docs: list[dict]):
        self.pvcs = {f"{_meta(d).get('namespace') or 'default'}/{_meta(d)['name']}": d
                     for d in docs if d.get("kind") == "PersistentVolumeClaim"}
        self.pvs = {_meta(d)["name"]: d for d in docs if d.get("kind") == "PersistentVolume"}
        self.classes = {_meta(d)["name"]: d for d in docs if d.get("kind") == "StorageClass"}
        self.limits = {_meta(d)["name"]: {x["name"]: int(x["allocatable"]["count"])
                                           for x in (d.get("spec") or {}).get("drivers") or []
                                           if (x.get("allocatable") or {}).get("count") is not None}
                       for d in docs if d.get("kind") == "CSINode"}
        self.tracked = {_meta(d)["name"] for d in docs
                        if d.get("kind") == "CSIDriver" and (d.get("spec") or {}).get("storageCapacity")}
        self.capacities = [d for d in docs if d.get("kind") == "CSIStorageCapacity"]

    def klass(self, pvc: dict) -> str:
        beta = (_meta(pvc).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class")
        return beta if beta is not None else (pvc.get("spec") or {}).get("storageClassName") or ""

    @staticmethod
    def bound(pvc: dict) -> bool:
        spec, ann = pvc.get("spec") or {}, _meta(pvc).get("annotations") or {}
        return bool(spec.get("volumeName")) and ("pv.kubernetes.io/bind-completed" in ann
                                                 or (pvc.get("status") or {}).get("phase") == "Bound")

    def pv_admits(self, pv: dict, labels: dict, name: str) -> bool:
        req = (((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
        return "nodeSelectorTerms" not in req or _terms_ok(req["nodeSelectorTerms"], labels, name)

    def pv_fits(self, pv: dict, pvc: dict) -> bool:
        ps, cs = pv.get("spec") or {}, pvc.get("spec") or {}
        ann = _meta(pv).get("annotations") or {}
        pv_class = ann.get("volume.beta.kubernetes.io/storage-class", ps.get("storageClassName") or "")
        want = amount("storage", ((cs.get("resources") or {}).get("requests") or {}).get("storage", 0))
        have = amount("storage", (ps.get("capacity") or {}).get("storage", 0))
        sel = cs.get("selector")
        labels = _meta(pv).get("labels") or {}
        return ((pv.get("status") or {}).get("phase") == "Available" and not ps.get("claimRef")
                and pv_class == self.klass(pvc) and have >= want
                and (ps.get("volumeMode") or "Filesystem") == (cs.get("volumeMode") or "Filesystem")
                and set(cs.get("accessModes") or []) <= set(ps.get("accessModes") or [])
                and (sel is None or (all(labels.get(k) == v for k, v in (sel.get("matchLabels") or {}).items())
                                     and all(_req_ok(e, labels) for e in sel.get("matchExpressions") or []))))

    def provisionable(self, pvc: dict, labels: dict) -> bool:
        sc = self.classes.get(self.klass(pvc)) or {}
        if sc.get("provisioner") in (None, "", NO_PROVISIONER):
            return False
        topo = sc.get("allowedTopologies")
        return (not topo or any(all(labels.get(e["key"]) in (e.get("values") or [])
                                    for e in t.get("matchLabelExpressions") or []) for t in topo)) and (
            self.capacity_holds(pvc, sc["provisioner"], labels))

    def capacity_holds(self, pvc: dict, driver: str, labels: dict) -> bool:
        """A driver tracking capacity: some CSIStorageCapacity of the class on the node holds the claim."""
        want = amount("storage", (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", 0))
        if driver not in self.tracked or not want:
            return True
        for cap in self.capacities:
            topology, limit = cap.get("nodeTopology"), cap.get("maximumVolumeSize", cap.get("capacity"))
            if (cap.get("storageClassName") == self.klass(pvc) and topology is not None and limit is not None
                    and amount("storage", limit) >= want
                    and all(labels.get(k) == v for k, v in (topology.get("matchLabels") or {}).items())
                    and all(_req_ok(e, labels) for e in topology.get("matchExpressions") or [])):
                return True
        return False


def volume_violations(docs: list[dict], pods: dict[str, dict], nodes: dict[str, dict],
                      placed: dict[str, str], where: dict[str, str]) -> list[str]:
    st = Storage(docs)
    out: list[str] = []
    statics: list[tuple[str, dict, str]] = []  # (pod key, claim, node) needing a static PV
    for key, n in placed.items():
        pod, labels = pods[key], nodes[n]["labels"]
        ns = _meta(pod).get("namespace") or "default"
        for name in _claims_of(pod):
            pvc = st.pvcs.get(f"{ns}/{name}")
            problem = _claim_problem(st, pvc, name, labels, n)
            if problem:
                out.append(f"{key}: {problem}")
            elif not st.bound(pvc) and not st.provisionable(pvc, labels):
                statics.append((key, pvc, n))
    out += _static_matching(st, statics, nodes)
    out += _attach_limits(st, pods, placed, where)
    out += _read_write_once_pod(st, pods, placed, where)
    return out


def _claim_problem(st: Storage, pvc: dict | None, name: str, labels: dict, node: str) -> str:
    if pvc is None:
        return f"claim {name} does not exist"
    if _meta(pvc).get("deletionTimestamp") or (pvc.get("status") or {}).get("phase") == "Lost":
        return f"claim {name} is being deleted or lost"
    spec = pvc.get("spec") or {}
    if st.bound(pvc):
        pv = st.pvs.get(spec["volumeName"])
        if pv is None:
            return f"claim {name} is bound to a missing PV"
        if not st.pv_admits(pv, labels, node):
            return f"claim {name}'s PV {spec['volumeName']} does not admit node {node}"
        pv_labels = _meta(pv).get("labels") or {}
        if any(k in labels for k in ZONE_KEYS):
            for k in ZONE_KEYS:
                if pv_labels.get(k):
                    have = labels.get(k, labels.get(k.replace("failure-domain.beta.kubernetes.io", "topology.kubernetes.io")))
                    if have not in pv_labels[k].split("__"):
                        return f"claim {name}'s PV zone {pv_labels[k]} is not node {node}'s"
        return ""
    sc = st.classes.get(st.klass(pvc))
    if spec.get("volumeName") or sc is None or sc.get("volumeBindingMode") != "WaitForFirstConsumer":
        return f"claim {name} is unbound and binds immediately"
    return ""


def _static_matching(st: Storage, needs: list[tuple[str, dict, str]], nodes: dict[str, dict]) -> list[str]:
    """Distinct available PVs for every claim that cannot be provisioned (bipartite matching, augmenting paths)."""
    options = [[pv for pv, d in st.pvs.items() if st.pv_fits(d, pvc) and st.pv_admits(d, nodes[n]["labels"], n)]
               for _, pvc, n in needs]
    owner: dict[str, int] = {}

    def augment(i: int, seen: set[str]) -> bool:
        for pv in options[i]:
            if pv not in seen:
                seen.add(pv)
                if pv not in owner or augment(owner[pv], seen):
                    owner[pv] = i
                    return True
        return False
    return [f"{key}: claim {_meta(pvc)['name']} has no PV of its own on node {n}"
            for i, (key, pvc, n) in enumerate(needs) if not augment(i, set())]


def _volume_ids(st: Storage, pod: dict) -> set[tuple[str, str]]:
    ns = _meta(pod).get("namespace") or "default"
    out = set()
    for name in _claims_of(pod):
        pvc = st.pvcs.get(f"{ns}/{name}")
        if pvc is None:
            continue
        pv = st.pvs.get((pvc.get("spec") or {}).get("volumeName") or "")
        csi = ((pv or {}).get("spec") or {}).get("csi")
        if csi:
            out.add((csi["driver"], csi["volumeHandle"]))
        elif pv is None:
            prov = (st.classes.get(st.klass(pvc)) or {}).get("provisioner")
            if prov and prov != NO_PROVISIONER:
                out.add((prov, f"{ns}/{name}"))
    return out


def _attach_limits(st: Storage, pods: dict[str, dict], placed: dict[str, str], where: dict[str, str]) -> list[str]:
    out = []
    for n in sorted(set(placed.values()) & set(st.limits)):
        ids = set().union(*(_volume_ids(st, pods[k]) for k, m in where.items() if m == n))
        new = set().union(*(_volume_ids(st, pods[k]) for k, m in placed.items() if m == n))
        for driver, limit in st.limits[n].items():
            if any(d == driver for d, _ in new) and sum(1 for d, _ in ids if d == driver) > limit:
                out.append(f"node {n}: more than {limit} {driver} volumes attached")
    return out


def _read_write_once_pod(st: Storage, pods: dict[str, dict], placed: dict[str, str], where: dict[str, str]) -> list[str]:
    users: dict[str, list[str]] = {}
    for k in where:
        ns = _meta(pods[k]).get("namespace") or "default"
        for name in _claims_of(pods[k]):
            pvc = st.pvcs.get(f"{ns}/{name}")
            if pvc is not None and "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or []):
                users.setdefault(f"{ns}/{name}", []).append(k)
    return [f"ReadWriteOncePod claim {c} used by {len(u)} pods" for c, u in users.items()
            if len(u) > 1 and any(k in placed for k in u)]
