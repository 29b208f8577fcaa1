"""--workers and CP-SAT's own limit: a number CP-SAT refuses is refused at the flag, and a solver refusal is never
silent (issue 47, point 5: `--workers 100000` used to skip CP-SAT and hand back the greedy start as if solved)."""

from __future__ import annotations

import os
import subprocess
import sys

from engine.cli import demo_path
from engine.planning.plan import make_plan
from engine.reading.manifests import load_cluster
from engine.solve.cpsat import MAX_WORKERS


def test_the_demo_needs_cp_sat_so_a_refusal_shows():
    """The demo's starting plan is not proven best: CP-SAT runs on it (else the tests below would test nothing)."""
    plan = make_plan(load_cluster([demo_path()]), time_limit=5, workers=1, seed=0)
    assert "CP-SAT" in plan.stats.strategy and plan.stats.phases.solve > 0
    assert not [n for n in plan.notes if "CP-SAT refused" in n]


def test_a_worker_count_cp_sat_refuses_is_said_in_the_notes():
    """Above MAX_WORKERS CP-SAT answers MODEL_INVALID; the plan is the greedy start, and its notes say why."""
    plan = make_plan(load_cluster([demo_path()]), time_limit=5, workers=MAX_WORKERS + 1, seed=0)
    refusals = [n for n in plan.notes if "CP-SAT refused" in n]
    assert len(refusals) == 1, plan.notes
    assert "num_workers" in refusals[0] and str(MAX_WORKERS) in refusals[0]


def test_cp_sat_takes_its_maximum():
    """MAX_WORKERS is CP-SAT's own bound, not ours: CP-SAT accepts exactly that many and refuses one more."""
    from ortools.sat.python import cp_model

    statuses = []
    for workers in (MAX_WORKERS, MAX_WORKERS + 1):
        model = cp_model.CpModel()
        model.maximize(model.new_int_var(0, 3, "x"))
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = workers
        solver.parameters.max_time_in_seconds = 5
        statuses.append(solver.solve(model))
    assert statuses == [cp_model.OPTIMAL, cp_model.MODEL_INVALID]


def test_the_flag_refuses_what_cp_sat_would_refuse():
    env = {**os.environ, "COLUMNS": "300"}
    for command in ("dry-run", "explain"):
        args = [command, "--workers", "100000"] + (["web-0"] if command == "explain" else [])
        out = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 2, out.stderr
        assert f"Invalid value for '--workers': 100000 is not in the range 1<=x<={MAX_WORKERS}" in out.stderr
        assert "Traceback" not in out.stderr
