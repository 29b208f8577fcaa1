"""A profile's policies from its ConfigMap: parsed and checked whole, swapped only when all is well.

A bad update keeps the previous policies active and is reported once per ConfigMap version: a Warning
event on the ConfigMap (file:line:col), a log line and a metric. A profile with a ConfigMap that was never
loaded successfully is not ready and schedules nothing (never with a half-loaded or missing policy set).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..ir import Rules
from ..policy.lower import lower
from ..policy.parse import PolicyError
from ..policy.sources import check_sources
from .ports import Obj
from .store import meta

log = logging.getLogger("policy_scheduler.policies")


def rules_from_configmap(configmap: Obj) -> Rules:
    """Every data key is one policy file, named `namespace/name[key]` in diagnostics; raises PolicyError.
    Returns what the policies add: placement, preemption (protect, eviction caps) and gang rules."""
    m = meta(configmap)
    sources = {f"{m.get('namespace')}/{m.get('name')}[{key}]": str(text)
               for key, text in sorted((configmap.get("data") or {}).items())}
    policies = check_sources(sources)
    return lower(policies)


@dataclass
class PolicyHolder:
    """The active policies of one profile and the ConfigMap version they came from."""

    configmap: tuple[str, str] | None  # namespace, name; None: no policies, only pod specs
    rules: Rules = Rules()
    ready: bool = False
    version: str | None = None  # resourceVersion last tried (good or bad)
    problem: str | None = None  # why the ConfigMap last tried is not the active policy set (missing, errors)

    def __post_init__(self) -> None:
        self.ready = self.configmap is None

    def refresh(self, current: Obj | None, on_error: Callable[[Obj, str], None]) -> bool:
        """Load `current` (the ConfigMap as stored now) if it is a new version; True when policies changed."""
        if self.configmap is None:
            return False
        where = "/".join(self.configmap)
        if current is None:
            if self.version != "absent":
                self.version = "absent"
                self.problem = f"policy ConfigMap {where} does not exist"
                log.warning("policy configmap missing configmap=%s keeping=%s", "/".join(self.configmap),
                            "previous" if self.ready else "none (not scheduling)")
            return False
        version = str(meta(current).get("resourceVersion") or "")
        if version == self.version:
            return False
        self.version = version
        try:
            rules = rules_from_configmap(current)
        except PolicyError as exc:
            message = "; ".join(f"{d.file}:{d.line}:{d.column}: {d.message}" for d in exc.diagnostics)
            self.problem = f"policy ConfigMap {where} has errors: {message}"
            log.error("policy reload failed configmap=%s version=%s errors=%r", "/".join(self.configmap), version,
                      message)
            on_error(current, message)
            return False
        self.rules, self.ready, self.problem = rules, True, None
        log.info("policies loaded configmap=%s version=%s", "/".join(self.configmap), version)
        return True
