import sys
from pathlib import Path

# tests import their helpers (runner.py, oracle.py, strategies.py) as top-level modules; the kit they share
# with bench/ (testkit/, at the repository root) is on the path through pyproject.toml's pytest `pythonpath`
sys.path.insert(0, str(Path(__file__).parent))

import os

from hypothesis import HealthCheck, settings

# `HYPOTHESIS_PROFILE=deep python -m pytest tests/test_optimality.py` searches far harder than CI does
settings.register_profile("deep", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
# CI runs the same examples every time (a landing must not depend on luck); local runs explore
settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
if os.environ.get("CI") and not os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile("ci")
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked `perf` assert how fast, which depends on the machine: they run only when `-m` names them
    (`python -m pytest -m perf`); every other run, the README's and CI's among them, deselects them."""
    if "perf" in (config.getoption("markexpr") or ""):
        return
    kept = [item for item in items if item.get_closest_marker("perf") is None]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("perf") is not None])
        items[:] = kept
