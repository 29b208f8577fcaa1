"""The plan checker's device rules, written from kube-scheduler's DynamicResources and the DRA API (imports
nothing of the engine; CEL through cel-expr-python directly, with just `quantity` and `compareTo`: capacities are
integers in milli-units here).

``device_violations(docs, pods, nodes, placed)``: every placed pod's claims must be met on its node by devices
reachable from it that satisfy the class's and the request's selectors, no device given to two claims (nor to a
claim allocated already), all placed claims at once (a search over distinct devices); a claim several placed
pods share is allocated once, its devices reachable from each of their nodes.

``device_domain_violations(docs, allocated, attribute, bound)``: a gang kept within a device attribute (issue 49,
point 2) holds, of the drivers publishing the attribute, only devices carrying one non-empty value of it — judged
on the devices the plan allocated, beside those its bound members' claims hold.
"""
from __future__ import annotations

from functools import cache
from typing import Any

from cel_expr_python import cel

from .quantity import exact


def _meta(d: dict) -> dict:
    return d.get("metadata") or {}


def _cel_device(driver: str, dev: dict) -> dict:
    attrs: dict = {}
    for key, value in (dev.get("attributes") or {}).items():
        domain, _, name = key.rpartition("/")
        v = next(iter(value.values()))
        attrs.setdefault(domain or driver, {})[name] = v
    caps: dict = {}
    for key, value in (dev.get("capacity") or {}).items():
        domain, _, name = key.rpartition("/")
        caps.setdefault(domain or driver, {})[name] = int(exact(value["value"]) * 1000)
    return {"device": {"driver": driver, "attributes": attrs, "capacity": caps,
                       "allowMultipleAllocations": bool(dev.get("allowMultipleAllocations"))}}


@cache
def _env() -> Any:
    t = cel.Type
    return cel.NewEnv(variables={"device": t.Map(t.STRING, t.DYN)}, functions=[
        cel.FunctionDecl("quantity", [cel.Overload("string_to_quantity", t.INT, [t.STRING],
                                                   impl=lambda s: int(exact(s) * 1000))]),
        cel.FunctionDecl("compareTo", [cel.Overload("quantity_compare_to", t.INT, [t.INT, t.INT], is_member=True,
                                                    impl=lambda a, b: (a > b) - (a < b))])])


@cache
def _program(expression: str) -> Any:
    return _env().compile(expression)


def _selects(device: dict, exprs: list[str]) -> bool:
    for e in exprs:
        try:
            result = _program(e).eval(data=device)
        except RuntimeError:  # an expression failing on a device does not select it
            return False
        if result.type() != cel.Type.BOOL or not result.value():
            return False
    return True


def _requirement(req: dict, values: dict) -> bool:
    op, key, want = req.get("operator"), req.get("key"), req.get("values") or []
    if op == "In":
        return key in values and values[key] in want
    if op == "NotIn":
        return key not in values or values[key] not in want
    return (key in values) == (op == "Exists")


def _reaches(selector: dict, node: dict) -> bool:
    """A node selector (terms ORed, requirements ANDed) admits the node (labels, and metadata.name as a field)."""
    labels, fields = _meta(node).get("labels") or {}, {"metadata.name": _meta(node).get("name")}
    return any(all(_requirement(r, labels) for r in t.get("matchExpressions") or [])
               and all(_requirement(r, fields) for r in t.get("matchFields") or [])
               and (t.get("matchExpressions") or t.get("matchFields"))
               for t in selector.get("nodeSelectorTerms") or [])


def _tolerates(toleration: dict, taint: dict) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if (toleration.get("operator") or "Equal") == "Exists":
        return True
    return (toleration.get("operator") or "Equal") == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def _blocked(taints: list[dict], tolerations: list[dict]) -> bool:
    """A NoSchedule/NoExecute taint no toleration tolerates (other effects do not block)."""
    return any(t.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(o, t) for o in tolerations)
               for t in taints)


def _rule_taints(docs: list[dict], driver: str, pool: str, name: str) -> list[dict]:
    out = []
    for d in docs:
        if d.get("kind") == "DeviceTaintRule":
            sel = (d.get("spec") or {}).get("deviceSelector")  # none: no device (1.37.1+)
            if sel is not None and all(sel.get(k) in (None, v)
                                       for k, v in (("driver", driver), ("pool", pool), ("device", name))):
                out.append(d["spec"]["taint"])
    return out


def _devices(docs: list[dict]) -> list[tuple[str, frozenset[str] | None, dict, list[dict]]]:
    """(device key, the nodes that reach it or None for every node, CEL activation, its taints)."""
    nodes = [d for d in docs if d.get("kind") == "Node"]
    out = []
    for d in docs:
        if d.get("kind") == "ResourceSlice":
            spec = d.get("spec") or {}
            driver, pool = spec["driver"], spec["pool"]["name"]
            for dev in spec.get("devices") or []:
                where = dev if spec.get("perDeviceNodeSelection") else spec
                reach: frozenset[str] | None = None
                if where.get("nodeName"):
                    reach = frozenset([where["nodeName"]])
                elif where.get("nodeSelector"):
                    reach = frozenset(_meta(n)["name"] for n in nodes if _reaches(where["nodeSelector"], n))
                out.append((f"{driver}/{pool}/{dev['name']}", reach, _cel_device(driver, dev),
                            list(dev.get("taints") or []) + _rule_taints(docs, driver, pool, dev["name"])))
    return out


def _options(claim: dict, classes: dict, devices, nodes: set[str]) -> list[list[list[list[str]]]] | None:
    """Per request, its alternatives that have candidates enough reachable from every node in `nodes` (the
    nodes of the pods using the claim), each as the devices it needs (one list of possible devices per device;
    `All`: every matching device, each only itself). None: some request has no alternative that could be met."""
    out = []
    for request in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        options = []
        for alt in [request["exactly"]] if request.get("exactly") else request.get("firstAvailable") or []:
            exprs = classes.get(alt["deviceClassName"], []) + [s["cel"]["expression"] for s in alt.get("selectors") or []]
            fit = [k for k, reach, act, taints in devices if (reach is None or nodes <= reach)
                   and not _blocked(taints, alt.get("tolerations") or []) and _selects(act, exprs)]
            if alt.get("allocationMode") == "All":
                if fit:
                    options.append([[k] for k in fit])
            elif len(fit) >= int(alt.get("count") or 1):
                options.append([fit] * int(alt.get("count") or 1))
        if not options:
            return None
        out.append(options)
    return out


def _counters(docs: list[dict]) -> tuple[dict[tuple[str, str, str], Any], dict[str, list[tuple[str, str, str, Any]]],
                                          set[str]]:
    """Partitionable devices: each (driver/pool, counter set, counter)'s value, and what each device consumes of
    them; and the devices allowing multiple allocations (consumable capacity)."""
    values: dict[tuple[str, str, str], Any] = {}
    consumes: dict[str, list[tuple[str, str, str, Any]]] = {}
    for d in docs:
        if d.get("kind") != "ResourceSlice":
            continue
        spec = d.get("spec") or {}
        pool = f"{spec['driver']}/{spec['pool']['name']}"
        for counter_set in spec.get("sharedCounters") or []:
            for name, c in (counter_set.get("counters") or {}).items():
                values[(pool, counter_set["name"], name)] = exact(c["value"])
        for dev in spec.get("devices") or []:
            consumes[f"{pool}/{dev['name']}"] = [(pool, use["counterSet"], name, exact(c["value"]))
                                                for use in dev.get("consumesCounters") or []
                                                for name, c in (use.get("counters") or {}).items()]
    multiple = {f"{d['spec']['driver']}/{d['spec']['pool']['name']}/{dev['name']}" for d in docs
                if d.get("kind") == "ResourceSlice" for dev in (d.get("spec") or {}).get("devices") or []
                if dev.get("allowMultipleAllocations")}
    return values, consumes, multiple


def _within(used: set[str], counters) -> bool:
    """The devices of `used` together consume no counter beyond its value."""
    values, consumes, _ = counters
    total: dict[tuple[str, str, str], Any] = {}
    for key in used:
        for pool, counter_set, name, milli in consumes.get(key, ()):
            total[(pool, counter_set, name)] = total.get((pool, counter_set, name), 0) + milli
    return all(amount <= values.get(counter, 0) for counter, amount in total.items())


def _distinct(slots: list[list[str]], used: set[str], counters) -> bool:
    """Some choice of one device per slot, all distinct, none in `used`, within the shared counters (depth first)."""
    if not slots:
        return True
    first, rest = min(slots, key=len), list(slots)
    rest.remove(first)
    return any(_distinct(rest, used | {k}, counters) for k in first  # shared devices: as often as asked (their
               if (k not in used or k in counters[2]) and _within(used | {k}, counters))  # capacity: the tests')


def _some_choice(requests: list[list[list[list[str]]]], chosen: list[list[str]], used: set[str], counters) -> bool:
    """Some alternative per request whose devices can all be distinct."""
    if not requests:
        return _distinct(chosen, used, counters)
    return any(_some_choice(requests[1:], chosen + option, used, counters) for option in requests[0])


def dra_extended_resources(docs: list[dict]) -> dict[str, str]:
    """Extended resource -> the DeviceClass serving it (spec.extendedResourceName, or the implicit
    deviceclass.resource.kubernetes.io/<class>), for resources no node advertises in allocatable."""
    advertised = {r for d in docs if d.get("kind") == "Node"
                  for r, v in ((d.get("status") or {}).get("allocatable") or (d.get("status") or {}).get("capacity")
                               or {}).items() if str(v) not in ("0", "")}
    out = {}
    for d in docs:
        if d.get("kind") == "DeviceClass":
            name = _meta(d)["name"]
            for resource in (f"deviceclass.resource.kubernetes.io/{name}", (d.get("spec") or {}).get("extendedResourceName")):
                if resource and resource not in advertised:
                    out[resource] = name
    return out


def _extended_claims(docs: list[dict], pods: dict[str, dict], placed: dict[str, str]) -> dict[str, dict]:
    """For each placed pod asking DRA-backed extended resources, the claim they amount to (its regular containers'
    requests of each, one request per resource): key pod/extended."""
    serving = dra_extended_resources(docs)
    out = {}
    for key in sorted(placed):
        wanted: dict[str, int] = {}
        for c in (pods[key].get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            for r, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
                if r in serving:
                    wanted[r] = wanted.get(r, 0) + int(v)
        if wanted:
            out[f"{key}/extended"] = {"metadata": {"name": f"{key}/extended"}, "spec": {"devices": {"requests": [
                {"name": r, "exactly": {"deviceClassName": serving[r], "count": n}} for r, n in sorted(wanted.items())]}}}
    return out


def device_violations(docs: list[dict], pods: dict[str, dict], placed: dict[str, str]) -> list[str]:
    """A claim shared by several placed pods is allocated once: its devices reachable from all their nodes."""
    if not any(d.get("kind") == "ResourceSlice" for d in docs):
        return []
    classes = {_meta(d)["name"]: [s["cel"]["expression"] for s in (d.get("spec") or {}).get("selectors") or []]
               for d in docs if d.get("kind") == "DeviceClass"}
    claims = {f"{_meta(d).get('namespace') or 'default'}/{_meta(d)['name']}": d for d in docs
              if d.get("kind") == "ResourceClaim"}
    devices = _devices(docs)
    allocated = {f"{r['driver']}/{r['pool']}/{r['device']}" for c in claims.values()
                 for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
    users: dict[str, set[str]] = {}
    for key, claim in _extended_claims(docs, pods, placed).items():
        claims[key] = claim
        users[key] = {placed[key.rsplit("/", 1)[0]]}
    for key, node in sorted(placed.items()):
        ns = key.split("/")[0]
        for pc in (pods[key].get("spec") or {}).get("resourceClaims") or []:
            name = f"{ns}/{pc.get('resourceClaimName')}"
            claim = claims.get(name)
            if claim is not None and not (claim.get("status") or {}).get("allocation"):
                users.setdefault(name, set()).add(node)  # allocated claims: the engine's filter, checked in its tests
    out: list[str] = []
    requests: list[list[list[list[str]]]] = []
    for name, nodes in sorted(users.items()):
        options = _options(claims[name], classes, devices, nodes)
        if options is None:
            out.append(f"claim {name} cannot be met on {', '.join(sorted(nodes))}")
        else:
            requests.extend(options)
    counters = _counters(docs)
    if not out and not all(_some_choice(part, [], allocated, counters) for part in _independent(requests)):
        out.append("the placed pods' claims need more distinct devices than their nodes reach")
    return out


def _independent(requests: list[list[list[list[str]]]]) -> list[list[list[list[list[str]]]]]:
    """The requests in groups that can share no device (each group searched on its own: a search over all of
    a large cluster's requests at once would never end)."""
    groups: list[tuple[list, set[str]]] = []
    for request in requests:
        devices = {k for option in request for slot in option for k in slot}
        joined = [g for g in groups if g[1] & devices]
        merged = ([request] + [r for g in joined for r in g[0]], devices.union(*(g[1] for g in joined)))
        groups = [g for g in groups if all(g is not j for j in joined)] + [merged]
    return [g[0] for g in groups]


def device_domain_violations(docs: list[dict], allocated: dict[str, list[str]], attribute: str,
                             bound: list[str] = ()) -> list[str]:
    """A gang kept within a device attribute (`domain/name`): every device its members hold — `allocated` (pod key
    -> device keys, the plan's) and the allocations of the `bound` members' claims — of a driver publishing the
    attribute carries one non-empty value of it."""
    values: dict[str, str] = {}
    publishing: set[str] = set()
    for d in docs:
        if d.get("kind") != "ResourceSlice":
            continue
        driver = d["spec"]["driver"]
        for dev in d["spec"].get("devices") or []:
            attrs = {(k if "/" in k else f"{driver}/{k}"): v for k, v in (dev.get("attributes") or {}).items()}
            if attribute in attrs:
                publishing.add(driver)
            found = attrs.get(attribute) or {}
            values[f"{driver}/{d['spec']['pool']['name']}/{dev['name']}"] = str(next(iter(found.values()), ""))
    held = {key: list(keys) for key, keys in allocated.items()}
    pods = {f"{_meta(d).get('namespace') or 'default'}/{_meta(d)['name']}": d for d in docs if d.get("kind") == "Pod"}
    claims = {f"{_meta(d).get('namespace') or 'default'}/{_meta(d)['name']}": d for d in docs
              if d.get("kind") == "ResourceClaim"}
    for key in bound:
        for pc in (pods[key].get("spec") or {}).get("resourceClaims") or []:
            claim = claims.get(f"{key.split('/')[0]}/{pc.get('resourceClaimName')}") or {}
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
            held.setdefault(key, []).extend(f"{r['driver']}/{r['pool']}/{r['device']}" for r in results)
    out, seen = [], {}
    for key, keys in sorted(held.items()):
        for device in keys:
            if device.split("/")[0] not in publishing:
                continue
            value = values.get(device, "")
            if not value:
                out.append(f"{key}: device {device} carries no value of {attribute}")
            else:
                seen.setdefault(value, []).append(key)
    if len(seen) > 1:
        out.append(f"the gang's devices are in {len(seen)} values of {attribute}: {', '.join(sorted(seen))}")
    return out
