"""Writing PNG figures for the commands that draw them (`simulate --plots`, `simulate-openb --plot`): matplotlib is
an optional extra, imported only here and only when plots are asked for, with the headless backend."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any


class PlotsUnavailable(RuntimeError):
    """matplotlib is not installed: the command says how to get it."""


def save_figures(make: Callable[[], Iterable[tuple[str, Any]]], directory: str, dpi: int = 110) -> list[str]:
    """Each (file name, figure) `make` yields, saved as PNG in `directory` (made if missing); the names written."""
    try:
        import matplotlib
    except ImportError:
        raise PlotsUnavailable("matplotlib is not installed (pip install 'policy-scheduler[plots]')") from None
    matplotlib.use("Agg")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, figure in make():
        figure.savefig(out / name, dpi=dpi)
        written.append(name)
    return written
