"""``deblur``: spatially varying Richardson-Lucy and RL-TV, for NumPy and dask images."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from ..core.options import BlurOptions, DeblurOptions
from ..core.params import DEBLUR_DEFAULT as DEFAULT
from ..core.params import fill_deblur_doc
from ..core.spec import BlurSpec
from .settings import settings
from .solve import deblur_spec
from .tiled import deblur_lazy

#: A dask image is deblurred tile by tile, each tile with a halo of this many times
#: the largest radius (see docs/deblur.md for the difference this leaves).
HALO_RADII = 4


@fill_deblur_doc
def deblur(
    image: npt.ArrayLike,
    sigma: float | tuple[float, ...] | np.ndarray,
    *,
    iterations: int,
    method: str = DEFAULT.method,
    regularization: float = DEFAULT.regularization,
    model: str = DEFAULT.model,
    acceleration: bool = DEFAULT.acceleration,
    stop: float | None = DEFAULT.stop,
    callback: Callable[[int, np.ndarray], bool | None] | None = DEFAULT.callback,
    pixel_spacing: float | tuple[float, ...] | None = DEFAULT.pixel_spacing,
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
) -> np.ndarray:
    """Undo a Gaussian blur with a global sigma or a per-pixel sigma map.

    The observed ``image`` is taken as Poisson counts of the blur of an unknown
    non-negative image (the blur ``gaussian_blur(..., model=model)`` with the same
    keywords); the estimate maximises their likelihood (Richardson-Lucy), optionally
    with a total-variation penalty (RL-TV).  It starts flat, like scikit-image's
    ``richardson_lucy`` (any flat start gives the same iterates).

    Parameters
    ----------
    image
        %(image)s
    sigma
        %(sigma)s
    iterations
        %(iterations)s
    method
        %(method)s
    regularization
        %(regularization)s
    model
        %(model)s
    acceleration
        %(acceleration)s
    stop
        %(stop)s
    callback
        %(callback)s
    pixel_spacing
        %(pixel_spacing)s
    mode
        %(mode)s
    cval
        %(cval)s  In ``deblur`` the fill is a known background: the model is
        ``A x + fill`` (with ``model="gather"``).
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

    Returns
    -------
    numpy.ndarray or dask.array.Array
        The estimate: the image's shape, dtype ``precision``, finite and non-negative
        (negative observed values count as 0).  A dask image gives a lazy array,
        deblurred tile by tile with a halo of four radii.

    Examples
    --------
    >>> import numpy as np
    >>> from napari_varblur import deblur, gaussian_blur
    >>> truth = np.zeros((32, 32)); truth[16, 16] = 100.0
    >>> observed = gaussian_blur(truth, 2.0, precision="float64")
    >>> estimate = deblur(observed, 2.0, iterations=200, precision="float64")
    >>> bool(estimate[16, 16] > 5 * observed[16, 16])
    True
    """
    spec, chosen = checked(image, sigma, mask, DeblurOptions.pick(locals()), callback)
    if spec.lazy:
        return deblur_lazy(spec, chosen, HALO_RADII)
    return deblur_spec(spec, chosen)


def checked(image, sigma, mask, options: DeblurOptions, callback=None):
    """The validated spec and settings of a deblur (every error at call time)."""
    blur = BlurOptions.pick(options.kwargs())
    spec = BlurSpec.build(image, sigma, blur, mask)
    return spec, settings(options, len(spec.axes), callback)


def deblur_steps(image: npt.ArrayLike, sigma, *, mask=None, **options):
    """:func:`deblur` as a generator of ``(iteration, estimate)`` (NumPy images): the
    arguments are checked now, the iterations run as it is consumed (napari's worker,
    with progress and Cancel).  The estimate is the working array: copy to keep it."""
    from .solve import deblur_steps as run_steps

    spec, chosen = checked(image, sigma, mask, DeblurOptions(**options))
    if spec.lazy:
        raise TypeError("deblur_steps: a NumPy image (deblur takes dask images)")
    return run_steps(spec, chosen)
