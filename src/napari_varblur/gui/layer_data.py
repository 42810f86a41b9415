"""What a napari layer holds for a blur: its data (at a multiscale level), the axes a
choice blurs, its pixel sizes and units."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from napari.layers import Image, Layer

from ..core.params import DEFAULT
from ..core.spec import is_dask_array, normalize_axes

#: How the blurred axes are chosen from a layer.
AXES_CHOICES = {
    "2d": "2-D per plane (Y, X)",
    "3d": "3-D volume (Z, Y, X)",
    "all": "all axes",
}


def _layer_data(layer: object, what: str, level: int | None) -> np.ndarray:
    if not isinstance(layer, Image):
        kind = type(layer).__name__
        raise TypeError(
            f"{what}: {getattr(layer, 'name', layer)!r} is a {kind} layer; "
            "VarBlur blurs Image layers"
        )
    if layer.multiscale:
        if level is None:
            raise ValueError(
                f"{what}: {layer.name!r} is multiscale with {len(layer.data)} levels; "
                "choose a level to blur"
            )
        if not 0 <= level < len(layer.data):
            raise ValueError(f"{what}: level {level} is out of range for {layer.name!r}")
        return _array(layer.data[level])
    return _array(layer.data)


def _array(data):
    """Dask arrays stay lazy; everything else becomes a NumPy array (no copy if it is)."""
    return data if is_dask_array(data) else np.asarray(data)


def blurred_axes(layer: Image, axes: str | Sequence[int]) -> tuple[int, ...]:
    """The blurred axes for a choice in :data:`AXES_CHOICES` or explicit indices."""
    ndim = np.ndim(layer.data[0]) if layer.multiscale else np.ndim(layer.data)
    spatial = ndim - 1 if layer.rgb else ndim
    if isinstance(axes, str):
        counts = {"2d": 2, "3d": 3, "all": spatial}
        if axes not in counts:
            raise ValueError(
                f"axes: unknown choice {axes!r}; valid choices are "
                + ", ".join(repr(a) for a in counts)
            )
        count = counts[axes]
        if count > spatial:
            raise ValueError(
                f"axes: {AXES_CHOICES[axes]!r} needs {count} spatial axes, but "
                f"{layer.name!r} has {spatial}"
            )
        return tuple(range(spatial - count, spatial))
    # Explicit axes index the layer's data (an RGB layer's channel axis included).
    return normalize_axes(axes, ndim)


def level_factors(layer: Image, level: int | None) -> tuple[float, ...]:
    """How much coarser ``level`` of a multiscale layer is than its level 0, per axis of
    the layer's world (ones for any other layer, or no level)."""
    if not layer.multiscale or level is None:
        return (1.0,) * layer.ndim
    return tuple(float(f) for f in layer.downsample_factors[level][: layer.ndim])


def level_choices(layer: Image) -> list[tuple[str, int]]:
    """A multiscale layer's levels as (label, index): "1: 2048×2048 (16 MiB)", the size
    of the level's float32 result."""
    return [(f"{k}: {'×'.join(str(int(n)) for n in shape)} ({_size(np.prod(shape) * 4)})", k)
            for k, shape in enumerate(layer.level_shapes)]  # fmt: skip


def default_level(
    layer: Image, precision: str = DEFAULT.precision, available: int | None = None
) -> int:
    """The finest level of a multiscale layer whose blur fits in memory: its data, its
    result and one scratch copy in ``precision`` within half of the ``available`` bytes
    (default: what the machine has free now); the coarsest if none does."""
    if available is None:
        import psutil

        available = psutil.virtual_memory().available
    itemsize = np.dtype(precision).itemsize
    for k, shape in enumerate(layer.level_shapes):
        if 3 * float(np.prod(shape)) * itemsize <= available / 2:
            return k
    return len(layer.level_shapes) - 1


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return ""  # pragma: no cover


def _world_scale(layer: Image, axes: tuple[int, ...], factors: Sequence[float]) -> np.ndarray:
    """The pixel size on each blurred axis: the layer's scale (times a multiscale level's
    downsampling).  An RGB layer's channel axis has none."""
    scale = np.asarray(layer.scale, dtype=np.float64) * np.asarray(factors)
    unscaled = [a for a in axes if a >= len(scale)]
    if unscaled:
        raise ValueError(
            f"axes: axis {unscaled[0]} is the colour channel axis of {layer.name!r}, which "
            "has no world scale; leave it out or turn off sigma in world units"
        )
    return scale[list(axes)]


def _units(layer: Image, axes: tuple[int, ...]) -> str:
    """The world unit of the blurred axes, abbreviated ("µm"; napari's default "pixel"
    is "px"); several, joined by "/" when the axes differ."""
    units = getattr(layer, "units", None) or ()
    names = [f"{units[a]:~}" if a < len(units) else "px" for a in axes]
    names = ["px" if n == "pixel" else n for n in names]
    return "/".join(dict.fromkeys(names))


def _level_of(layer: Layer, where: str, level: int | None):
    """A layer's data, at ``level`` when it is multiscale."""
    if not layer.multiscale:
        return layer.data
    if level is None or not 0 <= level < len(layer.data):
        raise ValueError(
            f"{where}: is multiscale with {len(layer.data)} levels; it is read at the "
            f"image's level, and level {level} is not one of them"
        )
    return layer.data[level]
