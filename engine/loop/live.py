"""A live cluster's current state, read once (list only, never a write): for planning without a snapshot file.

`read_cluster(kubeconfig)` returns the (source name, manifest) pairs that `engine.reading.load.build_cluster` takes,
so `dry-run --kubeconfig F` can plan exactly what `run` would see, with the same output as with a snapshot.
"""

from __future__ import annotations

from ..reading.objects import WATCHED
from .ports import NotFound, Obj, WatchTarget
from .store import meta, source_name

# every kind read, in order (the CLI's --kubeconfig help lists them from here, without loading the client)
LIVE_KINDS = tuple(k.name for k in WATCHED)


def read_cluster(kubeconfig: str | None) -> list[tuple[str, Obj]]:
    """Every object planning reads; a missing PodGroup CRD (or scheduling.k8s.io PodGroups not served) counts as
    no PodGroups. Raises api.ConfigError
    for an unusable kubeconfig and ports.ApiUnavailable / ApiError when the apiserver says no."""
    from .api import KubeAPI, load_client

    api = KubeAPI(load_client(kubeconfig))
    out: list[tuple[str, Obj]] = []
    for kind in LIVE_KINDS:
        try:
            items, _ = api.list(WatchTarget(kind))
        except NotFound:
            continue
        out.extend((source_name(kind, meta(o).get("namespace") or "", meta(o).get("name") or ""), o) for o in items)
    return out
