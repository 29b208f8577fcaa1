"""Which policy ConfigMaps the deployed schedulers read, checked as they read them, and which ConfigMaps look like
policy sets that no scheduler reads: what `policy-scheduler check --kubeconfig` reports (read only).

A policy set applied where no scheduler looks (another namespace than the Helm release's, a name no profile reads)
is otherwise ignored without a word: pods are placed without it. The deployed schedulers are the Deployments both
installs label `app.kubernetes.io/name: policy-scheduler`; their container's arguments are parsed by `run`'s own
parser, so a profile is read here exactly as the scheduler reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from ..policy.parse import PolicyError
from ..policy.sources import SUFFIX
from .command import ProfileError, parse_profiles, run
from .policies import KEPT_LABELS, rules_from_configmap
from .ports import ClusterAPI, Obj, WatchTarget
from .store import meta

NAME_LABEL = "app.kubernetes.io/name"
INSTALLED = "policy-scheduler"  # that label's value on both installs' Deployments and on `configmap`'s output
KEPT = KEPT_LABELS["app.kubernetes.io/component"]


@dataclass(frozen=True, slots=True)
class Reader:
    """One profile of a deployed scheduler, and the ConfigMap its policies come from."""

    deployment: str  # namespace/name
    profile: str
    configmap: tuple[str, str]
    optional: bool  # read once it exists: pod specs only until then

    def words(self) -> str:
        when = ", once it exists" if self.optional else ""
        return f"Deployment {self.deployment} reads {'/'.join(self.configmap)} (profile {self.profile}{when})"


@dataclass(frozen=True, slots=True)
class LiveFinding:
    """What the check says about the live policies: an `error` (the ConfigMap a scheduler reads does not check), a
    `warning` (a policy set nobody reads, a required ConfigMap that does not exist), or a `note`."""

    level: str
    message: str


def readers(deployment: Obj) -> list[Reader] | str:
    """The profiles a scheduler Deployment serves with a ConfigMap, from its container's arguments, or why they
    cannot be read."""
    m = meta(deployment)
    where = f"{m.get('namespace')}/{m.get('name')}"
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    for container in containers:
        words = [str(w) for w in (container.get("command") or []) + (container.get("args") or [])]
        if "run" not in words:
            continue
        try:
            params = run.make_context("run", words[words.index("run") + 1:]).params
            profiles = parse_profiles(params["scheduler_name"], params["policy_configmap"], params["profiles"])
        except (click.ClickException, ProfileError) as exc:
            return f"the arguments of Deployment {where} do not parse: {getattr(exc, 'message', exc)}"
        return [Reader(where, p.name, p.policy_configmap, p.optional) for p in profiles if p.policy_configmap]
    return f"Deployment {where} runs no `policy-scheduler run`"


def looks_like_policies(configmap: Obj) -> bool:
    """A ConfigMap that holds policy files (`.policy` keys) or that `policy-scheduler configmap` wrote (its label),
    other than a copy the scheduler keeps."""
    labels = meta(configmap).get("labels") or {}
    if labels.get("app.kubernetes.io/component") == KEPT:
        return False
    return labels.get(NAME_LABEL) == INSTALLED or any(str(k).endswith(SUFFIX) for k in configmap.get("data") or {})


def findings(deployments: list[Obj], configmaps: list[Obj]) -> list[LiveFinding]:
    """Every read ConfigMap checked (or missing), and every policy set no deployed scheduler reads."""
    out: list[LiveFinding] = []
    read: list[Reader] = []
    for deployment in deployments:
        if (meta(deployment).get("labels") or {}).get(NAME_LABEL) != INSTALLED:
            continue
        got = readers(deployment)
        if isinstance(got, str):
            out.append(LiveFinding("warning", got))
        else:
            read.extend(got)
    by_name = {(str(meta(c).get("namespace") or ""), str(meta(c).get("name") or "")): c for c in configmaps}
    for reader in read:
        out.extend(_checked(reader, by_name.get(reader.configmap)))
    if not any(d for d in deployments if (meta(d).get("labels") or {}).get(NAME_LABEL) == INSTALLED):
        out.append(LiveFinding("warning", f"no policy-scheduler Deployment found (label {NAME_LABEL}={INSTALLED}): no "
                                      "ConfigMap below is known to be read"))
    wanted = {r.configmap for r in read}
    for key, configmap in sorted(by_name.items()):
        if key not in wanted and looks_like_policies(configmap):
            out.append(LiveFinding("warning", _unread(key, configmap, read)))
    return out


def _checked(reader: Reader, configmap: Obj | None) -> list[LiveFinding]:
    """A ConfigMap a scheduler reads, checked as the scheduler checks it (or missing)."""
    where = "/".join(reader.configmap)
    if configmap is None:
        if reader.optional:
            return [LiveFinding("note", f"ConfigMap {where} does not exist: {reader.words()}; pods are placed by their "
                                    "own specs until it does")]
        return [LiveFinding("warning", f"ConfigMap {where} does not exist: {reader.words()}; that profile schedules "
                                   f"nothing until it does (unless it kept a last valid set, {where}-last-valid)")]
    try:
        rules_from_configmap(configmap)
    except PolicyError as exc:
        return [LiveFinding("error", f"ConfigMap {where} has errors: {reader.words()}; that profile schedules with the "
                                 "last valid policies it kept, or nothing\n" + "\n".join(d.render() for d in exc.diagnostics))]
    return [LiveFinding("note", f"ConfigMap {where} checks clean: {reader.words()}")]


def _unread(key: tuple[str, str], configmap: Obj, read: list[Reader]) -> str:
    """A policy set no scheduler reads, and where the deployed ones look instead."""
    keys = ", ".join(sorted(str(k) for k in configmap.get("data") or {})) or "no keys"
    where = "; ".join(r.words() for r in read) or "no deployed scheduler reads any policy ConfigMap"
    return (f"ConfigMap {key[0]}/{key[1]} looks like a policy set ({keys}) but no policy-scheduler reads it: its "
            f"policies are not in force. {where}. Apply it where a profile reads (`policy-scheduler configmap DIR "
            "--namespace NS --name NAME`), or point a profile at it")


def live_findings(api: ClusterAPI) -> list[LiveFinding]:
    """The findings for a live cluster: its Deployments and ConfigMaps, listed once."""
    deployments, _ = api.list(WatchTarget("Deployment"))
    configmaps, _ = api.list(WatchTarget("ConfigMap"))
    return findings(deployments, configmaps)
