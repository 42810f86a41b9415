"""The NumPy (and dask) API: validate once, then hand the spec to the router (NumPy) or
to the chunked adapter (dask)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ..core.options import BlurOptions
from ..core.params import DEFAULT, fill_doc
from ..core.spec import BlurSpec
from ..engine import router
from .dask_chunks import blur_lazy


@fill_doc
def gaussian_blur(
    image: npt.ArrayLike,
    sigma: float | tuple[float, ...] | np.ndarray,
    *,
    mode: str | tuple[str, ...] = DEFAULT.mode,
    cval: float = DEFAULT.cval,
    truncate: float = DEFAULT.truncate,
    radius: int | tuple[int, ...] | None = DEFAULT.radius,
    axes: int | tuple[int, ...] | None = DEFAULT.axes,
    backend: str = DEFAULT.backend,
    precision: str | np.dtype = DEFAULT.precision,
    tolerance: float | None = DEFAULT.tolerance,
    mask: npt.ArrayLike | None = DEFAULT.mask,
    nan_policy: str = DEFAULT.nan_policy,
    channel_axis: int | None = DEFAULT.channel_axis,
    model: str = DEFAULT.model,
) -> np.ndarray:
    """Gaussian blur with a global sigma or a per-pixel sigma map.

    Parameters
    ----------
    image
        %(image)s
    sigma
        %(sigma)s
    mode
        %(mode)s
    cval
        %(cval)s
    truncate
        %(truncate)s
    radius
        %(radius)s
    axes
        %(axes)s
    backend
        %(backend)s
    precision
        %(precision)s
    tolerance
        %(tolerance)s
    mask
        %(mask)s
    nan_policy
        %(nan_policy)s
    channel_axis
        %(channel_axis)s
    model
        %(model)s
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
    spec = BlurSpec.build(image, sigma, BlurOptions.pick(locals()), mask)
    if spec.lazy:
        return blur_lazy(spec)
    return router.blur(spec)
