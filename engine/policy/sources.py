"""Read policy sources (files, directories, ConfigMap manifests), parse and check them in one go.

The only place the policy front end touches the file system.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

from . import ast as A
from .check import check
from .parse import Diagnostic, PolicyError, parse

SUFFIX = ".policy"


def read_sources(paths: list[str]) -> dict[str, str]:
    """name -> text for every policy file under the paths (sorted), and every data key of a ConfigMap."""
    out: dict[str, str] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files = sorted(p for p in path.rglob(f"*{SUFFIX}") if p.is_file())
            if not files:
                raise PolicyError([Diagnostic(raw, 1, 1, f"no {SUFFIX} files in this directory")])
            for f in files:
                out[str(f)] = _read(f)
        elif path.suffix in (".yaml", ".yml", ".json"):
            out.update(_configmap(path))
        else:
            out[raw] = _read(path)
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a BOM is accepted (and dropped)
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise PolicyError([Diagnostic(str(path), 1, 1, f"cannot read policy file: {why}")]) from None


def _configmap(path: Path) -> dict[str, str]:
    """Policies kept in a ConfigMap: each data key is one policy file, named path[key]."""
    text = _read(path)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise PolicyError([Diagnostic(str(path), line, col, f"invalid YAML: {getattr(exc, 'problem', exc)}")]) from None
    out: dict[str, str] = {}
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "ConfigMap":
            raise PolicyError([Diagnostic(str(path), 1, 1, "expected a ConfigMap whose data keys are policy files")])
        name = (doc.get("metadata") or {}).get("name", "?")
        for key, value in sorted((doc.get("data") or {}).items()):
            out[f"{path}[ConfigMap {name}: {key}]"] = str(value)
    return out


def load_policies(paths: list[str]) -> list[A.Policy]:
    """Read, parse and check every source; raise PolicyError with all diagnostics if any is wrong."""
    return check_sources(read_sources(paths))


def check_sources(sources: dict[str, str]) -> list[A.Policy]:
    """Parse and check already-read sources (name -> text); raise PolicyError listing every problem."""
    policies: list[A.Policy] = []
    problems: list[Diagnostic] = []
    for name, text in sources.items():
        try:
            policies.extend(parse(text, name))
        except PolicyError as exc:
            problems.extend(exc.diagnostics)
    problems.extend(check(policies, sources))
    if problems:
        raise PolicyError(sorted(problems, key=line_order(sources)))
    return policies


def line_order(sources: dict[str, str]) -> Callable[[Diagnostic], tuple[int, int, int]]:
    """The order a reader meets diagnostics in: file by file as the sources were given, then by line and column
    (parse errors and the checker's come in separate passes, the checker's policy by policy)."""
    files = {name: i for i, name in enumerate(sources)}
    return lambda d: (files.get(d.file, len(files)), d.line, d.column)
