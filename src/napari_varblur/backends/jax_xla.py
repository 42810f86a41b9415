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

from ..core.spec import BlurSpec
from ..core.taps import (
    from_working_layout,
    global_plan,
    map_plan,
    padding_order,
    shape_along,
    working_layout,
)

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


_COMPILES = [0]


def _count_compile(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def compiles() -> int:
    """How many XLA programs this process compiled so far."""
    return _COMPILES[0]


def device_name() -> str:
    d = jax.devices()[0]
    # "cpu", or the platform and the card ("gpu:NVIDIA H200"); never "cpu:cpu".
    return d.platform if d.device_kind == d.platform else f"{d.platform}:{d.device_kind}"


# --------------------------------------------------------------------------- helpers


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
    return acc * scale.reshape(shape_along(axis, x.ndim, n))


#: The level walk (:mod:`napari_varblur.engine.walk`) runs whole-image passes here: every
#: pass of an axis has one shape, so a few programs serve every level.
WHOLE_IMAGE_LEVELS = True


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


# --------------------------------------------------------------------------- radius


def float64_ceil_product(truncate: float, sigma: jax.Array) -> jax.Array:
    """The contract's radius ``ceil(truncate * sigma)`` as float64 gives it, for a traced
    sigma, also when x64 is off (then sigma is float32 and so is every operation here).

    ``truncate * sigma`` is split into exact float32 partial products (``truncate`` in
    12-bit pieces on the host, sigma in two 12-bit halves by masking its mantissa:
    12 x 12 bits fit float32's 24), and the sign of ``x - n - tau`` is found exactly
    with an error-free expansion sum, where ``n`` is the integer nearest to x and
    ``tau`` half a float64 ulp of ``n``: float64 rounds x down onto ``n`` exactly when
    ``x - n <= tau``.  Returns a float array of integers (same dtype as the work).
    """
    if jax.config.jax_enable_x64:
        return jnp.ceil(np.float64(truncate) * sigma.astype(jnp.float64))
    s = sigma.astype(jnp.float32)
    bits = lax.bitcast_convert_type(s, jnp.uint32)
    s_hi = lax.bitcast_convert_type(bits & jnp.uint32(0xFFFFF000), jnp.float32)
    s_lo = s - s_hi  # exact: the low 12 bits of the mantissa
    terms = []
    for piece in _pieces12(truncate):
        terms += [jnp.float32(piece) * s_hi, jnp.float32(piece) * s_lo]  # exact products
    n = jnp.round(jnp.float32(truncate) * s)
    _, exponent = jnp.frexp(jnp.maximum(n, 1))
    tau = jnp.where(n >= 1, jnp.ldexp(jnp.float32(1), exponent - 54), 0)
    above = _sign_of_sum([*terms, -n, -tau]) > 0
    return n + above.astype(n.dtype)


def _pieces12(value: float) -> list[float]:
    """``value`` as a sum of float64 numbers of at most 12 significant bits each (so
    each is a float32 whose product with a 12-bit number is exact)."""
    pieces, rest = [], float(value)
    while rest != 0 and len(pieces) < 6:
        _, e = math.frexp(rest)
        piece = math.ldexp(math.trunc(math.ldexp(rest, 12 - e)), e - 12)
        pieces.append(piece)
        rest -= piece  # exact in float64
    return pieces


def _two_sum(a, b):
    """Knuth's error-free sum: a + b == s + e exactly."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _sign_of_sum(terms):
    """The exact sign of a sum of floats (Shewchuk's grow-expansion: the components are
    non-overlapping and increase in magnitude, so the largest nonzero one has the sum's
    sign)."""
    expansion: list = []
    for t in terms:
        q, grown = t, []
        for e in expansion:
            q, h = _two_sum(q, e)
            grown.append(h)
        expansion = [*grown, q]
    sign = jnp.zeros_like(terms[0])
    for component in expansion:
        sign = jnp.where(component != 0, jnp.sign(component), sign)
    return sign


#: The Gaussian recurrence restarts from exact exponentials every RESTART offsets.
#: Between restarts w(d+1) = w(d) g(d) and g(d+1) = g(d) q2 with q2 = exp(-2h) rounded
#: once: after i steps g is within ~1.5 i ulp and w within ~0.75 i^2 + i ulp of the
#: exact values, so with i <= 3 every weight is within ~10 ulp (6e-7 in float32, 2e-15
#: in float64) of exp(-d^2 h), at any sigma.  Without restarts the rounding of q grows
#: as d^2 ulp: 1e-3 at sigma 60 in float32.  Blocks of 4 are also the fastest on XLA's
#: CPU backend here (a fused block of 12 dynamic slices ran 1.4x slower than three of 4).
RESTART = 4


def gauss(d, h):
    """``exp(-d^2 h)`` for an integer offset ``d`` (static or traced) and exponents ``h``."""
    df = jnp.asarray(d).astype(h.dtype)
    return jnp.exp(-(df * df) * h)


def recurrence_start(h):
    """The loop-invariant part of :func:`sum_over_offsets` for exponents ``h``: q^2, and
    w(1), g(1) (exact exponentials, computed once per blur, not per outer offset)."""
    return jnp.exp(-2 * h), jnp.exp(-h), jnp.exp(-3 * h)


def sum_over_offsets(h, reach, step, init, block: int, start=None):
    """Run ``carry = step(d, w_d, carry)`` for d = 1 .. reach (and up to block - 1 past it:
    ``step`` must mask offsets beyond each pixel's radius), w_d = exp(-d^2 h).

    Offsets go in blocks of ``block``: exact at each block's first offset, the
    recurrence (see :data:`RESTART`) within it; ``block=1`` is exact everywhere.  The
    first block starts from ``start`` (:func:`recurrence_start`, hoisted by callers that
    run this in a loop).  A static ``reach`` keeps the loop differentiable in reverse
    mode; a traced one lets one compiled program serve every radius up to the padding.
    """
    q2, w1, g1 = recurrence_start(h) if start is None else start

    def run_block(d0, w, g, carry):
        for j in range(block):
            if j:
                w, g = w * g, g * q2
            carry = step(d0 + j, w, carry)
        return carry

    def later_block(b, carry):
        d0 = b * block + 1
        d0f = jnp.asarray(d0).astype(h.dtype)
        return run_block(d0, gauss(d0, h), jnp.exp(-(2 * d0f + 1) * h), carry)

    count = (reach + block - 1) // block
    carry = run_block(1, w1, g1, init)  # masked by ``step`` when reach is 0
    if isinstance(count, int) and count * block <= UNROLL_TAPS // 2:
        for b in range(1, count):  # small and static: unrolled, so XLA fuses it
            carry = later_block(b, carry)
        return carry
    return lax.fori_loop(1, count, later_block, carry)


def varying_blur(work, radius, exponent, fills, layout, reach=None):
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
        Static tuple of ``(n, mode, pad)`` per blurred axis: the padding read on each side.
    reach
        The largest radius per axis (``<= pad``): static ints (default: the pads) or a
        traced int array, so that one program serves every radius up to the padding.

    Notes
    -----
    Offsets ``+d`` and ``-d`` have the same weight, so every loop runs over ``d >= 0``
    and adds the two mirrored slices first: half the passes.  The outer axes' offsets
    run in one loop with exact weights ``exp(-d^2 h)``; the last axis's weights come
    from :func:`sum_over_offsets`'s recurrence, the same for the numerator and the
    normaliser, so a constant image stays constant.  Crop axes are padded with zeros;
    taps beyond a pixel's own radius are dropped with ``where`` so a NaN there cannot
    leak.
    """
    k = len(layout)
    shape = work.shape
    radius = jnp.broadcast_to(radius, (k, *shape))
    exponent = jnp.broadcast_to(exponent, (k, *shape)).astype(work.dtype)
    if reach is None:
        reach = tuple(pad for _, _, pad in layout)
    padded = work
    for a in padding_order([mode for _, mode, _ in layout]):
        n, mode, pad = layout[a]
        padded = extend_axis(padded, a + 1, n, mode, pad, pad, fills[a])
    block = RESTART
    start = recurrence_start(exponent[-1])  # the last axis's, shared by every loop
    den = jnp.ones(shape, work.dtype)
    for a in range(k):
        last = a == k - 1
        den = den * _counted_sum(a, layout[a], radius[a], exponent[a], reach[a],
                                 block if last else 1, start if last else None)  # fmt: skip
    return _outer_sum(padded, radius, exponent, layout, reach, block, start) / den


def _counted_sum(a, axis_layout, radius, h, reach, block, start):
    """The sum of the weights a pixel counts on axis ``a`` (in bounds, within radius)."""
    n, mode, _ = axis_layout
    shape = radius.shape
    pos = lax.broadcasted_iota(jnp.int32, shape, a + 1)

    def step(d, w, total):
        keep = (d <= radius) & (d <= reach)  # blocks may run past the reach
        plus, minus = keep, keep
        if mode.crop:
            plus, minus = keep & (pos + d < n), keep & (pos - d >= 0)
        return total + jnp.where(plus, w, 0) + jnp.where(minus, w, 0)

    return sum_over_offsets(h, reach, step, jnp.ones(shape, h.dtype), block, start)


def _outer_sum(padded, radius, exponent, layout, reach, block, start):
    """The numerator: every outer offset (mirrored rows added first) times the
    weighted sum along the last axis."""
    k = len(layout)
    shape = radius.shape[1:]
    n_last, _, pad_last = layout[-1]

    def row_sum(rows):
        """Weighted sum over the last axis of rows padded by ``pad_last`` there."""
        centre = lax.slice_in_dim(rows, pad_last, pad_last + n_last, axis=k)

        def step(d, w, acc):
            plus = lax.dynamic_slice_in_dim(rows, pad_last + d, n_last, axis=k)
            minus = lax.dynamic_slice_in_dim(rows, pad_last - d, n_last, axis=k)
            keep = (d <= radius[-1]) & (d <= reach[-1])  # blocks may run past the reach
            return acc + jnp.where(keep, w * (plus + minus), 0)

        return sum_over_offsets(exponent[-1], reach[-1], step, centre, block, start)

    outer = layout[:-1]
    spans = [r + 1 for r in reach[:-1]]
    if not isinstance(reach, tuple):  # traced: one integer type for the loop
        spans = [jnp.asarray(r, jnp.int32) for r in spans]
    sizes = (shape[0], *(n for n, _, _ in outer), n_last + 2 * pad_last)
    signs = list(itertools.product((1, -1), repeat=len(outer)))

    def outer_body(f, acc):
        offsets = []
        for span in reversed(spans):
            offsets.append(f % span)
            f = f // span
        offsets.reverse()
        # The mirrored rows (+d, -d on every outer axis) share one weight: add them
        # first.  At d = 0 both signs read the same row, hence the halving.
        rows = None
        for sign in signs:
            starts = [0, *(pad + s * d for (_, _, pad), s, d in zip(outer, sign, offsets)), 0]
            starts = [jnp.asarray(v, jnp.int32) for v in starts]  # one integer type
            piece = lax.dynamic_slice(padded, starts, sizes)
            rows = piece if rows is None else rows + piece
        w_outer = jnp.ones(shape, padded.dtype)
        counts = jnp.ones(shape, bool)
        for a, d in enumerate(offsets):
            w_outer = w_outer * gauss(d, exponent[a]) * jnp.where(d == 0, 0.5, 1.0)
            counts = counts & (d <= radius[a])
        return acc + jnp.where(counts, w_outer * row_sum(rows), 0)

    return lax.fori_loop(0, math.prod(spans) if spans else 1, outer_body,
                         jnp.zeros(shape, padded.dtype))  # fmt: skip


# --------------------------------------------------------------------------- backend


@partial(jax.jit, static_argnames=("layout",))
def _separable(x, weights, scales, fills, layout):
    for (axis, n, mode, left), w, scale, fill in zip(layout, weights, scales, fills):
        x = correlate_axis(x, axis, n, mode, left, w, scale, fill)
    return x


_varying_jit = jax.jit(varying_blur, static_argnames=("layout",))


def padding_bucket(pad: int, limit: int) -> int:
    """The static padding for a largest radius ``pad``: the next power of two (at most
    ``limit``), so that sweeping sigma over a factor of 3.5 compiles at most 3 programs;
    the loops still stop at the true radius (a traced bound)."""
    bucket = pad if pad <= 2 else 1 << (pad - 1).bit_length()
    return min(bucket, max(pad, limit))


def blur(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None) -> np.ndarray:
    dtype = spec.precision
    # float64 must really be float64: switch x64 on for this call only (and off for
    # float32), leaving the user's global JAX configuration as it was.
    with jax.enable_x64(dtype == np.float64):
        if spec.sigma is not None:
            out = _global_blur(spec)
        else:
            out = _map_blur(spec, map_plan(spec, pad_floor))
    # A new, writeable array that owns its memory (JAX's own buffers are read-only).
    return np.array(out, dtype=dtype)


def _global_blur(spec: BlurSpec) -> np.ndarray:
    dtype = spec.precision
    passes = global_plan(spec)
    out = _separable(
        jnp.asarray(spec.image.astype(dtype, copy=False)),
        tuple(jnp.asarray(p.weights, dtype) for p in passes),
        tuple(jnp.asarray(p.scale, dtype) for p in passes),
        tuple(jnp.asarray(p.fill, dtype) for p in passes),
        layout=tuple((p.axis, p.n, p.mode, p.left) for p in passes),
    )
    return np.asarray(out)


def _map_blur(spec: BlurSpec, plan: list) -> np.ndarray:
    dtype = spec.precision
    work = working_layout(spec.image, spec.axes).astype(dtype)

    def per_pixel(values: np.ndarray, kind) -> jax.Array:
        return jnp.asarray(working_layout(np.broadcast_to(values, spec.shape), spec.axes), kind)

    # An isotropic map sends one radius and one exponent array, broadcast over axes.
    # Its radius is capped at the largest limit only: the loops never go past an
    # axis's own reach, so the per-axis cap needs no array of its own.
    axes_data = plan[:1] if spec.isotropic else plan
    limit = max(m.limit for m in plan) if spec.isotropic else None
    out = _varying_jit(
        jnp.asarray(work),
        jnp.stack([per_pixel(m.radius(limit), jnp.int32) for m in axes_data]),
        jnp.stack([per_pixel(m.exponent(dtype), dtype) for m in axes_data]),
        tuple(jnp.asarray(m.fill, dtype) for m in plan),
        layout=tuple((m.n, m.mode, padding_bucket(m.pad, m.limit)) for m in plan),
        reach=jnp.asarray([m.pad for m in plan], jnp.int32),
    )
    return from_working_layout(np.asarray(out), spec.shape, spec.axes)
