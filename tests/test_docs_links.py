"""The repository's docs stand on their own: every relative link resolves inside the repository, nothing points
outside it (the JSON contract and the operations guide are in docs/), and the defaults they state are the code's."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "deploy" / "README.md", ROOT / "policies" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_repository(doc: Path) -> None:
    text = doc.read_text()
    assert "../shared" not in text
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        path = (doc.parent / target).resolve()
        assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: {target}"


def test_the_readme_links_the_contract_and_the_operations_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "(docs/dry-run-contract.md)" in readme and "(docs/operations.md)" in readme
    assert '-m "not e2e"' in readme and "Go ≥ 1.26" in readme


def test_the_documented_metrics_are_the_ones_served() -> None:
    from prometheus_client import generate_latest

    from engine.loop.scheduler import Profile, Scheduler, Settings
    from engine.quotas.tenant_report import Amounts, TenantLine
    from loopfake import FakeAPI

    s = Scheduler(FakeAPI(), Settings((Profile("p"),)))
    s.metrics.phase_seconds.labels("p", "solve").observe(0.1)
    s.metrics.gap.labels("p").set(0)
    s.metrics.tenants.record([TenantLine("ns/q", "ElasticQuota ns/q", True, 1.0, (Amounts("cpu", 0, 1000, 1000, 2000, 0),),
                                         500, (), ("ns/p",))], ["ns/p"])  # tenant gauges: only with quotas
    served = set(re.findall(r"^# TYPE (\S+)", generate_latest(s.metrics.registry).decode(), re.MULTILINE))
    documented = set(re.findall(r"`(policy_scheduler_[a-z_]+)", (ROOT / "docs" / "operations.md").read_text()))
    for name in documented:
        base = name.removesuffix("_total")
        assert base in served or name in served, f"docs/operations.md names {name}, which /metrics does not serve"
