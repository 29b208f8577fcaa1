"""Read snapshots: files or stdin, multi-document YAML, a `kind: List`, or JSON, into manifests.

The I/O edge of the dry-run: text in, (source, object) pairs out, where the source is `file:line` so
that `engine.reading.load.build_cluster` can name every object in its errors. Malformed, binary, too deep or
aliased input is one `InputError` with file, line and column.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ..model.cluster import Cluster
from ..model.ir import GangRules
from .convert.fields import describe, show_value
from .field_validation import UnknownFields, schemas
from .load import DEFAULT_SCHEDULER, InputError, build_cluster
from .yaml_parallel import parse_list

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_DEPTH = 200  # nesting levels; real manifests use ~20, and deeper input only serves to crash parsers


def read_documents(path: str) -> list[dict[str, Any]]:
    """Parse a file (or `-` for stdin) into the list of top-level objects, flattening `kind: List`."""
    return [obj for _, obj in read_objects(path)]


def read_objects(path: str) -> list[tuple[str, dict[str, Any]]]:
    """(source, object) pairs from a file or stdin; the source is `file:line` where the line is known."""
    name = "<stdin>" if path == "-" else path
    return parse_objects(_read_text(path, name), name)


def _read_text(path: str, name: str) -> str:
    """The input as text: bytes decoded as UTF-8 here (not by the locale), so binary input is one clear error."""
    try:
        if path == "-":
            stream = getattr(sys.stdin, "buffer", sys.stdin)
            data = stream.read()
        else:
            data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"{name}: cannot read file: {exc.strerror or exc}") from None
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                         "a snapshot is YAML or JSON") from None


def parse_documents(text: str, name: str = "<input>") -> list[dict[str, Any]]:
    return [obj for _, obj in parse_objects(text, name)]


def parse_objects(text: str, name: str = "<input>") -> list[tuple[str, dict[str, Any]]]:
    """Top-level objects with their source (`name:line` for YAML); empty input is an error."""
    return _parse(text, name).objects


@dataclass(slots=True)
class _Parsed:
    """A text's objects, and where each is: `lines`, by id, the line its mapping starts on (YAML); `places`, by id,
    its path in the document (`items[3]`; what finds a field's line in JSON, one document), for finding a field's
    line again."""

    objects: list[tuple[str, dict[str, Any]]]
    lines: dict[int, int]
    places: dict[int, str]
    json: bool = False


def _parse(text: str, name: str) -> _Parsed:
    text = text.removeprefix("\ufeff")
    lines: dict[int, int] = {}
    is_json = text.lstrip()[:1] in ("{", "[")
    try:
        if is_json:
            docs: list[Any] = [_load_json(text, name)]
        else:
            docs = parse_list(text, lines, _yaml_documents) or _yaml_documents(text, lines)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise InputError(f"{name}:{line}:{col}: invalid YAML: unacceptable character #x{exc.character:04x}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: invalid YAML: {problem}") from None
    if all(d is None for d in docs):
        raise InputError(f"{name}: no Kubernetes objects (the input is empty)")
    places: dict[int, str] = {}
    return _Parsed(list(_flatten(docs, name, lines, places=places)), lines, places, is_json)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _load_json(text: str, name: str) -> Any:
    """json.loads with an explicit nesting limit (the C decoder would otherwise hit Python's recursion limit)."""
    try:
        value = json.loads(text)
    except RecursionError:
        value = None
    else:
        if _nesting_at_most(text, MAX_DEPTH) or _depth_at_most(value, MAX_DEPTH):
            return value
    offset = _too_deep_offset(text)
    line, col = _line_col(text, offset)
    raise InputError(f"{name}:{line}:{col}: invalid JSON: nested more than {MAX_DEPTH} levels deep")


_STRUCTURE = bytes.maketrans(b"[]", b"{}")  # for nesting, a list is as deep as a mapping
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"[]{}')
_STRING = re.compile(rb'"[^"]*"')


def _nesting_at_most(text: str, limit: int) -> bool:
    """Whether the brackets of valid JSON nest at most `limit` deep, read off the text with bytes operations (a
    few passes in C, where walking the parsed value visits every value in Python). Escapes go first (escaped
    backslashes, then what is left of an escaped quote), then all but quotes and brackets, then the strings with
    what they hold; what remains is bracket pairs, and each pass peels the innermost. The text nests at least
    as deep as the value it parses to (a duplicate key drops the earlier value), so False is only a maybe."""
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    data = data.translate(_STRUCTURE, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in data:  # strings holding brackets
        data = _STRING.sub(b"", data)
    for _ in range(limit):
        if not data:
            return True
        data = data.replace(b"{}", b"")
    return not data


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether containers nest at most `limit` deep: one level at a time (the point is not to recurse)."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(limit):
        if not level:
            return True
        level = [c for item in level for c in (item.values() if type(item) is dict else item)
                 if type(c) is dict or type(c) is list]
    return not level


def _too_deep_offset(text: str) -> int:
    depth = 0
    for m in _JSON_NESTING.finditer(text):
        token = m.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return m.start()
        elif token in "]}":
            depth -= 1
    return 0


_STR = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_MAYBE_TYPED = frozenset("0123456789+-.~yYnNtTfFoO")


@lru_cache(maxsize=1 << 16)
def _typed_scalar(value: str, tag: str | None) -> Any:
    """A plain (or explicitly tagged) scalar as safe_load would construct it."""
    if tag is None or tag == "!":
        tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
    if tag == _STR:
        return value
    construct = _CONSTRUCTOR.yaml_constructors.get(tag)
    if construct is None:
        raise yaml.constructor.ConstructorError(None, None, f"unsupported tag {tag!r}", None)
    return construct(_CONSTRUCTOR, yaml.ScalarNode(tag, value))


def _tagged(ev: Any) -> Any:
    """An explicitly tagged scalar; an unsupported or malformed one is an error at its position."""
    try:
        return _typed_scalar(ev.value, ev.tag)
    except (yaml.YAMLError, ValueError, TypeError, IndexError, KeyError, OverflowError) as exc:
        problem = getattr(exc, "problem", None) or f"cannot read {ev.value[:40]!r} as {ev.tag}"
        raise yaml.constructor.ConstructorError(None, None, problem, ev.start_mark) from None


def load_yaml_documents(text: str) -> list[Any]:
    """yaml.safe_load_all, but built straight from libyaml's parse events (see _yaml_documents)."""
    return _yaml_documents(text, {})


def _yaml_documents(text: str, lines: dict[int, int]) -> list[Any]:
    """yaml.safe_load_all, but built straight from libyaml's parse events.

    PyYAML's constructor is pure Python and takes ~11 s on a 15,000-object snapshot; libyaml parses it
    in ~1 s, and building plain dicts and lists from its events costs little more. Scalars resolve as
    in safe_load (ints, bools, nulls, floats, timestamps); anchors, aliases and merge keys (`<<`) are
    honoured. Nesting deeper than MAX_DEPTH is an error with its position. `lines` receives the
    starting line of the mappings near the top (documents and List items), by id, for messages.
    """
    docs: list[Any] = []
    stack: list[Any] = []  # containers under construction; a mapping carries its pending key
    keys: list[Any] = []
    anchors: dict[str, Any] = {}
    events: Iterator[Any] = yaml.parse(text, Loader=_Loader)  # dispatched on exact type below, for speed
    for ev in events:
        cls = type(ev)
        if cls is yaml.ScalarEvent:
            if not ev.implicit[0]:  # quoted or block scalars are strings unless explicitly tagged
                value: Any = ev.value if ev.tag in (None, "!", _STR) else _tagged(ev)
            elif ev.tag is None and ev.value and ev.value[0] not in _MAYBE_TYPED:
                value = _MERGE if ev.value == "<<" and stack and keys[-1] is _NO_KEY and type(stack[-1]) is dict \
                    else ev.value  # a plain scalar that cannot resolve to anything but a string
            else:
                value = _typed_scalar(ev.value, ev.tag) if ev.tag is None else _tagged(ev)
        elif cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
            if len(stack) >= MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep", ev.start_mark)
            value = {} if cls is yaml.MappingStartEvent else []
            if ev.anchor:
                anchors[ev.anchor] = value
            if len(stack) < 3 and cls is yaml.MappingStartEvent:
                lines[id(value)] = ev.start_mark.line + 1
            _attach(stack, keys, docs, value, ev)
            stack.append(value)
            keys.append(_NO_KEY)
            continue
        elif cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
            done = stack.pop()
            keys.pop()
            if cls is yaml.MappingEndEvent and _MERGE in done:
                _merge(done, ev.start_mark)
            continue
        elif cls is yaml.AliasEvent:
            if ev.anchor not in anchors:
                raise yaml.composer.ComposerError(None, None, f"found undefined alias {ev.anchor!r}", ev.start_mark)
            value = anchors[ev.anchor]
        else:
            continue
        if cls is yaml.ScalarEvent and ev.anchor:
            anchors[ev.anchor] = value
        _attach(stack, keys, docs, value, ev)
    return docs


_NO_KEY = object()
_MERGE = type("_Merge", (), {"__repr__": lambda self: "<<"})()  # the `<<` merge key, as a unique dict key


def _merge(mapping: dict[Any, Any], mark: Any) -> None:
    """Apply a `<<` key as safe_load does: merged keys first, the mapping's own keys win, earlier sources win."""
    source = mapping.pop(_MERGE)
    sources = source if isinstance(source, list) else [source]
    if not all(isinstance(s, dict) for s in sources):
        raise yaml.constructor.ConstructorError(
            None, None, "expected a mapping or list of mappings for merging", mark)
    own = dict(mapping)
    mapping.clear()
    for s in sources:
        for k, v in s.items():
            mapping.setdefault(k, v)
    mapping.update(own)


def _attach(stack: list[Any], keys: list[Any], docs: list[Any], value: Any, ev: Any) -> None:
    if not stack:
        docs.append(value)
        return
    top = stack[-1]
    if type(top) is list:
        top.append(value)
    elif keys[-1] is _NO_KEY:
        keys[-1] = value
    else:
        try:
            top[keys[-1]] = value
        except TypeError:  # a list or mapping as a key: safe_load refuses it too
            raise yaml.constructor.ConstructorError(None, None, "a list or mapping cannot be a key", ev.start_mark) from None
        keys[-1] = _NO_KEY


def _flatten(docs: Iterable[Any], name: str, lines: dict[int, int], depth: int = 0, places: dict[int, str] | None = None,
             at: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects of the documents, Lists flattened; `places` receives each object's path below the document
    (`items[3]`; the documents themselves are the top level's items, `[i]`, only in a JSON list)."""
    if depth > 3:
        raise InputError(f"{name}: lists of objects nested more than 3 deep")
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        here = f"{at}[{i}]" if depth else ""
        if isinstance(doc, list):
            yield from _flatten(doc, name, lines, depth + 1, places, here)
            continue
        src = f"{name}:{lines[id(doc)]}" if id(doc) in lines else name
        if not isinstance(doc, dict):
            raise InputError(f"{name}: document {i + 1} is not a Kubernetes object (got {show_value(doc)})")
        kind = doc.get("kind")
        if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"{src}: {kind}.items is not a list")
            yield from _flatten(items, name, lines, depth + 1, places, f"{here}.items" if here else "items")
        else:
            if places is not None:
                places[id(doc)] = here
            yield src, doc


def load_cluster(paths: Iterable[str], scheduler_name: str = DEFAULT_SCHEDULER, gangs: GangRules | None = None,
                 strict: bool = False) -> Cluster:
    """Read every file and build one cluster model (objects from all files are merged).

    Fields an object's schema does not have (engine.reading.field_validation) are ignored and said in notes, first in
    `cluster.notes`; with `strict` they are an InputError naming the first object, as the apiserver's strict field
    validation refuses them. Not strict by default: a snapshot of a newer cluster holds fields this release's
    schemas lack, and is still right."""
    docs: list[tuple[str, dict[str, Any]]] = []
    unknown: list[UnknownFields] = []
    for path in paths:
        name = "<stdin>" if path == "-" else path
        text = _read_text(path, name)
        parsed = _parse(text, name)
        unknown += _unknown_fields(parsed, text)
        docs.extend(parsed.objects)
    if unknown and strict:
        raise InputError(str(unknown[0]), unknown[0].source, more=len(unknown) - 1,
                         more_what="object(s) with unknown fields")
    cluster = build_cluster(docs, scheduler_name, gangs)
    return replace(cluster, notes=[*unknown_field_notes(unknown), *cluster.notes]) if unknown else cluster


NOTED = 5  # objects with unknown fields named one by one in the notes; the rest are counted


def unknown_field_notes(unknown: list[UnknownFields]) -> list[str]:
    """What the notes say of unknown fields: the first objects' (with file, line and path), how many more, and
    what it means."""
    if not unknown:
        return []
    more = [f"… and {len(unknown) - NOTED} more object(s) with unknown fields"] if len(unknown) > NOTED else []
    return [*(str(u) for u in unknown[:NOTED]), *more,
            "unknown fields are ignored (a typo leaves its field unset): the apiserver's strict field validation "
            "would refuse them; --strict makes them an error"]


def _unknown_fields(parsed: _Parsed, text: str) -> list[UnknownFields]:
    """Each object with fields its kind's schema lacks, named with the file and, for the first few (those a message
    shows), the first such field's line."""
    check = schemas()
    out: list[UnknownFields] = []
    for src, obj in parsed.objects:
        paths = check.unknown_fields(obj)
        if not paths:
            continue
        meta = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        start = parsed.lines.get(id(obj))
        line = _field_line(text, start, parsed.places.get(id(obj), ""), paths[0]) \
            if len(out) < NOTED and (start is not None or parsed.json) else None
        source = f"{src.rsplit(':', 1)[0] if id(obj) in parsed.lines else src}:{line}" if line else src
        out.append(UnknownFields(source, describe(obj.get("kind"), meta), tuple(paths)))
    return out


_STEP = re.compile(r"\[(\d+)\]")
JSON_LOCATED = 8 << 20  # a JSON object's line is found by parsing the text up to it: only in files below this


def _field_line(text: str, start: int | None, place: str, path: str) -> int | None:
    """The line of the field at `path` in the object starting on line `start` (YAML, parsed from that line on), or
    at `place` in the document (JSON, parsed from the start); None where it cannot be told (aliases, merge keys, an
    object sharing its first line, a large JSON file)."""
    if start is None and len(text) > JSON_LOCATED:
        return None
    target = f"{place}.{path}" if place and start is None else path
    try:
        events = yaml.parse(text if start is None else text[_line_offset(text, start):], Loader=_Loader)
        first: Any = next(ev for ev in events if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)))
        if start is not None and isinstance(first, yaml.SequenceStartEvent):  # `- apiVersion: ...`: a List's item
            first = next(events)
        found = _find(events, first, target)
    except (yaml.YAMLError, StopIteration):
        return None
    return None if found is None else found + (start or 1)


def _line_offset(text: str, line: int) -> int:
    """Where 1-based `line` starts in `text`."""
    at = 0
    for _ in range(line - 1):
        at = text.index("\n", at) + 1
    return at


def _find(events: Iterator[Any], node: Any, rest: str) -> int | None:
    """The 0-based line (relative to where parsing began) of `rest` below `node`, whose start event was just read;
    the events are consumed up to there."""
    if isinstance(node, yaml.SequenceStartEvent):
        step = _STEP.match(rest)
        if step is None:
            return None
        index, rest = int(step.group(1)), rest[step.end():].removeprefix(".")
        for i, item in enumerate(_items(events)):
            if i == index:
                return _line(item) if not rest else _find(events, item, rest)
            _skip(events, item)
        return None
    if not isinstance(node, yaml.MappingStartEvent):
        return None
    for key in _items(events):
        name = key.value if isinstance(key, yaml.ScalarEvent) else None
        if name is not None and rest == name:
            return _line(key)
        value = next(events)
        if name is not None and rest.startswith(name) and rest[len(name):][:1] in (".", "["):
            return _find(events, value, rest[len(name):].removeprefix("."))
        _skip(events, key, value)
    return None


def _line(event: Any) -> int | None:
    return None if event.start_mark is None else event.start_mark.line


def _items(events: Iterator[Any]) -> Iterator[Any]:
    """The start events of a collection's entries (a mapping's keys, a list's items), until its end."""
    for ev in events:
        if isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            return
        yield ev


def _skip(events: Iterator[Any], *starts: Any) -> None:
    """Consume the rest of each node whose start event is in `starts`."""
    for ev in starts:
        depth = 1 if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)) else 0
        while depth:
            e = next(events)
            depth += isinstance(e, (yaml.MappingStartEvent, yaml.SequenceStartEvent)) - \
                isinstance(e, (yaml.MappingEndEvent, yaml.SequenceEndEvent))
