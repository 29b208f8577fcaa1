"""Why nodes cannot take a pod: typed verdicts of the static filters, kept per node in bulk.

A `Rejection` is kube-scheduler's Status as data: the plugin that said no, its reasons (upstream's words, made
from the data once, by the constraint kind that owns them), whether a cluster change could ever help
(Unschedulable vs UnschedulableAndUnresolvable) and, for a policy's rule, the rule itself. Nothing downstream
parses reason text back: `explain` counts reasons, `policy lint` blames `source`, the loop's requeue reads the
plugin and `resolvable`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .ir import Source
from .reasons import Code

UNCHECKED = "node(s) not checked: compile reached the time limit before this pod's class"
TIME_LIMIT = "TimeLimit"  # not an upstream plugin: the class was never filtered


@dataclass(frozen=True, slots=True)
class Rejection:
    """One filter's no for a node: plugin, reasons, resolvable by a cluster change or not, the policy rule
    behind it (None for the pod's own spec and for the cluster's state), and whether it is an error (a claim's
    CEL that fails: the pod is told SchedulerError, as upstream's Filter returning an Error status), and its reason
    code when it is not the plugin's own (`Kind.code`; None: the plugin's, or InvalidObject for an error)."""

    plugin: str
    reasons: tuple[str, ...]
    resolvable: bool = True
    source: Source | None = None
    error: bool = False  # an error about an object the pod needs (upstream's Error status), not a lack of room
    pre_filter: bool = False  # a PreFilter's verdict for every node at once: said without node counts, as upstream
    code: Code | None = None  # a reason of another kind than its plugin's (a claim that does not exist)


def joined(reasons: Iterable[str]) -> str:
    """Reasons in one line (an event's message, preemption quoting a re-plan): separated by "; ", each but the last
    without its closing full stop (never ".;"), empty ones left out."""
    said = [r.strip() for r in reasons if r and r.strip()]
    return "; ".join([r.rstrip(".") for r in said[:-1]] + said[-1:])


Nodes = np.ndarray | Iterable[int]  # a boolean mask over every node, or node indices


class Rejections:
    """Which nodes a class cannot use, and why: each node's first `Rejection` (filters run in upstream
    order and a node keeps the first that rejects it), or none.

    One small integer per node (an index into the distinct rejections) keeps memory at one array per class
    and lets a filter reject thousands of nodes in one numpy operation; the rejections are few.
    """

    def __init__(self, size: int, asked: np.ndarray | None = None):
        self.size = size
        self.code = np.full(size, -1, dtype=np.int32)  # per node: index into `keys`, -1 while it passes
        self.keys: list[Rejection] = []
        self._known: dict[Rejection, int] = {}
        # the nodes a run of the filters is about (None: every node): a filter need not look at the others, and
        # what it says of them is not kept (preemption asks about one node after each trial)
        self.asked = asked
        self._asked_mask: np.ndarray | None = None
        if asked is not None:
            self._asked_mask = np.zeros(size, dtype=bool)
            self._asked_mask[asked] = True

    @classmethod
    def about(cls, size: int, i: int) -> Rejections:
        """A run of the filters about node i alone (what preemption asks after each trial: kept as one entry, not an
        array over every node)."""
        return NodeRejections(size, i)

    def nodes(self) -> np.ndarray:
        """The nodes asked about, as positions."""
        return np.arange(self.size) if self.asked is None else self.asked

    @classmethod
    def unchecked(cls, size: int) -> Rejections:
        """Every node rejected as not checked: a class compile left out at the time limit."""
        out = cls(size)
        out.add(Rejection(TIME_LIMIT, (UNCHECKED,)), np.ones(size, dtype=bool))
        return out

    def add(self, rejection: Rejection, nodes: Nodes) -> None:
        """Reject `nodes` for this reason, unless an earlier filter already rejected them."""
        index = _indices(nodes)
        if self._asked_mask is not None:
            index = index[self._asked_mask[index]]
        new = index[self.code[index] < 0]
        if not new.size:
            return
        if rejection not in self._known:
            self._known[rejection] = len(self.keys)
            self.keys.append(rejection)
        self.code[new] = self._known[rejection]

    def rejected(self) -> np.ndarray:
        """A boolean mask: nodes some filter has rejected so far (a filter may skip them)."""
        return self.code >= 0

    @property
    def erred(self) -> bool:
        """Some rejection is an error (a claim's CEL that fails), not a lack of room: the pods are told so."""
        return any(r.error for r in self.keys)

    @property
    def groups(self) -> dict[Rejection, np.ndarray]:
        """Rejection -> the nodes it rejected first."""
        return {key: np.flatnonzero(self.code == k) for k, key in enumerate(self.keys)}

    def get(self, i: int) -> Rejection | None:
        k = int(self.code[i])
        return None if k < 0 else self.keys[k]

    def __contains__(self, i: int) -> bool:
        return bool(self.code[i] >= 0)

    def passing(self) -> tuple[int, ...]:
        return tuple(self.passing_array().tolist())

    def passing_array(self) -> np.ndarray:
        return np.flatnonzero(self.code < 0)

    def as_dict(self) -> dict[int, Rejection]:
        return {i: rejection for rejection, members in self.groups.items() for i in members.tolist()}


def _indices(nodes: Nodes) -> np.ndarray:
    """Node indices from a boolean mask, an index array or any iterable of indices."""
    if isinstance(nodes, np.ndarray):
        return np.flatnonzero(nodes) if nodes.dtype == bool else nodes
    return np.fromiter(nodes, dtype=np.int64)


class NodeRejections(Rejections):
    """`Rejections` for a run about one node: the same answers, kept as that node's first rejection alone."""

    def __init__(self, size: int, i: int):  # (no array over every node: a trial asks thousands of times)
        self.size, self.i = size, i
        self.asked = np.array([i], dtype=np.int64)
        self.first: Rejection | None = None

    def add(self, rejection: Rejection, nodes: Nodes) -> None:
        if self.first is None and bool((_indices(nodes) == self.i).any()):
            self.first = rejection

    def rejected(self) -> np.ndarray:
        mask = np.zeros(self.size, dtype=bool)
        mask[self.i] = self.first is not None
        return mask

    def get(self, i: int) -> Rejection | None:
        return self.first if i == self.i else None

    def __contains__(self, i: int) -> bool:
        return i == self.i and self.first is not None
