"""The one JAX 1-D pass, with the axis extended by its mode: global blurs, the level walk's
``correlate`` and the JAX-native level mix all run it."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.taps import shape_along

#: Up to this many taps a loop is unrolled (XLA fuses it); beyond, a ``fori_loop``
#: keeps compile time flat.
UNROLL_TAPS = 64


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
        src = mode.extend(np.arange(lo, hi), n)
        if (src < 0).all():
            shape = list(x.shape)
            shape[axis] = hi - lo
            part = jnp.full(shape, fill, dtype=x.dtype)
        else:
            part = jnp.take(x, np.maximum(src, 0), axis=axis)
            if (src < 0).any():
                mask = (src < 0).reshape(shape_along(axis, x.ndim, hi - lo))
                part = jnp.where(mask, jnp.asarray(fill, x.dtype), part)
        parts.append(part)
    head = parts[0] if left else None
    tail = parts[-1] if right else None
    return jnp.concatenate([p for p in (head, x, tail) if p is not None], axis=axis)


def correlate_axis(x, axis: int, n: int, mode: str, left: int, weights, scale, fill, radius=None):
    """One 1-D pass: ``out[i] = scale[i] * sum_t weights[t] * ext[i - left + t]``.

    ``radius`` (traced): only taps within it of the centre ``left`` count; the others
    are padding, skipped with ``where`` (a NaN there must not become 0 * NaN).
    """
    taps = weights.shape[0]
    ext = extend_axis(x, axis, n, mode, left, taps - 1 - left, fill)
    if taps <= UNROLL_TAPS and radius is None:
        acc = weights[0] * lax.slice_in_dim(ext, 0, n, axis=axis)
        for t in range(1, taps):
            acc = acc + weights[t] * lax.slice_in_dim(ext, t, t + n, axis=axis)
    else:

        def body(t, acc):
            term = weights[t] * lax.dynamic_slice_in_dim(ext, t, n, axis=axis)
            return acc + (term if radius is None else jnp.where(abs(t - left) <= radius, term, 0))

        acc = lax.fori_loop(0, taps, body, jnp.zeros_like(x))
    return acc * scale.reshape(shape_along(axis, x.ndim, n))


def correlate(x, axis: int, source, fill: float, weights, scale) -> np.ndarray:
    """One 1-D pass (the level walk's building block): ``out[i] = scale[i] *
    sum_t weights[t] * x[source[i + t]]`` along ``axis`` (``fill`` where ``source`` is
    -1).  Taps are padded to a power of two, so levels of nearby radii share one
    compiled program; the loop stops at the real tap count (padding is never read)."""
    dtype = np.dtype(x.dtype)
    taps = len(weights)
    bucket = 1 << (taps - 1).bit_length()
    source = np.concatenate([source, np.full(bucket - taps, -1, source.dtype)])
    padded = np.zeros(bucket)
    padded[:taps] = weights
    with jax.enable_x64(dtype == np.float64):
        out = _window_pass(jnp.asarray(x), jnp.asarray(source, jnp.int32),
                           jnp.asarray(fill, dtype), jnp.asarray(padded, dtype),
                           jnp.asarray(scale, dtype), jnp.asarray(taps, jnp.int32),
                           axis=axis, n=len(scale))  # fmt: skip
    return np.array(out, dtype=dtype)


@partial(jax.jit, static_argnames=("axis", "n"))
def _window_pass(x, source, fill, weights, scale, count, *, axis: int, n: int):
    ext = jnp.take(x, jnp.maximum(source, 0), axis=axis)
    outside = (source < 0).reshape(shape_along(axis, x.ndim, len(source)))
    ext = jnp.where(outside, fill, ext)

    def body(t, acc):
        return acc + weights[t] * lax.dynamic_slice_in_dim(ext, t, n, axis=axis)

    shape = x.shape[:axis] + (n,) + x.shape[axis + 1 :]
    acc = lax.fori_loop(0, count, body, jnp.zeros(shape, x.dtype))
    return acc * scale.reshape(shape_along(axis, x.ndim, n))
