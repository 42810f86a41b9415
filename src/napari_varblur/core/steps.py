"""Work written as a generator (it yields progress, may take a stop request by ``send``,
and returns its result): the two ways the package drives one."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any


def run_to_end(steps: Generator, on_step: Callable[[Any], Any] | None = None) -> Any:
    """Drive ``steps`` to its return value on this thread.  ``on_step(value)``, when
    given, sees each yielded value and its return value is sent back (a stop request)."""
    reply = None
    while True:
        try:
            value = steps.send(reply)
        except StopIteration as done:
            return done.value
        reply = None if on_step is None else on_step(value)


def map_steps(steps: Generator, change: Callable[[Any], Any]) -> Generator:
    """Yield ``change(value)`` for each value ``steps`` yields; return its result (use
    with ``yield from``)."""
    while True:
        try:
            value = next(steps)
        except StopIteration as done:
            return done.value
        yield change(value)
