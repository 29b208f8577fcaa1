"""Independent plan checker (test oracle) written from kube-scheduler semantics.

Does NOT import anything from ``engine``.  Entry point::

    check_plan(docs, assignments, scheduler_name="policy-scheduler") -> list[str]

``docs`` are raw manifest dicts, ``assignments`` maps "namespace/name" of pending
pods to node names.  An empty result means the plan is valid.  The check is on the
*final state*: present pods = bound pods + placed pending pods.
"""
from __future__ import annotations

from .devices import device_violations, dra_extended_resources
from .quantity import amount, exact, integer
from .quotas import quota_violations, reclaim_violations
from .volumes import volume_violations

PG_LABEL = "scheduling.x-k8s.io/pod-group"
NS_NAME_LABEL = "kubernetes.io/metadata.name"
UNSCHED_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
TERMINAL = ("Succeeded", "Failed")
HARD_EFFECTS = ("NoSchedule", "NoExecute")


# --------------------------------------------------------------------------- helpers
def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _ns(obj: dict) -> str:
    return _meta(obj).get("namespace") or "default"


def selector_matches(sel, labels: dict) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, {} matches everything."""
    if sel is None:
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In":
            ok = key in labels and labels[key] in vals
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in vals
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            ok = False
        if not ok:
            return False
    return True


def _node_requirement(expr: dict, labels: dict) -> bool:
    """One NodeSelectorRequirement against node labels."""
    key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in vals
    if op == "NotIn":
        return key not in labels or labels[key] not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):
        if key not in labels or len(vals) != 1:
            return False
        try:
            have, want = int(labels[key]), int(vals[0])
        except (TypeError, ValueError):
            return False
        return have > want if op == "Gt" else have < want
    return False


def _node_term(term: dict, node: Node) -> bool:
    """NodeSelectorTerm: expressions AND fields; an empty term matches nothing."""
    exprs, fields = term.get("matchExpressions") or [], term.get("matchFields") or []
    if not exprs and not fields:
        return False
    if not all(_node_requirement(e, node.labels) for e in exprs):
        return False
    for f in fields:
        if f.get("key") != "metadata.name" or f.get("operator") not in ("In", "NotIn"):
            return False
        inside = node.name in (f.get("values") or [])
        if inside != (f["operator"] == "In"):
            return False
    return True


def tolerates(toleration: dict, taint: dict) -> bool:
    """v1.Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    op = toleration.get("operator") or "Equal"
    tkey = toleration.get("key") or ""
    if tkey == "":
        if op != "Exists":  # empty key only allowed with Exists (matches all keys)
            return False
    elif tkey != taint.get("key"):
        return False
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def _ports_conflict(a: tuple, b: tuple) -> bool:
    (pa, ia, na), (pb, ib, nb) = a, b
    wild = ("", "0.0.0.0")
    return pa == pb and na == nb and (ia == ib or ia in wild or ib in wild)


# --------------------------------------------------------------------------- model
class Node:
    """A parsed Node."""

    def __init__(self, d: dict):
        self.name = _meta(d).get("name")
        self.labels = dict(_meta(d).get("labels") or {})
        spec, status = d.get("spec") or {}, d.get("status") or {}
        self.unschedulable = bool(spec.get("unschedulable"))
        self.taints = list(spec.get("taints") or [])
        cap = status.get("allocatable") or status.get("capacity") or {}
        self.capacity = {r: amount(r, v) for r, v in cap.items()}
        self.capacity.setdefault("pods", 110)
        self.declared_features = set(status.get("declaredFeatures") or [])

    def cap(self, resource: str) -> int:
        return self.capacity.get(resource, 0)


class Term:
    """A pod (anti-)affinity term, with its namespace set resolved."""

    def __init__(self, d: dict, owner_ns: str, cluster: Cluster, owner_labels: dict | None = None):
        self.topology_key = d.get("topologyKey") or ""
        self.selector = d.get("labelSelector")
        owner_labels = owner_labels or {}
        # matchLabelKeys / mismatchLabelKeys: the owner's values for these keys join the selector
        extra = [{"key": k, "operator": "In", "values": [owner_labels[k]]}
                 for k in d.get("matchLabelKeys") or [] if k in owner_labels]
        extra += [{"key": k, "operator": "NotIn", "values": [owner_labels[k]]}
                  for k in d.get("mismatchLabelKeys") or [] if k in owner_labels]
        if extra and self.selector is not None:
            self.selector = {**self.selector,
                             "matchExpressions": list(self.selector.get("matchExpressions") or []) + extra}
        self.namespaces = set(d.get("namespaces") or [])
        self.ns_selector = d.get("namespaceSelector")
        if not self.namespaces and self.ns_selector is None:
            self.namespaces = {owner_ns}
        self._cluster = cluster

    def matches(self, pod: Pod) -> bool:
        in_ns = pod.ns in self.namespaces or (
            self.ns_selector is not None
            and selector_matches(self.ns_selector, self._cluster.ns_labels(pod.ns)))
        return in_ns and selector_matches(self.selector, pod.labels)


class Pod:
    """A parsed Pod."""

    def __init__(self, d: dict, cluster: Cluster):
        meta, spec = _meta(d), d.get("spec") or {}
        self.doc = d
        self.ns, self.name = _ns(d), meta.get("name")
        self.key = f"{self.ns}/{self.name}"
        self.labels = dict(meta.get("labels") or {})
        self.spec = spec
        self.phase = (d.get("status") or {}).get("phase")
        self.node_name = spec.get("nodeName") or None
        self.scheduler = spec.get("schedulerName") or "default-scheduler"
        self.priority = cluster.priority_of(spec)
        self.requests = self._requests(spec)
        self.host_ports = [
            (p.get("protocol") or "TCP", p.get("hostIP") or "", int(p["hostPort"]))
            for c in spec.get("containers") or [] for p in c.get("ports") or []
            if int(p.get("hostPort") or 0) > 0]
        self.tolerations = list(spec.get("tolerations") or [])
        aff = spec.get("affinity") or {}
        na = (aff.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        self.node_affinity = na  # None = unconstrained
        self.node_selector = dict(spec.get("nodeSelector") or {})
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        self.aff_terms = [Term(t, self.ns, cluster, self.labels)
                          for t in (aff.get("podAffinity") or {}).get(req) or []]
        self.anti_terms = [Term(t, self.ns, cluster, self.labels)
                           for t in (aff.get("podAntiAffinity") or {}).get(req) or []]
        self.spread = [c for c in spec.get("topologySpreadConstraints") or []
                       if (c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"]
        self.group = self.labels.get(PG_LABEL)
        self.native_group = (spec.get("schedulingGroup") or {}).get("podGroupName")  # scheduling.k8s.io PodGroup
        self.required_features = _required_features(spec)

    @staticmethod
    def _requests(spec: dict) -> dict:
        """Upstream's pod requests: sum(containers) + sidecars, each init container on top of the sidecars
        started before it (max), pod-level spec.resources for cpu/memory/hugepages, + overhead, + 1 'pods'."""
        def one(c):
            res = c.get("resources") or {}
            merged = dict(res.get("limits") or {})  # requests default to limits
            merged.update(res.get("requests") or {})
            return {r: exact(v) for r, v in merged.items()}

        def plus(a: dict, b: dict) -> dict:
            return {r: a.get(r, 0) + b.get(r, 0) for r in {*a, *b}}

        total: dict = {}
        for c in spec.get("containers") or []:
            total = plus(total, one(c))
        started: dict = {}  # sidecars running so far
        peak: dict = {}
        for c in spec.get("initContainers") or []:
            if c.get("restartPolicy") == "Always":
                started = plus(started, one(c))
                total = plus(total, one(c))
                during = started
            else:
                during = plus(started, one(c))
            peak = {r: max(peak.get(r, 0), during.get(r, 0)) for r in {*peak, *during}}
        total = {r: max(total.get(r, 0), peak.get(r, 0)) for r in {*total, *peak}}
        total.update(Pod._pod_level(spec.get("resources") or {}, total))
        total = plus(total, {r: exact(v) for r, v in (spec.get("overhead") or {}).items()})
        out = {r: integer(r, v) for r, v in total.items()}
        out["pods"] = out.get("pods", 0) + 1
        return {r: v for r, v in out.items() if v > 0}

    @staticmethod
    def _pod_level(res: dict, containers: dict) -> dict:
        """Pod-level requests (as API defaulting fills them in from the limits) for the resources they cover."""
        def covered(r: str) -> bool:
            return r in ("cpu", "memory") or r.startswith("hugepages-")

        out = {r: exact(v) for r, v in (res.get("requests") or {}).items() if covered(r)}
        for r, v in (res.get("limits") or {}).items():
            if covered(r) and r not in out:
                out[r] = containers[r] if r in containers and not r.startswith("hugepages-") else exact(v)
        return out

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    def affinity_ok(self, node: Node) -> bool:
        """nodeSelector + required node affinity."""
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        if self.node_affinity is not None:
            terms = self.node_affinity.get("nodeSelectorTerms") or []
            if not any(_node_term(t, node) for t in terms):
                return False
        return True

    def untolerated(self, node: Node) -> list:
        """Hard (NoSchedule/NoExecute) node taints this pod does not tolerate."""
        return [t for t in node.taints if t.get("effect") in HARD_EFFECTS
                and not any(tolerates(tol, t) for tol in self.tolerations)]

    def node_reasons(self, node: Node) -> list[str]:
        """Reasons why this pod can never go to ``node`` (node-local static filters)."""
        out = []
        if node.unschedulable and not any(tolerates(t, UNSCHED_TAINT) for t in self.tolerations):
            out.append(f"node {node.name} is unschedulable (spec.unschedulable) and not tolerated")
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            out.append(f"nodeSelector {self.node_selector} does not match node {node.name}")
        elif not self.affinity_ok(node):
            out.append(f"required nodeAffinity does not match node {node.name}")
        for t in self.untolerated(node):
            out.append(f"untolerated taint {t.get('key')}={t.get('value', '')}:"
                       f"{t.get('effect')} on node {node.name}")
        missing = self.required_features - node.declared_features
        if missing:
            out.append(f"node {node.name} does not declare the features {sorted(missing)} the pod needs")
        return out


def _required_features(spec: dict) -> set[str]:
    """The node features a pod's spec needs (component-helpers' nodedeclaredfeatures InferForScheduling)."""
    out = set()
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    if any(r.get("action") == "RestartAllContainers" for c in containers for r in c.get("restartPolicyRules") or []):
        out.add("RestartAllContainersOnContainerExits")
    if spec.get("hostNetwork") and spec.get("hostUsers") is False:
        out.add("UserNamespacesHostNetworkSupport")
    if any(m.get("bindMountOptions") for c in [*containers, *(spec.get("ephemeralContainers") or [])]
           for m in c.get("volumeMounts") or []):
        out.add("VolumeBindMountOptions")
    return out


class Cluster:
    """Parsed manifests; ``violations(assignments)`` is the actual checker."""

    def __init__(self, docs: list[dict], scheduler_name: str = "policy-scheduler"):
        docs = [d for d in docs if isinstance(d, dict)]
        self.docs = docs
        self.scheduler_name = scheduler_name
        self._pclasses = {_meta(d).get("name"): d for d in docs if d.get("kind") == "PriorityClass"}
        self._ns_docs = {_meta(d).get("name"): dict(_meta(d).get("labels") or {})
                         for d in docs if d.get("kind") == "Namespace"}
        self.nodes = {}
        for d in docs:
            if d.get("kind") == "Node":
                n = Node(d)
                self.nodes[n.name] = n
        self.pods = {}
        for d in docs:
            if d.get("kind") == "Pod":
                p = Pod(d, self)
                self.pods[p.key] = p
        self.groups = {(_ns(d), _meta(d).get("name")): int((d.get("spec") or {}).get("minMember") or 1)
                       for d in docs if d.get("kind") == "PodGroup" and not _native(d)}
        # scheduling.k8s.io PodGroups with a gang policy: (ns, name) -> (minCount, topology key or None)
        self.composites = {(_ns(d), _meta(d).get("name")): _native_gang(d, "minGroupCount") for d in docs
                           if d.get("kind") == "CompositePodGroup"}
        self.parents = {(_ns(d), _meta(d).get("name")): (d.get("spec") or {}).get("parentCompositePodGroupName")
                        for d in docs if d.get("kind") == "PodGroup" and _native(d)}
        self.native_groups = {(_ns(d), _meta(d).get("name")): _native_gang(d) for d in docs
                              if d.get("kind") == "PodGroup" and _native(d) and _native_gang(d)[0]}
        self.dra_extended = dra_extended_resources(docs)  # requests devices serve (DRAExtendedResource)
        self.pending = [k for k, p in self.pods.items() if not p.node_name and not p.terminal
                        and p.scheduler == scheduler_name]
        self.bound = {k: p.node_name for k, p in self.pods.items() if p.node_name and not p.terminal}

    # ----------------------------------------------------------- lookups
    def priority_of(self, spec: dict) -> int:
        """spec.priority, else PriorityClass value, else globalDefault class, else 0."""
        if spec.get("priority") is not None:
            return int(spec["priority"])
        pc = self._pclasses.get(spec.get("priorityClassName"))
        if pc is None:
            pc = next((c for c in self._pclasses.values() if c.get("globalDefault")), None)
        return int(pc.get("value") or 0) if pc else 0

    def ns_labels(self, ns: str) -> dict:
        """Namespace labels (+ the apiserver-managed kubernetes.io/metadata.name)."""
        return {**self._ns_docs.get(ns, {}), NS_NAME_LABEL: ns}

    # ----------------------------------------------------------- main check
    def violations(self, assignments: dict[str, str]) -> list[str]:
        out: list[str] = []
        pending = set(self.pending)
        placed: dict[str, str] = {}
        for key, node in (assignments or {}).items():
            if key not in self.pods:
                out.append(f"{key}: assigned pod does not exist")
            elif key not in pending:
                out.append(f"{key}: assigned pod is not pending for {self.scheduler_name}")
            elif node not in self.nodes:
                out.append(f"{key}: assigned to unknown node {node!r}")
            else:
                placed[key] = node
        # present pods located on existing nodes
        where = {k: n for k, n in self.bound.items() if n in self.nodes}
        where.update(placed)
        on_node: dict[str, list[str]] = {}
        for k, n in where.items():
            on_node.setdefault(n, []).append(k)

        for key, n in placed.items():
            out += [f"{key}: {r}" for r in self.pods[key].node_reasons(self.nodes[n])]
        out += self._resources(placed, on_node)
        out += self._host_ports(placed, on_node)
        out += self._anti_affinity(placed, where)
        out += self._affinity(placed, where)
        out += self._spread(placed, where)
        out += self._gangs(placed)
        out += volume_violations(self.docs, {k: p.doc for k, p in self.pods.items()},
                                 {n: {"labels": node.labels} for n, node in self.nodes.items()}, placed, where)
        out += device_violations(self.docs, {k: p.doc for k, p in self.pods.items()}, placed)
        running = {k for k in self.bound if not _meta(self.pods[k].doc).get("deletionTimestamp")}
        out += quota_violations(self.docs, {k: p.requests for k, p in self.pods.items()}, running, set(placed),
                                set(self.pending))
        return out

    def _resources(self, placed, on_node) -> list[str]:
        """Per node with placed pods: resources requested by placed pods must fit."""
        out = []
        for n in sorted(set(placed.values())):
            node, keys = self.nodes[n], on_node[n]
            wanted = {r for k in keys if k in placed for r in self.pods[k].requests} - set(self.dra_extended)
            for r in sorted(wanted):
                used = sum(self.pods[k].requests.get(r, 0) for k in keys)
                if used > node.cap(r):
                    out.append(f"node {n}: {r} requested {used} > allocatable {node.cap(r)}")
        return out

    def _host_ports(self, placed, on_node) -> list[str]:
        out = []
        for n in sorted(set(placed.values())):
            keys = sorted(on_node[n])
            for i, a in enumerate(keys):
                for b in keys[i + 1:]:
                    if a not in placed and b not in placed:
                        continue
                    for pa in self.pods[a].host_ports:
                        for pb in self.pods[b].host_ports:
                            if _ports_conflict(pa, pb):
                                out.append(f"{a} and {b}: hostPort {pa[2]}/{pa[0]} conflict on node {n}")
        return out

    def _same_domain(self, n1: str, n2: str, tk: str) -> bool:
        l1, l2 = self.nodes[n1].labels, self.nodes[n2].labels
        return tk in l1 and tk in l2 and l1[tk] == l2[tk]

    def _anti_affinity(self, placed, where) -> list[str]:
        out = []
        for p, pn in placed.items():
            pod = self.pods[p]
            for q, qn in where.items():
                if q == p:
                    continue
                other = self.pods[q]
                for t in pod.anti_terms:
                    if t.matches(other) and self._same_domain(pn, qn, t.topology_key):
                        out.append(f"{p}: anti-affinity ({t.topology_key}) violated by {q}")
                if q in placed:
                    continue  # q's own terms are checked when q is the placed pod
                for t in other.anti_terms:
                    if t.matches(pod) and self._same_domain(pn, qn, t.topology_key):
                        out.append(f"{p}: violates anti-affinity ({t.topology_key}) of {q}")
        return out

    def _matches_all(self, p: str, q: str) -> bool:
        """Pod q matches all of pod p's required affinity terms."""
        return all(t.matches(self.pods[q]) for t in self.pods[p].aff_terms)

    def affinity_status(self, p: str, node: str, present: dict[str, str]) -> str:
        """Pod p's required pod affinity on `node` beside the pods `present` (pod -> node), as upstream's filter
        judges an incoming pod: 'sat' (a pod matching all its terms in each term's domain), 'exc' (no such pod
        anywhere and p matches its own terms: the first pod of a series) or 'no'."""
        terms, labels = self.pods[p].aff_terms, self.nodes[node].labels
        if not terms:
            return "sat"
        if any(t.topology_key not in labels for t in terms):
            return "no"
        matching = [q for q in present if q != p and self._matches_all(p, q)]
        if all(any(self._same_domain(node, present[q], t.topology_key) for q in matching) for t in terms):
            return "sat"
        counted = [q for q in matching if any(t.topology_key in self.nodes[present[q]].labels for t in terms)]
        return "exc" if not counted and self._matches_all(p, p) else "no"

    def _affinity(self, placed, where) -> list[str]:
        """Required pod affinity: some sequential order of placed pods must exist."""
        base = {k: n for k, n in where.items() if k not in placed}
        todo = frozenset(placed)
        if not any(self.pods[k].aff_terms for k in todo):
            return []

        all_match = self._matches_all

        def status(p, present):  # 'sat' | 'exc' | 'no'
            return self.affinity_status(p, placed[p], present)

        def kills(p, q):  # adding p removes q's "first of a series" exception
            return p != q and all_match(q, p) and any(
                t.topology_key in self.nodes[placed[p]].labels for t in self.pods[q].aff_terms)

        memo: dict = {}
        final_ok = {p for p in todo if status(p, where) == "sat"}  # satisfiable at all by pods

        def solve(rem: frozenset):
            if rem in memo:
                return memo[rem]
            start = rem
            present = {**base, **{k: placed[k] for k in placed if k not in rem}}
            while rem:  # greedily add satisfied pods that cannot hurt anyone
                st = {p: status(p, present) for p in rem}
                exc = [q for q, s in st.items() if s == "exc"]
                safe = {p for p in rem if st[p] == "sat" and not any(kills(p, q) for q in exc)}
                if not safe:
                    break
                rem = rem - safe
                present.update({p: placed[p] for p in safe})
            if not rem:
                res = frozenset()
            else:
                res, st = rem, {p: status(p, present) for p in rem}
                dead = frozenset(p for p, s in st.items() if s == "no" and p not in final_ok)
                if dead:  # can neither be satisfied later nor start a series
                    res, st = dead, {}
                for p in sorted(st, key=lambda p: (p in final_ok, p)):  # forced starters first
                    if st[p] != "no":
                        sub = solve(rem - {p})
                        if len(sub) < len(res):
                            res = sub
                        if not res:
                            break
            memo[start] = res
            return res

        # pods only interact with pods matching one of their terms: solve per component
        parent = {p: p for p in todo}

        def root(p):
            while parent[p] != p:
                p = parent[p]
            return p

        for p in todo:
            for q in todo:
                if p != q and any(t.matches(self.pods[q]) for t in self.pods[p].aff_terms):
                    parent[root(p)] = root(q)
        comps: dict = {}
        for p in todo:
            comps.setdefault(root(p), set()).add(p)
        stuck = set()
        for comp in comps.values():
            if any(self.pods[p].aff_terms for p in comp):
                stuck |= solve(frozenset(comp))
        return [f"{p}: required pod affinity cannot be satisfied (no valid placement order)"
                for p in sorted(stuck)]

    def _spread(self, placed, where) -> list[str]:
        """Hard topology spread constraints, evaluated on the final state."""
        out = []
        for p, pn in placed.items():
            pod = self.pods[p]
            if not pod.spread:
                continue
            keys = {c.get("topologyKey") for c in pod.spread}
            node = self.nodes[pn]
            for c in pod.spread:
                tk, max_skew = c.get("topologyKey"), int(c.get("maxSkew") or 1)
                if tk not in node.labels:
                    out.append(f"{p}: node {pn} lacks topology spread key {tk}")
                    continue
                sel = c.get("labelSelector")
                if sel is not None and c.get("matchLabelKeys"):
                    extra = [{"key": k, "operator": "In", "values": [pod.labels[k]]}
                             for k in c["matchLabelKeys"] if k in pod.labels]
                    sel = {**sel, "matchExpressions": list(sel.get("matchExpressions") or []) + extra}
                eligible = {name for name, nd in self.nodes.items()
                            if all(k in nd.labels for k in keys)
                            and (c.get("nodeAffinityPolicy") == "Ignore" or pod.affinity_ok(nd))
                            and (c.get("nodeTaintsPolicy") != "Honor" or not pod.untolerated(nd))}
                counts = {self.nodes[n].labels[tk]: 0 for n in eligible}
                for q, qn in where.items():
                    other = self.pods[q]
                    if qn in eligible and other.ns == pod.ns and selector_matches(sel, other.labels):
                        counts[self.nodes[qn].labels[tk]] += 1
                min_domains = int(c.get("minDomains") or 1)
                low = min(counts.values()) if counts and len(counts) >= min_domains else 0
                mine = counts.get(node.labels[tk], 0)
                if mine - low > max_skew:
                    out.append(f"{p}: topology spread on {tk} violated: domain "
                               f"{node.labels[tk]} has {mine}, min {low}, maxSkew {max_skew}")
        return out

    def _native_gangs(self, placed) -> list[str]:
        """minCount all or nothing (placed + bound members), every member in one domain of the topology key (a node
        whose value is empty is in none, as 1.38's TopologyAwareWorkloadScheduling has it)."""
        out = []
        for (ns, name), (min_count, key) in sorted(self.native_groups.items()):
            members = [k for k, p in self.pods.items() if p.ns == ns and p.native_group == name]
            n_placed = sum(1 for k in members if k in placed)
            n_bound = sum(1 for k in members if k in self.bound)
            if n_placed and n_placed + n_bound < min_count:
                out.append(f"pod group {ns}/{name}: {n_placed} placed + {n_bound} bound < minCount {min_count}")
            where = {self.nodes[n].labels.get(key) or None if n in self.nodes else None  # "": no domain (1.38)
                     for n in [placed.get(k) or self.bound.get(k) for k in members] if n}
            if n_placed and key and None in where:
                out.append(f"pod group {ns}/{name}: members on a node in no domain of {key} (no value)")
            elif n_placed and key and len(where) > 1:
                out.append(f"pod group {ns}/{name}: members in {len(where)} domains of {key}")
        return out

    def _composites(self, placed) -> list[str]:
        """A CompositePodGroup's gang: once any child starts, at least minGroupCount children are whole (placed +
        bound at their minCount); every pod of every child in one domain of its key (no value: no domain)."""
        out = []
        for (ns, name), (min_groups, key) in sorted(self.composites.items()):
            children = {child: self.native_groups[(ns, child)][0] for (cns, child), parent in self.parents.items()
                        if cns == ns and parent == name and (ns, child) in self.native_groups}
            members = {k: p.native_group for k, p in self.pods.items() if p.ns == ns and p.native_group in children}
            if not any(k in placed for k in members):
                continue
            whole = sum(1 for child, need in children.items()
                        if need and sum(1 for k, c in members.items() if c == child and (k in placed or k in self.bound))
                        >= need)
            if whole < min_groups:
                out.append(f"composite pod group {ns}/{name}: {whole} whole child group(s) < minGroupCount {min_groups}")
            where = {self.nodes[n].labels.get(key) or None if n in self.nodes else None
                     for n in [placed.get(k) or self.bound.get(k) for k in members] if n} if key else set()
            if None in where or len(where) > 1:
                out.append(f"composite pod group {ns}/{name}: members in domains {sorted(map(str, where))} of {key}")
        return out

    def _gangs(self, placed) -> list[str]:
        out = self._native_gangs(placed) + self._composites(placed)
        for (ns, name), min_member in sorted(self.groups.items()):
            members = [k for k, p in self.pods.items() if p.ns == ns and p.group == name]
            n_placed = sum(1 for k in members if k in placed)
            n_bound = sum(1 for k in members if k in self.bound)
            if n_placed and n_placed + n_bound < min_member:
                out.append(f"podgroup {ns}/{name}: {n_placed} placed + {n_bound} bound "
                           f"< minMember {min_member}")
        return out


def _native(doc: dict) -> bool:
    return str(doc.get("apiVersion", "")).startswith("scheduling.k8s.io/")


def _whole(mode: object) -> bool:
    """A disruptionMode that evicts the group whole: v1alpha2's `PodGroup`, v1beta1's `{all: {}}`."""
    return mode == "PodGroup" or (isinstance(mode, dict) and mode.get("all") is not None)


def _native_gang(doc: dict, quorum: str = "minCount") -> tuple[int, str | None]:
    """(gang.minCount — minGroupCount for a CompositePodGroup — or 0 for a basic group, the first topology
    constraint's key)."""
    spec = doc.get("spec") or {}
    gang = (spec.get("schedulingPolicy") or {}).get("gang")
    topology = (spec.get("schedulingConstraints") or {}).get("topology") or []
    return (int(gang.get(quorum) or 0) if gang else 0), (topology[0].get("key") if topology else None)


def check_evictions(docs: list[dict], evicted: set[str]) -> list[str]:
    """Violations of a plan's evictions: each victim a running pod, and a scheduling.k8s.io PodGroup with
    `disruptionMode: PodGroup` disrupted whole or not at all (every running member evicted, or none)."""
    cluster = Cluster(docs)
    out = [f"{key}: evicted but not a running pod" for key in sorted(evicted) if key not in cluster.bound]
    whole = {(_ns(d), _meta(d).get("name")) for d in docs if d.get("kind") == "PodGroup" and _native(d)
             and _whole((d.get("spec") or {}).get("disruptionMode"))}
    for ns, name in sorted(whole):
        running = {k for k, p in cluster.pods.items() if p.ns == ns and p.native_group == name and k in cluster.bound
                   and not _meta(p.doc).get("deletionTimestamp")}
        hit = running & evicted
        if hit and hit != running:
            out.append(f"pod group {ns}/{name} (disruptionMode PodGroup): {len(hit)} of {len(running)} running "
                       f"members evicted, not all")
    return out


def check_reclaim(docs: list[dict], assignments: dict[str, str], preemptions: dict[str, list[str]],
                  scheduler_name: str = "policy-scheduler") -> list[str]:
    """Violations of who evicts whom under ElasticQuotas (testkit.quotas.reclaim_violations): `preemptions` maps each
    preemptor to its victims, `assignments` is the plan's."""
    cluster = Cluster(docs, scheduler_name)
    running = {k for k in cluster.bound if not _meta(cluster.pods[k].doc).get("deletionTimestamp")}
    return reclaim_violations(docs, {k: p.requests for k, p in cluster.pods.items()},
                              {k: p.priority for k, p in cluster.pods.items()}, running, set(assignments), preemptions)


def check_plan(docs: list[dict], assignments: dict[str, str],
               scheduler_name: str = "policy-scheduler") -> list[str]:
    """Return human-readable violations of ``assignments`` (empty list = valid plan)."""
    return Cluster(docs, scheduler_name).violations(assignments)


def check_in_order(docs: list[dict], assignments: dict[str, str], preempted: set[str], evicted: set[str],
                   scheduler_name: str = "policy-scheduler") -> list[str]:
    """Violations of a plan with evictions, in the order things happen (kube-scheduler's, one pod at a time): the
    pods placed without preemption against the cluster as it is, then the victims gone, then the pods placed by
    preemption (`preempted`) against the cluster with the others bound. A pod's own spread and affinity are not
    checked again once it is bound (IgnoredDuringExecution); existing pods' anti-affinity is."""
    first = {k: n for k, n in assignments.items() if k not in preempted}
    out = check_plan(docs, first, scheduler_name) + check_evictions(docs, evicted)
    after: list[dict] = []
    for d in docs:
        key = f"{_ns(d)}/{_meta(d).get('name')}" if d.get("kind") == "Pod" else None
        if key in evicted:
            continue
        if key in first:
            d = {**d, "spec": {**d["spec"], "nodeName": first[key]}, "status": {"phase": "Running"}}
        after.append(d)
    return out + check_plan(after, {k: n for k, n in assignments.items() if k in preempted}, scheduler_name)
