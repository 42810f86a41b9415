"""Argument validation and normalisation, done once.

:class:`BlurSpec` is the single place where user arguments are checked.  Every error a
user can trigger with bad arguments is raised here, at call time, with a message that
names the argument and the problem: for NumPy and dask inputs alike, and the JAX-native
API, the command line and the napari plugin call the same normalisers.  Backends receive
a valid spec and only do arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .checks import (
    ArgumentError,
    as_float,
    choice,
    is_dask_array,
    is_jax_array,
    is_number,
    is_traced,
    real,
    where,
)
from .modes import Mode, canonical_mode
from .options import BlurOptions
from .params import BACKENDS, MODELS, NAN_POLICIES, PRECISIONS
from .rules import MAX_GLOBAL_RADIUS, radius_of
from .shapes import broadcasts
from .sigma import map_with_channel_axis, normalize_sigma

__all__ = ["MAX_GLOBAL_RADIUS", "ArgumentError", "BlurSpec", "is_dask_array"]


def normalize_image_dtype(dtype: np.dtype) -> None:
    """Raise ``TypeError`` unless ``dtype`` is a real numeric (or bool) dtype."""
    if dtype.kind not in "biuf":
        raise ArgumentError(
            f"image: dtype {dtype} is not supported; the image must be real-valued "
            "(bool, integer or float)"
        )


def check_image(dtype: np.dtype, ndim: int) -> None:
    """Raise unless an image of this dtype and ndim can be blurred."""
    normalize_image_dtype(np.dtype(dtype))
    if ndim == 0:
        raise ArgumentError("image: a 0-d (scalar) image cannot be blurred; need ndim >= 1")


def normalize_image(image: object) -> Any:
    """The image as a NumPy array (a dask or JAX array stays as it is), checked for dtype
    and ndim."""
    arr = image if is_dask_array(image) or is_jax_array(image) else np.asarray(image)
    check_image(arr.dtype, arr.ndim)
    return arr


def normalize_axes(axes: object, ndim: int) -> tuple[int, ...]:
    """Return the blurred axes as non-negative ints, in the order given."""
    if axes is None:
        return tuple(range(ndim))
    items = [axes] if isinstance(axes, numbers.Integral) else axes
    if isinstance(items, (str, bytes)) or not isinstance(items, (Sequence, np.ndarray)):
        raise ArgumentError(f"axes: expected an int or a sequence of ints, got {axes!r}")
    out = []
    for a in items:
        if not isinstance(a, numbers.Integral) or isinstance(a, bool):
            raise ArgumentError(f"axes: expected integers, got {a!r} in {axes!r}")
        if not -ndim <= a < ndim:
            raise ArgumentError(f"axes: axis {a} is out of range for a {ndim}-D image")
        out.append(int(a) % ndim)
    if len(set(out)) != len(out):
        raise ArgumentError(f"axes: duplicate axes in {axes!r} for a {ndim}-D image")
    return tuple(out)


def normalize_channel_axis(
    channel_axis: object, axes: object, ndim: int
) -> tuple[int | None, tuple[int, ...]]:
    """``channel_axis`` (never blurred; scikit-image's convention) as a non-negative
    int or ``None``, and the blurred axes: ``axes``, or every other axis when ``axes``
    is ``None``.  ``axes`` that include the channel axis are refused."""
    if channel_axis is None:
        return None, normalize_axes(axes, ndim)
    if not isinstance(channel_axis, numbers.Integral) or isinstance(channel_axis, bool):
        raise ArgumentError(f"channel_axis: expected an int or None, got {channel_axis!r}")
    if not -ndim <= channel_axis < ndim:
        raise ArgumentError(
            f"channel_axis: axis {channel_axis} is out of range for a {ndim}-D image"
        )
    channel = int(channel_axis) % ndim
    if axes is None:
        return channel, tuple(a for a in range(ndim) if a != channel)
    blurred = normalize_axes(axes, ndim)
    if channel in blurred:
        raise ArgumentError(
            f"axes: {axes!r} includes the channel axis {channel} (channel_axis is never "
            "blurred); leave it out of axes"
        )
    return channel, blurred


def mask_with_channel_axis(mask: Any, image_shape: tuple[int, ...], channel: int) -> Any:
    """A mask given without the channel axis, with a length-1 axis there, unless it
    already broadcasts to the image."""
    arr = mask if is_dask_array(mask) or isinstance(mask, np.ndarray) else np.asarray(mask)
    if broadcasts(arr.shape, image_shape, leading=True) or arr.ndim != len(image_shape) - 1:
        return arr  # normalize_mask reports it
    return arr.reshape(arr.shape[:channel] + (1,) + arr.shape[channel:])


def normalize_modes(mode: object, naxes: int) -> tuple[Mode, ...]:
    """Return one :class:`~napari_varblur.core.modes.Mode` per blurred axis."""
    if isinstance(mode, (str, Mode)):
        return (canonical_mode(mode),) * naxes
    if not isinstance(mode, Sequence):
        raise ArgumentError(f"mode: expected a mode name or one per blurred axis, got {mode!r}")
    if len(mode) != naxes:
        raise ArgumentError(
            f"mode: got {len(mode)} modes for {naxes} blurred axes; give one mode or one per axis"
        )
    return tuple(canonical_mode(m) for m in mode)


def normalize_cval(cval: object) -> float:
    """Any real number (NaN and inf too: they propagate like scipy's)."""
    return real("cval", cval, finite=False)


def normalize_truncate(truncate: object) -> float:
    return real("truncate", truncate, above=0)


def normalize_radius(radius: object, naxes: int, name: str = "radius") -> tuple[int, ...] | None:
    """Return one non-negative int radius per blurred axis, or ``None``."""
    if radius is None:
        return None
    sequence = isinstance(radius, (Sequence, np.ndarray))
    items = list(radius) if sequence else [radius] * naxes  # type: ignore[arg-type]
    if len(items) != naxes:
        raise ArgumentError(
            f"{name}: got {len(items)} values for {naxes} blurred axes; give one or one per axis"
        )
    for r in items:
        if not isinstance(r, numbers.Integral) or isinstance(r, bool) or r < 0:
            raise ArgumentError(f"{name}: must be a non-negative integer, got {r!r}")
        if r > MAX_GLOBAL_RADIUS:
            raise ArgumentError(f"{name}: {r} is too large (limit {MAX_GLOBAL_RADIUS})")
    return tuple(int(r) for r in items)


#: Largest tolerance the approximate map blur accepts (a fraction of the value range).
MAX_TOLERANCE = 0.1


def normalize_tolerance(tolerance: object) -> float | None:
    """``None`` (the exact contract) or a finite number in ``(0, MAX_TOLERANCE]``."""
    if tolerance is None:
        return None
    if (
        not is_number(tolerance)
        or not math.isfinite(as_float(tolerance))
        or not 0 < tolerance <= MAX_TOLERANCE
    ):
        raise ArgumentError(
            f"tolerance: must be None (exact) or a number in (0, {MAX_TOLERANCE}], "
            f"got {tolerance!r}"
        )
    return float(tolerance)


def normalize_nan_policy(nan_policy: object) -> str:
    return choice("nan_policy", nan_policy, NAN_POLICIES, "policy", "policies")


def _mask_values_error(mask: Any) -> ArgumentError:
    bad = (np.asarray(mask) != 0) & (np.asarray(mask) != 1)  # NaN is neither
    value = np.asarray(mask)[tuple(np.argwhere(bad)[0])]
    return ArgumentError(
        f"mask: a numeric mask must hold only 0 and 1 (1 = valid pixel), found {value!r} "
        f"in {where(bad)}"
    )


def normalize_mask(mask: object, image_shape: tuple[int, ...]) -> Any:
    """``None``, or a boolean mask (True = valid) with the image's ndim that broadcasts
    to ``image_shape`` (length 1 where it does not vary).  A NumPy mask is never
    modified (a numeric one is converted into a new array); a dask mask stays lazy
    (its values are checked now, in one pass)."""
    if mask is None:
        return None
    arr = mask if is_dask_array(mask) or is_traced(mask) else np.asarray(mask)
    if np.dtype(arr.dtype).kind not in "biuf":
        raise ArgumentError(
            f"mask: dtype {arr.dtype} is not supported; a mask must be boolean or numeric "
            "0/1 (True or 1 = valid pixel)"
        )
    shape = tuple(image_shape)
    if not broadcasts(arr.shape, shape, leading=True):
        raise ArgumentError(
            f"mask: shape {tuple(arr.shape)} does not broadcast to the image's shape {shape}"
        )
    arr = arr.reshape((1,) * (len(shape) - arr.ndim) + tuple(arr.shape))
    if np.dtype(arr.dtype).kind == "b":
        return arr
    if is_traced(arr):  # its values are unknown: any non-zero value is valid
        return arr != 0
    invalid = (arr != 0) & (arr != 1)
    if bool(invalid.any()):  # computes a dask mask's check
        raise _mask_values_error(arr)
    return arr != 0


def check_finite_values(
    image: Any,
    mask: Any,
    modes: tuple[Mode, ...],
    cval: float,
    sigma_max: tuple[float, ...] | None = None,
) -> None:
    """``nan_policy="raise"``: refuse NaN or inf in the valid pixels, and a non-finite
    ``cval`` that a constant-mode axis would read (one that blurs: its largest sigma,
    when known, is not 0)."""
    blurs = sigma_max or (1.0,) * len(modes)
    reads_cval = any(m.name == "constant" and s > 0 for m, s in zip(modes, blurs))
    if reads_cval and not math.isfinite(cval):
        raise ArgumentError(f"cval: is {cval} and nan_policy='raise' refuses non-finite values")
    if image.dtype.kind != "f" or image.size == 0:
        return
    bad = ~np.isfinite(image)
    if mask is not None:
        bad = bad & mask
    if bool(bad.any()):  # computes a dask image's check
        raise ArgumentError(
            "image: nan_policy='raise' and the image has non-finite (NaN or inf) values in "
            f"{where(np.asarray(bad))}; use nan_policy='omit' to leave them out"
        )


def normalize_precision(precision: object) -> np.dtype:
    """``"float32"`` or ``"float64"`` (a NumPy dtype or type too), as a dtype."""
    try:  # np.dtype(None) is float64: None is refused, not a silent default
        name = None if precision is None else np.dtype(precision).name
    except TypeError:
        name = None
    return np.dtype(choice("precision", name if name in PRECISIONS else precision,
                           PRECISIONS, "precision"))  # fmt: skip


def normalize_backend(backend: object) -> str:
    return choice("backend", backend, BACKENDS, "backend")


def check_radii(
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    modes: tuple[Mode, ...],
    truncate: float,
    sigma_max: tuple[float, ...],
    *,
    radius: tuple[int, ...] | None = None,
    maps: tuple[np.ndarray, ...] | None = None,
) -> None:
    """Refuse radii no backend can build.  ``sigma_max`` is each axis's largest sigma;
    ``maps`` (NumPy sigma maps, when there are any) locate the first offending pixel."""
    for i, axis in enumerate(axes):
        n = shape[axis]
        if sigma_max[i] == 0:
            continue
        r = float(radius_of(sigma_max[i], truncate)) if radius is None else radius[i]
        if maps is None and not r <= MAX_GLOBAL_RADIUS:  # also inf from overflow
            raise ArgumentError(
                f"sigma: radius {r:.0f} on axis {axis} is too large (limit "
                f"{MAX_GLOBAL_RADIUS}); lower sigma or truncate"
            )
        allowed = modes[i].map_allowed(n)
        if maps is not None and allowed is not None and r > allowed:
            where = ""
            if not is_dask_array(maps[i]):
                too_far = radius_of(maps[i], truncate) > allowed
                where = f" (at index {tuple(int(j) for j in np.argwhere(too_far)[0])})"
            raise ArgumentError(
                f"sigma: the sigma map needs radius {r:.0f} on axis {axis}{where}, far "
                f"beyond that axis's {n} pixels; in mode {modes[i].name!r} a sigma map "
                f"supports radii up to {allowed}. Use mode='crop', a smaller sigma or "
                "truncate, or a global sigma"
            )


@dataclass(frozen=True)
class BlurSpec:
    """A validated, normalised blur request.

    Attributes
    ----------
    image
        The input as a NumPy array (the caller's object, never written to), or a dask
        array (then :mod:`napari_varblur.adapters.dask_chunks` runs it chunk by chunk).
    axes
        Blurred axes, non-negative, in the order given.
    sigma
        One sigma per blurred axis for a global blur, else ``None``.
    sigma_map
        For a spatially varying blur, one float32 or float64 array (NumPy or dask) per
        blurred axis, each broadcastable to ``image.shape``; else ``None``.
    isotropic
        The map holds one sigma per pixel for every axis (``sigma_map`` repeats it).
    sigma_max
        Each blurred axis's largest sigma (the global sigma itself, or the map's maximum).
    radius
        One radius per blurred axis when given explicitly, else ``None``.
    modes
        One :class:`~napari_varblur.core.modes.Mode` per blurred axis.
    tolerance
        ``None`` for the exact contract, else the allowed error of a sigma-map blur as
        a fraction of the value range (:mod:`napari_varblur.core.levels`).
    mask
        ``None``, or a boolean array (True = valid) with the image's ndim that
        broadcasts to its shape (NumPy or dask): the blur reads valid taps only.
    nan_policy
        ``"propagate"``, ``"omit"`` (non-finite pixels count as masked) or ``"raise"``
        (already checked: the valid pixels are finite).
    """

    image: Any
    axes: tuple[int, ...]
    sigma: tuple[float, ...] | None
    sigma_map: tuple[Any, ...] | None
    isotropic: bool
    sigma_max: tuple[float, ...]
    radius: tuple[int, ...] | None
    modes: tuple[Mode, ...]
    cval: float
    truncate: float
    backend: str
    precision: np.dtype
    tolerance: float | None = None
    mask: Any = None
    nan_policy: str = NAN_POLICIES[0]
    #: ``"gather"`` or ``"scatter"`` (the transpose).
    model: str = MODELS[0]

    @property
    def masked(self) -> bool:
        """Whether the blur is a normalised convolution (:mod:`napari_varblur.engine.masked`)."""
        return self.mask is not None or self.nan_policy == "omit"

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.image.shape)

    @property
    def lazy(self) -> bool:
        """Whether the image or the map is a dask array."""
        arrays = (self.image, self.mask, *(self.sigma_map or ()))
        return any(is_dask_array(a) for a in arrays)

    #: A traced sigma's static largest radius per blurred axis (the JAX-native API's
    #: ``max_radius``); ``None`` for a concrete sigma.
    max_radius: tuple[int, ...] | None = None

    @classmethod
    def build(
        cls, image: object, sigma: object, options: BlurOptions, mask: object = None
    ) -> BlurSpec:
        """Validate the arguments of :func:`napari_varblur.gaussian_blur`: the image,
        the sigma, the settings (:class:`~napari_varblur.core.options.BlurOptions`) and
        the mask."""
        arr = normalize_image(image)
        return cls.checked(arr, sigma, normalize_options(arr.ndim, options), mask)

    @classmethod
    def from_args(cls, image: object, sigma: object, *, mask: object = None, **options) -> BlurSpec:
        """:meth:`build` from keywords (those of ``gaussian_blur``), for scripts and tests."""
        return cls.build(image, sigma, BlurOptions(**options), mask)

    @classmethod
    def checked(cls, arr: Any, sigma: object, options: dict, mask: object) -> BlurSpec:
        """The checks that follow :func:`normalize_options`: mask, sigma, radii and
        ``nan_policy="raise"``.  ``arr`` is a normalised image (NumPy, dask, or a JAX
        array for the JAX-native API, which also passes traced masks)."""
        shape = tuple(arr.shape)
        blurred = options["axes"]
        sigma, valid = normalize_map_and_mask(sigma, mask, shape, options)
        sig, smap, isotropic, sigma_max = normalize_sigma(sigma, shape, len(blurred),
                                                           options["radius"])  # fmt: skip
        modes, fill, trunc = options["modes"], options["cval"], options["truncate"]
        check_radii(shape, blurred, modes, trunc, sigma_max, radius=options["radius"], maps=smap)
        if options["nan_policy"] == "raise":
            check_finite_values(arr, valid, modes, fill, sigma_max)
        return cls(
            image=arr,
            axes=blurred,
            sigma=sig,
            sigma_map=smap,
            isotropic=isotropic,
            sigma_max=sigma_max,
            radius=options["radius"],
            modes=modes,
            cval=fill,
            truncate=trunc,
            backend=options["backend"],
            precision=options["precision"],
            tolerance=options["tolerance"],
            mask=valid,
            nan_policy=options["nan_policy"],
            model=options["model"],
        )


def normalize_map_and_mask(sigma: object, mask: object, shape: tuple[int, ...], options: dict):
    """A sigma map (NumPy, dask or JAX, traced too) given without the channel axis gets a
    length-1 axis there; the mask likewise, then normalised (:func:`normalize_mask`).
    Returns the sigma and the valid pixels."""
    channel = options["channel"]
    if channel is not None and mask is not None:
        mask = mask_with_channel_axis(mask, shape, channel)
    array = is_dask_array(sigma) or is_jax_array(sigma) or isinstance(sigma, np.ndarray)
    if channel is not None and array:
        sigma = map_with_channel_axis(sigma, shape, len(options["axes"]), channel)
    return sigma, normalize_mask(mask, shape)


def normalize_options(ndim: int, options: BlurOptions) -> dict:
    """A blur's settings checked in one order, so every API given the same bad
    arguments raises the same first error; returns them normalised."""
    channel, blurred = normalize_channel_axis(options.channel_axis, options.axes, ndim)
    k = len(blurred)
    return dict(
        channel=channel,
        axes=blurred,
        modes=normalize_modes(options.mode, k),
        cval=normalize_cval(options.cval),
        truncate=normalize_truncate(options.truncate),
        radius=normalize_radius(options.radius, k),
        tolerance=normalize_tolerance(options.tolerance),
        nan_policy=normalize_nan_policy(options.nan_policy),
        precision=normalize_precision(options.precision),
        backend=normalize_backend(options.backend),
        model=choice("model", options.model, MODELS, "model"),
    )
