"""``deblur``'s own settings, checked once at call time (the blur's are checked by
:class:`~napari_varblur.core.spec.BlurSpec`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import ArgumentError, choice, real
from ..core.options import DeblurOptions
from ..core.params import DEBLUR_METHODS, REQUIRED


@dataclass(frozen=True)
class Settings:
    iterations: int
    method: str
    regularization: float
    acceleration: bool
    pixel_spacing: tuple[float, ...]
    stop: float | None
    callback: object


def settings(options: DeblurOptions, blurred: int, callback=None) -> Settings:
    """The checked settings for ``blurred`` blurred axes; an error names the argument."""
    method = choice("method", options.method, DEBLUR_METHODS, "method")
    weight = real("regularization", options.regularization, at_least=0.0)
    if weight > 0 and method != "rl_tv":
        raise ArgumentError(
            f"regularization: only method='rl_tv' uses it (got {weight:g} with {method!r})"
        )
    if not isinstance(options.acceleration, (bool, np.bool_)):
        raise ArgumentError(f"acceleration: must be True or False, got {options.acceleration!r}")
    stop = None if options.stop is None else real("stop", options.stop, above=0.0)
    if callback is not None and not callable(callback):
        raise ArgumentError(f"callback: must be callable, got {type(callback).__name__}")
    return Settings(_iterations(options.iterations), method, weight, bool(options.acceleration),
                    _spacing(options.pixel_spacing, blurred), stop, callback)  # fmt: skip


def _iterations(value: object) -> int:
    if value is REQUIRED:
        raise ArgumentError("iterations: required (how many iterations to run, >= 1)")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"iterations: must be an integer >= 1, got {value!r}")
    if value < 1:
        raise ArgumentError(f"iterations: must be an integer >= 1, got {value!r}")
    return int(value)


def _spacing(value: object, blurred: int) -> tuple[float, ...]:
    if value is None:
        return (1.0,) * blurred
    values = list(np.ravel(np.asarray(value, dtype=object)))
    if len(values) not in (1, blurred):
        raise ArgumentError(
            f"pixel_spacing: expected 1 or {blurred} values (one per blurred axis), "
            f"got {len(values)}"
        )
    spacing = [real("pixel_spacing", v, above=0.0) for v in values]  # finite, > 0
    return tuple(spacing * blurred if len(spacing) == 1 else spacing)
