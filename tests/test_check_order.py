"""`policy-scheduler check` lists its errors in the order a reader meets them (issue 47, point 9): file by file as
given, then by line and column — not parse errors first, nor the checker's policy by policy and kind by kind."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from testkit.manifests import node, pod

CHECKED = """\
policy one {
  applies to pods where namespace == "ml"
  gang by label "job" min 0
}
policy one {
  applies to pods where namespace == "ml"
}
policy three {
  applies to pods where namespace == "ml"
  gang by label "job" min 0
  runtime 0s
  quota max "cpu" "abc"
}
"""
UNPARSED = """\
policy two {
  applies to pods where namespace == "ml"
  require nod label "x" exists
}
"""
# `applies to` may come anywhere in a policy: here after the line the lint also warns about
LINTED = """\
policy late-scope {
  require node label "nope" exists
  applies to pods where namespace == "nowhere"
}
policy fine {
  applies to pods where namespace == "nowhere-either"
  prefer node label "nope" exists weight 5
}
"""


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", "check", *args], capture_output=True, text=True, timeout=60)


def positions(stderr: str) -> list[tuple[str, int, int]]:
    return [(f, int(line), int(col)) for f, line, col in re.findall(r"^(\S+?\.policy):(\d+):(\d+): ", stderr, re.M)]


def test_errors_come_file_by_file_in_line_order(tmp_path) -> None:
    checked, unparsed = tmp_path / "b-checked.policy", tmp_path / "a-unparsed.policy"
    checked.write_text(CHECKED)
    unparsed.write_text(UNPARSED)
    out = check(str(checked), str(unparsed))  # the checked file first: its type errors before the other's parse error
    assert out.returncode == 1
    found = positions(out.stderr)
    assert [line for f, line, _ in found if f == str(checked)] == [3, 5, 10, 11, 12], out.stderr
    assert found[-1][:2] == (str(unparsed), 3)
    assert found == sorted(found, key=lambda p: (p[0] != str(checked), p[1], p[2]))
    assert "6 error(s)" in out.stderr


def test_lint_findings_come_in_line_order(tmp_path) -> None:
    policy = tmp_path / "p.policy"
    policy.write_text(LINTED)
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([node("a"), pod("x")]))
    out = check(str(policy), "--cluster", str(cluster))
    assert out.returncode == 0, out.stderr
    lines = [line for _, line, _ in positions(out.stderr)]
    assert lines == [2, 3, 6, 7], out.stderr
