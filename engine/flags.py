"""Strict command-line values: every malformed one is a one-line error and exit 2, never a quiet default.

Shared by the dry-run commands (cli.py) and `run` (loop/command.py). Names are checked as the apiserver checks
them (a scheduler name, a Lease's or a ConfigMap's name: a DNS-1123 subdomain; a namespace: a DNS-1123 label),
so a typo fails at start instead of leaving pods waiting for a scheduler that can never match them.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import click

from .reading.convert.fields import name_problem


class Name(click.ParamType):
    """A Kubernetes object name: a DNS-1123 subdomain, or a DNS-1123 label (namespaces)."""

    def __init__(self, label: bool = False):
        self.label = label
        self.name = "namespace" if label else "name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        problem = name_problem(str(value), self.label)
        if problem:
            self.fail(f"{str(value)!r} {problem}", param, ctx)
        return str(value)


def namespaced(value: str) -> tuple[str, str] | str:
    """NAMESPACE/NAME as a pair, or why it is not one."""
    namespace, sep, name = value.partition("/")
    if not sep or "/" in name:
        return f"must be NAMESPACE/NAME, got {value!r}"
    for part, label in ((namespace, True), (name, False)):
        problem = name_problem(part, label)
        if problem:
            return f"{'namespace' if label else 'name'} {part!r} {problem}"
    return namespace, name


class Namespaced(click.ParamType):
    """NAMESPACE/NAME, both valid object names."""

    name = "namespace/name"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, str]:
        if isinstance(value, tuple):
            return value
        got = namespaced(str(value))
        if isinstance(got, str):
            self.fail(got, param, ctx)
        return got


OPTIONAL = ",optional"  # NAMESPACE/NAME,optional: a policy ConfigMap that may be absent


def policy_source(value: str) -> tuple[tuple[str, str], bool] | str:
    """NAMESPACE/NAME[,optional] as ((namespace, name), optional), or why it is not one."""
    optional = value.endswith(OPTIONAL)
    got = namespaced(value.removesuffix(OPTIONAL))
    return got if isinstance(got, str) else (got, optional)


class PolicySource(click.ParamType):
    """A policy ConfigMap: NAMESPACE/NAME, with `,optional` when it may be absent."""

    name = "namespace/name[,optional]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[tuple[str, str], bool]:
        if isinstance(value, tuple):
            return value
        got = policy_source(str(value))
        if isinstance(got, str):
            self.fail(got, param, ctx)
        return got


class Seconds(click.ParamType):
    """A finite number of seconds, at least `minimum` (nan and inf are refused: a time limit must end)."""

    name = "seconds"

    def __init__(self, minimum: float):
        self.minimum = minimum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if number < self.minimum:
            self.fail(f"{value!r} is below the minimum of {self.minimum:g} seconds", param, ctx)
        return number


class OneLineErrors(click.Group):
    """A group whose usage errors are one line on stderr (`policy-scheduler: error: ...`) and exit 2, like
    every other user mistake; click's own Usage/Try/Error block is four."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            result = super().main(*args, **kwargs)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "policy-scheduler"
            click.echo(f"policy-scheduler: error: {exc.format_message().rstrip('.')} (see `{where} --help`)", err=True)
            sys.exit(2)
        except click.ClickException as exc:
            click.echo(f"policy-scheduler: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("policy-scheduler: aborted", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)
