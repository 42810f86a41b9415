"""The public blur function: validate once, then hand a clean spec to a backend."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from . import backends
from .spec import BlurSpec


def gaussian_blur(
    image: npt.ArrayLike,
    sigma: float | tuple[float, ...] | np.ndarray,
    *,
    mode: str | tuple[str, ...] = "crop",
    cval: float = 0.0,
    truncate: float = 3.0,
    radius: int | tuple[int, ...] | None = None,
    axes: int | tuple[int, ...] | None = None,
    backend: str = "auto",
    precision: str | np.dtype = "float32",
    tolerance: float | None = None,
) -> np.ndarray:
    """Gaussian blur with a global sigma or a per-pixel sigma map.

    Parameters
    ----------
    image
        Real-valued array (bool, integer or float), ``ndim >= 1``.  Never modified.
    sigma
        Standard deviation in pixels, each value >= 0: a number (every blurred axis),
        a sequence with one number per blurred axis, or a NumPy *sigma map*: an array
        with the image's ndim that broadcasts to ``image.shape`` (one isotropic sigma
        per pixel), or of shape ``image.shape + (len(axes),)`` (one per pixel and axis).
    mode
        ``"crop"`` (default): the window is cut at the border and the kernel
        renormalised over the in-bounds taps.  Or one of scipy.ndimage's ``"reflect"``,
        ``"mirror"``, ``"nearest"``, ``"wrap"``, ``"constant"`` (and the aliases
        ``"grid-mirror"``, ``"grid-wrap"``, ``"grid-constant"``); or one mode per
        blurred axis.
    cval
        Value outside the image in ``"constant"`` mode.
    truncate
        The radius at a pixel is ``ceil(truncate * sigma)``, computed in float64.
    radius
        Explicit radius (one int or one per blurred axis); overrides ``truncate``.
        Global sigma only.
    axes
        Axes to blur (negative allowed); default all.  The others are batch axes.
    backend
        ``"auto"`` (JAX when it sees a GPU, else Numba), ``"numba"``, ``"jax"`` or
        ``"reference"`` (plain float64 NumPy).
    precision
        ``"float32"`` or ``"float64"``: the arithmetic and the result's dtype.
    tolerance
        ``None`` (default): the exact contract.  A number ``t`` in ``(0, 0.1]`` lets a
        sigma map be blurred by mixing a few global blurs per pixel, each output within
        ``t * (max - min)`` of the exact result (max/min over the values the blur
        reads: the image's finite values, and ``cval`` in constant mode; float32 adds
        its own rounding).  Used only when it is faster.  Ignored for a global sigma
        (already exact and fast).  Maps with at most 64 distinct values are blurred
        exactly by global passes whatever ``tolerance`` is.

    Returns
    -------
    numpy.ndarray or dask.array.Array
        The blurred image, same shape as ``image``, dtype ``precision``.  A dask
        ``image`` gives a lazy dask array, exact across chunk borders (the sigma map
        may then be a dask array too).

    Notes
    -----
    The full contract is in ``docs/contract.md``.  For a global sigma the result equals
    ``scipy.ndimage.gaussian_filter(image, sigma, mode=mode, cval=cval,
    radius=ceil(truncate * sigma))`` for every scipy mode.

    Examples
    --------
    >>> import numpy as np
    >>> from napari_varblur import gaussian_blur
    >>> image = np.zeros((5, 5)); image[2, 2] = 1
    >>> out = gaussian_blur(image, 1.0, backend="reference", precision="float64")
    >>> round(float(out.sum()), 12), out.shape
    (1.0, (5, 5))
    """
    options = dict(
        mode=mode,
        cval=cval,
        truncate=truncate,
        radius=radius,
        axes=axes,
        backend=backend,
        precision=precision,
        tolerance=tolerance,
    )
    spec = BlurSpec.from_args(image, sigma, **options)
    if spec.lazy:
        from .chunked import blur_lazy

        return blur_lazy(spec)
    if spec.image.size == 0:
        return np.empty(spec.shape, dtype=spec.precision)
    return backends.blur(spec)
