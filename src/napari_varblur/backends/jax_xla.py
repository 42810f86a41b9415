"""The JAX backend: XLA code compiled with ``jax.jit``, on the GPU when JAX sees one.

Shapes are static: radii and tap counts come from the host plan and are part of the
compilation key, while weights, crop normalisers, per-pixel radii and exponents are
array arguments, so a new sigma with the same radius reuses the compiled code.

The pure functions :func:`correlate_axis` and :func:`varying_blur` also serve the
JAX-native, differentiable API in :mod:`napari_varblur.jax`.
"""

from __future__ import annotations

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
    The outer axes' offsets run in a ``fori_loop`` with one exp per pixel and offset;
    the last axis pairs the taps ``+d`` and ``-d`` and gets its weights
    ``exp(-d^2 h)`` from the recurrence ``w_{d+1} = w_d g_d``, ``g_{d+1} = g_d q^2``
    with ``q = exp(-h)``: multiplies instead of exps, O(r) exps per pixel in 2-D.
    Taps outside a pixel's own radius are excluded with ``where`` so that a NaN there
    cannot leak in.
    """
    k = len(layout)
    dtype = work.dtype
    shape = work.shape
    radius = jnp.broadcast_to(radius, (k,) + shape)
    exponent = jnp.broadcast_to(exponent, (k,) + shape).astype(dtype)

    padded = work
    for a, (n, mode, pad) in enumerate(layout):
        padded = extend_axis(padded, a + 1, n, mode, pad, pad, fills[a])

    def inside(a: int, d):
        """Whether offset d along axis a counts at each pixel."""
        n, mode, _ = layout[a]
        counts = jnp.abs(d) <= radius[a]
        if mode == "crop":
            pos = lax.broadcasted_iota(jnp.int32, shape, a + 1)
            counts = counts & (pos + d >= 0) & (pos + d < n)
        return counts

    def weight(a: int, d):
        return jnp.exp(-(d * d).astype(dtype) * exponent[a])

    # Denominator: the product of each axis's counted weight sum.
    denominator = jnp.ones(shape, dtype)
    for a, (_, _, pad) in enumerate(layout):

        def den_body(t, s, a=a, pad=pad):
            d = t - pad
            return s + jnp.where(inside(a, d), weight(a, d), 0)

        denominator = denominator * lax.fori_loop(0, 2 * pad + 1, den_body, jnp.zeros(shape, dtype))

    n_last, _, pad_last = layout[-1]
    h_last = exponent[-1]
    r_last = radius[-1]

    def row_sum(block):
        """Sum over the last axis of a block padded by ``pad_last`` on that axis."""
        centre = lax.slice_in_dim(block, pad_last, pad_last + n_last, axis=k)
        q = jnp.exp(-h_last)
        q2 = q * q

        def step(d, carry):
            acc, w, g = carry
            w = w * g
            g = g * q2
            plus = lax.dynamic_slice_in_dim(block, pad_last + d, n_last, axis=k)
            minus = lax.dynamic_slice_in_dim(block, pad_last - d, n_last, axis=k)
            acc = acc + jnp.where(d <= r_last, w * (plus + minus), 0)
            return acc, w, g

        carry = (centre, jnp.ones(shape, dtype), q)
        if pad_last <= UNROLL_TAPS // 2:
            for d in range(1, pad_last + 1):
                carry = step(d, carry)
        else:
            carry = lax.fori_loop(1, pad_last + 1, step, carry)
        return carry[0]

    outer = layout[:-1]
    sizes = (shape[0],) + tuple(n for n, _, _ in outer) + (n_last + 2 * pad_last,)
    count = math.prod(2 * pad + 1 for _, _, pad in outer)

    def outer_body(f, acc):
        starts = [0]
        w_outer = jnp.ones(shape, dtype)
        counts = jnp.ones(shape, bool)
        rest = f
        offsets = []
        for _, _, pad in reversed(outer):
            offsets.append(rest % (2 * pad + 1) - pad)
            rest = rest // (2 * pad + 1)
        offsets.reverse()
        for a, ((_, _, pad), d) in enumerate(zip(outer, offsets)):
            starts.append(pad + d)
            w_outer = w_outer * weight(a, d)
            counts = counts & inside(a, d)
        starts.append(0)
        block = lax.dynamic_slice(padded, starts, sizes)
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

        def per_pixel(values: np.ndarray) -> np.ndarray:
            return working_layout(np.broadcast_to(values, spec.shape), spec.axes)

        out = _varying_jit(
            jnp.asarray(work),
            jnp.asarray(np.stack([per_pixel(m.radius) for m in plan]), jnp.int32),
            jnp.asarray(np.stack([per_pixel(m.exponent) for m in plan]), dtype),
            tuple(jnp.asarray(m.fill, dtype) for m in plan),
            layout=tuple((m.n, m.mode, m.pad) for m in plan),
        )
        return from_working_layout(np.asarray(out), spec.shape, spec.axes)
