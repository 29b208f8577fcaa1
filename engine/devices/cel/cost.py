"""The worst-case cost of a selector, estimated as the apiserver estimates it before admitting one: a port of
cel-go's checker/cost.go (v0.26) with the estimators upstream plugs in — Kubernetes' library/cost.go
(`CostEstimator.EstimateCallCost`), cel-go's lists v3 and sets estimators, and DRA's sizeEstimator
(compile.go: the `device` variable's strings, maps and 32 attributes per device bound every size).

cel-cpp tracks no cost while evaluating, so this estimate is what keeps an evaluation bounded: a selector whose
estimate exceeds resourceapi.CELSelectorExpressionMaxCost is refused at compile, as the apiserver refuses it.
It runs on cel-cpp's checked AST, whose macro expansions are cel-go's; where cel-cpp's checker types a node
`dyn` but upstream knows better (anything read from `device`, results of our Kubernetes functions), upstream's
type is used. What differs is said in docs/devices-and-gangs.md."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from .checked import DYN, Checked, Expr, Type
from .vet import Vetted, upstream_type

MAX_COST = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
U64 = (1 << 64) - 1
TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE, MAP_CREATE, STRUCT_CREATE = 10, 30, 40
ACCUMULATORS = ("__result__", "@result")


def _add(a: int, b: int) -> int:
    return min(a + b, U64)


def _mul(a: int, b: int) -> int:
    return min(a * b, U64)


def _factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > U64 / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= 2.0**64 else int(c)


@dataclass(frozen=True)
class Est:
    """A [min, max] estimate: cel-go's SizeEstimate and CostEstimate alike."""

    lo: int
    hi: int

    def add(self, o: Est) -> Est:
        return Est(_add(self.lo, o.lo), _add(self.hi, o.hi))

    def mul(self, o: Est) -> Est:
        return Est(_mul(self.lo, o.lo), _mul(self.hi, o.hi))

    def factor(self, f: float) -> Est:
        return Est(_factor(self.lo, f), _factor(self.hi, f))

    def union(self, o: Est) -> Est:
        return Est(min(self.lo, o.lo), max(self.hi, o.hi))


UNKNOWN = Est(0, U64)
ONE = Est(1, 1)
ZERO = Est(0, 0)


def fixed(n: int) -> Est:
    return Est(n, n)


# -- DRA's `device` (compile.go newCompiler): the declared types and their maximum sizes ----------------------------

@dataclass(frozen=True)
class Decl:
    type: Type
    size: int
    key: Decl | None = None
    elem: Decl | None = None
    fields: dict[str, Decl] = field(default_factory=dict, hash=False, compare=False)


_ATTRIBUTE = Decl(Type("any"), 64)  # DeviceAttributeMaxValueLength
_QUANTITY = Decl(Type("message", "kubernetes.Quantity"), 0)
_DOMAIN, _ID = Decl(Type("string"), 63), Decl(Type("string"), 32)  # DeviceMaxDomainLength, DeviceMaxIDLength
_MAP = Type("map", params=(Type("string"), DYN))


def _maps(value: Decl) -> Decl:
    return Decl(_MAP, 32, key=_DOMAIN, elem=Decl(_MAP, 32, key=_ID, elem=value))  # 32 attributes per device


DEVICE = Decl(Type("message", "kubernetes.DRADevice"), 0, fields={
    "driver": Decl(Type("string"), 63), "attributes": _maps(_ATTRIBUTE), "capacity": _maps(_QUANTITY),
    "allowMultipleAllocations": Decl(Type("bool"), 1)})


def device_decl(path: list[str] | None, typing: bool = False) -> Decl | None:
    """DRA's sizeEstimator walk: the declaration a path from `device` reaches (an attribute of any name). With
    `typing`, the type the checker gives it: a name selected from any map is that map's element."""
    if not path or path[0] != "device":
        return None
    node: Decl | None = DEVICE
    for name in path[1:]:
        assert node is not None
        if name in ("@items", "@values"):
            node = node.elem
        elif name == "@keys":
            node = node.key
        elif name in node.fields:
            node = node.fields[name]
        elif node.elem is _ATTRIBUTE or (typing and node.elem is not None):
            node = node.elem
        else:
            return None
        if node is None:
            return None
    return node


def kind(t: Type) -> str:
    """cel-go's Kind of a type: our messages are Kubernetes' object types (struct) or opaque ones (net.IP)."""
    if t.kind == "message":
        return "opaque" if t.name.startswith("net.") else "struct"
    if t.kind == "abstract":
        return "opaque"
    return t.kind


def is_scalar(t: Type) -> bool:
    if t.kind in ("bool", "double", "duration", "int", "timestamp", "uint"):
        return True
    return t.name == "optional_type" and bool(t.params) and is_scalar(t.params[0])


@dataclass
class SizedNode:
    """cel-go's AstNode: what an estimator sees of an argument."""

    expr: Expr | None
    path: list[str] | None
    type: Type
    size: Est | None


@dataclass
class Entry:
    container: str
    key: Est
    val: Est

    def union(self, o: Entry | None) -> Entry | None:
        return None if o is None else Entry(self.container, self.key.union(o.key), self.val.union(o.val))


@dataclass
class Local:
    path: list[str]
    size: Est | None
    entry: Entry | None


def estimate(vetted: Vetted) -> int:
    """The estimated worst-case cost (cel-go's CostEstimate.Max) of a vetted selector."""
    return Coster(vetted.checked).cost(vetted.checked.expr).hi


class Coster:
    """cel-go's coster, its methods in the same order and under the same names."""

    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.paths: dict[int, list[str]] = {}
        self.sizes: dict[int, Est] = {}
        self.entries: dict[int, Entry] = {}
        self.scopes: dict[str, list[Local]] = {}

    # -- types, paths, sizes ----------------------------------------------------------------------------------------

    def type(self, e: Expr) -> Type:
        decl = device_decl(self.path(e), typing=True)
        return decl.type if decl is not None else upstream_type(self.checked, e)

    def path(self, e: Expr) -> list[str]:
        if e.kind == "ident" and self.scopes.get(e.name):
            return list(self.scopes[e.name][-1].path)
        return list(self.paths.get(e.id, []))

    def node(self, e: Expr) -> SizedNode:
        path: list[str] | None = self.path(e)
        if path and path[0] in ACCUMULATORS:
            path = None
        return SizedNode(e, path, self.type(e), self.compute_size(e))

    def estimate_size(self, node: SizedNode) -> Est | None:
        decl = device_decl(node.path)
        return Est(0, decl.size) if decl is not None else None

    def compute_size(self, e: Expr) -> Est | None:
        if e.id in self.sizes:
            return self.sizes[e.id]
        literal = _literal_size(e)
        if literal is not None:
            return literal
        size = self.estimate_size(SizedNode(e, self.path(e), self.type(e), None))
        if size is not None:
            self.sizes[e.id] = size
            return size
        if is_scalar(self.type(e)):
            return ONE
        if e.kind == "ident" and self.scopes.get(e.name):
            return self.scopes[e.name][-1].size
        return None

    def size_or_unknown(self, e: Expr | SizedNode) -> Est:
        size = e.size if isinstance(e, SizedNode) else self.compute_size(e)
        return size if size is not None else UNKNOWN

    def sized(self, node: SizedNode) -> Est:
        """library/cost.go sizeEstimate: the node's computed size, else the size estimator's, else unknown."""
        if node.size is not None:
            return node.size
        return self.estimate_size(node) or UNKNOWN

    def entry_size(self, e: Expr) -> Entry | None:
        if e.id in self.entries:
            return self.entries[e.id]
        if e.kind == "ident" and self.scopes.get(e.name):
            return self.scopes[e.name][-1].entry
        return None

    def set_size(self, e: Expr, size: Est | None) -> None:
        if size is not None:
            self.sizes[e.id] = size

    def set_entry(self, e: Expr, entry: Entry | None) -> None:
        if entry is not None:
            self.entries[e.id] = entry

    def copy_sizes(self, dst: Expr, src: Expr) -> None:
        self.set_size(dst, self.compute_size(src))
        self.set_entry(dst, self.entry_size(src))

    def push(self, name: str, path: list[str], size: Est | None, entry: Entry | None = None) -> None:
        self.scopes.setdefault(name, []).append(Local(path, size, entry))

    def pop(self, name: str) -> None:
        self.scopes[name].pop()

    def push_iter(self, name: str, rng: Expr, part: str) -> None:
        """pushIterKey / pushIterValue / pushIterSingle: `part` is key, value or single."""
        entry = self.entry_size(rng)
        container = entry.container if entry is not None else kind(self.type(rng))
        is_list = container == "list"
        if part == "key":
            size, sub = (entry.key if entry else None), ("@indices" if is_list else "@keys")
        elif part == "value":
            size, sub = (entry.val if entry else None), ("@items" if is_list else "@values")
        else:
            size, sub = (entry.val if entry else None, "@items") if is_list else (entry.key if entry else None, "@keys")
        self.push(name, self.path(rng) + [sub], size)

    # -- expressions ------------------------------------------------------------------------------------------------

    def cost(self, e: Expr) -> Est:
        if e.kind == "const":
            return ZERO
        if e.kind == "ident":
            self.paths[e.id] = self.path(e) if self.scopes.get(e.name) else [e.name]
            return ONE
        return {"select": self.cost_select, "call": self.cost_call, "list": self.cost_list, "map": self.cost_map,
                "struct": self.cost_struct, "comprehension": self.cost_comprehension}[e.kind](e)

    def cost_select(self, e: Expr) -> Est:
        operand = e.operand
        assert operand is not None
        if e.test_only:
            return ZERO.add(self.cost(operand))  # PresenceTestHasCost(false), as Kubernetes sets it
        total = self.cost(operand)
        if kind(self.type(operand)) in ("map", "struct", "type_param"):
            total = total.add(ONE)
        self.paths[e.id] = self.path(operand) + [e.name]
        return total

    def cost_call(self, e: Expr) -> Est:
        if e.name == "dyn" and e.args:
            argument = self.cost(e.args[0])
            self.copy_sizes(e, e.args[0])
            return ONE.add(argument)
        arg_costs = [self.cost(a) for a in e.args]
        args = [self.node(a) for a in e.args]
        ids = self.overloads(e)
        if not ids:
            return ZERO
        total, target = ZERO, None
        if e.target is not None:
            total = total.add(self.cost(e.target))
            target = self.node(e.target)
        fn, result = Est(U64, 0), None
        for overload in ids:
            est, size = self.function_cost(e, overload, target, args, arg_costs)
            fn = fn.union(est)
            if size is not None:
                result = size if result is None else result.union(size)
            if overload in ("index_list", "index_map") and e.args:
                found = self.entry_size(e.args[0])
                result = found.val if found is not None else None
                self.paths[e.id] = self.path(e.args[0]) + ["@items" if overload == "index_list" else "@values"]
            if result is None:
                result = self.compute_size(e)
        self.set_size(e, result)
        return total.add(fn)

    def overloads(self, e: Expr) -> tuple[str, ...]:
        """The checker's overload ids; indexing (or `in`) what upstream types as a map (anything read from
        `device`) is index_map (in_map) only, where cel-cpp, seeing dyn, lists every overload."""
        ids = self.checked.overloads.get(e.id, ())
        if e.name == "_[_]" and e.args and kind(self.type(e.args[0])) == "map" and "index_map" in ids:
            return ("index_map",)
        if e.name == "@in" and len(e.args) == 2 and kind(self.type(e.args[1])) == "map" and "in_map" in ids:
            return ("in_map",)
        return ids

    def cost_list(self, e: Expr) -> Est:
        total, item = ZERO, Est(0 if not e.args else U64, 0)
        for element in e.args:
            total = total.add(self.cost(element))
            item = item.union(self.size_or_unknown(element))
        self.set_entry(e, Entry("list", ONE, item))
        return total.add(fixed(LIST_CREATE))

    def cost_map(self, e: Expr) -> Est:
        total = ZERO
        key, val = Est(0 if not e.entries else U64, 0), Est(0 if not e.entries else U64, 0)
        for k, v, _ in e.entries:
            total = total.add(self.cost(k)).add(self.cost(v))
            key, val = key.union(self.size_or_unknown(k)), val.union(self.size_or_unknown(v))
        self.set_entry(e, Entry("map", key, val))
        return total.add(fixed(MAP_CREATE))

    def cost_struct(self, e: Expr) -> Est:
        total = ZERO
        for _, v, _ in e.entries:
            total = total.add(self.cost(v))
        return total.add(fixed(STRUCT_CREATE))

    def cost_comprehension(self, e: Expr) -> Est:
        rng, init, condition, step, result = e.parts
        if rng.kind == "list" and not rng.args and condition.kind == "const" and condition.value is False \
                and e.accu_var != "__result__":
            return self.cost_bind(e)
        total = self.cost(rng).add(self.cost(init))
        self.push(e.accu_var, self.path(init), self.compute_size(init), self.entry_size(init))
        if e.iter_var2:
            self.push_iter(e.iter_var, rng, "key")
            self.push_iter(e.iter_var2, rng, "value")
        else:
            self.push_iter(e.iter_var, rng, "single")
        loop, step_cost = self.cost(condition), self.cost(step)
        self.pop(e.iter_var)
        if e.iter_var2:
            self.pop(e.iter_var2)
        total = total.add(self.cost(result))
        self.pop(e.accu_var)
        count = self.size_or_unknown(rng)
        total = total.add(count.mul(step_cost.add(loop)))
        if init.kind == "const":
            self.set_size(e, self.compute_size(init))
        elif init.kind in ("list", "map"):
            self.set_size(e, count)
            self.set_entry(e, self.entry_size(step))
        return total

    def cost_bind(self, e: Expr) -> Est:
        rng, init, _, _, result = e.parts
        total = self.cost(rng).add(self.cost(init))
        self.push(e.accu_var, self.path(init), self.compute_size(init), self.entry_size(init))
        total = total.add(self.cost(result))
        self.pop(e.accu_var)
        self.copy_sizes(e, result)
        return total

    # -- calls ------------------------------------------------------------------------------------------------------

    def function_cost(self, e: Expr, overload: str, target: SizedNode | None, args: list[SizedNode],
                      arg_costs: list[Est]) -> tuple[Est, Est | None]:
        arg_sum = ZERO
        for a in arg_costs:
            arg_sum = arg_sum.add(a)
        for estimator in (_OVERLOAD_ESTIMATORS.get(overload), self.kubernetes):
            if estimator is not None:
                found = estimator(self, e, overload, target, args)
                if found is not None:
                    return found[0].add(arg_sum), found[1]
        return self.builtin(e, overload, target, args, arg_costs, arg_sum)

    def builtin(self, e: Expr, overload: str, target: SizedNode | None, args: list[SizedNode], arg_costs: list[Est],
                arg_sum: Est) -> tuple[Est, Est | None]:
        """The overloads cel-go's coster knows itself (functionCost's switch)."""
        if overload == "string_format" and target is not None:
            return self.size_or_unknown(target).factor(TRAVERSAL).add(arg_sum), None
        if overload in ("string_to_bytes", "bytes_to_string", "strings_quote") and len(args) == 1:
            sz = self.size_or_unknown(args[0])
            result = {"string_to_bytes": Est(sz.lo, _mul(sz.hi, 4)), "bytes_to_string": Est(sz.lo // 4, sz.hi),
                      "strings_quote": Est(_add(sz.lo, 2), _add(_mul(sz.hi, 2), 2))}[overload]
            return sz.factor(TRAVERSAL).add(arg_sum), result
        if overload in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return self.size_or_unknown(args[0]).factor(TRAVERSAL).add(arg_sum), None
        if overload == "in_list" and len(args) == 2:
            return self.size_or_unknown(args[1]).factor(1).add(arg_sum), None
        if overload == "matches_string" and target is not None and len(args) == 1:
            text = self.size_or_unknown(target).add(ONE).factor(TRAVERSAL)
            return text.mul(self.size_or_unknown(args[0]).factor(REGEX)).add(arg_sum), None
        if overload == "contains_string" and target is not None and len(args) == 1:
            text = self.size_or_unknown(target).factor(TRAVERSAL)
            return text.mul(self.size_or_unknown(args[0]).factor(TRAVERSAL)).add(arg_sum), None
        if overload in ("logical_or", "logical_and"):
            return Est(arg_costs[0].lo, arg_costs[0].add(arg_costs[1]).hi), None
        if overload == "conditional":
            return self.conditional(e, args, arg_costs)
        if overload in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            return self.concatenation(e, overload, args, arg_sum)
        if overload in _COMPARISONS:
            smallest = min(self.size_or_unknown(args[0]).hi, self.size_or_unknown(args[1]).hi)
            return Est(1 if smallest > 0 else 0, smallest).factor(TRAVERSAL).add(arg_sum), None
        return ONE.add(arg_sum), None

    def conditional(self, e: Expr, args: list[SizedNode], arg_costs: list[Est]) -> tuple[Est, Est | None]:
        size = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
        left = self.entry_size(args[1].expr) if args[1].expr else None
        self.set_entry(e, left.union(self.entry_size(args[2].expr)) if left and args[2].expr else None)
        return arg_costs[0].add(arg_costs[1].union(arg_costs[2])), size

    def concatenation(self, e: Expr, overload: str, args: list[SizedNode], arg_sum: Est) -> tuple[Est, Est | None]:
        size = self.size_or_unknown(args[0]).add(self.size_or_unknown(args[1]))
        left = self.entry_size(args[0].expr) if args[0].expr else None
        if left is not None and args[1].expr is not None:
            self.set_entry(e, left.union(self.entry_size(args[1].expr)))
        if overload == "add_list":
            return ONE.add(arg_sum), size
        return size.factor(TRAVERSAL).add(arg_sum), size

    def kubernetes(self, _: Coster, e: Expr, overload: str, target: SizedNode | None,
                   args: list[SizedNode]) -> tuple[Est, Est | None] | None:
        """library/cost.go CostEstimator.EstimateCallCost, by function name."""
        found = _KUBERNETES.get(e.name)
        return found(self, overload, target, args) if found is not None else None

    def element(self, node: SizedNode) -> SizedNode | None:
        """library/cost.go listElementNode."""
        if not node.type.params:
            return None
        return SizedNode(None, node.path + ["@items"] if node.path is not None else None, node.type.params[0], None)


def _literal_size(e: Expr) -> Est | None:
    if e.kind == "const":
        if isinstance(e.value, str):
            return fixed(len(e.value))
        if isinstance(e.value, bytes):
            return fixed(len(e.value))
        return ONE
    if e.kind == "list":
        return fixed(len(e.args))
    if e.kind == "map":
        return fixed(len(e.entries))
    return None


_COMPARISONS = {f"{op}_{t}" for op in ("less", "greater", "less_equals", "greater_equals") for t in ("string", "bytes")}
_COMPARISONS |= {"equals", "not_equals"}

Estimator = Callable[[Coster, Expr, str, "SizedNode | None", list[SizedNode]], "tuple[Est, Est | None] | None"]
KubeEstimator = Callable[[Coster, str, "SizedNode | None", list[SizedNode]], "tuple[Est, Est | None] | None"]


def _list_call(factor: float, size: Est) -> tuple[Est, Est]:
    """ext/lists.go estimateAllocatingListCall."""
    return size.factor(factor).add(ONE).add(fixed(LIST_CREATE)), size


def _int_literal(node: SizedNode, default: int) -> int:
    e = node.expr
    if e is None or e.kind != "const" or not isinstance(e.value, int) or isinstance(e.value, bool) or e.uint:
        return default
    return max(e.value, 0)


def _slice(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    if target is None or len(args) != 2:
        return None
    sz = c.sized(target)
    start, end = _int_literal(args[0], 0), _int_literal(args[1], sz.hi)
    return _list_call(1, fixed(end - start if end >= start else U64))


def _range(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    return None if target is not None or len(args) != 1 else _list_call(1, fixed(_int_literal(args[0], U64)))


def _reverse(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    return None if target is None or args else _list_call(1, c.sized(target))


def _flatten(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    if target is None or len(args) > 1:
        return None
    return _list_call(float(_int_literal(args[0], U64) if args else 1), c.sized(target))


def _distinct(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    if target is None or args:
        return None
    sz = c.sized(target)
    return _list_call(2.0, sz.mul(sz))


def _sort(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est] | None:
    by = "sortByAssociatedKeys" in o
    if target is None or len(args) != (1 if by else 0):
        return None
    sz = c.sized(args[0] if by else target)
    factor = 2.0 + (TRAVERSAL if o.startswith(("list_string_", "list_bytes_")) else 0)
    return _list_call(factor, sz.mul(sz))


def _sets(factor: float) -> Estimator:
    def estimate(c: Coster, e: Expr, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
        if len(args) != 2:
            return None
        return c.sized(args[0]).mul(c.sized(args[1])).factor(factor).add(ONE), None
    return estimate


_SORTABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
_OVERLOAD_ESTIMATORS: dict[str, Estimator] = {
    "list_slice": _slice, "list_flatten": _flatten, "list_flatten_int": _flatten, "list_range": _range,
    "lists_range": _range, "list_reverse": _reverse, "list_distinct": _distinct,
    "list_sets_contains_list": _sets(1), "list_sets_intersects_list": _sets(1), "list_sets_equivalent_list": _sets(2),
    **{f"list_{t}_sort": _sort for t in _SORTABLE},
    **{f"list_{t}_sortByAssociatedKeys": _sort for t in _SORTABLE},
}


# -- Kubernetes' library/cost.go EstimateCallCost, by function name ---------------------------------------------------

KubeResult = "tuple[Est, Est | None] | None"


def _k_lists(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None:
        return None
    element = c.element(target)
    if element is None:  # a string: indexOf / lastIndexOf
        return c.sized(target).factor(TRAVERSAL), None
    cost = ONE
    if element.type.kind in ("string", "bytes"):
        cost = cost.add(c.sized(element).factor(TRAVERSAL))
    return c.sized(target).mul(cost), None


def _k_traverse_target(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None:
        return None
    sz = c.sized(target)
    return sz.factor(TRAVERSAL), sz


def _k_traverse_arg(factor: float) -> KubeEstimator:
    def estimate(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
        return (c.sized(args[0]).factor(factor), None) if args else None
    return estimate


def _k_replace(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None or len(args) < 2:
        return None
    sz, old, new = c.sized(target), c.sized(args[0]), c.sized(args[1])
    count_hi, retained_hi = _replacements(sz.hi, old.lo, old.lo == 0, new.hi <= old.lo)
    count_lo, retained_lo = _replacements(sz.lo, old.hi, old.hi == 0, old.hi <= new.lo)
    size = Est(count_lo, count_hi).mul(new).add(Est(retained_lo, retained_hi))
    return sz.factor(2 * TRAVERSAL), size


def _replacements(size: int, old: int, empty: bool, kept: bool) -> tuple[int, int]:
    """One bound of library/cost.go's replace estimate: how many replacements, how much of the string is kept."""
    if empty:
        return (size + 1 if size < U64 else size), size
    if kept:
        return 0, size
    return math.ceil(size / old), 0


def _k_split(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None:
        return None
    sz = c.sized(target)
    most = sz.hi
    if len(args) > 1 and args[1].expr is not None and args[1].expr.kind == "const" \
            and isinstance(args[1].expr.value, int) and not args[1].expr.uint:
        most = args[1].expr.value % (1 << 64)  # Go's uint64(i)
    return sz.factor(2 * TRAVERSAL), Est(0, most)


def _k_join(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None:
        return None
    size, count = ZERO, c.sized(target)
    element = c.element(target)
    if element is not None:
        size = count.mul(c.sized(element))
    if args:
        separators = Est(count.lo - 1 if count.lo > 0 else 0, count.hi - 1 if count.hi > 0 else 0)
        size = size.add(c.sized(args[0]).mul(separators))
    return size.factor(TRAVERSAL), size


def _k_find(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if target is None or not args:
        return None
    sz = c.sized(target)
    return sz.add(ONE).factor(TRAVERSAL).mul(c.sized(args[0]).factor(REGEX)), Est(0, sz.hi)


def _k_ip(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if o == "cidr_ip":
        return ONE, None
    return (c.sized(args[0]).factor(TRAVERSAL), None) if args else None


def _k_contains(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if not args:
        return None
    address = Est(4, 16)
    cost = address.add(address).factor(TRAVERSAL)
    if o.startswith("cidr_contains_cidr"):
        cost = cost.add(address.factor(TRAVERSAL)).add(ONE)
    if o in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
        cost = cost.add(c.sized(args[0]).factor(TRAVERSAL))
    return cost, None


def _k_one(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    return ONE, None


def _k_equals(c: Coster, o: str, target: SizedNode | None, args: list[SizedNode]) -> tuple[Est, Est | None] | None:
    if len(args) != 2 or args[0].type != args[1].type:
        return None
    t = args[0].type
    if kind(t) in ("opaque", "struct") and t.kind == "message" and t.name in (
            "net.IP", "net.CIDR", "kubernetes.Quantity", "kubernetes.Semver"):
        return ONE, None
    return None


_KUBERNETES: dict[str, KubeEstimator] = {
    **dict.fromkeys(("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"), _k_lists),
    **dict.fromkeys(("lowerAscii", "upperAscii", "substring", "trim"), _k_traverse_target),
    "replace": _k_replace, "split": _k_split, "join": _k_join, "find": _k_find, "findAll": _k_find,
    **{name: _k_traverse_arg(TRAVERSAL) for name in ("cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver",
                                                    "isSemver")},
    "ip": _k_ip, "ip.isCanonical": _k_traverse_arg(2 * TRAVERSAL),
    "containsIP": _k_contains, "containsCIDR": _k_contains,
    **dict.fromkeys(("masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
                     "isLinkLocalUnicast", "isGlobalUnicast", "sign", "asInteger", "isInteger", "asApproximateFloat",
                     "isGreaterThan", "isLessThan", "compareTo", "add", "sub", "major", "minor", "patch"), _k_one),
    "_==_": _k_equals,
}
