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


def test_import_contracts_hold() -> None:
    result = _run("-c", LINT_IMPORTS, "--config", str(ROOT / ".importlinter"), "--no-cache")
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_ruff_finds_nothing() -> None:
    result = _run("-m", "ruff", "check", "--no-cache", "engine", "tests", "bench", "testkit", "scripts")
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
