"""``sigma_map_from_beads``'s arguments, checked once at call time; an error names the
argument and says what was wrong."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.checks import ArgumentError, is_number, real, where
from ..core.options import Options

#: Column names of the spatial axes, by their number.
AXIS_NAMES = {2: ("y", "x"), 3: ("z", "y", "x")}
#: The smallest extent of a spatial axis (pixels) that holds a bead and its background.
SMALLEST_AXIS = 8


@dataclass(frozen=True)
class Settings:
    """The checked settings; ``image`` is float32 with the stack axis (if any) first and
    the spatial axes after it, in ``axes`` order."""

    image: np.ndarray
    axes: tuple[int, ...]
    names: tuple[str, ...]
    stack: int | None
    truncate: float
    per_axis: bool
    spacing: np.ndarray
    threshold: float
    min_separation: float
    saturation: float | None
    degree: int | None


def settings(image: object, options: Options) -> Settings:
    values = _image(image)
    axes = _axes(options.axes, values.ndim)
    stack = next((a for a in range(values.ndim) if a not in axes), None)
    order = ((stack,) if stack is not None else ()) + axes
    level = _saturation(options.saturation, values.dtype)
    if not isinstance(options.per_axis, (bool, np.bool_)):
        raise ArgumentError(f"per_axis: must be True or False, got {options.per_axis!r}")
    return Settings(
        np.transpose(values, order).astype(np.float32),
        axes, AXIS_NAMES[len(axes)], stack,
        real("truncate", options.truncate, above=0.0),
        bool(options.per_axis),
        _spacing(options.spacing, len(axes)),
        real("threshold", options.threshold, above=0.0),
        real("min_separation", options.min_separation, at_least=0.0),
        level,
        _degree(options.degree),
    )  # fmt: skip


def _image(image: object) -> np.ndarray:
    values = np.asarray(image)
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        raise ArgumentError(f"image: must be numeric, got dtype {values.dtype}")
    if np.iscomplexobj(values):
        raise ArgumentError("image: must be real, got a complex array")
    if values.ndim not in (2, 3, 4):
        raise ArgumentError(
            f"image: expected 2 or 3 spatial axes (plus at most one stack axis), got "
            f"{values.ndim} axes, shape {values.shape}"
        )
    bad = ~np.isfinite(values) if values.dtype.kind == "f" else None
    if bad is not None and bad.any():
        raise ArgumentError(f"image: NaN or inf in {where(bad)}; replace them first")
    return values


def _axes(value: object, ndim: int) -> tuple[int, ...]:
    if value is None:
        if ndim == 4:
            raise ArgumentError("axes: a 4-D image needs axes= (its 3 spatial axes)")
        return tuple(range(ndim))
    items = [value] if is_number(value) else list(np.ravel(np.asarray(value, dtype=object)))
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in items):
        raise ArgumentError(f"axes: must be integers, got {value!r}")
    if any(not -ndim <= a < ndim for a in items):
        raise ArgumentError(f"axes: {value!r} is out of range for an image of {ndim} axes")
    axes = tuple(int(a) % ndim for a in items)
    if len(set(axes)) != len(axes) or len(axes) not in (2, 3) or ndim - len(axes) > 1:
        raise ArgumentError(
            f"axes: pick 2 or 3 distinct spatial axes, leaving at most one stack axis "
            f"(got {value!r} for {ndim} axes)"
        )
    return axes


def _spacing(value: object, count: int) -> np.ndarray:
    if value is None:
        return np.ones(count)
    items = [value] if is_number(value) else list(np.ravel(np.asarray(value, dtype=object)))
    if len(items) not in (1, count):
        raise ArgumentError(
            f"spacing: expected 1 or {count} values (one voxel size per spatial axis), "
            f"got {len(items)}"
        )
    sizes = [real("spacing", v, above=0.0) for v in items]
    return np.array(sizes * count if len(sizes) == 1 else sizes)


def _saturation(value: object, dtype: np.dtype) -> float | None:
    if value is None:
        return float(np.iinfo(dtype).max) if dtype.kind in "ui" else None
    return real("saturation", value)


def _degree(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"degree: must be an integer >= 0 or None, got {value!r}")
    if value < 0:
        raise ArgumentError(f"degree: must be an integer >= 0 or None, got {value!r}")
    return int(value)


def check_extent(plane: np.ndarray) -> None:
    """Refuse what holds no bead: a spatial axis under 8 px, or one value everywhere."""
    if min(plane.shape) < SMALLEST_AXIS:
        raise ArgumentError(
            f"image: each spatial axis needs at least {SMALLEST_AXIS} pixels to hold a bead "
            f"and its background, got {plane.shape}"
        )
    low, high = float(plane.min()), float(plane.max())
    if low == high:
        raise ArgumentError(f"image: every pixel is {low:g}: there are no beads to find")
