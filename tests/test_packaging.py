"""The image is reproducible: deploy/Dockerfile pins its base image and installs only pinned versions."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "deploy" / "Dockerfile").read_text()
LOCK = ROOT / "deploy" / "requirements.lock"


def _pins() -> dict[str, str]:
    lines = [x.strip() for x in LOCK.read_text().splitlines() if x.strip() and not x.startswith("#")]
    pins = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==([A-Za-z0-9.+!-]+)", line)
        assert m, f"not an exact pin: {line!r}"
        pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def test_the_base_image_is_an_exact_release_or_a_digest() -> None:
    images = re.findall(r"^FROM\s+(\S+)", DOCKERFILE, re.MULTILINE)
    assert images
    for image in images:
        assert "@sha256:" in image or re.fullmatch(r"python:\d+\.\d+\.\d+-slim-[a-z]+", image), image


def test_every_runtime_dependency_is_pinned_and_satisfies_pyproject() -> None:
    pins = _pins()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for line in project["dependencies"]:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {LOCK.name}"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req.name}=={pins[name]} does not satisfy {req}"


def test_the_image_installs_from_the_lock_and_nothing_unpinned() -> None:
    installs = re.findall(r"^RUN (pip install .*)$", DOCKERFILE, re.MULTILINE)
    assert installs and all("--no-deps" in x for x in installs), installs
    assert any("-r requirements.lock" in x for x in installs)
