"""The sweep's curves (issue 52): unallocated GPUs against the arrived workload, as the FGD paper draws them, a line
per scheduler — the mean over its seeds, a band from the least to the most — one figure per inflation level,
departures and prefill (arrival settings side by side in it, named in the legend). matplotlib is imported only
here, when plots are asked for."""
from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

POINTS = 400  # where each run's curve is read, on a common axis, to average seeds
ZOOM = 0.8  # the arrived share a figure starts at (when the inflation goes past it)


def _figure_key(p: dict[str, Any]) -> tuple[Any, ...]:
    return p["inflation"], p["departures"], p.get("prefill")


def _file_name(key: tuple[Any, ...]) -> str:
    inflation, departures, prefill = key
    return (f"unallocated_{inflation:g}{'_departures' if departures else ''}"
            f"{'_prefill-' + prefill.replace(':', '-') if prefill else ''}.png")


def _arrivals(p: dict[str, Any]) -> str:
    return f"every {p['batch_seconds']:g} s" if p["batch_seconds"] is not None else f"batch {p['batch']}"


def curve(run: dict[str, Any], xs: np.ndarray) -> np.ndarray:
    """A run's unallocated GPUs at each arrived share in `xs`, from (0, all GPUs) by straight lines between its
    steps; NaN past its last step."""
    arrived = np.array([0.0, *run["series"]["arrived"]])
    unallocated = np.array([run["summary"]["capacity_gpus"], *run["series"]["unallocated"]])
    ys = np.interp(xs, arrived, unallocated)
    ys[xs > arrived[-1]] = np.nan
    return ys


def unallocated_figures(runs: list[dict[str, Any]]) -> Iterator[tuple[str, Any]]:
    """(file name, figure) per inflation level, departures and prefill."""
    import matplotlib.pyplot as plt

    settings: dict[tuple[Any, ...], set[str]] = {}
    for r in runs:
        settings.setdefault(_figure_key(r["parameters"]), set()).add(_arrivals(r["parameters"]))
    figures: dict[tuple[Any, ...], dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        p = r["parameters"]
        key = _figure_key(p)
        label = p["scheduler"] + (f" ({p['policy']})" if p["policy"] else "")
        label += f", {_arrivals(p)}" if len(settings[key]) > 1 else ""  # batches of the same trace: one figure
        figures.setdefault(key, {}).setdefault(label, []).append(r)
    for key, lines in figures.items():
        fig, ax = plt.subplots(figsize=(8, 4.5))
        xs = np.linspace(0.0, key[0], POINTS)
        top = 0.0
        for label, members in lines.items():
            ys = np.array([curve(m, xs) for m in members])
            with warnings.catch_warnings():  # past every seed's last step the mean is of nothing: no line there
                warnings.simplefilter("ignore", RuntimeWarning)
                mean, low, high = np.nanmean(ys, axis=0), np.nanmin(ys, axis=0), np.nanmax(ys, axis=0)
            ax.plot(100 * xs, mean, label=f"{label} ({len(members)} seed{'s' * (len(members) > 1)})")
            ax.fill_between(100 * xs, low, high, alpha=0.2)
            top = max(top, float(np.nanmax(np.where(xs >= ZOOM, high, np.nan), initial=0.0)))
        if key[0] > ZOOM:  # the paper's view: where the schedulers part, not the straight fall before it
            ax.set_xlim(100 * ZOOM, 100 * key[0])
            ax.set_ylim(0, top * 1.05)
        ax.set(xlabel="arrived workload (% of GPU capacity)", ylabel="unallocated GPUs",
               title=f"Unallocated GPUs as the workload arrives ({_file_name(key)[12:-4]})")
        ax.legend(fontsize="small")
        fig.tight_layout()
        yield _file_name(key), fig
        plt.close(fig)
