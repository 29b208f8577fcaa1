"""What one scheduler did with one workload: figures from the observations of a run (pure functions).

A run observes: when each pending pod's create returned, when the watch first saw it bound, and where the
pods are at the end. Everything here derives from those, the same way for every scheduler.
"""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from compare_workloads import POD_GROUP_LABEL, PRICE_ANNOTATION, ZONE_KEY, Scenario
from testkit.quantity import amount


@dataclass
class RunResult:
    """One scheduler on one workload at one size, one repeat. Times in seconds, memory in MiB."""

    workload: str
    nodes: int
    scheduler: str
    repeat: int
    arrival: str
    pending: int
    placed: int = 0
    seconds: float = 0.0               # t0 (creation start, or ready for batch arrival) -> last bind seen
    pods_per_s: float = 0.0            # placed / seconds
    latency_p50: float | None = None   # created (or t0) -> bind seen, over placed pods
    latency_p90: float | None = None
    latency_p99: float | None = None
    rate: float | None = None          # stream arrival: pods created per second (None: as fast as 16 clients go)
    startup_s: float = 0.0             # process start -> ready
    first_bind_s: float | None = None  # batch arrival: process start -> the first pod bound
    # batch arrival: ready -> the first pod bound (issue 30's "after the scheduler sees it": /readyz answers once the
    # informers have listed the cluster, for both schedulers; negative when the bind came before the poll saw ready)
    seen_bind_s: float | None = None
    latency_p99_solo: float | None = None  # p99 over the pods in no gang (set when the workload has gangs)
    # --apiserver-gc: the apiserver's garbage-collector mark phases during the run (from its gctrace), their seconds,
    # the pods whose wait overlapped one, and the p99 of those pods' waits and of the others'
    gc_marks: int | None = None
    gc_mark_s: float | None = None
    pods_in_gc: int | None = None
    latency_p99_in_gc: float | None = None
    latency_p99_clear: float | None = None
    bound_curve: list[tuple[float, int]] | None = None  # batch arrival: (s from ready, pods bound), sampled
    create_s: float = 0.0              # creating the pending pods (16 client threads)
    gangs: int = 0
    gangs_complete: int = 0
    gangs_partial: int = 0
    pods_in_partial: int = 0           # bound pods of incomplete gangs: capacity held for nothing
    nodes_used: int = 0                # nodes hosting at least one benchmark pod
    claims: int = 0                    # PersistentVolumeClaims of the workload
    claims_bound: int | None = None    # of those, Bound by the PV controller at the end (None: no claims)
    devices_used: int | None = None    # DRA devices allocated to claims reserved for a pod (None: no claims)
    # DRA: physical devices (shared counter sets) and devices allocated beyond their slices at the end (None: no claims)
    devices_overcommitted: int | None = None
    # CPU seconds (user + system) during the run: kube-apiserver and etcd from just before the pods are created (or
    # the scheduler starts) to the end of the run; the scheduler process over its life, startup included
    apiserver_cpu_s: float | None = None
    etcd_cpu_s: float | None = None  # etcd's part of apiserver_cpu_s
    apiserver_cpu_bound_s: float | None = None  # apiserver_cpu_s until the last bind (before the scheduler stops)
    scheduler_cpu_s: float | None = None
    api_requests: dict[str, int] | None = None  # requests the apiserver served during the run, by "VERB resource"
    api_seconds: dict[str, float] | None = None  # seconds the apiserver spent serving them, by the same key
    zone_skew: int | None = None       # over apps: the most (max - min) of an app's placed pods across zones
    node_max: int | None = None        # over apps: the most pods of one app placed on one node
    price: float | None = None         # sum of the `price` annotations of those nodes
    # policy-scheduler's cycles, from its /metrics histograms (batch_size, solve_seconds) at the end of the run
    solve_s: float | None = None       # seconds from snapshot to plan, all cycles (solve_seconds_sum)
    batches: int | None = None         # cycles (batch_size_count)
    batch_pods: int | None = None      # pending pods over all cycles, a retried pod each time (batch_size_sum)
    solve_max_s: float | None = None   # the slowest cycle took at most this (its solve_seconds bucket; inf: > 10 s)
    rss_mib: float | None = None       # peak resident memory of the scheduler process (VmHWM)
    # gangs with a required topology (schedulingConstraints.topology[0].key): complete ones whose members all lie in
    # one domain of it (a node without the label is in none), and the domains a complete gang's members span
    gangs_one_domain: int | None = None
    domains_mean: float | None = None
    domains_max: int | None = None
    # pods created bound for the run (preset) in gangs: groups a scheduler evicted whole, and groups it left with some
    # members evicted and some running (never right for a group of disruptionMode all)
    groups_evicted: int | None = None
    groups_half_evicted: int | None = None
    victims_by_namespace: dict[str, int] | None = None  # the same victims, by namespace (one per priority in hero)
    unplaced_why: dict[str, int] | None = None  # unplaced pods' last FailedScheduling messages, counted
    # workloads with ElasticQuotas: pods a scheduler deleted (preempted) during the run, of any tenant; tenants
    # whose min / max was honoured at the end; per tenant (namespace): TenantFigures as a dict
    preemptions: int | None = None
    min_honoured: int | None = None
    max_honoured: int | None = None
    tenants: dict[str, dict[str, Any]] | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


CURVE_POINTS = 200


def bound_curve(bound_at: list[float], ready_at: float) -> list[tuple[float, int]]:
    """(seconds from ready, pods bound by then) at every k-th bind, at most CURVE_POINTS of them (the last bind's
    always): enough for a plot of pods bound over time."""
    times = sorted(t - ready_at for t in bound_at)
    if not times:
        return []
    step = max(1, -(-len(times) // CURVE_POINTS))
    picked = [(round(times[k - 1], 4), k) for k in range(step, len(times) + 1, step)]
    if picked[-1][1] != len(times):
        picked.append((round(times[-1], 4), len(times)))
    return picked


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def waits_of(created: dict[str, float], bound: dict[str, float], t0: float, batch: bool) -> dict[str, float]:
    """Each bound pod's wait. Stream arrival: from its creation; batch arrival (pods waiting before the scheduler
    started): from t0, when it was ready."""
    return {k: max(0.0, bound[k] - (t0 if batch else created[k])) for k in bound if k in created}


def timing(result: RunResult, created: dict[str, float], bound: dict[str, float], t0: float,
           batch: bool, in_gangs: frozenset[str] = frozenset()) -> None:
    """Throughput and latency (`waits_of`); p99 also over the pods not in a gang (`in_gangs`): a gang's members
    wait for its last one, which a scheduler without gangs does not."""
    times = [t for key, t in bound.items() if key in created]
    if not times:
        return
    result.seconds = max(times) - t0
    result.pods_per_s = len(times) / result.seconds if result.seconds > 0 else 0.0
    waits = list(waits_of(created, bound, t0, batch).values())
    result.latency_p50 = percentile(waits, 0.5)
    result.latency_p90 = percentile(waits, 0.9)
    result.latency_p99 = percentile(waits, 0.99)
    if in_gangs:
        solo = [w for key, w in waits_of(created, bound, t0, batch).items() if key not in in_gangs]
        result.latency_p99_solo = percentile(solo, 0.99)


GCTRACE = re.compile(r"^gc \d+ @(?P<at>[\d.]+)s \d+%: (?P<phases>[\d.+]+) ms clock")


def gc_marks(log: str, started_at: float) -> list[tuple[float, float]]:
    """(start, end) on time.monotonic() of every collection a Go process's gctrace lines report (GODEBUG=gctrace=1:
    "gc N @<s since start>s <%>: <sweep term>+<mark>+<mark term> ms clock, ..."), the process started (exec'd) at
    `started_at`: while the apiserver marks, its collector takes a quarter of its cores and makes the goroutines
    that allocate help, and every request it serves slows down."""
    marks = []
    for line in log.splitlines():
        if (m := GCTRACE.match(line)) is not None:
            begin = started_at + float(m["at"])
            marks.append((begin, begin + sum(float(x) for x in m["phases"].split("+")) / 1000))
    return marks


def gc_split(result: RunResult, created: dict[str, float], bound: dict[str, float], t0: float, batch: bool,
             marks: list[tuple[float, float]], in_gangs: frozenset[str] = frozenset()) -> None:
    """Each bound pod's wait (`waits_of`) counted in or out of the apiserver's GC marks: in when the wait overlapped
    one (its creation, or t0, before the mark ended, its bind seen after the mark began). Over the pods in no gang
    (`in_gangs`), as `latency_p99_solo`: a member waits for its gang's last one, GC or not."""
    waits = {k: w for k, w in waits_of(created, bound, t0, batch).items() if k not in in_gangs}
    if not waits:
        return
    since = {k: t0 if batch else created[k] for k in waits}
    start, end = min(since.values()), max(bound[k] for k in waits)
    during = [(a, b) for a, b in marks if a < end and b > start]
    result.gc_marks = len(during)
    result.gc_mark_s = round(sum(min(b, end) - max(a, start) for a, b in during), 3)
    inside = {k for k in waits if any(a <= bound[k] and since[k] <= b for a, b in during)}
    result.pods_in_gc = len(inside)
    result.latency_p99_in_gc = percentile([waits[k] for k in inside], 0.99)
    result.latency_p99_clear = percentile([w for k, w in waits.items() if k not in inside], 0.99)


def outcome(result: RunResult, scenario: Scenario, where: dict[str, str | None]) -> None:
    """Pods placed, gangs complete / partial, nodes used and their price, from the final placement."""
    placed = {key: node for key, node in where.items() if node}
    result.placed = len(placed)
    result.nodes_used = len(set(placed.values()))
    prices = {n.name: float(n.annotations[PRICE_ANNOTATION]) for n in scenario.nodes
              if PRICE_ANNOTATION in n.annotations}
    if prices:
        result.price = round(sum(prices.get(node, 0.0) for node in set(placed.values())), 3)
    result.zone_skew, result.node_max = spread_of(scenario, placed)
    members = gang_members(scenario)
    pending_groups = set(members.values())  # groups whose pods run already (created bound) are not the run's gangs
    sizes = {g: size for g, size in scenario.gang_sizes().items() if g in pending_groups}
    bound_per_gang = Counter(members[key] for key in placed if key in members)
    result.gangs = len(sizes)
    topology_outcome(result, scenario, placed, members, sizes)
    for gang, size in sizes.items():
        got = bound_per_gang.get(gang, 0)
        if got >= size:
            result.gangs_complete += 1
        elif got > 0:
            result.gangs_partial += 1
            result.pods_in_partial += got


def topology_outcome(result: RunResult, scenario: Scenario, placed: dict[str, str], members: dict[str, str],
                     sizes: dict[str, int]) -> None:
    """For gangs with a required topology key: how many complete ones lie in one domain, and the domains each
    complete one spans (mean, max), read from the nodes' labels after the run."""
    keys = {f"{g['metadata']['namespace']}/{g['metadata']['name']}": topology[0].get("key")
            for g in scenario.pod_groups
            if (topology := ((g.get("spec") or {}).get("schedulingConstraints") or {}).get("topology"))}
    if not keys:
        return
    labels = {n.name: n.labels for n in scenario.nodes}
    domains: dict[str, set[str | None]] = defaultdict(set)
    count = Counter(members[key] for key in placed if key in members)
    for key, node in placed.items():
        gang = members.get(key)
        if gang in keys and count[gang] >= sizes.get(gang, 0):
            domains[gang].add(labels.get(node, {}).get(keys[gang]))
    spans = [len(d) for d in domains.values()]
    result.gangs_one_domain = sum(1 for d in domains.values() if len(d) == 1 and None not in d)
    result.domains_mean = round(sum(spans) / len(spans), 3) if spans else None
    result.domains_max = max(spans, default=None)


def eviction_outcome(result: RunResult, scenario: Scenario, victims: set[str]) -> None:
    """Pods created bound for the run that a scheduler evicted (`victims`), and what became of their gangs: evicted
    whole, or half-evicted (some members gone, some left)."""
    result.preemptions = len(victims)
    result.victims_by_namespace = dict(sorted(Counter(key.split("/", 1)[0] for key in victims).items()))
    per_group: dict[str, list[str]] = defaultdict(list)
    for pod in scenario.preset:
        meta = pod["metadata"]
        group = (pod["spec"].get("schedulingGroup") or {}).get("podGroupName") or \
            (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        if group:
            per_group[f"{meta['namespace']}/{group}"].append(f"{meta['namespace']}/{meta['name']}")
    hit = {g: sum(1 for key in pods if key in victims) for g, pods in per_group.items()}
    result.groups_evicted = sum(1 for g, n in hit.items() if n == len(per_group[g]))
    result.groups_half_evicted = sum(1 for g, n in hit.items() if 0 < n < len(per_group[g]))


def spread_of(scenario: Scenario, placed: dict[str, str]) -> tuple[int, int]:
    """How evenly each app's placed pods lie: the largest zone skew (max - min over the cluster's zones) and
    the most pods of one app on one node, over all apps."""
    zone_of = {n.name: n.labels.get(ZONE_KEY) for n in scenario.nodes}
    zones = sorted({z for z in zone_of.values() if z})
    app_of = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": (p["metadata"].get("labels") or {}).get("app")
              for p in scenario.pending}
    per_zone: dict[str, Counter] = defaultdict(Counter)
    per_node: dict[str, Counter] = defaultdict(Counter)
    for key, node in placed.items():
        app = app_of.get(key)
        if app:
            per_zone[app][zone_of.get(node)] += 1
            per_node[app][node] += 1
    skew = max((max(c[z] for z in zones) - min(c[z] for z in zones) for c in per_zone.values()), default=0) if zones else 0
    return skew, max((max(c.values()) for c in per_node.values()), default=0)


def gang_members(scenario: Scenario) -> dict[str, str]:
    """``namespace/pod`` -> ``namespace/podgroup`` for pending pods labelled with a PodGroup, or naming a
    scheduling.k8s.io one in spec.schedulingGroup."""
    out: dict[str, str] = {}
    for pod in scenario.pending:
        meta = pod["metadata"]
        group = (meta.get("labels") or {}).get(POD_GROUP_LABEL) or (pod["spec"].get("schedulingGroup") or {}).get(
            "podGroupName")
        if group:
            out[f"{meta['namespace']}/{meta['name']}"] = f"{meta['namespace']}/{group}"
    return out


# --- tenants (ElasticQuotas) --------------------------------------------------------------------------------

@dataclass
class TenantFigures:
    """One tenant (a namespace with an ElasticQuota) at the end of a run. cpu in millicores.

    ``asked``: what its pods ask for, those created bound for the run included; ``used``: what its pods bound at
    the end ask for (pods a scheduler evicted are gone). Min honoured: it uses at least the smaller of its min and
    what it asked for (the mins add up to at most the cluster in these workloads, so every tenant's can be met at
    once). Max honoured: no resource its max lists used beyond it."""

    min_cpu: int
    max_cpu: int
    asked_cpu: int
    running_cpu: int       # of `asked_cpu`, in pods created bound before the run
    pods: int              # pending pods
    placed: int            # of those, bound at the end
    used_cpu: int
    min_ok: bool
    max_ok: bool
    preempted: int         # its pods a scheduler deleted
    latency_p50: float | None
    latency_p99: float | None


def requests_of(pod: dict[str, Any]) -> Counter[str]:
    """cpu (millicores) and memory (bytes) the pod's containers ask for (the workloads' pods have no init containers
    or overhead)."""
    out: Counter[str] = Counter()
    for c in pod["spec"]["containers"]:
        for r, q in ((c.get("resources") or {}).get("requests") or {}).items():
            out[r] += amount(r, q)
    return out


def tenant_outcome(result: RunResult, scenario: Scenario, where: dict[str, str | None], preset_left: set[str],
                   victims: set[str], waits: dict[str, float]) -> None:
    """Per tenant: pods placed, cpu used against min and max, latency, preemptions; and the counts over tenants.
    `where`: the pending pods' nodes at the end; `preset_left`: the pods created bound for the run still there;
    `victims`: the pods a scheduler deleted; `waits`: each pending pod's wait until it was seen bound."""
    tenants = {q["metadata"]["namespace"]: tenant_figures(q, scenario, where, preset_left, victims, waits)
               for q in scenario.quotas}
    result.tenants = {ns: asdict(t) for ns, t in tenants.items()}
    result.preemptions = len(victims)
    result.min_honoured = sum(t.min_ok for t in tenants.values())
    result.max_honoured = sum(t.max_ok for t in tenants.values())


def tenant_figures(quota: dict[str, Any], scenario: Scenario, where: dict[str, str | None], preset_left: set[str],
                   victims: set[str], waits: dict[str, float]) -> TenantFigures:
    ns = quota["metadata"]["namespace"]
    pods = [(f"{ns}/{p['metadata']['name']}", p, False) for p in scenario.pending if p["metadata"]["namespace"] == ns]
    pods += [(f"{ns}/{p['metadata']['name']}", p, True) for p in scenario.preset if p["metadata"]["namespace"] == ns]
    bound = [(key, p, preset) for key, p, preset in pods if (key in preset_left if preset else where.get(key))]
    used: Counter[str] = sum((requests_of(p) for _, p, _ in bound), Counter())
    asked = sum(requests_of(p)["cpu"] for _, p, _ in pods)
    low, high = (quantities(quota["spec"].get(field) or {}) for field in ("min", "max"))
    latencies = [waits[key] for key, _, preset in pods if not preset and key in waits]
    return TenantFigures(
        min_cpu=low.get("cpu", 0), max_cpu=high.get("cpu", 0), asked_cpu=asked,
        running_cpu=sum(requests_of(p)["cpu"] for _, p, preset in pods if preset),
        pods=sum(1 for *_, preset in pods if not preset), placed=sum(1 for *_, preset in bound if not preset),
        used_cpu=used["cpu"], min_ok=used["cpu"] >= min(asked, low.get("cpu", 0)),
        max_ok=all(used[r] <= most for r, most in high.items()), preempted=sum(1 for key, *_ in pods if key in victims),
        latency_p50=percentile(latencies, 0.5), latency_p99=percentile(latencies, 0.99))


def quantities(resources: dict[str, Any]) -> dict[str, int]:
    return {r: amount(r, q) for r, q in resources.items()}


NUMERIC = ("placed", "seconds", "pods_per_s", "latency_p50", "latency_p90", "latency_p99", "startup_s", "first_bind_s",
           "seen_bind_s", "latency_p99_solo", "gc_marks", "gc_mark_s", "pods_in_gc", "latency_p99_in_gc",
           "latency_p99_clear",
           "create_s",
           "gangs_complete", "gangs_partial", "pods_in_partial", "nodes_used", "price", "solve_s", "batches",
           "rss_mib", "claims_bound", "zone_skew", "node_max", "devices_used", "preemptions", "min_honoured",
           "max_honoured", "devices_overcommitted", "apiserver_cpu_s", "scheduler_cpu_s", "gangs_one_domain",
           "domains_mean", "domains_max", "groups_evicted", "groups_half_evicted")


def medians(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (workload, nodes, scheduler): the median of each figure over its repeats (runs that
    failed are left out and counted in ``errors``)."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[(r["workload"], r["nodes"], r["scheduler"])].append(r)
    rows = []
    for (workload, nodes, scheduler), runs in groups.items():
        good = [r for r in runs if not r["error"]]
        row: dict[str, Any] = {"workload": workload, "nodes": nodes, "scheduler": scheduler,
                               "pending": runs[0]["pending"], "gangs": runs[0]["gangs"], "claims": runs[0].get("claims", 0),
                               "arrival": runs[0]["arrival"], "rate": runs[0].get("rate"), "runs": len(good),
                               "tenant_count": len(runs[0].get("tenants") or {}),
                               "errors": [r["error"] for r in runs if r["error"]]}
        for key in NUMERIC:
            values = [r[key] for r in good if r.get(key) is not None]  # (results of older runs lack newer figures)
            row[key] = median(values)
        rows.append(row)
    return rows


def median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


TENANT_NUMERIC = ("placed", "used_cpu", "preempted", "latency_p50", "latency_p99")
TENANT_FIXED = ("min_cpu", "max_cpu", "asked_cpu", "running_cpu", "pods")


def tenant_medians(results: list[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, dict[str, Any]]]:
    """(workload, nodes, scheduler) -> tenant -> the median of each figure over the runs that did not fail;
    ``min_ok`` / ``max_ok``: in how many of those ``runs`` the tenant's min / max was honoured."""
    groups: dict[tuple[str, int, str], list[dict[str, dict[str, Any]]]] = defaultdict(list)
    for r in results:
        if r.get("tenants") and not r["error"]:
            groups[(r["workload"], r["nodes"], r["scheduler"])].append(r["tenants"])
    out: dict[tuple[str, int, str], dict[str, dict[str, Any]]] = {}
    for key, runs in groups.items():
        out[key] = {}
        for ns, first in runs[0].items():
            figures = [run[ns] for run in runs]
            row = {k: first[k] for k in TENANT_FIXED} | {"runs": len(figures)}
            row |= {k: median([f[k] for f in figures if f[k] is not None]) for k in TENANT_NUMERIC}
            row |= {k: sum(1 for f in figures if f[k]) for k in ("min_ok", "max_ok")}
            out[key][ns] = row
    return out


# --- DRA: what the final allocations promise of each physical device ----------------------------------------

def overcommitted(slices: list[dict[str, Any]], claims: list[dict[str, Any]]) -> int:
    """How many counter sets (physical devices of partitionable slices) the allocations in the claims' status
    consume beyond the slices' sharedCounters, plus devices allocated to more than one claim (or request) without
    ``allowMultipleAllocations``. A device is (driver, pool, name); its ``consumesCounters`` draw on the counter sets
    of the same driver and pool."""
    counters: dict[tuple[str, str, str, str], int] = {}
    devices: dict[tuple[str, str, str], dict[str, Any]] = {}
    for s in slices:
        spec = s["spec"]
        driver, pool = spec["driver"], spec["pool"]["name"]
        for cs in spec.get("sharedCounters") or []:
            for name, c in (cs.get("counters") or {}).items():
                counters[(driver, pool, cs["name"], name)] = amount(name, c["value"])
        for d in spec.get("devices") or []:
            devices[(driver, pool, d["name"])] = d
    used: Counter[tuple[str, str, str, str]] = Counter()
    allocations: Counter[tuple[str, str, str]] = Counter()
    for c in claims:
        results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        for r in results:
            key = (r["driver"], r["pool"], r["device"])
            allocations[key] += 1
            for cc in (devices.get(key) or {}).get("consumesCounters") or []:
                for name, v in (cc.get("counters") or {}).items():
                    used[(key[0], key[1], cc["counterSet"], name)] += amount(name, v["value"])
    sets = {(d, p, cs) for (d, p, cs, name), total in used.items() if total > counters.get((d, p, cs, name), 0)}
    twice = [k for k, n in allocations.items() if n > 1 and not (devices.get(k) or {}).get("allowMultipleAllocations")]
    return len(sets) + len(twice)
