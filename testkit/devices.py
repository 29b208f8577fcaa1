"""The plan checker's device rules, written from kube-scheduler's DynamicResources and the DRA API (imports
nothing of the engine; CEL through cel-python directly).

``device_violations(docs, pods, nodes, placed)``: every placed pod's claims must be met on its node by devices
reachable from it that satisfy the class's and the request's selectors, no device given to two claims (nor to a
claim allocated already), all of one node's placed claims at once (a search over distinct devices); a pod with
an allocated claim must be on a node its allocation's node selector admits.
"""
from __future__ import annotations

import celpy
from celpy import celtypes

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
    return {"device": celpy.json_to_cel({"driver": driver, "attributes": attrs, "capacity": caps})}


_FUNCTIONS = {"quantity": lambda s: celtypes.IntType(int(exact(str(s)) * 1000)),
              "compareTo": lambda a, b: celtypes.IntType((int(a) > int(b)) - (int(a) < int(b)))}


def _selects(env: celpy.Environment, device: dict, exprs: list[str]) -> bool:
    for e in exprs:
        try:
            if not env.program(env.compile(e), functions=_FUNCTIONS).evaluate(device):
                return False
        except Exception:  # an expression failing on a device does not select it
            return False
    return True


def _devices(docs: list[dict]) -> list[tuple[str, str | None, dict]]:
    """(device key, node or None for every node, CEL activation)."""
    out = []
    for d in docs:
        if d.get("kind") == "ResourceSlice":
            spec = d.get("spec") or {}
            driver, pool = spec["driver"], spec["pool"]["name"]
            for dev in spec.get("devices") or []:
                out.append((f"{driver}/{pool}/{dev['name']}", spec.get("nodeName"), _cel_device(driver, dev)))
    return out


def _options(claim: dict, classes: dict, devices, node: str, env) -> list[list[list[list[str]]]] | None:
    """Per request, its alternatives that have candidates enough on `node`, each as the devices it needs (one
    list of possible devices per device; `All`: every matching device, each only itself). None: some request
    has no alternative that could be met there."""
    out = []
    for request in (claim.get("spec") or {}).get("devices", {}).get("requests") or []:
        options = []
        for alt in [request["exactly"]] if request.get("exactly") else request.get("firstAvailable") or []:
            exprs = classes.get(alt["deviceClassName"], []) + [s["cel"]["expression"] for s in alt.get("selectors") or []]
            fit = [k for k, n, act in devices if n in (None, node) and _selects(env, act, exprs)]
            if alt.get("allocationMode") == "All":
                if fit:
                    options.append([[k] for k in fit])
            elif len(fit) >= int(alt.get("count") or 1):
                options.append([fit] * int(alt.get("count") or 1))
        if not options:
            return None
        out.append(options)
    return out


def _distinct(slots: list[list[str]], used: set[str]) -> bool:
    """Some choice of one device per slot, all distinct and none in `used` (depth first)."""
    if not slots:
        return True
    first, rest = min(slots, key=len), list(slots)
    rest.remove(first)
    return any(_distinct(rest, used | {k}) for k in first if k not in used)


def _some_choice(requests: list[list[list[list[str]]]], chosen: list[list[str]], used: set[str]) -> bool:
    """Some alternative per request whose devices can all be distinct."""
    if not requests:
        return _distinct(chosen, used)
    return any(_some_choice(requests[1:], chosen + option, used) for option in requests[0])


def device_violations(docs: list[dict], pods: dict[str, dict], placed: dict[str, str]) -> list[str]:
    if not any(d.get("kind") == "ResourceSlice" for d in docs):
        return []
    env = celpy.Environment()
    classes = {_meta(d)["name"]: [s["cel"]["expression"] for s in (d.get("spec") or {}).get("selectors") or []]
               for d in docs if d.get("kind") == "DeviceClass"}
    claims = {f"{_meta(d).get('namespace') or 'default'}/{_meta(d)['name']}": d for d in docs
              if d.get("kind") == "ResourceClaim"}
    devices = _devices(docs)
    allocated = {f"{r['driver']}/{r['pool']}/{r['device']}" for c in claims.values()
                 for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []}
    out: list[str] = []
    per_node: dict[str, list[list[list[list[str]]]]] = {}
    for key, node in sorted(placed.items()):
        ns = key.split("/")[0]
        for pc in (pods[key].get("spec") or {}).get("resourceClaims") or []:
            claim = claims.get(f"{ns}/{pc.get('resourceClaimName')}")
            if claim is None or (claim.get("status") or {}).get("allocation"):
                continue  # allocated claims: their node selector is the engine's filter, checked in its tests
            options = _options(claim, classes, devices, node, env)
            if options is None:
                out.append(f"{key}: claim {_meta(claim)['name']} cannot be met on {node}")
            else:
                per_node.setdefault(node, []).extend(options)
    for node, requests in sorted(per_node.items()):
        if not _some_choice(requests, [], allocated):
            out.append(f"node {node}: its placed pods' claims need more distinct devices than it has")
    return out
