"""The exact per-pixel gather in XLA: each pixel's own radius (the contract's float64 rule,
reproduced exactly from a float32 sigma) and the Gaussian recurrence over offsets."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ...core.taps import padding_order
from .passes import UNROLL_TAPS, extend_axis

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


#: Loops over more offsets than this are summed with compensation (x64 is off, so
#: float32 has no wider accumulator): a plain float32 running sum drifts with the
#: loop's length, 1.2e-5 of the values over the ~4000 offsets of sigma 1000-1300 (the
#: contract allows 1e-5; Numba, with float64 accumulators, 0.5e-5).  Shorter loops
#: (sigma up to ~85 at truncate 3; at most 0.2e-5 there) keep the plain sum.
COMPENSATE_AFTER = 256


def running_sum(value, compensated: bool):
    """A running sum that starts at ``value``: the array itself, or with ``compensated``
    a (sum, compensation) pair for :func:`add`."""
    return (value, jnp.zeros_like(value)) if compensated else value


def add(total, term):
    """``total + term`` for a :func:`running_sum`; Kahan's step for a pair (``c`` holds
    the rounding error of the last addition, taken off the next term; none once the
    sum is inf or NaN, which it then stays, as a plain sum would)."""
    if not isinstance(total, tuple):
        return total + term
    s, c = total
    y = term - c
    t = s + y
    # An infinite sum has no rounding error to carry: (inf - inf) - y would be NaN.
    return t, jnp.where(jnp.isfinite(t), (t - s) - y, 0)


def sum_value(total):
    """The value of a :func:`running_sum` (the pending correction applied)."""
    return total[0] - total[1] if isinstance(total, tuple) else total


def gauss(d, h):
    """``exp(-d^2 h)`` for an integer offset ``d`` (static or traced) and exponents ``h``."""
    df = jnp.asarray(d).astype(h.dtype)
    return jnp.exp(-(df * df) * h)


def recurrence_start(h):
    """The loop-invariant part of :func:`sum_over_offsets` for exponents ``h``: q^2, and
    w(1), g(1) (exact exponentials, computed once per blur, not per outer offset)."""
    return jnp.exp(-2 * h), jnp.exp(-h), jnp.exp(-3 * h)


def sum_over_offsets(h, reach, step, init, block: int, start=None, compensated=False):
    """Run ``carry = step(d, w_d, carry)`` for d = 1 .. reach (and possibly past it:
    ``step`` must mask offsets beyond each pixel's radius), w_d = exp(-d^2 h).

    Offsets go in blocks of ``block``: exact at each block's first offset, the
    recurrence (see :data:`RESTART`) within it; ``block=1`` is exact everywhere.  The
    first block starts from ``start`` (:func:`recurrence_start`, hoisted by callers that
    run this in a loop).  A static ``reach`` keeps the loop differentiable in reverse
    mode; a traced one lets one compiled program serve every radius up to the padding.
    ``compensated``: the later blocks run in groups (:func:`_compensated_blocks`).
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
    if compensated:
        return _compensated_blocks(later_block, count, carry)
    if isinstance(count, int) and count * block <= UNROLL_TAPS // 2:
        for b in range(1, count):  # small and static: unrolled, so XLA fuses it
            carry = later_block(b, carry)
        return carry
    return lax.fori_loop(1, count, later_block, carry)


#: Blocks per group of :func:`_compensated_blocks`.
GROUP = 8


def _compensated_blocks(later_block, count, carry):
    """``carry`` plus blocks 1 .. count - 1, in groups of :data:`GROUP` blocks: a plain sum
    from 0 within each group, the groups' sums added by Kahan's step, so the rounding
    no longer grows with the loop (one compensation per group costs next to nothing).
    Every group runs all its blocks (``step`` masks those past ``count``), so a static
    ``count`` keeps static trip counts, for reverse mode."""

    def group(k, total):
        first = 1 + k * GROUP
        blocks = lambda i, acc: later_block(first + i, acc)  # noqa: E731
        return add(total, lax.fori_loop(0, GROUP, blocks, jnp.zeros_like(total[0])))

    groups = (count - 1 + GROUP - 1) // GROUP
    return sum_value(lax.fori_loop(0, groups, group, running_sum(carry, True)))


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
    leak.  A loop longer than :data:`COMPENSATE_AFTER` offsets (by its static padding)
    is summed with Kahan's compensation: per group of blocks on the last axis, per
    offset on the outer axes (each of which sums a whole row).
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
    n, mode, pad = axis_layout
    shape = radius.shape
    pos = lax.broadcasted_iota(jnp.int32, shape, a + 1)

    def step(d, w, total):
        keep = (d <= radius) & (d <= reach)  # blocks may run past the reach
        plus, minus = keep, keep
        if mode.crop:
            plus, minus = keep & (pos + d < n), keep & (pos - d >= 0)
        return total + jnp.where(plus, w, 0) + jnp.where(minus, w, 0)

    return sum_over_offsets(h, reach, step, jnp.ones(shape, h.dtype), block, start,
                            pad > COMPENSATE_AFTER)  # fmt: skip


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

        return sum_over_offsets(exponent[-1], reach[-1], step, centre, block, start,
                                pad_last > COMPENSATE_AFTER)  # fmt: skip

    outer = layout[:-1]
    outer_count = math.prod(pad + 1 for _, _, pad in outer)  # static, also for a traced reach
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
        return add(acc, jnp.where(counts, w_outer * row_sum(rows), 0))

    init = running_sum(jnp.zeros(shape, padded.dtype), outer_count > COMPENSATE_AFTER)
    return sum_value(lax.fori_loop(0, math.prod(spans) if spans else 1, outer_body, init))
