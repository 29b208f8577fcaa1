"""The Helm chart renders its ClusterRole and the PodGroup CRD from deploy/'s own files: its files/ holds copies of
them (a symlink would make helm warn on every command), and the copies are deploy/'s, byte for byte."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ROOT / "deploy" / "helm" / "policy-scheduler" / "files"


def _copied() -> list[Path]:
    """What `make chart-files` copies into the chart (the Makefile's CHART_FILES)."""
    makefile = (ROOT / "Makefile").read_text()
    listed = re.search(r"^CHART_FILES = (.+)$", makefile, re.MULTILINE)
    assert listed, "the Makefile has no CHART_FILES"
    return [ROOT / name for name in listed.group(1).split()]


def test_the_chart_files_are_deploys_files() -> None:
    sources = _copied()
    assert sorted(p.name for p in FILES.iterdir()) == sorted(p.name for p in sources)
    for source in sources:
        copy = FILES / source.name
        assert copy.read_bytes() == source.read_bytes(), (
            f"{copy.relative_to(ROOT)} is not {source.relative_to(ROOT)}: run `make chart-files` and commit the result")


def test_nothing_in_the_chart_is_a_symlink() -> None:
    chart = FILES.parent
    assert [str(p.relative_to(chart)) for p in chart.rglob("*") if p.is_symlink()] == []
