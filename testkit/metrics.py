"""A scheduler's Prometheus exposition (`/metrics`), read with prometheus_client's own parser.

Sample names are the exposition's: a counter `x` is read as `x_total`, a histogram `h` as `h_bucket`, `h_count`
and `h_sum`. Labels given as keywords must all match; samples differing in other labels are summed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample


def samples(text: str, name: str, **labels: str) -> list[Sample]:
    """Every sample called `name` whose labels include `labels`."""
    return [s for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def total(text: str, name: str, **labels: str) -> float:
    """The sum of the matching samples (0 when there are none)."""
    return sum(s.value for s in samples(text, name, **labels))


@dataclass(frozen=True)
class Histogram:
    """One histogram, summed over the label sets that matched."""

    count: float
    sum: float
    buckets: list[tuple[float, float]]  # (upper bound `le`, cumulative count), ascending, +Inf last

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None

    def at_most(self) -> float | None:
        """The smallest bucket bound that every observation is under (None: no observation); `inf` when some
        observation is above the largest finite bound."""
        return next((le for le, n in self.buckets if n >= self.count), None) if self.count else None

    def quantile(self, q: float) -> float:
        """Linear interpolation inside the buckets, as PromQL's histogram_quantile (0 without observations)."""
        target, prev_le, prev_count = q * self.count, 0.0, 0.0
        for le, count in self.buckets:
            if count >= target:
                if math.isinf(le):
                    return prev_le
                span = count - prev_count
                return prev_le + (le - prev_le) * ((target - prev_count) / span if span else 0)
            prev_le, prev_count = le, count
        return prev_le


def histogram(text: str, name: str, **labels: str) -> Histogram:
    """Histogram `name` (its _count, _sum and _bucket samples)."""
    cumulative: dict[float, float] = {}
    for s in samples(text, f"{name}_bucket", **labels):
        le = float(s.labels["le"])
        cumulative[le] = cumulative.get(le, 0.0) + s.value
    return Histogram(total(text, f"{name}_count", **labels), total(text, f"{name}_sum", **labels),
                     sorted(cumulative.items()))


@dataclass(frozen=True)
class Cycles:
    """policy-scheduler's scheduling cycles, as its histograms tell them (per cycle values are not kept: a
    histogram gives counts, sums and buckets)."""

    sizes: Histogram  # pending pods per cycle (policy_scheduler_batch_size)
    solve: Histogram  # seconds from snapshot to plan per cycle (policy_scheduler_solve_seconds)

    @property
    def count(self) -> int:
        return int(self.sizes.count)


def cycles(text: str, **labels: str) -> Cycles:
    """The cycles of every profile (or those of `profile=...`) in policy-scheduler's exposition `text`."""
    return Cycles(histogram(text, "policy_scheduler_batch_size", **labels),
                  histogram(text, "policy_scheduler_solve_seconds", **labels))
