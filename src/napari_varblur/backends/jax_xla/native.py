"""The differentiable steps of the JAX-native API (:mod:`napari_varblur.jax`): the same
passes and gather as the backend, on ``jax.Array`` data (traced or not), and the level
mix: one separable blur per sigma level in a ``fori_loop``, weighted per pixel.

Host numbers (taps, radii, level lists) come from :mod:`napari_varblur.core`, as for
every backend; a traced sigma gets its radius from the float64 rule, reproduced exactly
in float32 (:func:`.gather.float64_ceil_product`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...core.level_plan import LevelPlan, level_table
from ...core.levels import AxisLevels, bucket_range, level_weight
from ...core.rules import exponent_of
from ...core.sigma import traced_layout
from ...core.spec import BlurSpec
from ...core.taps import from_working_layout, global_plan, map_plan, working_layout
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


def traced_maps(sigma, image_shape: tuple[int, ...], k: int) -> tuple:
    """A traced sigma (a scalar, one per axis, or a map) as one image-shaped array per
    blurred axis (the same object for every axis when it is isotropic)."""
    layout = traced_layout(sigma.shape, image_shape, k)
    if layout == "values":
        return tuple(jnp.broadcast_to(sigma[i], image_shape) for i in range(k))
    if layout == "per-axis":
        return tuple(jnp.broadcast_to(sigma[..., i], image_shape) for i in range(k))
    return (jnp.broadcast_to(sigma, image_shape),) * k


def traced_map(image: jax.Array, spec: BlurSpec) -> jax.Array:
    """A traced map: each pixel's radius from its sigma (the float64 rule, exactly),
    capped at ``spec.max_radius``."""
    radii, exponents, layout = [], [], []
    for i, axis in enumerate(spec.axes):
        n, mode = image.shape[axis], spec.modes[i]
        s = jnp.abs(spec.sigma_map[i].astype(image.dtype))
        limit = mode.map_limit(n)
        pad = spec.max_radius[i] if limit is None else min(spec.max_radius[i], limit)
        r = float64_ceil_product(spec.truncate, jax.lax.stop_gradient(jnp.abs(spec.sigma_map[i])))
        radii.append(jnp.clip(r, 0, pad).astype(jnp.int32))
        exponents.append(exponent_of(s, xp=jnp))
        layout.append((n, mode, pad))
    return _run_varying(image, spec.axes, jnp.stack(radii), jnp.stack(exponents), spec.cval,
                        spec.modes, tuple(layout))  # fmt: skip


@partial(jax.jit, static_argnames=("blurred", "cval", "modes", "layout"))
def _run_varying(image, blurred, radius, exponent, cval, modes, layout):
    """Blur in the working layout (batch axes flattened first, blurred axes last): one
    compiled program per shape and layout, which another map of the same shapes (and
    radius) runs again."""
    work = working_layout(image, blurred)
    radius = jnp.stack([working_layout(r, blurred) for r in radius])
    exponent = jnp.stack([working_layout(e, blurred) for e in exponent])
    fills = tuple(jnp.asarray(m.fill(cval), image.dtype) for m in modes)
    out = varying_blur(work, radius, exponent, fills, layout)
    return from_working_layout(out, image.shape, blurred)


def concrete_levels(image: jax.Array, spec: BlurSpec, plan: LevelPlan) -> jax.Array:
    """An isotropic concrete map by the planner's shared levels: each pixel's level and
    weight from the host, only the levels some pixel uses."""
    lv = plan.levels[0]
    sigma = np.broadcast_to(spec.sigma_map[0], spec.shape)
    k, t = lv.locate(sigma)
    t = np.zeros(spec.shape) if t is None else t
    used = np.unique(np.concatenate([k.ravel(), (k + 1)[t > 0]]))
    position = np.searchsorted(used, k)  # each pixel's level as an index into `used`
    return _mix_levels(image, spec, lv, used, jnp.asarray(position), jnp.asarray(t, image.dtype))


def traced_levels(image: jax.Array, spec: BlurSpec, plan: LevelPlan) -> jax.Array:
    """An isotropic traced map by the planner's shared levels, which cover every sigma
    up to the largest whose radius fits ``max_radius`` (larger sigmas act as it)."""
    lv = plan.levels[0]
    highest = bucket_range(min(spec.max_radius), spec.truncate)[1]
    s = jnp.abs(jnp.broadcast_to(spec.sigma_map[0], image.shape).astype(image.dtype))
    s = jnp.minimum(s, jnp.asarray(highest, image.dtype))
    frozen = jax.lax.stop_gradient(s)
    r = float64_ceil_product(spec.truncate, frozen).astype(jnp.int32)
    k, t = lv.mix(s, r, jnp, s_index=frozen)
    return _mix_levels(image, spec, lv, np.arange(len(lv)), k, t)


def _mix_levels(image, spec: BlurSpec, lv: AxisLevels, used: np.ndarray, k, t) -> jax.Array:
    """``sum_l w_l(p) * blur_l(image)(p)`` over the levels ``used``: one separable blur
    per level in a loop, ``w_l = 1 - t`` where ``k == l`` and ``t`` where ``k == l - 1``
    (``k`` indexes ``used``).  Each axis's passes come from the level engine's table;
    they go in as arguments of one compiled program (shapes static), so another map or
    image of the same shapes runs it again without compiling."""
    dtype = image.dtype
    layout, tables = [], []
    for i, mode in enumerate(spec.modes):
        table = level_table(spec, i, lv, used, dtype)
        reach, taps, radii = table.centred
        layout.append((table.axis, table.n, mode, reach))
        scale, fill = jnp.asarray(table.scale, dtype), jnp.asarray(mode.fill(spec.cval), dtype)
        tables.append((jnp.asarray(taps, dtype), jnp.asarray(radii), scale, fill))
    return _mix(image, k, t, tuple(tables), layout=tuple(layout))


@partial(jax.jit, static_argnames=("layout",))
def _mix(image, k, t, tables, *, layout):
    def body(level, acc):
        y = image
        for (axis, n, mode, reach), (taps, radii, scale, fill) in zip(layout, tables):
            y = correlate_axis(y, axis, n, mode, reach, taps[level], scale[level], fill,
                               radius=radii[level])  # fmt: skip
        w = level_weight(k, t, level, jnp)
        # `where`, not a product: a NaN the pixel does not mix must not reach it.
        return acc + jnp.where(w != 0, w * y, 0)

    return jax.lax.fori_loop(0, tables[0][0].shape[0], body, jnp.zeros_like(image))
