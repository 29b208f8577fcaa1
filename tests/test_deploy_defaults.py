"""One set of defaults: `dry-run` plans as the deployed scheduler runs, and both installs (deploy/deployment.yaml,
the chart's values.yaml) run it as `policy-scheduler run` runs by default. The table in docs/operations.md
("Defaults") and the chart's values table there say the same; any of them drifting fails here.

The command line's defaults are click's own (its parser reads the Deployment's arguments, so the last of two
flags wins as it does in the pod); the chart's arguments as rendered are compared in tests/e2e/test_chart.py."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest
import yaml

from engine.cli import main
from engine.loop.scheduler import Settings

ROOT = Path(__file__).resolve().parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
DEPLOYMENT = ROOT / "deploy" / "deployment.yaml"
VALUES = ROOT / "deploy" / "helm" / "policy-scheduler" / "values.yaml"
COLUMNS = ("dry-run", "run", "kustomize", "helm")
NA = "—"
# settings that are the same only where these say: a local `run` is one process (no leader election, no replicas),
# and the chart's Lease is in its release namespace
ONLY_IN = {"leader election": ("kustomize", "helm"), "replicas": ("kustomize", "helm"),
           "lease namespace": ("run", "kustomize"), "policy ConfigMap, once it exists": ("kustomize", "helm")}
OPTIONAL = "policy ConfigMap, once it exists"  # the installs read one when it exists: pod specs only until then
SECURE_PORT = "secure port (HTTPS: metrics, health)"  # run's --secure-port; the chart's metrics.port


def _params(command: str, args: list[str] | None = None) -> dict:
    """The values `command` runs with for `args`: its defaults, as click parses them."""
    cmd = main.commands[command]
    assert isinstance(cmd, click.Command)
    return cmd.make_context(command, list(args or [])).params


def _solver_workers() -> int:
    return next(f.default for f in dataclasses.fields(Settings) if f.name == "solver_workers")


def _policies(source: tuple[tuple[str, str], bool] | None) -> tuple[str, str]:
    """What a --policy-configmap value makes active by default (a ConfigMap read once it exists adds nothing until
    then), and the name of such a ConfigMap."""
    if source is None:
        return "none", "none"
    (namespace, name), optional = source
    return ("none", name) if optional else (f"{namespace}/{name}", "none")


def _from_run(params: dict) -> dict:
    """The table's settings for `run` with these parsed options."""
    policies, optional = _policies(params["policy_configmap"])
    return {"scheduler name": params["scheduler_name"], "policies": policies, OPTIONAL: optional,
            "preemption": params["preemption"], "time limit (seconds)": params["time_limit"],
            "time per pod (seconds)": params["time_per_pod"], "batch window (seconds)": params["batch_window"],
            "solver workers": _solver_workers(), "bind workers": params["bind_workers"],
            "leader election": params["leader_elect"], "lease namespace": params["lease_namespace"],
            "lease duration (seconds)": params["lease_duration"], SECURE_PORT: params["secure_port"],
            "log level": params["log_level"], "replicas": None}


def dry_run_defaults() -> dict:
    p = _params("dry-run")
    settings = dict.fromkeys(_from_run(_params("run")))
    settings.update({"scheduler name": p["scheduler_name"], "policies": ", ".join(p["policies"] or ()) or "none",
                     OPTIONAL: None,
                     "preemption": not p["no_preemption"], "time limit (seconds)": p["time_limit"],
                     "solver workers": p["workers"]})
    return settings


def run_defaults() -> dict:
    return _from_run(_params("run"))


def kustomize_defaults() -> dict:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "run"
    return {**_from_run(_params("run", args[1:])), "replicas": deployment["spec"]["replicas"]}


def helm_defaults() -> dict:
    """What the chart's values make of the settings (templates/deployment.yaml passes them as flags; what it does
    not pass is `run`'s default)."""
    values = yaml.safe_load(VALUES.read_text())
    profile = values["profiles"][0]
    own = profile.get("policies") or profile.get("existingConfigMap")  # else NAME-policies, once it exists
    return {**run_defaults(), "scheduler name": profile["name"], "policies": "set" if own else "none",
            OPTIONAL: "none" if own else f"{profile['name']}-policies",
            "preemption": values["preemption"]["enabled"], "time limit (seconds)": values["timeLimit"],
            "batch window (seconds)": values["batchWindow"], "leader election": True,  # always --leader-elect
            "lease namespace": "the release namespace", "lease duration (seconds)": values["leaderElection"]["leaseDuration"],
            SECURE_PORT: values["metrics"]["port"], "log level": values["logLevel"], "replicas": values["replicas"]}


def shown(value: object) -> str:
    """A value as the table writes it."""
    if value is None:
        return NA
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def table(heading: str) -> list[list[str]]:
    """The rows (cells stripped, separator row left out) of the first table under `heading` in operations.md."""
    text = OPERATIONS.read_text().split(f"\n{heading}\n", 1)[1]
    lines = text[text.index("\n|"):].strip().split("\n\n", 1)[0].splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines if line.startswith("|")]
    return [r for r in rows[1:] if not set("".join(r)) <= set("-: ")]


def cell(text: str) -> str:
    """A cell's value: its first `code` span, or the dash of a setting that does not apply."""
    m = re.search(r"`([^`]*)`", text)
    return m.group(1) if m else text


def sources() -> dict[str, dict]:
    return {"dry-run": dry_run_defaults(), "run": run_defaults(), "kustomize": kustomize_defaults(),
            "helm": helm_defaults()}


def test_the_defaults_table_is_what_the_code_and_the_installs_say() -> None:
    found = sources()
    rows = {r[0]: r[1:] for r in table("### Defaults")}
    assert set(rows) == set(found["run"]), "the Defaults table's settings are not the ones this test checks"
    for setting, cells in rows.items():
        documented = dict(zip(COLUMNS, map(cell, cells), strict=True))
        actual = {column: shown(found[column][setting]) for column in COLUMNS}
        assert documented == actual, f"docs/operations.md, Defaults, {setting!r}"


def test_dry_run_and_every_install_have_the_same_defaults() -> None:
    found = sources()
    for setting in found["run"]:
        values = {column: shown(found[column][setting]) for column in ONLY_IN.get(setting, COLUMNS)}
        applicable = {column: v for column, v in values.items() if v != NA}
        assert len(set(applicable.values())) == 1, f"{setting}: {applicable}"


def test_the_defaults_are_the_ones_asked_for() -> None:
    """Preempting as kube-scheduler does, pods placed by their own specs, one solver worker."""
    for column, settings in sources().items():
        assert settings["preemption"] is True, column
        assert shown(settings["policies"]) == "none", column
        assert settings["scheduler name"] == "policy-scheduler", column
    assert kustomize_defaults()["leader election"] is True


def test_the_readme_configmap_is_the_one_both_default_installs_read() -> None:
    """One policy workflow: the README's `policy-scheduler configmap DIR | kubectl apply -f -` writes the ConfigMap a
    default kustomize install and a default Helm install (in the README's namespace) read once it exists."""
    params = _params("configmap", ["policies/"])
    written = (params["namespace"], params["name"])
    readme = (ROOT / "README.md").read_text()
    assert f"policy-scheduler configmap my-policies/ | kubectl apply -f -   # the live ConfigMap: {'/'.join(written)}" \
        in readme
    helm_install = next(line for line in readme.splitlines() if line.startswith("helm install "))
    assert f" -n {written[0]} " in helm_install, helm_install  # the release namespace: where the chart reads it
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert _params("run", args[1:])["policy_configmap"] == (written, True)
    assert kustomize_defaults()[OPTIONAL] == helm_defaults()[OPTIONAL] == written[1]


def _lookup(values: dict, dotted: str) -> object:
    found: object = values
    for part in dotted.split("."):
        assert isinstance(found, dict) and part in found, f"values.yaml has no {dotted}"
        found = found[part]
    return found


@pytest.mark.parametrize("row", table("### Helm"), ids=lambda r: r[0])
def test_the_helm_values_table_gives_the_values_yaml_defaults(row: list[str]) -> None:
    """A row names values and their defaults in `code`, in order; a row with no default given says nothing."""
    names, defaults = re.findall(r"`([^`]+)`", row[0]), re.findall(r"`([^`]*)`", row[1])
    if not defaults:
        return
    assert len(names) == len(defaults), f"docs/operations.md, Helm values: {row[0]} | {row[1]}"
    values = yaml.safe_load(VALUES.read_text())
    for name, default in zip(names, defaults, strict=True):
        assert yaml.safe_load(default) == _lookup(values, name), f"docs/operations.md says {name} defaults to {default}"
