"""The argument checks every normaliser shares, and the one exception policy.

Every bad argument a user can pass raises :class:`ArgumentError`, whose message starts
with the argument's name (``"sigma: ..."``).  It subclasses both ``ValueError`` and
``TypeError``, so code written for either (scipy raises both for bad arguments) keeps
working, and a caller never has to guess which one a check picked.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Sequence

import numpy as np


class ArgumentError(ValueError, TypeError):
    """A bad argument; the message starts with its name."""


def is_dask_array(value: object) -> bool:
    """True for a dask array, without importing dask."""
    return type(value).__module__.startswith("dask.array")


def is_jax_array(value: object) -> bool:
    """A ``jax.Array`` (concrete or traced), recognised without importing JAX."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def is_traced(value: object) -> bool:
    """A JAX tracer (inside ``jit``, ``grad`` or ``vmap``): its values are unknown."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.core.Tracer)


def is_number(value: object) -> bool:
    """A real number (NumPy scalars too), not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def as_float(value: numbers.Real) -> float:
    """``float(value)``; a Python int beyond float's range becomes inf (then refused
    by the caller's finiteness check) instead of raising OverflowError."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def real(
    name: str,
    value: object,
    *,
    above: float | None = None,
    at_least: float | None = None,
    finite: bool = True,
) -> float:
    """``value`` as a float: a real number, finite unless ``finite=False``, ``> above``
    and ``>= at_least`` when given; else an :class:`ArgumentError` naming ``name``."""
    number = as_float(value) if is_number(value) else None
    ok = number is not None and (not finite or math.isfinite(number))
    ok = ok and (above is None or number > above) and (at_least is None or number >= at_least)
    if ok:
        return number
    words = ["finite" if finite else "real", "number"]
    if above is not None:
        words.append(f"> {above:g}")
    if at_least is not None:
        words.append(f">= {at_least:g}")
    raise ArgumentError(f"{name}: must be a {' '.join(words)}, got {value!r}")


def count(name: str, value: object) -> int:
    """An integer >= 1 (a float with an integer value too)."""
    number = as_float(value) if is_number(value) else math.nan
    if not math.isfinite(number) or number != int(number) or number < 1:
        raise ArgumentError(f"{name}: must be an integer >= 1, got {value!r}")
    return int(number)


def choice(
    name: str, value: object, valid: Sequence[str], noun: str, plural: str | None = None
) -> str:
    """``value`` if it is one of ``valid``; else an error listing them."""
    if isinstance(value, str) and value in valid:
        return value
    listed = ", ".join(repr(v) for v in valid)
    raise ArgumentError(
        f"{name}: unknown {noun} {value!r}; valid {plural or noun + 's'} are {listed}"
    )


def where(mask: np.ndarray) -> str:
    """Describe how many entries of ``mask`` are set and where the first one is."""
    total = int(np.count_nonzero(mask))
    first = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{total} value{'s' if total != 1 else ''} (first at index {first})"
