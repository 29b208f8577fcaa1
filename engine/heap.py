"""The cyclic collector paused while a stage builds a large graph with no cycles.

Loading a snapshot, compiling and planning make millions of small containers (manifests, index entries, candidate
tuples) and no reference cycles, while the heap around them holds millions of objects: each full pass of the
collector would walk all of it again (seconds per compile at 20,000 nodes). Who pauses it is the process's owner,
never the core: engine.cli for a one-shot command (the whole command), engine.loop.runtime for `run` (startup and
each cycle, counted across threads); a bench that calls the core in-process pauses as the command it stands for.
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
