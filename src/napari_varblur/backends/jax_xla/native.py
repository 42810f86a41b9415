"""The differentiable steps of the JAX-native API (:mod:`napari_varblur.jax`): the same
passes and gather as the backend, on ``jax.Array`` data (traced or not), and the level
mix: one separable blur per sigma level in a ``fori_loop``, weighted per pixel.

Host numbers (taps, radii, level lists) come from :mod:`napari_varblur.core`, as for
every backend; a traced sigma gets its radius from the float64 rule, reproduced exactly
in float32 (:func:`.gather.float64_ceil_product`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ...core.levels import AxisLevels, bucket_range, level_weight, tolerance_levels, windows
from ...core.rules import exponent_of
from ...core.sigma import traced_layout
from ...core.spec import BlurSpec
from ...core.taps import (
    from_working_layout,
    gaussian_taps,
    global_plan,
    level_pass,
    map_limit,
    map_plan,
    working_layout,
)
from .gather import float64_ceil_product, varying_blur
from .passes import correlate_axis


def global_passes(image: jax.Array, spec: BlurSpec) -> jax.Array:
    """Separable passes with the host plan's taps."""
    x, dtype = image, image.dtype
    for p in global_plan(spec):
        weights, scale = jnp.asarray(p.weights, dtype), jnp.asarray(p.scale, dtype)
        x = correlate_axis(x, p.axis, p.n, p.mode, p.left, weights, scale,
                           jnp.asarray(p.fill, dtype))  # fmt: skip
    return x


def concrete_map(image: jax.Array, spec: BlurSpec) -> jax.Array:
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
    layout = traced_layout(sigma.shape, image.shape, k)
    if layout == "values":
        return [jnp.broadcast_to(sigma[i], image.shape) for i in range(k)]
    if layout == "per-axis":
        return [jnp.broadcast_to(sigma[..., i], image.shape) for i in range(k)]
    return [jnp.broadcast_to(sigma, image.shape)] * k


def traced_map(image, sigma, blurred, modes, *, cval, truncate, limits):
    """A traced map: each pixel's radius from its sigma (the float64 rule, exactly),
    capped at ``limits`` (the static ``max_radius``)."""
    k = len(blurred)
    per_axis = _per_axis_sigma(jnp.asarray(sigma), image, k)
    radii, exponents, layout = [], [], []
    for i, axis in enumerate(blurred):
        n = image.shape[axis]
        s = jnp.abs(per_axis[i].astype(image.dtype))
        limit = modes[i].map_limit(n)
        pad = limits[i] if limit is None else min(limits[i], limit)
        r = float64_ceil_product(truncate, jax.lax.stop_gradient(jnp.abs(per_axis[i])))
        radii.append(jnp.clip(r, 0, pad).astype(jnp.int32))
        exponents.append(exponent_of(s, xp=jnp))
        layout.append((n, modes[i], pad))
    return _run_varying(
        image, blurred, jnp.stack(radii), jnp.stack(exponents), cval, modes, tuple(layout)
    )


def _run_varying(image, blurred, radius, exponent, cval, modes, layout):
    """Blur in the working layout (batch axes flattened first, blurred axes last)."""
    work = working_layout(image, blurred)
    radius = jnp.stack([working_layout(r, blurred) for r in radius])
    exponent = jnp.stack([working_layout(e, blurred) for e in exponent])
    fills = tuple(jnp.asarray(m.fill(cval), image.dtype) for m in modes)
    out = varying_blur(work, radius, exponent, fills, layout)
    return from_working_layout(out, image.shape, blurred)


def concrete_levels(image: jax.Array, spec: BlurSpec, lv: AxisLevels) -> jax.Array:
    """An isotropic concrete map by levels: each pixel's level and weight from the host."""
    sigma = np.broadcast_to(spec.sigma_map[0], spec.shape)
    k, t = lv.locate(sigma)
    t = np.zeros(spec.shape) if t is None else t
    used = np.unique(np.concatenate([k.ravel(), (k + 1)[t > 0]]))
    tables = _level_tables(spec.shape, spec.axes, spec.modes, spec.cval, lv, used, image.dtype)
    position = np.searchsorted(used, k)  # each pixel's level as an index into `used`
    return _mix_levels(image, spec.axes, spec.modes, spec.cval, tables,
                       jnp.asarray(position), jnp.asarray(t, image.dtype))  # fmt: skip


def traced_levels(image, sigma, blurred, modes, *, cval, truncate, limits, tolerance):
    """An isotropic traced map by levels covering every sigma up to ``limits``."""
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
    tables = _level_tables(image.shape, blurred, modes, cval, lv, np.arange(len(lv)), image.dtype)
    return _mix_levels(image, blurred, modes, cval, tables, k, t)


def _level_tables(shape, axes, modes, cval, lv: AxisLevels, used: np.ndarray, dtype) -> list:
    """Per blurred axis: each used level's taps (centred, zero-padded to the largest
    radius), its own radius (taps beyond it are never read) and per-position scale
    (crop renormalisation, else 1)."""
    tables = []
    for axis, mode in zip(axes, modes):
        n = shape[axis]
        radii = np.minimum(lv.radius[used], map_limit(mode, n))
        if mode.crop:
            radii = np.minimum(radii, n - 1)
        reach = int(radii.max(initial=0))
        taps = np.zeros((len(used), 2 * reach + 1))
        scale = np.ones((len(used), n))
        for row, (level, r) in enumerate(zip(used, radii)):
            sigma = float(lv.sigma[level])
            p = level_pass(axis, n, sigma, int(r), mode, cval, dtype)
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
            y = correlate_axis(y, axis, n, mode, reach, taps[level], scale[level], fill,
                               radius=radii[level])  # fmt: skip
        w = level_weight(k, t, level, jnp)
        # `where`, not a product: a NaN the pixel does not mix must not reach it.
        return acc + jnp.where(w != 0, w * y, 0)

    count = tables[0][4].shape[0]
    return jax.lax.fori_loop(0, count, body, jnp.zeros_like(image))
