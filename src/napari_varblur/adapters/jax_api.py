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

from ..backends.jax_xla import correlate_axis, extend_axis, float64_ceil_product, varying_blur
from ..core.levels import MAX_LEVEL_RADIUS, AxisLevels, bucket_range, tolerance_levels, windows
from ..core.rules import MAX_EXPONENT
from ..core.spec import (
    BlurSpec,
    check_finite_values,
    check_image,
    map_layout,
    map_with_channel_axis,
    mask_with_channel_axis,
    normalize_channel_axis,
    normalize_cval,
    normalize_mask,
    normalize_modes,
    normalize_nan_policy,
    normalize_radius,
    normalize_tolerance,
    normalize_truncate,
)
from ..core.taps import gaussian_taps, global_plan, level_pass, map_limit, map_plan, shape_along
from ..engine import masked
from ..engine import walk as stacked

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
    tolerance: float | None = None,
    mask: jax.Array | np.ndarray | None = None,
    nan_policy: str = "propagate",
    channel_axis: int | None = None,
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
        As in :func:`napari_varblur.gaussian_blur`: never blurred; a sigma map or mask
        may omit it.

    Returns
    -------
    jax.Array
        The blurred image, same shape, float dtype.
    """
    image = jnp.asarray(image)
    check_image(np.dtype(image.dtype), image.ndim)
    if not jnp.issubdtype(image.dtype, jnp.floating):
        image = image.astype(jnp.float32)
    channel, blurred = normalize_channel_axis(channel_axis, axes, image.ndim)
    modes = normalize_modes(mode, len(blurred))
    if channel is not None:
        if isinstance(sigma, (jax.Array, np.ndarray)):
            sigma = map_with_channel_axis(sigma, image.shape, len(blurred), channel)
        if mask is not None:
            mask = mask_with_channel_axis(mask, image.shape, channel)
    fill, truncate = normalize_cval(cval), normalize_truncate(truncate)
    options = dict(blurred=blurred, modes=modes, truncate=truncate, radius=radius,
                   max_radius=max_radius, tolerance=normalize_tolerance(tolerance))  # fmt: skip
    policy = normalize_nan_policy(nan_policy)
    valid = _mask(mask, image.shape)
    if policy == "raise":
        if isinstance(image, jax.core.Tracer):
            raise ValueError(
                "nan_policy: 'raise' needs a concrete image (it is traced here); use "
                "'omit' or 'propagate' inside jax.jit"
            )
        check_finite_values(np.asarray(image), None if valid is None else np.asarray(valid),
                            modes, fill)  # fmt: skip
    omit = policy == "omit"
    if valid is None and not omit:
        return _blur(image, sigma, cval=fill, **options)
    valid = masked.valid_pixels(image, valid, omit, jnp)
    valid = jnp.ones(image.shape, bool) if valid is None else valid
    counts = masked.fill_counts(fill, omit)
    num = _blur(masked.numerator(image, valid, image.dtype, jnp), sigma,
                cval=fill if counts else 0.0, **options)  # fmt: skip
    weights = jnp.broadcast_to(valid, image.shape).astype(image.dtype)
    return masked.ratio(num, _blur(weights, sigma, cval=float(counts), **options), jnp)


def _mask(mask, shape: tuple[int, ...]) -> jax.Array | None:
    """The NumPy API's mask check; a traced mask is checked for dtype and shape only."""
    if mask is None:
        return None
    if not isinstance(mask, jax.core.Tracer):
        return jnp.asarray(normalize_mask(np.asarray(mask), shape))
    placeholder = np.broadcast_to(np.zeros((), mask.dtype), mask.shape)
    normalize_mask(placeholder, shape)
    return jnp.reshape(mask != 0, (1,) * (len(shape) - mask.ndim) + mask.shape)


def _blur(image, sigma, *, blurred, modes, cval, truncate, radius, max_radius, tolerance):
    """The plain (unmasked) blur of a float JAX array, arguments normalised."""
    options = dict(cval=cval, truncate=truncate)
    if isinstance(sigma, jax.core.Tracer):
        if radius is not None:
            raise ValueError("radius: cannot be combined with a traced sigma; use max_radius")
        if (
            tolerance is not None
            and _isotropic(sigma, image, len(blurred))
            and max_radius is not None
            and max(normalize_radius(max_radius, len(blurred), name="max_radius"))
            <= MAX_LEVEL_RADIUS
        ):
            return _traced_levels(image, sigma, blurred, modes, max_radius=max_radius,
                                  tolerance=tolerance, **options)  # fmt: skip
        return _traced_map(image, sigma, blurred, modes, max_radius=max_radius, **options)
    if isinstance(sigma, jax.Array):
        sigma = np.asarray(sigma)
    # Concrete sigma: the NumPy API's validation and plan, on a zero-cost placeholder.
    placeholder = np.broadcast_to(np.zeros((), np.float32), image.shape)
    spec = BlurSpec.from_args(placeholder, sigma, mode=modes, radius=radius, axes=blurred,
                              tolerance=tolerance, **options)  # fmt: skip
    if spec.sigma is not None:
        return _global(image, spec)
    found = stacked.levels_for(spec, map_plan(spec)) if spec.isotropic else None
    if found is not None and found[1]:
        return _concrete_levels(image, spec, found[0][0])
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


# ------------------------------------------------------------------- sigma levels


def _isotropic(sigma, image, k: int) -> bool:
    """A traced sigma that is one map for every axis (not one value or map per axis)."""
    if sigma.ndim == 0:
        return True
    if sigma.shape == (k,) and image.ndim != 1:
        return False
    return not map_layout(sigma.shape, image.shape, k)


def _concrete_levels(image: jax.Array, spec: BlurSpec, lv: AxisLevels) -> jax.Array:
    """An isotropic concrete map by levels: each pixel's level and weight from the host."""
    sigma = np.broadcast_to(spec.sigma_map[0], spec.shape)
    k, t = lv.locate(sigma)
    t = np.zeros(spec.shape) if t is None else t
    used = np.unique(np.concatenate([k.ravel(), (k + 1)[t > 0]]))
    tables = _level_tables(spec, lv, used, image.dtype)
    position = np.searchsorted(used, k)  # each pixel's level as an index into `used`
    return _mix_levels(image, spec.axes, spec.modes, spec.cval, tables,
                       jnp.asarray(position), jnp.asarray(t, image.dtype))  # fmt: skip


def _traced_levels(image, sigma, blurred, modes, *, cval, truncate, max_radius, tolerance):
    """An isotropic traced map by levels covering every sigma up to ``max_radius``."""
    limits = normalize_radius(max_radius, len(blurred), name="max_radius")
    spec = BlurSpec.from_args(np.broadcast_to(np.zeros((), np.float32), image.shape), 1.0,
                              mode=modes, axes=blurred, cval=cval, truncate=truncate)  # fmt: skip
    top = min(limits)
    limit = max(map_limit(m, image.shape[a]) for a, m in zip(blurred, modes))
    shapes = [
        windows(image.shape[a], m.crop, map_limit(m, image.shape[a]))
        for a, m in zip(blurred, modes)
    ]
    highest = bucket_range(top, truncate)[1]
    lv = tolerance_levels(0.0, highest, True, 2 * tolerance, truncate, shapes, limit)
    s = jnp.abs(jnp.broadcast_to(sigma, image.shape).astype(image.dtype))
    s = jnp.minimum(s, jnp.asarray(highest, image.dtype))
    frozen = jax.lax.stop_gradient(s)
    r = float64_ceil_product(truncate, frozen).astype(jnp.int32)
    k, t = lv.mix(s, r, jnp, s_index=frozen)
    tables = _level_tables(spec, lv, np.arange(len(lv)), image.dtype)
    return _mix_levels(image, blurred, modes, cval, tables, k, t)


def _level_tables(spec: BlurSpec, lv: AxisLevels, used: np.ndarray, dtype) -> list:
    """Per blurred axis: each used level's taps (centred, zero-padded to the largest
    radius), its own radius (taps beyond it are never read) and per-position scale
    (crop renormalisation, else 1)."""
    tables = []
    for axis, mode in zip(spec.axes, spec.modes):
        n = spec.shape[axis]
        radii = np.minimum(lv.radius[used], map_limit(mode, n))
        if mode.crop:
            radii = np.minimum(radii, n - 1)
        reach = int(radii.max(initial=0))
        taps = np.zeros((len(used), 2 * reach + 1))
        scale = np.ones((len(used), n))
        for row, (level, r) in enumerate(zip(used, radii)):
            sigma = float(lv.sigma[level])
            p = level_pass(axis, n, sigma, int(r), mode, spec.cval, dtype)
            if p is None:
                taps[row, reach], radii[row] = 1.0, 0
                continue
            # The extension reads any overhang: unfolded taps (normalised unless crop).
            w = p.weights if mode.crop else gaussian_taps(sigma, int(r))
            taps[row, reach - r : reach + r + 1] = w if mode.crop else w / w.sum()
            scale[row] = p.scale
        tables.append((axis, n, mode, reach, jnp.asarray(taps, dtype), jnp.asarray(radii),
                       jnp.asarray(scale, dtype)))  # fmt: skip
    return tables


def _mix_levels(image, blurred, modes, cval, tables, k, t):
    """``sum_l w_l(p) * blur_l(image)(p)``: one separable blur per level in a loop,
    ``w_l = 1 - t`` where ``k == l`` and ``t`` where ``k == l - 1``."""
    fills = [jnp.asarray(m.fill(cval), image.dtype) for m in modes]

    def body(level, acc):
        y = image
        for (axis, n, mode, reach, taps, radii, scale), fill in zip(tables, fills):
            y = _level_pass(y, axis, n, mode, reach, taps[level], radii[level], scale[level],
                            fill)  # fmt: skip
        w = jnp.where(k == level, 1 - t, 0) + jnp.where(k == level - 1, t, 0)
        # `where`, not a product: a NaN the pixel does not mix must not reach it.
        return acc + jnp.where(w != 0, w * y, 0)

    count = tables[0][4].shape[0]
    return jax.lax.fori_loop(0, count, body, jnp.zeros_like(image))


def _level_pass(x, axis: int, n: int, mode, reach: int, taps, radius, scale, fill):
    """One level's pass; taps beyond the level's own radius are padding and never read
    (`where`: a NaN there must not become 0 * NaN)."""
    ext = extend_axis(x, axis, n, mode, reach, reach, fill)

    def tap(i, acc):
        term = taps[i] * jax.lax.dynamic_slice_in_dim(ext, i, n, axis=axis)
        return acc + jnp.where(abs(i - reach) <= radius, term, 0)

    acc = jax.lax.fori_loop(0, taps.shape[0], tap, jnp.zeros_like(x))
    return acc * scale.reshape(shape_along(axis, x.ndim, n))
