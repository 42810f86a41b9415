"""The JAX backend: XLA code compiled with ``jax.jit``, on the GPU when JAX sees one.

Shapes are static: radii and tap counts come from the host plan and are part of the
compilation key, while weights, crop normalisers, per-pixel radii and exponents are
array arguments, so a new sigma with the same radius reuses the compiled code.

The pure functions :func:`correlate_axis` and :func:`varying_blur` also serve the
JAX-native, differentiable API in :mod:`napari_varblur.jax`.
"""

from __future__ import annotations

import itertools
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..boundary import extend_indices
from ..plan import from_working_layout, global_plan, map_plan, working_layout
from ..spec import BlurSpec

#: Up to this many taps a loop is unrolled (XLA fuses it); beyond, a ``fori_loop``
#: keeps compile time flat.
UNROLL_TAPS = 64


def has_gpu() -> bool:
    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:
        return False


def describe() -> str:
    devices = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
    return f"jax {jax.__version__}, {devices}"


def device_name() -> str:
    d = jax.devices()[0]
    return f"{d.platform}:{d.device_kind}"


# --------------------------------------------------------------------------- helpers


def _shape_along(axis: int, ndim: int, n: int) -> tuple[int, ...]:
    return (1,) * axis + (n,) + (1,) * (ndim - axis - 1)


def extend_axis(
    x: jax.Array, axis: int, n: int, mode: str, left: int, right: int, fill
) -> jax.Array:
    """``x`` extended along ``axis`` by ``left``/``right`` positions in ``mode``.

    The middle is ``x`` itself; only the overhangs are gathered (or filled).
    """
    if left == 0 and right == 0:
        return x
    parts = []
    for lo, hi in ((-left, 0), (n, n + right)):
        if hi == lo:
            continue
        src = extend_indices(np.arange(lo, hi), n, mode)
        if (src < 0).all():
            shape = list(x.shape)
            shape[axis] = hi - lo
            part = jnp.full(shape, fill, dtype=x.dtype)
        else:
            part = jnp.take(x, np.maximum(src, 0), axis=axis)
            if (src < 0).any():
                mask = (src < 0).reshape(_shape_along(axis, x.ndim, hi - lo))
                part = jnp.where(mask, jnp.asarray(fill, x.dtype), part)
        parts.append(part)
    head = parts[0] if left else None
    tail = parts[-1] if right else None
    return jnp.concatenate([p for p in (head, x, tail) if p is not None], axis=axis)


def correlate_axis(x, axis: int, n: int, mode: str, left: int, weights, scale, fill):
    """One 1-D pass: ``out[i] = scale[i] * sum_t weights[t] * ext[i - left + t]``."""
    taps = weights.shape[0]
    ext = extend_axis(x, axis, n, mode, left, taps - 1 - left, fill)
    if taps <= UNROLL_TAPS:
        acc = weights[0] * lax.slice_in_dim(ext, 0, n, axis=axis)
        for t in range(1, taps):
            acc = acc + weights[t] * lax.slice_in_dim(ext, t, t + n, axis=axis)
    else:

        def body(t, acc):
            return acc + weights[t] * lax.dynamic_slice_in_dim(ext, t, n, axis=axis)

        acc = lax.fori_loop(0, taps, body, jnp.zeros_like(x))
    return acc * scale.reshape(_shape_along(axis, x.ndim, n))


def varying_blur(work, radius, exponent, fills, layout):
    """Spatially varying blur of ``work`` (batch axis first, then the blurred axes).

    Parameters
    ----------
    work
        Array of shape ``(B, n_1, ..., n_k)``.
    radius, exponent
        Per-pixel radius (int) and ``1/(2 sigma^2)`` of each blurred axis, shape
        ``(k, B, n_1, ..., n_k)`` (or broadcastable).
    fills
        One fill value per axis (``cval`` for constant mode, else 0).
    layout
        Static tuple of ``(n, mode, pad)`` per blurred axis.

    Notes
    -----
    Offsets ``+d`` and ``-d`` have the same weight, so every loop runs over ``d >= 0``
    and adds the two mirrored slices first: half the passes.  The outer axes' offsets
    run in a ``fori_loop`` (one exp per pixel and offset); the last axis and the
    normalisers get their weights ``exp(-d^2 h)`` from the recurrence
    ``w_{d+1} = w_d g_d``, ``g_{d+1} = g_d q^2``, ``q = exp(-h)``: multiplies, not
    exps.  Crop axes are padded with zeros, so out-of-bounds taps add nothing; taps
    beyond a pixel's own radius are dropped with ``where`` so a NaN there cannot leak.
    """
    k = len(layout)
    dtype = work.dtype
    shape = work.shape
    radius = jnp.broadcast_to(radius, (k, *shape))
    exponent = jnp.broadcast_to(exponent, (k, *shape)).astype(dtype)

    # Crop axes are padded last, so their zeros also cover the corners where another
    # axis's extension (e.g. a constant cval) would otherwise leak into dropped taps.
    padded = work
    for a in sorted(range(k), key=lambda a: layout[a][1] == "crop"):
        n, mode, pad = layout[a]
        padded = extend_axis(padded, a + 1, n, mode, pad, pad, fills[a])

    def recurrence(a: int, count: int, step, init):
        """Run ``step(d, w, carry)`` for d = 1..count with w = exp(-d^2 h_a)."""
        q = jnp.exp(-exponent[a])
        q2 = q * q

        def body(d, state):
            carry, w, g = state
            w = w * g
            return step(d, w, carry), w, g * q2

        state = (init, jnp.ones(shape, dtype), q)
        if count <= UNROLL_TAPS // 2:
            for d in range(1, count + 1):
                state = body(d, state)
        else:
            state = lax.fori_loop(1, count + 1, body, state)
        return state[0]

    # Normaliser: the product over axes of the counted weights' sum.
    denominator = jnp.ones(shape, dtype)
    for a, (n, mode, pad) in enumerate(layout):
        pos = lax.broadcasted_iota(jnp.int32, shape, a + 1)

        def den_step(d, w, total, a=a, n=n, mode=mode, pos=pos):
            keep = d <= radius[a]
            plus, minus = keep, keep
            if mode == "crop":
                plus, minus = keep & (pos + d < n), keep & (pos - d >= 0)
            return total + jnp.where(plus, w, 0) + jnp.where(minus, w, 0)

        denominator = denominator * recurrence(a, pad, den_step, jnp.ones(shape, dtype))

    n_last, _, pad_last = layout[-1]

    def row_sum(block):
        """Weighted sum over the last axis of a block padded by ``pad_last`` there."""
        centre = lax.slice_in_dim(block, pad_last, pad_last + n_last, axis=k)

        def step(d, w, acc):
            plus = lax.dynamic_slice_in_dim(block, pad_last + d, n_last, axis=k)
            minus = lax.dynamic_slice_in_dim(block, pad_last - d, n_last, axis=k)
            return acc + jnp.where(d <= radius[-1], w * (plus + minus), 0)

        return recurrence(k - 1, pad_last, step, centre)

    outer = layout[:-1]
    sizes = (shape[0], *(n for n, _, _ in outer), n_last + 2 * pad_last)
    count = math.prod(pad + 1 for _, _, pad in outer)
    signs = list(itertools.product((1, -1), repeat=len(outer)))

    def outer_body(f, acc):
        offsets = []
        for _, _, pad in reversed(outer):
            offsets.append(f % (pad + 1))
            f = f // (pad + 1)
        offsets.reverse()
        # The mirrored rows (+d, -d on every outer axis) share one weight: add them
        # first.  At d = 0 both signs read the same row, hence the halving.
        block = None
        for sign in signs:
            starts = [0, *(pad + s * d for (_, _, pad), s, d in zip(outer, sign, offsets)), 0]
            piece = lax.dynamic_slice(padded, starts, sizes)
            block = piece if block is None else block + piece
        w_outer = jnp.ones(shape, dtype)
        counts = jnp.ones(shape, bool)
        for a, d in enumerate(offsets):
            w_outer = w_outer * jnp.exp(-(d * d).astype(dtype) * exponent[a])
            w_outer = w_outer * jnp.where(d == 0, 0.5, 1.0).astype(dtype)
            counts = counts & (d <= radius[a])
        return acc + jnp.where(counts, w_outer * row_sum(block), 0)

    numerator = lax.fori_loop(0, count, outer_body, jnp.zeros(shape, dtype))
    return numerator / denominator


# --------------------------------------------------------------------------- backend


@partial(jax.jit, static_argnames=("layout",))
def _separable(x, weights, scales, fills, layout):
    for (axis, n, mode, left), w, scale, fill in zip(layout, weights, scales, fills):
        x = correlate_axis(x, axis, n, mode, left, w, scale, fill)
    return x


_varying_jit = jax.jit(varying_blur, static_argnames=("layout",))


def blur(spec: BlurSpec) -> np.ndarray:
    dtype = spec.precision
    # float64 must really be float64: switch x64 on for this call only (and off for
    # float32), leaving the user's global JAX configuration as it was.
    with jax.enable_x64(dtype == np.float64):
        x = jnp.asarray(spec.image.astype(dtype, copy=False))
        if spec.sigma is not None:
            passes = global_plan(spec)
            out = _separable(
                x,
                tuple(jnp.asarray(p.weights, dtype) for p in passes),
                tuple(jnp.asarray(p.scale, dtype) for p in passes),
                tuple(jnp.asarray(p.fill, dtype) for p in passes),
                layout=tuple((p.axis, p.n, p.mode, p.left) for p in passes),
            )
            return np.asarray(out)
        plan = map_plan(spec)
        work = working_layout(spec.image, spec.axes).astype(dtype)

        def per_pixel(values: np.ndarray, kind) -> jax.Array:
            return jnp.asarray(working_layout(np.broadcast_to(values, spec.shape), spec.axes), kind)

        # An isotropic map sends one radius and one exponent array, broadcast over axes.
        # Its radius is capped at the largest limit only: the loops never go past an
        # axis's own pad, so the per-axis cap needs no array of its own.
        shared = all(m.sigma is plan[0].sigma for m in plan)
        axes_data = plan[:1] if shared else plan
        limit = max(m.limit for m in plan) if shared else None
        out = _varying_jit(
            jnp.asarray(work),
            jnp.stack([per_pixel(m.radius(limit), jnp.int32) for m in axes_data]),
            jnp.stack([per_pixel(m.exponent(dtype), dtype) for m in axes_data]),
            tuple(jnp.asarray(m.fill, dtype) for m in plan),
            layout=tuple((m.n, m.mode, m.pad) for m in plan),
        )
        return from_working_layout(np.asarray(out), spec.shape, spec.axes)
