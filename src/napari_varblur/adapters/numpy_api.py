"""The NumPy (and dask) API: validate once, then hand the spec to the router (NumPy) or
to the chunked adapter (dask)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..core.spec import BlurSpec
from ..engine import router
from .dask_chunks import blur_lazy


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
    mask: npt.ArrayLike | None = None,
    nan_policy: str = "propagate",
    channel_axis: int | None = None,
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
        exactly by global passes whatever ``tolerance`` is.  With a ``mask`` or
        ``nan_policy="omit"`` the bound holds for the sums of valid taps; the result
        is their ratio, so divide ``t`` by the valid share of a pixel's kernel.
    mask
        Boolean (or 0/1 numeric) array that broadcasts to ``image.shape``; True (1)
        marks a valid pixel.  The blur is then a normalised convolution: each output
        is the Gaussian-weighted mean of the *valid* taps of its window (same weights
        and radii as without a mask), masked pixels included (they are filled from
        their valid neighbours), and NaN where a window holds no valid tap.  Edge
        modes extend the mask with the image; constant-mode taps read ``cval`` and
        are valid; crop's out-of-bounds taps are not.  Never modified.
    nan_policy
        ``"propagate"`` (default): NaN and inf spread over their windows.
        ``"omit"``: non-finite pixels count as masked (a non-finite ``cval`` too).
        ``"raise"``: ``ValueError`` if a valid pixel (or a ``cval`` that constant mode
        reads) is NaN or inf; finite data is blurred as with ``"propagate"``.
    channel_axis
        The axis of colour or other channels (scikit-image's convention): never
        blurred.  With ``axes=None`` every other axis is blurred; ``axes`` that include
        it are a ``ValueError``.  A sigma map (or mask) may then omit that axis: it
        applies to every channel.

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

    A dead pixel left out and filled from its neighbours:

    >>> image = np.ones((5, 5)); image[2, 2] = np.nan
    >>> out = gaussian_blur(image, 1.0, nan_policy="omit")
    >>> float(out[2, 2])
    1.0
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
        mask=mask,
        nan_policy=nan_policy,
        channel_axis=channel_axis,
    )
    spec = BlurSpec.from_args(image, sigma, **options)
    if spec.lazy:
        return blur_lazy(spec)
    return router.blur(spec)
