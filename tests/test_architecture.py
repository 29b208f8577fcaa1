"""The house rules, checked: import-linter contracts (.importlinter: DESIGN.md §8), ruff and mypy (configured in
pyproject.toml), and no function in engine/ over 60 lines."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60


# The tools are the running interpreter's own (those `pip install '.[test]'` pinned), never whichever is first on PATH:
# another mypy there once failed this with 15 errors. import-linter has no `python -m` entry point: its command, run.
LINT_IMPORTS = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=600)


# Modules of engine/kinds/ that are no constraint kind: the kinds' protocols and the batch context they read.
KIND_INFRASTRUCTURE = frozenset({"__init__", "base", "context"})
# The one package outside a kind's module allowed to name a kind: batch preemption is what the protection kind's
# rules are for (it counts caps and words its refusals).
NAMES_A_KIND = ("engine.preempt.* -> engine.kinds.protection",)
# Helpers one kind reads from another, each a rule both apply (an edge added here is a decision, not a default).
SHARED_RULES = (
    "engine.kinds.reservations -> engine.kinds.resources",  # `shortage`: a reservation's room is counted as requests
    "engine.kinds.spread -> engine.kinds.node_affinity",  # `hard_rules`: nodeAffinityPolicy: Honor reads them
    "engine.kinds.spread -> engine.kinds.taints",  # `tolerations`: nodeTaintsPolicy: Honor reads them
    "engine.kinds.unschedulable -> engine.kinds.taints",  # `tolerations`: the unschedulable taint is tolerated
)


def kind_modules(root: Path) -> list[str]:
    """Every constraint kind's module: each file under engine/kinds/ but the kinds' shared infrastructure."""
    return sorted(f"engine.kinds.{p.stem}" for p in (root / "engine" / "kinds").glob("*.py")
                  if p.stem not in KIND_INFRASTRUCTURE)


def kind_contracts(root: Path) -> str:
    """The import-linter contracts about constraint kinds, made from the modules under engine/kinds/: nothing else in
    engine names a kind (the registry, engine.kinds, aside), and no kind imports another (each kind's layer, below
    compile, is the layers contract's in .importlinter)."""
    kinds = kind_modules(root)
    others = sorted(f"engine.{p.stem if p.suffix else p.name}" for p in (root / "engine").iterdir()
                    if p.name not in {"kinds", "__init__.py", "__main__.py", "__pycache__", "data"}
                    and (p.suffix == ".py" or (p / "__init__.py").exists()))
    lines = "\n    ".join
    return f"""
[importlinter:contract:one-module-per-kind]
name = Nothing names a constraint kind but its own module and the registry (engine.kinds.KINDS)
type = forbidden
allow_indirect_imports = True
source_modules =
    {lines(others)}
forbidden_modules =
    {lines(kinds)}
ignore_imports =
    {lines(NAMES_A_KIND)}

[importlinter:contract:kinds-are-independent]
name = No constraint kind imports another
type = independence
modules =
    {lines(kinds)}
ignore_imports =
    {lines(SHARED_RULES)}
"""


def test_every_kind_module_is_in_the_registry() -> None:
    """A module under engine/kinds/ is a kind the registry lists (engine.kinds.KINDS), and the other way round: the
    contracts below are made from the modules, the phases from the registry."""
    from engine.kinds import KINDS

    assert kind_modules(ROOT) == sorted({type(kind).__module__ for kind in KINDS})


def test_import_contracts_hold(tmp_path: Path) -> None:
    """.importlinter's contracts and those made from the kinds' modules (`kind_contracts`), in one run."""
    config = tmp_path / "importlinter.ini"
    config.write_text((ROOT / ".importlinter").read_text() + kind_contracts(ROOT))
    result = _run("-c", LINT_IMPORTS, "--config", str(config), "--no-cache")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_the_kind_contracts_cover_every_kind(tmp_path: Path) -> None:
    """A kind module added tomorrow is in both contracts without anyone listing it."""
    kinds = tmp_path / "engine" / "kinds"
    kinds.mkdir(parents=True)
    for name in ("__init__", "base", "context", "taints", "brand_new"):
        (kinds / f"{name}.py").write_text("")
    (tmp_path / "engine" / "planning").mkdir()
    (tmp_path / "engine" / "planning" / "__init__.py").write_text("")
    (tmp_path / "engine" / "cli.py").write_text("")
    contracts = kind_contracts(tmp_path)
    assert contracts.count("engine.kinds.brand_new\n") == 2 and "engine.kinds.base" not in contracts
    assert "source_modules =\n    engine.cli\n    engine.planning\n" in contracts


def test_ruff_finds_nothing() -> None:
    result = _run("-m", "ruff", "check", "--no-cache", "engine", "tests", "bench", "testkit", "scripts", "tools")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    result = _run("-m", "mypy", "--no-incremental", "--cache-dir", "/dev/null")  # files and settings: pyproject
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def long_functions(root: Path) -> list[str]:
    """Every function under `root` longer than MAX_FUNCTION_LINES lines (decorators aside), as path:line name."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_no_engine_function_is_over_60_lines() -> None:
    assert long_functions(ROOT / "engine") == []


def test_the_length_check_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert long_functions(tmp_path) == [f"long.py:1 long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_the_wheel_ships_every_engine_package() -> None:
    """pyproject lists the packages by hand: a new subpackage left out would pass every test (they import the
    source tree) and break `pip install . && policy-scheduler`."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "engine").rglob("__init__.py")}
    assert found <= listed, sorted(found - listed)


def test_test_modules_have_unique_basenames() -> None:
    """tests/ has no __init__.py, so pytest imports test modules by basename: two files of one name (one under
    tests/e2e/) stop the whole run at collection — CI once failed that way."""
    names = sorted(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert len(names) == len(set(names)), [name for name in names if names.count(name) > 1]


def class_names(root: Path) -> dict[str, list[str]]:
    """Every class defined at module level under `root`, with the modules defining it."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(str(path.relative_to(root)))
    return found


def test_one_name_per_concept_in_engine() -> None:
    """No class name is defined twice in engine/ (issue 27): a reader, a grep or an import never has to ask which."""
    twice = {name: where for name, where in class_names(ROOT / "engine").items() if len(where) > 1}
    assert twice == {}


def test_the_name_check_sees_a_name_defined_twice(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Usage:\n    pass\n")
    (tmp_path / "b.py").write_text("class Usage:\n    pass\n")
    assert class_names(tmp_path) == {"Usage": ["a.py", "b.py"]}
