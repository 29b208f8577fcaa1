"""Parse a large `kubectl get -o yaml` snapshot on every core.

Building objects from libyaml's events costs a Python call per event, so a production snapshot (80 MiB,
25,000 objects) takes seconds on one core. kubectl prints one `kind: List` whose items start at column 0
with `- `; those runs of items are independent YAML sequences, so parts of them parse in separate
processes with the same event builder, and their objects come back pickled.

This is only a fast path: any part that fails to parse, or text that is not such a List, makes the caller
parse the whole text serially, which reports errors with their true positions. Aliases cannot cross parts
(an undefined alias fails the part), so a successful parallel parse equals the serial one.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import re
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .objects import BY_NAME

MIN_BYTES = 4 << 20  # below this, starting processes costs more than it saves
ITEM = re.compile(r"^- ", re.MULTILINE)
TOP_KEY = re.compile(r"^[^\s#-]", re.MULTILINE)

Parse = Callable[[str, dict[int, int]], list[Any]]


def _parts(text: str, items_at: int, items_end: int, workers: int) -> list[tuple[int, int]]:
    """(start, end) offsets of about equal runs of items, cut at item starts."""
    starts = [m.start() for m in ITEM.finditer(text, items_at, items_end)]
    if not starts:
        return []
    step = max(1, len(starts) // workers)
    cuts = starts[::step] + [items_end]
    cuts[0] = starts[0]
    return [(a, b) for a, b in itertools.pairwise(cuts) if a < b]


def _items_region(text: str) -> tuple[int, int] | None:
    """Where the List's items run: after a column-0 `items:` line, up to the next column-0 key."""
    m = re.search(r"^items:[ \t]*\n", text, re.MULTILINE)
    if m is None or "\n---" in text or text.startswith("---"):
        return None
    end = TOP_KEY.search(text, m.end())
    return m.end(), end.start() if end else len(text)


def prune(item: Any) -> None:
    """Drop the bulky fields of an object that no scheduling decision reads (engine.reading.objects says which, per kind:
    managed fields, probes, env, status conditions), so the objects sent back to the parent, which unpickles them
    on one core, are a fraction of the text."""
    entry = BY_NAME.get(str(item.get("kind"))) if isinstance(item, dict) else None
    if entry is None or entry.pruned is None:
        return
    unread = entry.pruned
    for section, keys in (("metadata", unread.metadata), ("status", unread.status)):
        part = item.get(section)
        if isinstance(part, dict):
            for key in keys:
                part.pop(key, None)
    spec = item.get("spec")
    if unread.volume_kept is not None and isinstance(spec, dict) and isinstance(spec.get("volumes"), list):
        spec["volumes"] = [{k: v for k, v in vol.items() if k in unread.volume_kept} if isinstance(vol, dict) else vol
                           for vol in spec["volumes"]]
    if unread.container and isinstance(spec, dict):
        for field in ("containers", "initContainers"):
            for container in spec.get(field) or () if isinstance(spec.get(field), list) else ():
                if isinstance(container, dict):
                    for key in unread.container:
                        container.pop(key, None)


def _parse_part(parse: Parse, text: str, first_line: int) -> tuple[list[Any], list[int]]:
    """One run of items (pruned), and the line of each item (for messages)."""
    lines: dict[int, int] = {}
    docs = parse(text, lines)
    items = docs[0] if len(docs) == 1 and isinstance(docs[0], list) else None
    if items is None:
        raise ValueError("not a run of List items")
    for item in items:
        prune(item)
    return items, [lines.get(id(item), 0) + first_line - 1 if isinstance(item, dict) else 0 for item in items]


def parse_list(text: str, lines: dict[int, int], parse: Parse, workers: int | None = None,
               min_bytes: int = MIN_BYTES) -> list[Any] | None:
    """The documents of a big kubectl List parsed on all cores, or None when the serial parse should run."""
    workers = workers or min(4, os.cpu_count() or 1)
    region = _items_region(text) if len(text) >= min_bytes and workers > 1 else None
    if region is None:
        return None
    parts = _parts(text, *region, workers)
    if len(parts) < 2:
        return None
    head = text[: region[0]] + "items: []\n" + text[region[1]:]
    line_of = [text.count("\n", 0, a) + 1 for a, _ in parts]
    try:  # the last part is parsed here meanwhile: one process fewer, and one part never pickled
        with ProcessPoolExecutor(len(parts) - 1, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [pool.submit(_parse_part, parse, text[a:b], n) for (a, b), n in zip(parts[:-1], line_of)]
            (a, b), n = parts[-1], line_of[-1]
            own = _parse_part(parse, text[a:b], n)
            docs = parse(head, lines)
            results = [f.result() for f in futures] + [own]
    except Exception:
        return None
    if len(docs) != 1 or not isinstance(docs[0], dict) or docs[0].get("items") != []:
        return None
    items: list[Any] = []
    for part, part_lines in results:
        for item, line in zip(part, part_lines):
            if line:
                lines[id(item)] = line
        items.extend(part)
    docs[0]["items"] = items
    return docs
