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

from .backends.jax_xla import correlate_axis, float64_ceil_product, varying_blur
from .plan import global_plan, map_plan
from .rules import MAX_EXPONENT
from .spec import (
    BlurSpec,
    check_image,
    map_layout,
    normalize_axes,
    normalize_cval,
    normalize_modes,
    normalize_radius,
    normalize_truncate,
)

__all__ = ["gaussian_blur"]


def gaussian_blur(
    image: jax.Array,
    sigma: float | Sequence[float] | jax.Array | np.ndarray,
    *,
    mode: str | Sequence[str] = "crop",
    cval: float = 0.0,
    truncate: float = 3.0,
    radius: int | Sequence[int] | None = None,
    axes: int | Sequence[int] | None = None,
    max_radius: int | Sequence[int] | None = None,
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
    mode, cval, truncate, radius, axes
        As in :func:`napari_varblur.gaussian_blur`.
    max_radius
        Static largest radius (one int or one per blurred axis) for a traced sigma.
        Each pixel uses ``min(ceil(truncate * sigma), max_radius)``; values are not
        checked when traced (a negative sigma acts like its absolute value).

    Returns
    -------
    jax.Array
        The blurred image, same shape, float dtype.
    """
    image = jnp.asarray(image)
    check_image(np.dtype(image.dtype), image.ndim)
    if not jnp.issubdtype(image.dtype, jnp.floating):
        image = image.astype(jnp.float32)
    blurred = normalize_axes(axes, image.ndim)
    modes = normalize_modes(mode, len(blurred))
    options = dict(cval=normalize_cval(cval), truncate=normalize_truncate(truncate))
    if isinstance(sigma, jax.core.Tracer):
        if radius is not None:
            raise ValueError("radius: cannot be combined with a traced sigma; use max_radius")
        return _traced_map(image, sigma, blurred, modes, max_radius=max_radius, **options)
    if isinstance(sigma, jax.Array):
        sigma = np.asarray(sigma)
    # Concrete sigma: the NumPy API's validation and plan, on a zero-cost placeholder.
    placeholder = np.broadcast_to(np.zeros((), np.float32), image.shape)
    spec = BlurSpec.from_args(placeholder, sigma, mode=modes, radius=radius, axes=blurred,
                              **options)  # fmt: skip
    if spec.sigma is not None:
        return _global(image, spec)
    return _concrete_map(image, spec)


def _global(image: jax.Array, spec: BlurSpec) -> jax.Array:
    """Separable passes with the host plan's taps."""
    x, dtype = image, image.dtype
    for p in global_plan(spec):
        weights, scale = jnp.asarray(p.weights, dtype), jnp.asarray(p.scale, dtype)
        x = correlate_axis(x, p.axis, p.n, p.mode, p.left, weights, scale,
                           jnp.asarray(p.fill, dtype))  # fmt: skip
    return x


def _concrete_map(image: jax.Array, spec: BlurSpec) -> jax.Array:
    """A concrete map: radii and exponents from the host plan (float64 rule)."""
    plan = map_plan(spec)
    dtype = image.dtype
    radius = jnp.stack([jnp.broadcast_to(jnp.asarray(m.radius()), image.shape) for m in plan])
    exponent = jnp.stack(
        [jnp.broadcast_to(jnp.asarray(m.exponent(), dtype), image.shape) for m in plan]
    )
    layout = tuple((m.n, m.mode, m.pad) for m in plan)
    return _run_varying(image, spec.axes, radius, exponent, spec.cval, spec.modes, layout)


def _per_axis_sigma(sigma, image, k: int) -> list:
    """A traced sigma (scalar, one per axis, or a map) as one image-shaped array per axis."""
    if sigma.ndim == 0:
        return [jnp.broadcast_to(sigma, image.shape)] * k
    if sigma.shape == (k,) and image.ndim != 1:
        return [jnp.broadcast_to(sigma[i], image.shape) for i in range(k)]
    if map_layout(sigma.shape, image.shape, k):
        return [jnp.broadcast_to(sigma[..., i], image.shape) for i in range(k)]
    return [jnp.broadcast_to(sigma, image.shape)] * k


def _traced_map(image, sigma, blurred, modes, *, cval, truncate, max_radius):
    k = len(blurred)
    if max_radius is None:
        raise ValueError(
            "max_radius: a traced sigma needs a static max_radius (an int or one per axis)"
        )
    limits = normalize_radius(max_radius, k, name="max_radius")
    per_axis = _per_axis_sigma(jnp.asarray(sigma), image, k)
    radii, exponents, layout = [], [], []
    for i, axis in enumerate(blurred):
        n = image.shape[axis]
        s = jnp.abs(per_axis[i].astype(image.dtype))
        limit = modes[i].map_limit(n)
        pad = limits[i] if limit is None else min(limits[i], limit)
        r = float64_ceil_product(truncate, jax.lax.stop_gradient(jnp.abs(per_axis[i])))
        radii.append(jnp.clip(r, 0, pad).astype(jnp.int32))
        # Double-where keeps the gradient finite where sigma is 0.
        safe = jnp.where(s > 0, s, 1)
        exponents.append(jnp.where(s > 0, jnp.minimum(0.5 / (safe * safe), MAX_EXPONENT), 0))
        layout.append((n, modes[i], pad))
    return _run_varying(
        image, blurred, jnp.stack(radii), jnp.stack(exponents), cval, modes, tuple(layout)
    )


def _run_varying(image, blurred, radius, exponent, cval, modes, layout):
    """Move the blurred axes last (batch axes flattened first), blur, move back."""
    batch = [a for a in range(image.ndim) if a not in blurred]
    order = batch + list(blurred)
    inverse = np.argsort(order)
    lead = (-1,) + tuple(image.shape[a] for a in blurred)

    def to_work(x):
        return jnp.transpose(x, order).reshape(lead)

    work = to_work(image)
    radius = jnp.stack([to_work(r) for r in radius])
    exponent = jnp.stack([to_work(e) for e in exponent])
    fills = tuple(jnp.asarray(m.fill(cval), image.dtype) for m in modes)
    out = varying_blur(work, radius, exponent, fills, layout)
    moved = out.reshape(tuple(image.shape[a] for a in order))
    return jnp.transpose(moved, inverse)
