"""Kubernetes quantities as integers, from the Kubernetes Python client's parser (not the engine's own port of
upstream's, which is what the tests judge): cpu in millicores, everything else in units (bytes, pods, GPUs)."""

from __future__ import annotations

import math
from decimal import Decimal

from kubernetes.utils import parse_quantity


def exact(value: str | int | float) -> Decimal:
    """The quantity's exact value (`"1500m"` is 1.5, `"1Ki"` is 1024)."""
    return Decimal(parse_quantity(value))


def integer(resource: str, value: Decimal) -> int:
    """An exact value as the integer the scheduler counts in, rounded up: millicores for cpu, else units."""
    return math.ceil(value * 1000) if resource == "cpu" else math.ceil(value)


def amount(resource: str, value: str | int | float) -> int:
    """`integer(resource, exact(value))`: `amount("cpu", "1.5")` is 1500, `amount("memory", "1Gi")` 2**30."""
    return integer(resource, exact(value))
