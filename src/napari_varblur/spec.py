"""Argument validation and normalisation, done once.

:class:`BlurSpec` is the single place where user arguments are checked.  Every error a
user can trigger with bad arguments is raised here, with a message that names the
argument and the problem.  Backends receive a valid spec and only do arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .boundary import canonical_mode

BACKENDS: tuple[str, ...] = ("auto", "numba", "jax", "reference")
PRECISIONS: tuple[str, ...] = ("float32", "float64")

#: Largest kernel radius we build for a global sigma; beyond it the kernel alone would
#: take gigabytes.  (Radii larger than the axis are folded, so this is never needed.)
MAX_GLOBAL_RADIUS = 50_000_000


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _where(mask: np.ndarray) -> str:
    """Describe how many entries of ``mask`` are set and where the first one is."""
    count = int(np.count_nonzero(mask))
    first = tuple(int(i) for i in np.argwhere(mask)[0])
    return f"{count} value{'s' if count != 1 else ''} (first at index {first})"


def normalize_image_dtype(dtype: np.dtype) -> None:
    """Raise ``TypeError`` unless ``dtype`` is a real numeric (or bool) dtype."""
    if dtype.kind not in "biuf":
        raise TypeError(
            f"image: dtype {dtype} is not supported; the image must be real-valued "
            "(bool, integer or float)"
        )


def normalize_axes(axes: object, ndim: int) -> tuple[int, ...]:
    """Return the blurred axes as non-negative ints, in the order given."""
    if axes is None:
        return tuple(range(ndim))
    items = [axes] if isinstance(axes, numbers.Integral) else axes
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"axes: expected an int or a sequence of ints, got {axes!r}")
    out = []
    for a in items:
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise TypeError(f"axes: expected integers, got {a!r} in {axes!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"axes: axis {a} is out of range for a {ndim}-D image")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"axes: duplicate axes in {axes!r} for a {ndim}-D image")
    return tuple(out)


def normalize_modes(mode: object, naxes: int) -> tuple[str, ...]:
    """Return one canonical mode name per blurred axis."""
    if isinstance(mode, str):
        return (canonical_mode(mode),) * naxes
    if not isinstance(mode, Sequence):
        raise ValueError(f"mode: expected a mode name or one per blurred axis, got {mode!r}")
    if len(mode) != naxes:
        raise ValueError(
            f"mode: got {len(mode)} modes for {naxes} blurred axes; give one mode or one per axis"
        )
    return tuple(canonical_mode(m) for m in mode)


def normalize_truncate(truncate: object) -> float:
    if not _is_number(truncate) or not math.isfinite(truncate) or truncate <= 0:
        raise ValueError(f"truncate: must be a finite number > 0, got {truncate!r}")
    return float(truncate)


def normalize_radius(radius: object, naxes: int) -> tuple[int, ...] | None:
    """Return one non-negative int radius per blurred axis, or ``None``."""
    if radius is None:
        return None
    sequence = isinstance(radius, (Sequence, np.ndarray))
    items = list(radius) if sequence else [radius] * naxes  # type: ignore[arg-type]
    if len(items) != naxes:
        raise ValueError(
            f"radius: got {len(items)} values for {naxes} blurred axes; give one or one per axis"
        )
    out = []
    for r in items:
        if not isinstance(r, numbers.Integral) or isinstance(r, bool):
            raise ValueError(f"radius: must be a non-negative integer, got {r!r}")
        if r < 0:
            raise ValueError(f"radius: must be a non-negative integer, got {r!r}")
        out.append(int(r))
    return tuple(out)


def normalize_precision(precision: object) -> np.dtype:
    try:
        dtype = np.dtype(precision)
    except TypeError:
        dtype = None
    if dtype is None or dtype.name not in PRECISIONS:
        raise ValueError(
            f"precision: unknown precision {precision!r}; valid precisions are "
            + ", ".join(repr(p) for p in PRECISIONS)
        )
    return dtype


def normalize_backend(backend: object) -> str:
    if backend not in BACKENDS:
        raise ValueError(
            f"backend: unknown backend {backend!r}; valid backends are "
            + ", ".join(repr(b) for b in BACKENDS)
        )
    return str(backend)


def check_sigma_values(values: np.ndarray, what: str) -> None:
    """Raise ``ValueError`` if any sigma is NaN, infinite or negative."""
    bad_nan = np.isnan(values)
    if bad_nan.any():
        raise ValueError(f"sigma: {what} has NaN in {_where(bad_nan)}; sigma must be finite")
    bad_inf = np.isinf(values)
    if bad_inf.any():
        raise ValueError(f"sigma: {what} is infinite in {_where(bad_inf)}; sigma must be finite")
    bad_neg = values < 0
    if bad_neg.any():
        raise ValueError(f"sigma: {what} is negative in {_where(bad_neg)}; sigma must be >= 0")


def normalize_global_sigma(sigma: object, naxes: int) -> tuple[float, ...]:
    """One float sigma per blurred axis from a number or a sequence."""
    if _is_number(sigma):
        if not math.isfinite(sigma) or sigma < 0:
            raise ValueError(f"sigma: must be a finite number >= 0, got {sigma!r}")
        values = [sigma] * naxes
    else:
        values = list(sigma)  # type: ignore[arg-type]
        if len(values) != naxes:
            raise ValueError(
                f"sigma: got {len(values)} values for {naxes} blurred axes; "
                "give one sigma or one per blurred axis"
            )
        for v in values:
            if not _is_number(v):
                raise TypeError(f"sigma: expected numbers, got {v!r}")
    arr = np.asarray(values, dtype=np.float64)
    check_sigma_values(arr, "per-axis sigma")
    return tuple(float(v) for v in arr)


def map_layout(map_shape: tuple[int, ...], image_shape: tuple[int, ...], naxes: int) -> bool:
    """Check a sigma map's shape; return ``True`` if it holds one sigma per blurred axis.

    An isotropic map has the image's ndim and broadcasts to the image's shape; a
    per-axis map has an extra trailing axis of length ``len(axes)``.
    """
    ndim = len(image_shape)

    def broadcasts(shape: tuple[int, ...]) -> bool:
        return all(s in (1, n) for s, n in zip(shape, image_shape))

    if len(map_shape) == ndim and broadcasts(map_shape):
        return False
    if len(map_shape) == ndim + 1 and map_shape[-1] == naxes and broadcasts(map_shape[:-1]):
        return True
    raise ValueError(
        f"sigma: a sigma map of shape {tuple(map_shape)} does not fit an image of shape "
        f"{tuple(image_shape)}; expected a shape that broadcasts to {tuple(image_shape)} "
        f"(one sigma per pixel) or {tuple(image_shape) + (naxes,)} (one per pixel and axis)"
    )


@dataclass(frozen=True)
class BlurSpec:
    """A validated, normalised blur request.

    Attributes
    ----------
    image
        The input as a NumPy array (the caller's object, never written to).
    axes
        Blurred axes, non-negative, in the order given.
    sigma
        One sigma per blurred axis for a global blur, else ``None``.
    sigma_map
        For a spatially varying blur, one float32 or float64 array per blurred axis,
        each broadcastable to ``image.shape`` (the same object on every axis for an
        isotropic map); else ``None``.
    radius
        One radius per blurred axis when given explicitly, else ``None``.
    modes
        One canonical mode name per blurred axis.
    """

    image: np.ndarray
    axes: tuple[int, ...]
    sigma: tuple[float, ...] | None
    sigma_map: tuple[np.ndarray, ...] | None
    radius: tuple[int, ...] | None
    modes: tuple[str, ...]
    cval: float
    truncate: float
    backend: str
    precision: np.dtype
    #: Internal: a floor for each axis's padding in a sigma-map blur, so that chunks of
    #: one array share static shapes (and JAX compiles once per chunk shape).
    map_pads: tuple[int, ...] | None = None

    @property
    def shape(self) -> tuple[int, ...]:
        return self.image.shape

    @classmethod
    def from_args(
        cls,
        image: object,
        sigma: object,
        *,
        mode: object = "crop",
        cval: object = 0.0,
        truncate: object = 3.0,
        radius: object = None,
        axes: object = None,
        backend: object = "auto",
        precision: object = "float32",
    ) -> BlurSpec:
        """Validate the arguments of :func:`napari_varblur.gaussian_blur`."""
        arr = np.asarray(image)
        normalize_image_dtype(arr.dtype)
        if arr.ndim == 0:
            raise ValueError("image: a 0-d (scalar) image cannot be blurred; need ndim >= 1")
        blurred = normalize_axes(axes, arr.ndim)
        k = len(blurred)
        modes = normalize_modes(mode, k)
        if not _is_number(cval):
            raise ValueError(f"cval: must be a real number, got {cval!r}")
        trunc = normalize_truncate(truncate)
        rad = normalize_radius(radius, k)
        prec = normalize_precision(precision)
        name = normalize_backend(backend)

        sig: tuple[float, ...] | None = None
        smap: tuple[np.ndarray, ...] | None = None
        if isinstance(sigma, np.ndarray) and sigma.ndim == 0:
            sigma = sigma.item()
        if isinstance(sigma, np.ndarray) and not (sigma.ndim == 1 and arr.ndim != 1):
            if sigma.dtype.kind not in "biuf":
                raise TypeError(f"sigma: a sigma map must be real-valued, got dtype {sigma.dtype}")
            if rad is not None:
                raise ValueError(
                    "radius: cannot be combined with a sigma map (each pixel's radius comes "
                    "from its sigma and truncate)"
                )
            per_axis = map_layout(sigma.shape, arr.shape, k)
            # float32 maps stay float32 (their float64 value is exact); others widen.
            keep = sigma.dtype in (np.float32, np.float64)
            values = sigma if keep else sigma.astype(np.float64)
            check_sigma_values(values, "the sigma map")
            smap = tuple(values[..., i] for i in range(k)) if per_axis else (values,) * k
        elif _is_number(sigma) or (
            isinstance(sigma, (Sequence, np.ndarray)) and not isinstance(sigma, (str, bytes))
        ):
            sig = normalize_global_sigma(sigma, k)
        else:
            raise TypeError(
                f"sigma: expected a number, one number per blurred axis, or a NumPy sigma "
                f"map, got {type(sigma).__name__}"
            )
        return cls(
            image=arr,
            axes=blurred,
            sigma=sig,
            sigma_map=smap,
            radius=rad,
            modes=modes,
            cval=float(cval),
            truncate=trunc,
            backend=name,
            precision=prec,
        )
