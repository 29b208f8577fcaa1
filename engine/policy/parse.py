"""Parse policy source into the typed AST (grammar file + lark Transformer, as lark's examples do).

Syntax errors become `Diagnostic`s with file, line, column, the source line and a caret, and a
"did you mean" for misspelt keywords.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from . import ast as A

HOSTNAME = "kubernetes.io/hostname"
DOMAINS = {"per_node": HOSTNAME, "per_zone": "topology.kubernetes.io/zone", "per_region": "topology.kubernetes.io/region"}


@dataclass(frozen=True, slots=True)
class Diagnostic:
    file: str
    line: int
    column: int
    message: str
    source_line: str = ""

    def headline(self) -> str:
        """`file:line:col: message`, on one line."""
        return f"{self.file}:{self.line}:{self.column}: {self.message}"

    def render(self) -> str:
        """`file:line:col: message`, then the source line with a caret under the column."""
        out = self.headline()
        if self.source_line:
            out += f"\n    {self.source_line}\n    {' ' * (self.column - 1)}^"
        return out


class PolicyError(Exception):
    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("\n".join(d.render() for d in diagnostics))
        self.diagnostics = diagnostics


def grammar_text() -> str:
    """grammar/policy.lark: shipped in the wheel as engine/grammar, read from the tree when run from source."""
    try:
        return resources.files("engine.grammar").joinpath("policy.lark").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return (Path(__file__).resolve().parents[2] / "grammar" / "policy.lark").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def parser() -> Lark:
    """The LALR parser, built once per process."""
    return Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=False)


TERMINAL_NAMES = {
    "PREFER_WITHIN": "prefer within",
    "NAME": "a policy name (lower-case letters, digits and '-')",
    "STRING": "a quoted string",
    "SIGNED_NUMBER": "a number",
    "INT": "a whole number",
    "TAINT": "a taint (key[=value][:Effect])",
    "ATTR": "label, annotation, taint or allocatable",
}
ATTRIBUTES = ("label", "annotation", "taint", "allocatable", "name")


def keywords() -> dict[str, str]:
    """Terminal name -> the literal it spells ('WEIGHT' -> 'weight', 'EQ' -> '==')."""
    return {t.name: t.pattern.value for t in parser().terminals if t.pattern.type == "str"}


def _pos(file: str, meta_or_token) -> A.Pos:
    return A.Pos(file, getattr(meta_or_token, "line", 0) or 0, getattr(meta_or_token, "column", 0) or 0)


def _string(token: Token) -> str:
    return json.loads(str(token))


def _value(token) -> A.Value:
    if isinstance(token, Token) and token.type == "STRING":
        return _string(token)
    text = str(token)
    return int(text) if text.lstrip("+-").isdigit() else float(text)


UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """A duration as the grammar's DURATION writes it (90m, 1h30m, 2d) in seconds."""
    return sum(int(n) * UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)([smhd])", text))


class _ToAst(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file

    # tokens and small pieces
    def eq_op(self, items):
        return str(items[0])

    cmp_op = eq_op

    def op_in(self, _):
        return "in"

    def op_not_in(self, _):
        return "not in"

    def op_exists(self, _):
        return True

    def op_not_exists(self, _):
        return False

    def list(self, items):
        return tuple(str(_value(v)) for v in items)

    def weight(self, items):
        return float(items[0])

    @v_args(meta=True)
    def per_node(self, meta, _):
        return A.Domain(DOMAINS["per_node"], _pos(self.file, meta))

    @v_args(meta=True)
    def per_zone(self, meta, _):
        return A.Domain(DOMAINS["per_zone"], _pos(self.file, meta))

    @v_args(meta=True)
    def per_region(self, meta, _):
        return A.Domain(DOMAINS["per_region"], _pos(self.file, meta))

    @v_args(meta=True)
    def per_label(self, meta, items):
        return A.Domain(_string(items[0]), _pos(self.file, meta))

    # pod expressions
    @v_args(meta=True)
    def scope_all(self, meta, _):
        return A.Scope(A.AllPods(_pos(self.file, meta)), _pos(self.file, meta))

    @v_args(meta=True)
    def pod_or(self, meta, items):
        return A.PodOr(items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def pod_and(self, meta, items):
        return A.PodAnd(items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def pod_not(self, meta, items):
        return A.PodNot(items[0], _pos(self.file, meta))

    def _field(self, meta, field: str, key: str, op: str, values) -> A.PodField:
        values = values if isinstance(values, tuple) else (str(_value(values)),)
        return A.PodField(field, key, op, values, _pos(self.file, meta))

    @v_args(meta=True)
    def pod_namespace(self, meta, items):
        return self._field(meta, "namespace", "", items[0], items[1])

    @v_args(meta=True)
    def pod_owner_kind(self, meta, items):
        return self._field(meta, "owner kind", "", items[0], items[1])

    @v_args(meta=True)
    def pod_label(self, meta, items):
        return self._field(meta, "label", _string(items[0]), items[1], items[2])

    @v_args(meta=True)
    def pod_label_exists(self, meta, items):
        return A.PodLabelExists(_string(items[0]), items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def pod_priority(self, meta, items):
        return A.PodPriority(items[0], _value(items[1]), _pos(self.file, meta))

    # node expressions
    @v_args(meta=True)
    def node_or(self, meta, items):
        return A.NodeOr(items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def node_and(self, meta, items):
        return A.NodeAnd(items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def node_not(self, meta, items):
        return A.NodeNot(items[0], _pos(self.file, meta))

    @v_args(meta=True)
    def node_compare(self, meta, items):
        return A.NodeCompare(str(items[0]), _string(items[1]), items[2], _value(items[3]), _pos(self.file, meta))

    @v_args(meta=True)
    def node_member(self, meta, items):
        return A.NodeMember(str(items[0]), _string(items[1]), items[2], items[3], _pos(self.file, meta))

    @v_args(meta=True)
    def node_exists(self, meta, items):
        return A.NodeExists(str(items[0]), _string(items[1]), items[2], _pos(self.file, meta))

    @v_args(meta=True)
    def node_name(self, meta, items):
        values = items[1] if isinstance(items[1], tuple) else (str(_value(items[1])),)
        op = {"==": "in", "!=": "not in"}.get(items[0], items[0])
        return A.NodeName(op, values, _pos(self.file, meta))

    # statements
    @v_args(meta=True)
    def scope_where(self, meta, items):
        return A.Scope(items[0], _pos(self.file, meta))

    @v_args(meta=True)
    def require(self, meta, items):
        return A.NodeRequirement("require", items[0], None, _pos(self.file, meta))

    @v_args(meta=True)
    def forbid(self, meta, items):
        return A.NodeRequirement("forbid", items[0], None, _pos(self.file, meta))

    @v_args(meta=True)
    def prefer(self, meta, items):
        return A.NodeRequirement("prefer", items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def fragmentation(self, meta, items):
        return A.LessFragmentation(_string(items[0]), items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def avoid(self, meta, items):
        return A.NodeRequirement("avoid", items[0], items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def tolerate(self, meta, items):
        return A.Tolerate(tuple(self._taint(t) for t in items), _pos(self.file, meta))

    @v_args(meta=True)
    def tolerate_all(self, meta, _):
        return A.Tolerate((A.TaintPattern("", None, "", _pos(self.file, meta)),), _pos(self.file, meta))

    def _taint(self, token: Token) -> A.TaintPattern:
        text = str(token)
        key_value, _, effect = text.partition(":")
        key, eq, value = key_value.partition("=")
        return A.TaintPattern(key, value if eq else None, effect, _pos(self.file, token))

    @v_args(meta=True)
    def minimize(self, meta, items):
        return A.Minimize(str(items[0]), _string(items[1]), items[2], _pos(self.file, meta))

    @v_args(meta=True)
    def price(self, meta, items):
        return A.Price(_string(items[0]), str(items[1]), _string(items[2]), _pos(self.file, meta))

    @v_args(meta=True)
    def minimize_cost(self, meta, items):
        return A.MinimizeCost(tuple(items[:-1]), items[-1], _pos(self.file, meta))

    @v_args(meta=True)
    def pods_same_label(self, meta, items):
        return A.SameLabel(_string(items[0]), _pos(self.file, meta))

    @v_args(meta=True)
    def pods_where(self, meta, items):
        return A.PodsWhere(items[0], _pos(self.file, meta))

    @v_args(meta=True)
    def separate(self, meta, items):
        return A.Proximity(True, items[0], items[1], items[2] if len(items) > 2 else None, _pos(self.file, meta))

    @v_args(meta=True)
    def together(self, meta, items):
        return A.Proximity(False, items[0], items[1], items[2] if len(items) > 2 else None, _pos(self.file, meta))

    @v_args(meta=True)
    def pack(self, meta, items):
        return A.PackOrSpread(True, items[0], _pos(self.file, meta))

    @v_args(meta=True)
    def spread(self, meta, items):
        return A.PackOrSpread(False, items[0], _pos(self.file, meta))

    @v_args(meta=True)
    def limit(self, meta, items):
        return A.AtMost(int(items[0]), items[1], items[2], _pos(self.file, meta))

    @v_args(meta=True)
    def default_spreading_off(self, meta, _):
        return A.DefaultSpreadingRule((), _pos(self.file, meta))

    @v_args(meta=True)
    def default_spreading(self, meta, items):
        return A.DefaultSpreadingRule(tuple(items), _pos(self.file, meta))

    @v_args(meta=True)
    def default_spread(self, meta, items):
        return A.DefaultSpread(items[0], int(items[1]), _pos(self.file, meta))

    @v_args(meta=True)
    def protect(self, meta, items):
        return A.Protect(_pos(self.file, meta))

    @v_args(meta=True)
    def evictions_total(self, meta, items):
        return A.EvictionsPerCycle(int(items[0]), False, _pos(self.file, meta))

    @v_args(meta=True)
    def evictions_per_namespace(self, meta, items):
        return A.EvictionsPerCycle(int(items[0]), True, _pos(self.file, meta))

    @v_args(meta=True)
    def amount(self, meta, items):
        return A.Amount(_string(items[0]), _value(items[1]), _pos(self.file, meta))

    @v_args(meta=True)
    def quota_min(self, meta, items):
        return A.QuotaAmounts("min", tuple(items), _pos(self.file, meta))

    @v_args(meta=True)
    def quota_max(self, meta, items):
        return A.QuotaAmounts("max", tuple(items), _pos(self.file, meta))

    @v_args(meta=True)
    def quota_weight(self, meta, items):
        return A.QuotaWeight(float(items[0]), _pos(self.file, meta))

    @v_args(meta=True)
    def runtime(self, meta, items):
        return A.Runtime(duration(str(items[0])), _pos(self.file, meta))

    @v_args(meta=True)
    def reserve(self, meta, items):
        return A.Reserve(int(items[0]), duration(str(items[1])), _pos(self.file, meta))

    def gang_within(self, items):
        return items[0]

    def gang_prefer(self, items):
        return tuple(items[1:])  # after the PREFER_WITHIN token

    @v_args(meta=True)
    def gang_least(self, meta, items):
        return A.AtLeastPer(int(items[0]), items[1], _pos(self.file, meta))

    @v_args(meta=True)
    def per_device_attribute(self, meta, items):
        return A.DeviceAttribute(_string(items[0]), _pos(self.file, items[0]))  # the name, where an error points

    @v_args(meta=True)
    def gang_podgroup(self, meta, items):
        return A.GangBy("", 0, _pos(self.file, meta), *_gang_topology(items))

    @v_args(meta=True)
    def gang_workload(self, meta, items):
        return A.GangBy("", 0, _pos(self.file, meta), *_gang_topology(items), workload=True)

    @v_args(meta=True)
    def gang(self, meta, items):
        return A.GangBy(_string(items[0]), int(items[1]), _pos(self.file, meta), *_gang_topology(items[2:]))

    # structure
    @v_args(meta=True)
    def policy(self, meta, items):
        return A.Policy(str(items[0]), tuple(items[1:]), _pos(self.file, meta))

    def start(self, items):
        return list(items)


def _describe_expected(expected: set[str]) -> str:
    words = keywords()
    names = sorted({f"'{words[e]}'" if e in words else TERMINAL_NAMES.get(e, e) for e in expected})
    return ", ".join(names[:8]) + (" …" if len(names) > 8 else "")


def _suggestion(got: str, expected: set[str]) -> str | None:
    words = [w for e, w in keywords().items() if e in expected and w.isalpha()]
    if "ATTR" in expected:
        words += list(ATTRIBUTES)
    close = difflib.get_close_matches(got.strip('"').lower(), words, n=1, cutoff=0.6)
    return close[0] if close else None


def _syntax_error(exc: UnexpectedInput, text: str, file: str) -> Diagnostic:
    lines = text.splitlines()
    line = getattr(exc, "line", 0) or (len(lines) or 1)
    column = getattr(exc, "column", 0) or 1
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    if isinstance(exc, UnexpectedToken):
        at_end = exc.token.type == "$END"
        got = "" if at_end else str(exc.token)
        message = "unexpected end of file" if at_end else f"unexpected {got!r}"
        expected = set(exc.expected)
    elif isinstance(exc, UnexpectedEOF):
        got, message, expected = "", "unexpected end of file", set(exc.expected)
    else:
        assert isinstance(exc, UnexpectedCharacters)
        got = source[column - 1:].split()[0] if source[column - 1:].split() else source[column - 1:column]
        message = f"unexpected {got!r}"
        expected = set(exc.allowed or ())
    if expected:
        message += f"; expected {_describe_expected(expected)}"
        close = _suggestion(got, expected) if got else None
        if close:
            message += f" (did you mean '{close}'?)"
    return Diagnostic(file, line, column, message, source)


MAX_NESTING = 100  # and/or/not levels in one expression; every later stage walks expressions recursively


def _too_deep(tree: Tree, text: str, file: str) -> Diagnostic | None:
    """An expression nested beyond MAX_NESTING, at its start; found without recursing (that is what it guards)."""
    todo: list[tuple[Tree, int, Tree | None]] = [(tree, 0, None)]
    while todo:
        node, depth, top = todo.pop()
        nested = node.data in ("pod_or", "pod_and", "pod_not", "node_or", "node_and", "node_not")
        depth, top = (depth + 1, top or node) if nested else (0, None)
        if depth > MAX_NESTING and top is not None:
            line, column = getattr(top.meta, "line", 1), getattr(top.meta, "column", 1)
            lines = text.splitlines()
            source = lines[line - 1] if 0 < line <= len(lines) else ""
            message = (f"expression nested more than {MAX_NESTING} levels deep (and / or / not); "
                       "for many alternatives use 'in [...]'")
            return Diagnostic(file, line, column, message, source if len(source) <= 200 else "")
        todo.extend((c, depth, top) for c in node.children if isinstance(c, Tree))
    return None


def parse(text: str, file: str = "<policy>") -> list[A.Policy]:
    """Parse one source into policies, or raise PolicyError with a positioned diagnostic."""
    text = text.removeprefix("\ufeff")  # a BOM some editors write; invisible, so never the user's mistake
    try:
        tree = parser().parse(text)
    except UnexpectedInput as exc:
        raise PolicyError([_syntax_error(exc, text, file)]) from None
    except RecursionError:
        raise PolicyError([Diagnostic(file, 1, 1, "policy is nested too deeply")]) from None
    deep = _too_deep(tree, text, file)
    if deep:
        raise PolicyError([deep])
    try:
        return _ToAst(file).transform(tree)
    except VisitError as exc:  # a literal the grammar accepts but Python cannot read (e.g. a huge number)
        raise PolicyError([Diagnostic(file, 1, 1, f"invalid literal: {exc.orig_exc}")]) from None


def _gang_topology(items: list) -> tuple[A.Domain | None, tuple[A.Domain, ...], A.AtLeastPer | None,
                                         A.DeviceAttribute | None]:
    """A gang statement's optional parts, each found by its type: within (a label's domain or a device attribute's),
    prefer within, with at least."""
    within = next((i for i in items if isinstance(i, A.Domain)), None)
    prefer = next((i for i in items if isinstance(i, tuple)), ())
    least = next((i for i in items if isinstance(i, A.AtLeastPer)), None)
    device = next((i for i in items if isinstance(i, A.DeviceAttribute)), None)
    return within, prefer, least, device
