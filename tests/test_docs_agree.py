"""The docs agree with each other and with what they describe (issue 47, point 9): the permissions table with its
"not read" list, deploy/'s and the chart's RBAC and engine/reading/objects.py; the README's snapshot one-liner with the
operations guide's and with the kinds the model reads; the image's build and push beside the install commands; the
documented way to start a local control plane; and the README still opens with exactly its two commands."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from engine.reading.objects import MODEL_KINDS, OBJECT_KINDS, WATCHED

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
OPERATIONS = ROOT / "docs" / "operations.md"
CHART = ROOT / "deploy" / "helm" / "policy-scheduler"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
SHORT_NAMES = {"pdb": "poddisruptionbudgets", "pvc": "persistentvolumeclaims", "pv": "persistentvolumes"}

Grant = tuple[str, str, str]  # (API group, "" for core; resource; verb)
# the built-in ClusterRole the installs bind for the secure port's delegated authentication and authorization
AUTH_DELEGATOR = "system:auth-delegator"
DELEGATED: set[Grant] = {("authentication.k8s.io", "tokenreviews", "create"),
                         ("authorization.k8s.io", "subjectaccessreviews", "create")}


def section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of its level or higher."""
    level = heading.split(" ", 1)[0]
    body = text.split(f"\n{heading}\n", 1)[1]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", body, re.M)]
    return body[:ends[0]] if ends else body


def documented_grants() -> set[Grant]:
    """Every (group, resource, verb) the Permissions table of docs/operations.md lists."""
    rows = [line for line in section(OPERATIONS.read_text(), "## Permissions").splitlines() if line.startswith("| ")]
    out: set[Grant] = set()
    for row in rows[1:]:  # the header row first
        resources, verbs = (c.strip() for c in row.strip("|").split("|")[:2])
        verb_set = set(re.findall(rf"\b({'|'.join(VERBS)})\b", verbs))
        assert verb_set, row
        for part in resources.split(";"):
            group, _, names = part.partition(":")
            group = group.strip().strip("`")
            for name in re.findall(r"`([a-z/]+)`", names.split("(")[0]):
                out |= {("" if group == "core" else group, name, verb) for verb in verb_set}
    return out


def not_read() -> list[str]:
    text = section(OPERATIONS.read_text(), "## Permissions")
    sentence = text.split("Not read at all, so not granted:", 1)[1].split(".\n", 1)[0]
    return re.findall(r"`([a-z]+)`", sentence)


def rules_granted(rules: list[dict]) -> set[Grant]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def deploy_grants() -> set[Grant]:
    """What deploy/ grants the scheduler: its ClusterRoles (preemption's included) and Roles."""
    docs = [d for f in ("clusterrole.yaml", "preemption.yaml", "rbac.yaml")
            for d in yaml.safe_load_all((ROOT / "deploy" / f).read_text()) if d]
    delegated = any(d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == AUTH_DELEGATOR for d in docs)
    return rules_granted([r for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]]) | (
        DELEGATED if delegated else set())


def chart_grants() -> set[Grant]:
    """What the chart grants with its default values: its copy of deploy/clusterrole.yaml and the rules written out
    in its templates (template lines between them stripped)."""
    out = rules_granted(yaml.safe_load((CHART / "files" / "clusterrole.yaml").read_text())["rules"])
    for template in ("clusterrole.yaml", "role.yaml"):
        text = (CHART / "templates" / template).read_text()
        for group, resources, verbs in re.findall(r"- apiGroups: \[(.*?)\]\s+resources: \[(.*?)\]\s+(?:resourceNames: "
                                                  r".*?\n\s+)?verbs: \[(.*?)\]", text):
            out |= {(g.strip().strip('"'), r.strip(), v.strip()) for g in group.split(",") for r in resources.split(",")
                    for v in verbs.split(",")}
        if f"name: {AUTH_DELEGATOR}\n" in text:
            out |= DELEGATED
    return out


def test_the_permissions_table_is_what_deploy_and_the_chart_grant() -> None:
    table = documented_grants()
    assert table == deploy_grants(), (table ^ deploy_grants())
    assert table == chart_grants(), (table ^ chart_grants())


def test_every_kind_the_scheduler_reads_is_in_the_table_and_the_not_read_list_is_not() -> None:
    table = documented_grants()
    # the ConfigMap of policies besides; not the Deployments `check --kubeconfig` reads with the user's credentials
    for kind in (*WATCHED, *(k for k in OBJECT_KINDS if k.family is None and k.name != "Deployment")):
        group = kind.versions[0].split("/")[0] if "/" in kind.versions[0] else ""
        assert {(group, kind.plural, "list"), (group, kind.plural, "watch")} <= table, kind.name
    left_out = not_read()
    assert left_out, "the Permissions section lists what is not read"
    read = {k.plural for k in OBJECT_KINDS}
    for name in left_out:
        assert name not in read, f"{name} is in engine/reading/objects.py, yet the docs say it is not read"
        assert not any(r == name for _, r, _ in table | deploy_grants()), f"{name} is granted, yet not read"


def one_liner(path: Path) -> tuple[set[str], set[str]]:
    """The resources a doc's snapshot `kubectl get` lists, and those its comment says to add where served."""
    text = path.read_text().replace("\\\n", "")
    listed = re.search(r"kubectl get ([a-z.,-]+)\s+-A[^\n]*\n((?:# [^\n]*\n)*)", text)
    assert listed, path
    plurals = {k.plural for k in MODEL_KINDS}
    added = {name for name in re.findall(r"[a-z]+(?:\.[a-z0-9-]+)*", listed.group(2)) if name.split(".")[0] in plurals}
    return set(listed.group(1).split(",")), added


def test_the_snapshot_one_liners_list_every_kind_the_model_reads() -> None:
    readme, ops = one_liner(README), one_liner(OPERATIONS)
    assert readme[0] >= ops[0] and readme[1] >= ops[1], (ops[0] - readme[0], ops[1] - readme[1])
    plurals = [k.plural for k in MODEL_KINDS]
    for listed, added in (readme, ops):
        named: set[tuple[str, str]] = set()  # (plural, group or "" when the name alone is one kind)
        for name in listed | added:
            plural, _, group = SHORT_NAMES.get(name, name).partition(".")
            assert plural in plurals, f"{name} is not a kind the model reads"
            assert group or plurals.count(plural) == 1, f"{name} names two kinds: say its group"
            named.add((plural, group))
        for kind in MODEL_KINDS:
            group = kind.versions[0].split("/")[0] if "/" in kind.versions[0] else ""
            assert (kind.plural, "") in named or (kind.plural, group) in named, f"{kind.name} is not in the one-liner"


def code_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, re.S)


def test_the_image_is_built_and_pushed_beside_the_install_commands() -> None:
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    deployment = yaml.safe_load((ROOT / "deploy" / "deployment.yaml").read_text())
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == f"policy-scheduler:{version}"
    build = f"docker build -f deploy/Dockerfile -t REGISTRY/policy-scheduler:{version} ."
    push = f"docker push REGISTRY/policy-scheduler:{version}"
    install = next(b for b in code_blocks(README.read_text()) if "kubectl apply -k deploy/" in b)
    assert build in install and push in install and install.index(push) < install.index("kubectl apply -k deploy/")
    ops = OPERATIONS.read_text()
    install_section = section(ops, "## Install")
    assert any(build in b and push in b for b in code_blocks(install_section))
    assert install_section.index(push) < install_section.index("kubectl apply -k deploy/")


def test_a_local_control_plane_for_trying_run_is_documented() -> None:
    script = ROOT / "scripts" / "local_control_plane.py"
    for doc in (README, OPERATIONS):
        assert "python scripts/local_control_plane.py" in doc.read_text(), doc.name
    out = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--nodes" in out.stdout and "--version" in out.stdout, out.stderr


def test_the_readme_still_opens_with_its_two_commands() -> None:
    first = code_blocks(README.read_text())[0]
    assert README.read_text().startswith("# policy-scheduler\n\n```sh\n")
    assert first.splitlines() == [
        "pip install . && policy-scheduler dry-run",
        "pip install '.[test]' && python -m pytest -q && POLICY_SCHEDULER_KUBE_VERSION=v1.37.2 python -m pytest -q "
        "tests/e2e"]
