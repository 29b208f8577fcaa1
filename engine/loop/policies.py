"""A profile's policies from its ConfigMap: parsed and checked whole, swapped only when all is well, and kept where
the next start finds them.

A bad update keeps the policies in force and is reported once per ConfigMap version: a Warning event on the
ConfigMap (file:line:col), a log line and a metric. The set in force is kept in a ConfigMap of its own beside the
policy ConfigMap (`NAME-last-valid`, which the leader writes each time a new version loads cleanly): a replica that
starts while the policy ConfigMap is missing or has errors restores that set, schedules with it and says so (an
event, a condition on its pod, a metric). With no valid set kept either, a profile schedules nothing and is not
ready: never with a half-loaded or missing policy set. Only an optional ConfigMap (`,optional`, the installs'
default) that does not exist, with nothing kept, means no policies: pods are placed by their own specs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from ..model.ir import Rules
from ..policy.lower import lower
from ..policy.parse import PolicyError
from ..policy.sources import check_sources
from .ports import Obj
from .store import meta

log = logging.getLogger("policy_scheduler.policies")

# the kept copy's annotations: which ConfigMap version it holds, and when it was kept
KEPT_FROM = "policy-scheduler/kept-from"  # NAMESPACE/NAME of the policy ConfigMap
KEPT_UID = "policy-scheduler/kept-uid"
KEPT_VERSION = "policy-scheduler/kept-version"  # its resourceVersion
KEPT_AT = "policy-scheduler/kept-at"  # RFC 3339
KEPT_LABELS = {"app.kubernetes.io/name": "policy-scheduler", "app.kubernetes.io/component": "last-valid-policies"}


def rules_from_configmap(configmap: Obj) -> Rules:
    """Every data key is one policy file, named `namespace/name[key]` in diagnostics; raises PolicyError.
    Returns what the policies add: placement, preemption (protect, eviction caps) and gang rules."""
    m = meta(configmap)
    sources = {f"{m.get('namespace')}/{m.get('name')}[{key}]": str(text)
               for key, text in sorted((configmap.get("data") or {}).items())}
    policies = check_sources(sources)
    return lower(policies)


def _errors(exc: PolicyError) -> str:
    return "; ".join(f"{d.file}:{d.line}:{d.column}: {d.message}" for d in exc.diagnostics)


class Standing(Enum):
    """What a profile schedules with, beside its policy ConfigMap as it is now."""

    UNLOADED = "unloaded"  # nothing read yet
    CURRENT = "current"  # the ConfigMap as it is now (or no ConfigMap: pod specs only)
    ABSENT = "absent"  # an optional ConfigMap that does not exist, nothing kept: pod specs only
    PREVIOUS = "previous"  # the ConfigMap is missing or has errors: the set this process loaded from it stays
    RESTORED = "restored"  # the ConfigMap is missing or has errors: the set an earlier run kept is in force
    NOTHING = "nothing"  # the ConfigMap is missing or has errors and no valid set is kept: nothing is scheduled


@dataclass(frozen=True, slots=True)
class Origin:
    """The version of the policy ConfigMap a set was loaded from: what the kept copy records."""

    uid: str
    version: str
    kept_at: str = ""  # when it was kept (a restored set)

    def of(self, kept: Obj | None) -> bool:
        """Whether `kept` holds this version already."""
        notes = meta(kept or {}).get("annotations") or {}
        return (notes.get(KEPT_UID), notes.get(KEPT_VERSION)) == (self.uid, self.version)


def kept_rules(kept: Obj | None, configmap: tuple[str, str], kept_name: str) -> tuple[Rules, Origin] | str:
    """The set a kept copy holds and the ConfigMap version it came from, or why there is none to restore."""
    where = f"{configmap[0]}/{kept_name}"
    if kept is None:
        return f"ConfigMap {where} does not exist"
    notes = meta(kept).get("annotations") or {}
    if not notes.get(KEPT_FROM):
        return f"ConfigMap {where} holds no policy set yet"
    if notes[KEPT_FROM] != "/".join(configmap):
        return f"ConfigMap {where} holds the policies of {notes[KEPT_FROM]}, not of {'/'.join(configmap)}"
    try:
        rules = rules_from_configmap(kept)
    except PolicyError as exc:
        return f"the policies kept in ConfigMap {where} have errors: {_errors(exc)}"
    return rules, Origin(str(notes.get(KEPT_UID) or ""), str(notes.get(KEPT_VERSION) or ""), str(notes.get(KEPT_AT) or ""))


def kept_copy(loaded: Obj, kept_name: str) -> Obj:
    """The kept copy of a ConfigMap version that loaded cleanly: its data, and which version it is."""
    m = meta(loaded)
    notes = {KEPT_FROM: f"{m.get('namespace')}/{m.get('name')}", KEPT_UID: str(m.get("uid") or ""),
             KEPT_VERSION: str(m.get("resourceVersion") or ""), KEPT_AT: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": kept_name, "namespace": m.get("namespace"), "labels": dict(KEPT_LABELS),
                         "annotations": notes},
            "data": dict(loaded.get("data") or {})}


def kept_patch(copy: Obj, kept: Obj) -> Obj:
    """A merge patch turning `kept` into `copy` (keys no longer there removed), conditional on the version read."""
    data: dict[str, str | None] = dict.fromkeys(kept.get("data") or {})
    data.update(copy["data"])
    m = copy["metadata"]
    return {"metadata": {"resourceVersion": meta(kept).get("resourceVersion"), "labels": m["labels"],
                         "annotations": m["annotations"]}, "data": data}


@dataclass
class PolicyHolder:
    """The active policies of one profile, where they came from, and why the ConfigMap as it is now is not them."""

    configmap: tuple[str, str] | None  # namespace, name; None: no policies, only pod specs
    optional: bool = False  # the ConfigMap may be absent (pod specs only until it first exists)
    kept_name: str = ""  # the kept copy's name, beside the ConfigMap
    rules: Rules = Rules()
    standing: Standing = Standing.UNLOADED
    version: str | None = None  # resourceVersion last tried (good or bad; "absent")
    problem: str | None = None  # why the ConfigMap as it is now is not the active policy set (missing, errors)
    loaded: Obj | None = None  # the ConfigMap version this process loaded the active set from (what is kept)
    origin: Origin | None = None  # the ConfigMap version the active set is (loaded here, or restored)
    kept_tried: str | None = None  # the kept copy's resourceVersion last read ("absent")
    kept_problem: str | None = None  # why no kept set could be restored

    def __post_init__(self) -> None:
        if self.configmap is None:
            self.standing = Standing.CURRENT

    @property
    def ready(self) -> bool:
        """A policy set is in force (or none is needed): the profile schedules."""
        return self.standing not in (Standing.UNLOADED, Standing.NOTHING)

    @property
    def valid(self) -> bool:
        """The ConfigMap as it is now is what is in force."""
        return self.standing in (Standing.CURRENT, Standing.ABSENT)

    def refresh(self, current: Obj | None, on_error: Callable[[Obj, str], None], kept: Obj | None = None) -> bool:
        """Load `current` (the ConfigMap as stored now) if it is a new version; while it is missing or has errors and
        no set loaded here stands, restore the one kept beside it (`kept`). True when the active policies changed;
        `on_error` hears a new version's errors once, after the standing they leave is settled."""
        if self.configmap is None:
            return False
        before = self.rules
        errors = self._read(current)
        if self.standing not in (Standing.CURRENT, Standing.PREVIOUS):
            self._fall_back(kept, absent=current is None)
        if errors is not None and current is not None:
            on_error(current, errors)
        return self.rules is not before

    def _read(self, current: Obj | None) -> str | None:
        """Take in a new version of the ConfigMap: adopted when it checks clean; its errors otherwise."""
        where = "/".join(self.configmap or ())
        version = "absent" if current is None else str(meta(current).get("resourceVersion") or "")
        if version == self.version:
            return None
        self.version = version
        if current is None:
            self.problem = f"policy ConfigMap {where} does not exist"
            self._stale()
            log.log(logging.INFO if self.optional else logging.WARNING, "policy configmap missing configmap=%s "
                    "optional=%s", where, self.optional)
            return None
        try:
            rules = rules_from_configmap(current)
        except PolicyError as exc:
            message = _errors(exc)
            self.problem = f"policy ConfigMap {where} has errors: {message}"
            self._stale()
            log.error("policy reload failed configmap=%s version=%s errors=%r", where, version, message)
            return message
        self.rules, self.standing, self.problem, self.loaded = rules, Standing.CURRENT, None, current
        self.origin = Origin(str(meta(current).get("uid") or ""), version)
        log.info("policies loaded configmap=%s version=%s", where, version)
        return None

    def _stale(self) -> None:
        """The ConfigMap is no longer what is in force: a set loaded here stays."""
        if self.standing is Standing.CURRENT:
            self.standing = Standing.PREVIOUS

    def _fall_back(self, kept: Obj | None, absent: bool) -> None:
        """No set loaded here stands: the kept one (read again when it changed), else none (an optional ConfigMap that
        does not exist), else nothing is scheduled. A restored set stays while the kept copy holds no better one."""
        version = "absent" if kept is None else str(meta(kept).get("resourceVersion") or "")
        if version != self.kept_tried:
            self.kept_tried = version
            got = kept_rules(kept, self.configmap or ("", ""), self.kept_name)
            if isinstance(got, str):
                self.kept_problem = got
            else:
                self.rules, self.origin = got
                self.standing, self.kept_problem = Standing.RESTORED, None
                log.warning("policies restored configmap=%s from=%s version=%s kept_at=%s", "/".join(self.configmap or ()),
                            self.kept_name, self.origin.version, self.origin.kept_at)
        if self.standing is not Standing.RESTORED:  # (nothing was in force: no rules to drop)
            self.standing = Standing.ABSENT if self.optional and absent else Standing.NOTHING

    def to_keep(self, kept: Obj | None) -> Obj | None:
        """The kept copy as it should be, when it is not so yet: the set loaded here, while it is the ConfigMap as it
        is now; once the ConfigMap has gone bad, only into a copy that holds no version of it (another version there
        may be a later one this process never saw: resourceVersions do not order)."""
        if self.loaded is None or self.origin is None or self.standing not in (Standing.CURRENT, Standing.PREVIOUS):
            return None
        if self.origin.of(kept):
            return None
        notes = meta(kept or {}).get("annotations") or {}
        if self.standing is Standing.PREVIOUS and notes.get(KEPT_UID) == self.origin.uid:
            return None
        return kept_copy(self.loaded, self.kept_name)

    def describe(self) -> str:
        """What is in force, in words: for events, logs, the pod's condition."""
        where = "/".join(self.configmap or ())
        version = f"version {self.origin.version} of ConfigMap {where}" if self.origin else ""
        return {
            Standing.UNLOADED: "policies not loaded yet",
            Standing.CURRENT: f"the policies of {version} are in force" if self.configmap else "no policies: pod specs only",
            Standing.ABSENT: f"no policies: ConfigMap {where} does not exist and none were kept, so pods are placed by "
                             "their own specs until it does",
            Standing.PREVIOUS: f"the last valid policies ({version}) stay in force",
            Standing.RESTORED: f"the last valid policies ({version}, kept in ConfigMap {self.kept_name} at "
                               f"{self.origin.kept_at if self.origin else '?'}) are in force",
            Standing.NOTHING: f"no valid policy set is in force ({self.kept_problem or 'nothing kept'}): nothing is "
                              f"scheduled until ConfigMap {where} loads",
        }[self.standing]
