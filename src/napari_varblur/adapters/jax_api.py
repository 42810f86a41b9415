"""JAX-native Gaussian blur: ``jax.Array`` in, ``jax.Array`` out.

Works inside ``jax.jit`` and ``jax.vmap`` and is differentiable with respect to the
image and the sigma map.  It computes in the image's dtype (enable JAX's x64 mode
yourself for float64) and never changes the global JAX configuration.  Arguments go
through the same normalisers as :func:`napari_varblur.gaussian_blur`.

Example
-------
>>> import jax, jax.numpy as jnp
>>> from napari_varblur.jax import gaussian_blur
>>> image = jnp.zeros((32, 32)).at[16, 16].set(1.0)
>>> sigma = jnp.full((32, 32), 2.0)
>>> loss = lambda s: gaussian_blur(image, s, max_radius=8)[16, 16]
>>> grad = jax.grad(loss)(sigma)  # how the centre pixel changes with each sigma
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..core.checks import ArgumentError, is_jax_array, is_traced
from ..core.options import BlurOptions
from ..core.params import DEFAULT, fill_doc
from ..core.spec import BlurSpec, check_image, normalize_options, normalize_radius
from ..engine import masked, native

__all__ = ["gaussian_blur"]


@fill_doc
def gaussian_blur(
    image: jax.Array,
    sigma: float | Sequence[float] | jax.Array | np.ndarray,
    *,
    mode: str | Sequence[str] = DEFAULT.mode,
    cval: float = DEFAULT.cval,
    truncate: float = DEFAULT.truncate,
    radius: int | Sequence[int] | None = DEFAULT.radius,
    axes: int | Sequence[int] | None = DEFAULT.axes,
    max_radius: int | Sequence[int] | None = DEFAULT.max_radius,
    tolerance: float | None = DEFAULT.tolerance,
    mask: jax.Array | np.ndarray | None = DEFAULT.mask,
    nan_policy: str = DEFAULT.nan_policy,
    channel_axis: int | None = DEFAULT.channel_axis,
    model: str = DEFAULT.model,
) -> jax.Array:
    """Gaussian blur of a JAX array with a global sigma or a sigma map.

    Parameters
    ----------
    image
        Real array; float dtypes are kept, others become float32.
    sigma
        As in :func:`napari_varblur.gaussian_blur`.  Python numbers and NumPy/concrete
        arrays are validated and their radii computed in float64 on the host.  A traced
        array (inside ``jit``/``grad``/``vmap``) is treated as a sigma map (a scalar or
        one value per axis is broadcast over the image) and needs ``max_radius``; its
        radii follow the same float64 rule, exactly, also when x64 is off (XLA flushes
        subnormal values, below 1.2e-38 in float32, to 0: such a sigma acts as 0).
    mode
        %(mode)s
    cval
        %(cval)s
    truncate
        %(truncate)s
    radius
        %(radius)s  With a traced sigma use ``max_radius``.
    axes
        %(axes)s
    max_radius
        %(max_radius)s
    tolerance
        As in :func:`napari_varblur.gaussian_blur`, for an isotropic sigma map (one
        sigma per pixel): the map is blurred by mixing global blurs at a few sigma
        levels (:mod:`napari_varblur.core.levels`), each output within ``tolerance`` times
        the value range of the exact result.  Levels are a loop of global passes (a
        good fit for a GPU); the result is differentiable with respect to the image and
        the map (piecewise smooth in sigma).  With a traced map, levels cover sigmas up
        to the largest whose radius fits ``max_radius`` (larger sigmas act as that
        one).  Per-axis maps, and global sigmas, ignore ``tolerance`` (exact).
    mask, nan_policy
        As in :func:`napari_varblur.gaussian_blur`: a normalised convolution over the
        valid taps, differentiable with respect to the image and the sigma map (the
        mask is a constant).  A traced mask is checked for dtype and shape only (any
        non-zero value is valid); ``nan_policy="raise"`` needs a concrete image.
    channel_axis
        %(channel_axis)s
    model
        %(model)s  Differentiable too (``jax.linear_transpose`` of the gather).

    Returns
    -------
    jax.Array
        The blurred image, same shape, float dtype.
    """
    image = _float_image(image)
    options = normalize_options(image.ndim, BlurOptions.pick(locals()))
    options["precision"] = np.dtype(image.dtype)  # the JAX-native API keeps the image's
    if options["nan_policy"] == "raise" and is_traced(image):
        raise ArgumentError(
            "nan_policy: 'raise' needs a concrete image (it is traced here); use "
            "'omit' or 'propagate' inside jax.jit"
        )
    limits = None if max_radius is None else normalize_radius(max_radius, len(options["axes"]),
                                                              name="max_radius")  # fmt: skip
    if is_traced(sigma):
        spec = native.traced_spec(image, sigma, options, mask, limits)
    else:  # concrete: the NumPy API's checks, radii from the host
        host = np.asarray(sigma) if is_jax_array(sigma) else sigma
        spec = BlurSpec.checked(image, host, options, mask)
    run = native.runner(spec)
    fill, omit = spec.cval, spec.nan_policy == "omit"
    valid = None if spec.mask is None else jnp.asarray(spec.mask)
    if spec.model == "scatter":
        return masked.transposed(image, valid, fill, omit, run, native.transpose(run, image),
                                 dtype=image.dtype, xp=jnp)  # fmt: skip
    if spec.mask is None and not omit:
        return run(image, fill)
    return masked.normalized_convolution(image, valid, fill, omit, run, dtype=image.dtype,
                                         xp=jnp)  # fmt: skip


def _float_image(image) -> jax.Array:
    """The image as a JAX array, checked like the NumPy API's; float dtypes are kept,
    others become float32."""
    if not is_jax_array(image):  # checked before JAX converts (or refuses) its dtype
        host = np.asarray(image)
        check_image(host.dtype, host.ndim)
        image = host
    image = jnp.asarray(image)
    check_image(np.dtype(image.dtype), image.ndim)
    return image if jnp.issubdtype(image.dtype, jnp.floating) else image.astype(jnp.float32)
