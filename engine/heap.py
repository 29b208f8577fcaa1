"""The cyclic collector paused while a stage builds a large graph with no cycles.

Loading a snapshot, a cycle's compile and a scheduler's first lists make millions of small containers (manifests,
index entries, candidate tuples) and no reference cycles, while the heap around them holds millions of objects:
each full pass of the collector would walk all of it again (seconds per compile at 20,000 nodes; the 25,000-pod
list of a starting scheduler decodes 4-5x faster without collections).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection while the block runs; as it was after (a nested pause leaves it off)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
