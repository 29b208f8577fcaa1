"""Group engine/'s flat modules into folders by what they are (issue 48, point 8), and rewrite every reference.

Run from the repository root: `python tools/relayout.py` (then `ruff check --fix --select I engine tests bench
testkit scripts tools` sorts the imports it rewrote). It moves files with `git mv` and rewrites module paths only:
imports (absolute and relative, whose levels change when a module moves), dotted names and file paths in code,
strings, comments, docs, `.importlinter` and pyproject.toml. It knows no class or function name, so it runs on a
tree where those differ, and it is idempotent: on a tree already laid out it changes nothing, and on one where a
merged branch brought back an old path it moves or rewrites just that.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# old module (or package) under engine → its new place; the folders are described in FOLDERS below
MOVES: dict[str, str] = {
    # the model and what every stage reads of it
    "model": "model.cluster",
    "ir": "model.ir",
    "podspec": "model.podspec",
    "quantity": "model.quantity",
    "gangs": "model.gangs",
    "queue_order": "model.queue_order",
    "rejections": "model.rejections",
    "tables": "model.tables",
    "view": "model.view",
    # the model's reading: files and objects in
    "manifests": "reading.manifests",
    "yaml_parallel": "reading.yaml_parallel",
    "field_validation": "reading.field_validation",
    "objects": "reading.objects",
    "convert": "reading.convert",
    "load": "reading.load",
    "resolve": "reading.resolve",
    "workloads": "reading.workloads",
    # planning: one batch compiled, solved and explained, and the pipeline around it
    "classes": "planning.classes",
    "compile": "planning.compile",
    "explain": "planning.explain",
    "plan": "planning.plan",
    "planner": "planning.planner",
    "isolation": "planning.isolation",
    # preemption's strategies
    "reclaim": "preempt.reclaim",
    # tenants and quotas
    "tenants": "quotas.tenants",
    "tenant_report": "quotas.tenant_report",
    # time
    "timeline": "time.timeline",
    "timed_plan": "time.timed_plan",
    "dra_time": "time.dra_time",
    "simulate": "time.simulate",
    # devices and volumes
    "dra": "devices.dra",
    "dra_capacity": "devices.dra_capacity",
    "dra_counters": "devices.dra_counters",
    "storage": "devices.storage",
    "cel": "devices.cel",
}

# each new folder's __init__ docstring: what it holds and why it is a group
FOLDERS: dict[str, str] = {
    "model": """The model and what every stage reads of it: the typed cluster (`cluster`), the rule IR every front end
writes (`ir`, `podspec`), quantities, gangs, units in line, and the tables and views the filters, compile,
preemption and time ask about nodes and bound pods. The bottom layers: pure, and they import nothing above.
""",
    "reading": """The model's reading: snapshot files and API objects in, one typed cluster out. `manifests` reads files,
`objects` is the registry of kinds read, `convert/` reads one object each, `load` assembles them and `resolve`
says what the pods mean together. Everything that turns YAML or the API's objects into the model is here.
""",
    "planning": """Planning one batch and the pipeline around it: pods into classes, compile (every kind's filter and score)
into the solver's problem (engine.solve solves it), explain who was left out, the plan; `planner` runs place →
reserve → preempt, and `isolation` keeps a failure to the pods it concerns.
""",
    "quotas": """Tenants and their quotas (issue 19): whose quota a pod counts toward, the figures the batch model and the
reports read, and the per-tenant report around a plan. One concept read by compile, preemption and the outputs.
""",
    "time": """Time in the plan (issue 29): when running pods end and a waiting pod could start (`timeline`), the
planner's answers at a later time (`timed_plan`), devices in time (`dra_time`) and `simulate`, a trace replayed
on a virtual clock. Grouped because each answers "when", not "where".
""",
    "devices": """Devices and volumes: what a pod's claims on things attached to nodes mean. DRA (`dra`, with
partitionable devices and consumable capacity, and `cel/` for device selectors) and PersistentVolumeClaims
(`storage`), each resolved once per snapshot and read by their kinds and the loop's binder.
""",
}

SOURCE_DIRS = ["engine", "tests", "bench", "testkit", "tools", "scripts"]
TEXT_FILES = [".importlinter", "pyproject.toml", "README.md", "Makefile", "deploy/Dockerfile", "deploy/README.md"]
TEXT_GLOBS = ["docs/*.md", "deploy/**/*.yaml", "policies/**/*.md", ".ci/*"]
ENGINE = ROOT / "engine"
LINE_LENGTH = 130  # pyproject's [tool.ruff]: a longer path can push a docstring line over it


def was_package(old: str) -> bool:
    """A moved package (convert, cel) carries its submodules; a moved module is matched exactly."""
    return old in {"convert", "cel"}


MODEL_PARTS = {new.split(".", 1)[1] for new in MOVES.values() if new.startswith("model.")}
# a bare `engine.model` names the old module (now model.cluster) only while engine/model.py is there; once moved, the
# folder (a contract or a doc may name it); `engine.model.Pod` and `from engine.model import Pod` are never ambiguous
MODEL_WAS_A_FILE = (ENGINE / "model.py").exists()


def new_module(name: str) -> str:
    """engine.X... under its new path; anything not moved is returned as it is."""
    parts = name.split(".")
    if parts[0] != "engine" or len(parts) < 2 or parts[1] not in MOVES:
        return name
    old = parts[1]
    if len(parts) > 2 and not was_package(old):
        return name  # e.g. engine.model.tables: already a new path
    return ".".join(["engine", *MOVES[old].split("."), *parts[2:]])


# --- moving -------------------------------------------------------------------------------------------------------


def git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def move_files() -> None:
    """`git mv` what is still at its old place; each new folder gets its __init__.py (its docstring) once."""
    for folder, doc in FOLDERS.items():
        init = ENGINE / folder / "__init__.py"
        if not init.exists():
            init.parent.mkdir(exist_ok=True)
            init.write_text(f'"""{doc}"""\n')
            git("add", str(init))
    for old, new in MOVES.items():
        src = ENGINE / (old if was_package(old) else f"{old}.py")
        dst = ENGINE / (new.replace(".", "/") + ("" if was_package(old) else ".py"))
        if not src.exists():
            continue
        if dst.exists():
            sys.exit(f"both {src} and {dst} exist: merge them by hand, then run again")
        git("mv", str(src), str(dst))


# --- imports ------------------------------------------------------------------------------------------------------


def module_of(path: Path) -> tuple[str, bool]:
    """The dotted module a file under ROOT is, and whether it is a package's __init__."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def known_modules() -> set[str]:
    """Every module under engine/ now, under both its old and its new name."""
    found = {module_of(p)[0] for p in ENGINE.rglob("*.py")}
    found |= {f"engine.{old}" for old in MOVES} | {f"engine.{new}" for new in MOVES.values()}
    return found | {new_module(m) for m in found}


def relative(target: str, package: str) -> str:
    """`target` written relative to `package` (the importing module's package)."""
    t, p = target.split("."), package.split(".")
    common = 0
    while common < min(len(t), len(p)) and t[common] == p[common]:
        common += 1
    return "." * (len(p) - common + 1) + ".".join(t[common:])


def split_names(module: str, names: list[ast.alias], known: set[str]) -> list[tuple[str, list[str]]]:
    """`from module import names`, regrouped by the new module each name comes from (a name that is itself a module
    is imported from its new parent, under its old binding)."""
    groups: dict[str, list[str]] = {}
    for alias in names:
        full = f"{module}.{alias.name}"
        if full in known and alias.name != "*":
            moved = new_module(full)
            parent, last = moved.rsplit(".", 1)
            bound = alias.asname or alias.name
            groups.setdefault(parent, []).append(last if last == bound else f"{last} as {bound}")
            continue
        target = new_module(module)
        if module == "engine.model" and alias.name in MODEL_PARTS:
            target = module  # the folder's own module, imported as already laid out
        groups.setdefault(target, []).append(alias.name if not alias.asname else f"{alias.name} as {alias.asname}")
    return list(groups.items())


def rewrite_imports(text: str, current: str, is_pkg: bool, known: set[str]) -> str:
    """Every `from … import` resolved against where the file is now, mapped to the new paths and written from
    where the file will be (relative stays relative)."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    here = current if is_pkg else current.rpartition(".")[0]
    final = new_module(current)
    there = final if is_pkg else final.rpartition(".")[0]
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here.split(".")[: len(here.split(".")) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if module != "engine" and not module.startswith("engine."):
            continue
        groups = split_names(module, node.names, known)
        written = [(relative(m, there) if node.level else m, names) for m, names in groups]
        old_form = ("." * node.level + (node.module or ""), [a.name if not a.asname else f"{a.name} as {a.asname}"
                                                             for a in node.names])
        if len(written) == 1 and written[0] == old_form:
            continue
        edits.append((node.lineno, node.end_lineno or node.lineno, render(node, lines, written)))
    for start, end, new in sorted(edits, reverse=True):
        lines[start - 1:end] = [new]
    return "".join(lines)


def render(node: ast.ImportFrom, lines: list[str], written: list[tuple[str, list[str]]]) -> str:
    """The new statement(s): the `from X import` prefix swapped in place when the names stay as they were (keeping
    the statement's wrapping and comments), else one line per source module."""
    first = lines[node.lineno - 1]
    indent = first[: len(first) - len(first.lstrip())]
    original = "".join(lines[node.lineno - 1: node.end_lineno])
    same_names = [a.name if not a.asname else f"{a.name} as {a.asname}" for a in node.names]
    if len(written) == 1 and written[0][1] == same_names:
        return re.sub(r"from\s+[.\w]+\s+import", f"from {written[0][0]} import", original, count=1)
    if "#" in original and node.lineno != node.end_lineno:
        print(f"note: comments inside a rebuilt import dropped at line {node.lineno}: {original.strip()}")
    comment = re.search(r"\s(#.*)$", original.rstrip("\n"))
    out = [f"{indent}from {m} import {', '.join(names)}" for m, names in written]
    if comment:
        out[0] += f"  {comment.group(1)}"
    return "\n".join(out) + "\n"


def import_spans(text: str) -> set[int]:
    """The lines `from … import` statements take (rewritten by rewrite_imports, not as text)."""
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)]
    return {line for start, end in spans for line in range(start, end + 1)}


# --- dotted names and paths in any text ---------------------------------------------------------------------------

OLD = sorted(MOVES, key=len, reverse=True)
DOTTED = re.compile(r"\bengine\.(" + "|".join(OLD) + r")\b((?:\.\w+)?)")
PATH = re.compile(r"\bengine/(" + "|".join(OLD) + r")(\.py\b|/|\b)")


def rewrite_text(text: str) -> str:
    """engine.X and engine/X.py (or engine/X/ for a package) under their new names."""

    def dotted(m: re.Match[str]) -> str:
        old, rest = m.group(1), m.group(2)
        if old == "model" and (rest[1:] in MODEL_PARTS or (not rest and not MODEL_WAS_A_FILE)):
            return m.group(0)  # engine.model.tables, or engine.model once moved: the folder, already laid out
        return f"engine.{MOVES[old]}{rest}"

    def path(m: re.Match[str]) -> str:
        old, end = m.group(1), m.group(2)
        if was_package(old):
            return f"engine/{MOVES[old].replace('.', '/')}{end}"
        if end != ".py":
            return m.group(0)  # engine/model/… is the new folder; a bare engine/plan names no file
        return f"engine/{MOVES[old].replace('.', '/')}.py"

    return PATH.sub(path, DOTTED.sub(dotted, text))


def rewrite_python(path: Path, known: set[str]) -> None:
    """A file's imports (resolved against where it is now, written from where it will be), then the dotted names
    and paths elsewhere in it: strings, comments, docstrings, `import engine.x` and attribute chains."""
    text = path.read_text()
    current, is_pkg = module_of(path)
    new = rewrite_imports(text, current, is_pkg, known)
    skip = import_spans(new)
    lines = new.splitlines(keepends=True)
    result = "".join(line if i + 1 in skip else rewrite_text(line) for i, line in enumerate(lines))
    if result != text:
        path.write_text(result)
        before, where = set(text.splitlines()), new_module(current).replace(".", "/") + ("/__init__" if is_pkg else "")
        for number, line in enumerate(result.splitlines(), 1):
            if len(line) > LINE_LENGTH and line not in before and not where.startswith("tests/"):
                print(f"{where}.py:{number}: over {LINE_LENGTH} characters now: wrap it by hand")


def importlinter_layers(text: str) -> str:
    """The layers contract names modules relative to its container (engine): those move too, and one that moved
    into a module that is a layer itself (reclaim into preempt) is now part of that layer."""
    out: list[str] = []
    block: list[str] | None = None  # the lines of a `layers =` value, while in one
    for line in [*text.splitlines(keepends=True), "[end]\n"]:
        stripped = line.strip()
        if block is not None and stripped and not stripped.startswith("#") and line[0].isspace():
            name = MOVES[stripped] if stripped in MOVES and not was_package(stripped) else stripped
            block.append(line.replace(stripped, name))
            continue
        if block is not None:
            names = {entry.strip() for entry in block}
            out += [entry for entry in block if not contained(entry.strip(), names)]
            block = None
        out.append(line)
        if line.startswith("layers"):
            block = []
    return "".join(out[:-1])


def contained(name: str, listed: set[str]) -> bool:
    """A dotted layer name inside another listed one (preempt.reclaim inside preempt)."""
    parts = name.split(".")
    return len(parts) > 1 and any(".".join(parts[:i]) in listed for i in range(1, len(parts)))


def pyproject_packages(text: str) -> str:
    """Every package under engine/ listed for the wheel (the new folders, the moved convert/ and cel/)."""
    found = sorted({module_of(p)[0] for p in ENGINE.rglob("__init__.py")})
    m = re.search(r'^packages = \[(.*)\]$', text, re.MULTILINE)
    if not m:
        return text
    listed = [s.strip().strip('"') for s in m.group(1).split(",")]
    listed += [p for p in found if p not in listed]
    # a module is no package (the text pass reads a bare "engine.model" as the old module, now model.cluster)
    listed = [p for i, p in enumerate(listed) if p not in listed[:i] and not (ROOT / f"{p.replace('.', '/')}.py").exists()]
    listed += [p for p in found if p not in listed]
    return text[: m.start(1)] + ", ".join(f'"{p}"' for p in listed) + text[m.end(1):]


def main() -> None:
    """Rewrite the Python first (a moved file's relative imports are read from where it is now), then move, then the
    other text (the wheel's package list is read from the moved tree)."""
    known = known_modules()
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")) if (ROOT / folder).exists() else []:
            if path.resolve() != Path(__file__).resolve():
                rewrite_python(path, known)
    move_files()
    texts = [ROOT / f for f in TEXT_FILES] + [p for g in TEXT_GLOBS for p in sorted(ROOT.glob(g))]
    for path in texts:
        if not path.is_file():
            continue
        text = path.read_text()
        new = rewrite_text(text)
        if path.name == ".importlinter":
            new = importlinter_layers(new)
        if path.name == "pyproject.toml":
            new = pyproject_packages(new)
        if new != text:
            path.write_text(new)


if __name__ == "__main__":
    main()
