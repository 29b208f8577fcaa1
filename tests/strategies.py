"""Hypothesis strategies: random small clusters and pending batches as real manifests."""

from __future__ import annotations

from hypothesis import strategies as st

from testkit.manifests import affinity, anti, expr, node, node_affinity, pod, podgroup, spread, term

ZONE = "topology.kubernetes.io/zone"
APPS = ["web", "db", "cache"]


@st.composite
def nodes(draw, max_nodes: int = 5) -> list[dict]:
    out = []
    for i in range(draw(st.integers(1, max_nodes))):
        labels = {ZONE: draw(st.sampled_from("ab"))}
        if draw(st.booleans()):
            labels["disk"] = draw(st.sampled_from(["ssd", "hdd"]))
        taints = None
        if draw(st.integers(0, 4)) == 0:
            taints = [{"key": "dedicated", "value": draw(st.sampled_from(["gpu", "infra"])),
                       "effect": draw(st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule"]))}]
        extra = {"example.com/gpu": "1"} if draw(st.integers(0, 3)) == 0 else {}
        out.append(node(f"n{i}", cpu=str(draw(st.integers(1, 4))), pods=draw(st.integers(2, 6)), labels=labels,
                        taints=taints, unschedulable=draw(st.integers(0, 6)) == 0, **extra))
    return out


@st.composite
def pending_pod(draw, name: str, gangs: list[str]) -> dict:
    app = draw(st.sampled_from(APPS))
    labels = {"app": app}
    kw: dict = {}
    if gangs and draw(st.integers(0, 3)) == 0:
        labels["scheduling.x-k8s.io/pod-group"] = draw(st.sampled_from(gangs))
    aff: dict = {}
    choice = draw(st.integers(0, 9))
    if choice == 0:
        kw["nodeSelector"] = {"disk": draw(st.sampled_from(["ssd", "hdd"]))}
    elif choice == 1:
        aff.update(node_affinity([expr(ZONE, draw(st.sampled_from(["In", "NotIn"])), "a")]))
    n_terms = draw(st.sampled_from([0, 0, 0, 0, 0, 1, 1, 2]))
    if n_terms:
        aff.update(affinity(*[term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from([ZONE, "kubernetes.io/hostname"])))
                              for _ in range(n_terms)]))
    if draw(st.integers(0, 2)) == 0:
        aff.update(anti(term({"app": draw(st.sampled_from(APPS))}, draw(st.sampled_from([ZONE, "kubernetes.io/hostname"])))))
    if draw(st.integers(0, 4)) == 0:
        aff.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(1, 100)), "preference": {"matchExpressions": [expr("disk", "In", "ssd")]}}]
    if draw(st.integers(0, 5)) == 0:
        kw["requests"] = {"example.com/gpu": "1"}
    if draw(st.integers(0, 5)) == 0:
        kw["initContainers"] = [{"name": "init", "image": "busybox",
                                 "resources": {"requests": {"cpu": draw(st.sampled_from(["1", "2", "3"]))}}}]
    if aff:
        kw["affinity"] = aff
    if draw(st.integers(0, 4)) == 0:
        kw["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if draw(st.integers(0, 4)) == 0:
        kw["topologySpreadConstraints"] = [spread({"app": app}, hard=draw(st.booleans()))]
    if draw(st.integers(0, 5)) == 0:
        kw["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    cpu = draw(st.sampled_from(["500m", "1", "1500m", "2"]))
    return pod(name, cpu=cpu, labels=labels, priority=draw(st.sampled_from([0, 0, 100])), **kw)


@st.composite
def clusters(draw, max_nodes: int = 5, max_pods: int = 8) -> list[dict]:
    docs = draw(nodes(max_nodes))
    gangs = [g for g in ("g1", "g2") if draw(st.booleans())]
    docs += [podgroup(g, draw(st.integers(1, 3))) for g in gangs]
    n_nodes = sum(1 for d in docs if d["kind"] == "Node")
    for i in range(draw(st.integers(0, 2))):  # a few bound pods
        host = f"n{draw(st.integers(0, n_nodes - 1))}"
        bound_kw = {}
        if draw(st.booleans()):
            bound_kw["affinity"] = anti(term({"app": draw(st.sampled_from(APPS))}, ZONE))
        docs.append(pod(f"bound{i}", cpu="500m", labels={"app": draw(st.sampled_from(APPS))}, node_name=host, **bound_kw))
    for i in range(draw(st.integers(1, max_pods))):
        docs.append(draw(pending_pod(f"p{i}", gangs)))
    return docs


PRIORITIES = (0, 100, 1000)
GPU_TAINT = {"key": "gpu", "value": "true", "effect": "NoSchedule"}


@st.composite
def mixed_apps(draw, max_nodes: int = 12, max_pods: int = 40) -> list[dict]:
    """Snapshots shaped like a user's 300-node one (issue 26 point 4), small: nodes of three sizes in three
    zones (a few GPU-tainted, a few cordoned) and apps of a few pods each, every pod plain or carrying one
    rule about its own app — a hard zone spread, required zone affinity, hostname anti-affinity — or an init
    container larger than its container (tolerating the GPU taint); three priorities, one creation time each."""
    docs = []
    for i in range(draw(st.integers(3, max_nodes))):
        cpu = draw(st.sampled_from(["4", "8", "16"]))
        docs.append(node(f"n{i:02d}", cpu=cpu, memory=f"{4 * int(cpu)}Gi", labels={ZONE: "abc"[i % 3]},
                         taints=[GPU_TAINT] if draw(st.integers(0, 5)) == 0 else None,
                         unschedulable=draw(st.integers(0, 9)) == 0))
    apps = draw(st.integers(1, 3))
    for i in range(draw(st.integers(1, max_pods))):
        app = {"app": f"app-{draw(st.integers(0, apps - 1))}"}
        kw: dict = {}
        rule = draw(st.sampled_from(["plain", "plain", "spread", "affinity", "anti", "init"]))
        if rule == "spread":
            kw["topologySpreadConstraints"] = [spread(app)]
        elif rule == "affinity":
            kw["affinity"] = affinity(term(app, ZONE))
        elif rule == "anti":
            kw["affinity"] = anti(term(app))
        elif rule == "init":
            kw["initContainers"] = [{"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]
            kw["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
        doc = pod(f"p{i:02d}", cpu=draw(st.sampled_from(["100m", "250m", "500m", "1", "2"])),
                  memory=draw(st.sampled_from(["128Mi", "512Mi", "1Gi", "2Gi"])), labels=app,
                  priority=draw(st.sampled_from(PRIORITIES)), **kw)
        doc["metadata"]["creationTimestamp"] = f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z"
        docs.append(doc)
    return docs


HOSTNAME = "kubernetes.io/hostname"


@st.composite
def alike_preemptors(draw) -> list[dict]:
    """Zoned nodes full of running pods of low priorities, and preemptors most of which share one class (replicas of
    one spec: the same labels, requests and rules, so the per-node search serves them one after the other against
    one ledger and the batch model counts them as one class): a zone spread over their own label, anti-affinity to
    each other or to a running app, a host port; sometimes a second, smaller class beside them."""
    docs: list[dict] = []
    count = draw(st.integers(2, 5))
    for i in range(count):
        room = draw(st.integers(1, 3))
        docs.append(node(f"n{i}", cpu=str(room), pods=10, labels={ZONE: "ab"[i % 2] if count > 2 else "a"}))
        for j in range(room):
            docs.append(pod(f"r{i}-{j}", cpu="1", node_name=f"n{i}", priority=draw(st.sampled_from([0, 0, 5])),
                            labels={"app": draw(st.sampled_from(["web", "db"]))}))

    def spec(labels: dict) -> dict:
        extra: dict = {}
        if draw(st.booleans()):
            extra["topologySpreadConstraints"] = [spread(labels, ZONE, skew=1)]
        rule = draw(st.sampled_from([None, "self", "db"]))
        if rule is not None:
            extra["affinity"] = anti(term(labels if rule == "self" else {"app": "db"},
                                          draw(st.sampled_from([HOSTNAME, ZONE]))))
        if draw(st.integers(0, 3)) == 0:
            extra["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        return extra

    shared = spec({"app": "train"})
    for k in range(draw(st.integers(2, 4))):
        docs.append(pod(f"p{k}", cpu="1", priority=100, labels={"app": "train"}, **shared))
    if draw(st.booleans()):
        other = spec({"app": "serve"})
        docs += [pod(f"q{k}", cpu="1", priority=50, labels={"app": "serve"}, **other)
                 for k in range(draw(st.integers(1, 2)))]
    return docs
