"""Sigma levels: a sigma map as a few global blurs, mixed per pixel.

A pixel's kernel is a product of 1-D kernels, one per blurred axis (``docs/contract.md``).
Along each axis we blur the image with a short list of *levels* (a sigma and a radius
each) and give every pixel a mix of at most two of them:

- **quantised maps** (few distinct sigmas): one level per distinct value, radius
  ``ceil(truncate * value)``; each pixel takes its own value's level with weight 1.
  This is the exact contract, computed with global passes.
- **tolerance mode**: inside one radius bucket (all sigmas with the same radius ``r``)
  levels ``s0 < s1`` with radius ``r`` each, and a pixel of sigma ``s`` takes
  ``(1 - t) k(s0) + t k(s1)`` with ``t = (s^2 - s0^2) / (s1^2 - s0^2)`` (so the mix has
  the pixel's variance).  Levels never straddle a radius jump: the pixel's window is
  its exact window, and a NaN reaches exactly the pixels it reaches in the contract.

The bound.  Every 1-D kernel here is normalised (crop renormalises over the in-bounds
window, per axis), so the error of the output is ``sum_d e(d) v(d)`` with
``sum_d e(d) = 0``, at most ``||e||_1 (max v - min v) / 2``.  The kernel of a pixel
and its mix are tensor products of the per-axis kernels ``K_a`` and mixes ``A_a``
(non-negative, each of L1 norm 1), so ``||A - K||_1 <= sum_a ||A_a - K_a||_1``.  Each
interval between levels is split until the 1-D L1 error, maximised over the interval
(16 interior sigmas, then 16 more around each local maximum found) and over every
window the axis has (crop windows at each distance from the edge), is at most
``0.97 * 2 * tolerance / naxes``: so every output is within ``tolerance * (max - min)``
of the exact result (the error is a smooth bump, as ``t (1 - t)``: the refined maximum
is within about 1e-4 of the true one, and the 0.97 leaves 300 times that).  Where the
axes share their levels and each has one symmetric window (every mode but crop), the
D-dimensional L1 distance is summed exactly instead, over the kernel's symmetric
orbits: the per-axis sums overstate it 1.5x in 2-D and 2x in 3-D (their errors partly
cancel), and the looser bound cost 134 levels instead of 103 on a 3-D map from sigma
0.5 to 8.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from .rules import radius_of
from .shapes import compact
from .taps import NO_LIMIT

#: At most this many distinct sigmas (per axis) make a map *quantised*: exact levels.
MAX_QUANTISED = 64
#: Tolerance levels are planned up to this radius (the bound's work grows as r^3 per
#: crop bucket); a map reaching further is blurred exactly.
MAX_LEVEL_RADIUS = 128
#: Interior sigmas at which an interval's error is evaluated (then as many again around
#: each local maximum, ``ZOOMS`` times: :func:`_refined_max`), and the share of the budget the
#: refined maximum may use.  (With 16 samples alone and a share of 0.8, a 3-D map from
#: sigma 0.5 to 8 took 103 levels; refined, at 0.97, 94: buckets 21-23 need one
#: interval, not two.)
SAMPLES = 16
ZOOMS = 1
MAX_PEAKS = 4
SAFETY = 0.97
#: Pixels located per chunk (bounds locate's float64 temporaries).
LOCATE_CHUNK = 1 << 16
#: The most distinct taps for which a tensor kernel's mixing error is summed exactly
#: (3-D: radius 63; beyond it the bound of sums is used).
MAX_TERMS = 1 << 16
#: An interval is not split below this width (relative): far below any useful budget.
MIN_WIDTH = 1e-9
#: The most pieces one interval is cut into at once.
MAX_PIECES = 16


@dataclass(frozen=True)
class AxisLevels:
    """The levels of one blurred axis, sorted by (radius, sigma).

    ``sigma[l]`` and ``radius[l]`` define level ``l`` (radius 0: the axis untouched);
    ``joined[l]`` says levels ``l`` and ``l + 1`` bound an interval a pixel may mix.
    """

    sigma: np.ndarray
    radius: np.ndarray
    joined: np.ndarray
    limit: int
    truncate: float

    def __len__(self) -> int:
        return len(self.sigma)

    @cached_property
    def _buckets(self) -> tuple[np.ndarray, np.ndarray]:
        """Per radius ``r`` up to the largest: the first and last level of bucket ``r``."""
        r = np.arange(int(self.radius[-1]) + 1)
        first = np.searchsorted(self.radius, r, side="left")
        return first, np.maximum(np.searchsorted(self.radius, r, side="right") - 1, first)

    @property
    def quantised(self) -> bool:
        """One level per sigma value, no mixing."""
        return not self.joined.any()

    def locate(self, s: np.ndarray, dtype=np.float64) -> tuple[np.ndarray, np.ndarray | None]:
        """Per pixel: the lower level ``k`` and the upper level's weight ``t`` (of
        ``dtype``; ``None`` for quantised levels: each pixel's sigma is a level).
        Computed in float64 in chunks, so temporaries stay small."""
        s = np.asarray(s)
        index = np.int16 if len(self) < 2**15 else np.int32  # half an image, or one
        if self.quantised:
            return np.searchsorted(self.sigma, s).astype(index), None
        flat = np.ravel(s)
        k = np.empty(flat.shape, index)
        t = np.empty(flat.shape, dtype)
        for lo in range(0, flat.size, LOCATE_CHUNK):
            part = slice(lo, lo + LOCATE_CHUNK)
            k[part], t[part] = self._locate(flat[part].astype(np.float64))
        return k.reshape(s.shape), t.reshape(s.shape)

    def _locate(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = np.minimum(radius_of(s, self.truncate), self.limit)
        return self.mix(s, r.astype(np.int64))

    def mix(self, s, r, xp=np, s_index=None):
        """Each pixel's lower level ``k`` and upper weight ``t`` from its sigma ``s`` and
        radius ``r`` (the contract's, computed by the caller), with ``xp`` NumPy or
        ``jax.numpy``; ``s_index`` (default ``s``) finds the level, so JAX can stop
        its gradient there while ``t`` stays differentiable in ``s``.

        Sigmas never decrease along the levels (a bucket's lowest level repeats the
        previous bucket's highest sigma): find the sigma, then keep it within the levels
        of its own radius bucket.  A radius beyond the levels (a traced sigma above
        ``max_radius``) takes the highest bucket, so its sigma acts as the largest.
        """
        first, last = self._buckets
        sigma = xp.asarray(self.sigma, s.dtype)
        r = xp.clip(r, 0, len(first) - 1)
        k = xp.searchsorted(sigma, s if s_index is None else s_index, side="right") - 1
        k = xp.clip(k, xp.asarray(first)[r], xp.asarray(last)[r])
        upper = xp.minimum(k + 1, len(self) - 1)
        lo2, hi2 = sigma[k] ** 2, sigma[upper] ** 2
        joined = xp.asarray(self.joined)[k]
        span = xp.where(joined, hi2 - lo2, 1)  # never 0: no NaN, nor in a gradient
        return k, xp.clip(xp.where(joined, (s * s - lo2) / span, 0), 0, 1)


def quantised_levels(values: np.ndarray, truncate: float, limit: int) -> AxisLevels:
    """One exact level per distinct sigma (``values`` sorted, unique)."""
    radius = np.minimum(radius_of(values, truncate), limit).astype(np.int64)
    return AxisLevels(values, radius, np.zeros(len(values), bool), limit, truncate)


def tolerance_levels(
    low: float, high: float, has_zero: bool, budget: float, truncate: float,
    windows: Sequence[Callable[[int], tuple]], limit: int
) -> AxisLevels:  # fmt: skip
    """Levels for sigmas in ``[low, high]`` (and 0 if ``has_zero``), shared by the axes
    whose windows ``windows[i](r)`` gives, with a mixing error within ``budget``
    (:func:`mixing_error`)."""
    sig, rad, joined = [], [], []
    if has_zero:
        sig.append(0.0), rad.append(0), joined.append(False)
    if high > 0:
        r_lo = int(min(max(radius_of(low, truncate), 1), limit))
        r_hi = int(min(radius_of(high, truncate), limit))
        for r in range(r_lo, r_hi + 1):
            lo, hi = bucket_range(r, truncate, limit)
            shapes = tuple(w(r) for w in windows)
            points = _split(max(lo, low), min(hi, high), r, budget, shapes)
            sig.extend(points), rad.extend([r] * len(points))
            joined.extend([True] * (len(points) - 1) + [False])
    return AxisLevels(np.array(sig), np.array(rad, np.int64), np.array(joined), limit, truncate)


def bucket_range(r: int, truncate: float, limit: int = NO_LIMIT) -> tuple[float, float]:
    """Sigmas whose (capped) radius is ``r`` lie in ``[lo, hi]``: ``hi`` is the largest
    float64 with ``ceil(truncate * hi) <= r`` (``inf`` for the capped bucket), ``lo``
    the previous bucket's ``hi`` (0 for ``r = 1``)."""
    return (_bucket_top(r - 1, truncate) if r > 1 else 0.0,
            np.inf if r >= limit else _bucket_top(r, truncate))  # fmt: skip


@lru_cache(maxsize=4096)
def _bucket_top(r: int, truncate: float) -> float:
    """The largest float64 sigma of radius ``r`` or less (kept: a plan asks for every
    bucket's twice, ~10 us each, a millisecond a plan)."""
    s = r / truncate
    while radius_of(s, truncate) > r:
        s = np.nextafter(s, 0.0)
    while radius_of(np.nextafter(s, np.inf), truncate) <= r:
        s = np.nextafter(s, np.inf)
    return float(s)


def windows(n: int, crop: bool, limit: int = NO_LIMIT) -> Callable[[int], tuple]:
    """The distinct windows ``[-a, b]`` of radius ``r`` (capped at ``limit``) on an axis
    of length ``n``: the full one, or in crop mode one per distance from the edge (a
    mirror image has the same error)."""

    def of(r: int) -> tuple[tuple[int, int], ...]:
        r = min(r, limit)
        if not crop:
            return ((r, r),)
        edges = itertools.chain(range(min(n, r + 1)), range(max(0, n - r - 1), n))
        pairs = {tuple(sorted((min(r, i), min(r, n - 1 - i)))) for i in edges}
        return tuple(sorted(pairs))

    return of


@lru_cache(maxsize=4096)
def _split(lo: float, hi: float, r: int, budget: float, shapes) -> tuple[float, ...]:
    """Level sigmas from ``lo`` to ``hi``: an interval over budget is cut into as many
    pieces as its error asks for (the error grows as the square of a short interval's
    width), and a piece still over budget is cut again.  Halving alone overshoots:
    an interval at five times the budget needs three pieces, not four.  (Kept: every
    call plans its levels again, and a bucket's split asked ~20 cached errors.)"""
    if hi - lo <= MIN_WIDTH * max(hi, 1e-300):
        return (hi,)
    limit = SAFETY * budget

    def too_big(a: float, b: float) -> bool:  # (refined only where the samples pass)
        return b - a > MIN_WIDTH * b and (
            mixing_error(a, b, r, shapes, False) > limit or mixing_error(a, b, r, shapes) > limit
        )

    done, todo = [], [(lo, hi)]
    while todo:
        a, b = todo.pop()
        if not too_big(a, b):
            done.append((a, b))
            continue
        # The fewest equal pieces that all pass (from the square-law guess up).
        n = max(2, math.ceil(math.sqrt(mixing_error(a, b, r, shapes, False) / limit)))
        while True:
            cuts = _cuts(a, b, n)
            pieces = list(itertools.pairwise(cuts))
            over = [p for p in pieces if too_big(*p)]
            if not over or n >= MAX_PIECES:
                break
            n += 1
        done += [p for p in pieces if p not in over]
        todo += over
    done.sort()
    return (done[0][0], *(b for _, b in done))


def _cuts(a: float, b: float, n: int) -> list[float]:
    """``n`` pieces from ``a`` to ``b``: equal ratios of sigma (the error follows the
    relative width) unless ``a`` is near 0, then equal steps of sigma squared."""
    u = np.arange(n + 1) / n
    inner = b * (a / b) ** (1 - u) if a > 0.25 * b else np.sqrt(a * a + (b * b - a * a) * u)
    return [a] + [float(x) for x in inner[1:-1]] + [b]


@lru_cache(maxsize=8192)
def mixing_error(lo: float, hi: float, r: int, shapes: tuple, refine: bool = True) -> float:
    """Bound on the L1 distance between a pixel's kernel and its mix of levels ``lo``
    and ``hi`` (radius ``r``) over the axes that share them (one window set each).

    Per axis, ``e_a(s)`` is the 1-D mixing error and ``u_a = ||k_hi - k_lo||_1``, both
    maximised over the axis's windows.  One axis: ``e_a``.  Several axes mixing the
    *same* two levels with one weight ``t`` (``(1 - t) K_lo + t K_hi``, K the tensor
    products): the tensor mix of the per-axis mixes is within ``sum_a e_a`` of the
    kernel, and differs from this mix by ``sum_{|S| >= 2} (t - t^|S|) u^S k_lo^rest``
    (expand ``k_hi = k_lo + u``), so the bound adds
    ``t (prod(1 + u_a) - 1 - sum u_a) - (prod(1 + t u_a) - 1 - t sum u_a)``.
    Where every axis has one symmetric window, the D-dimensional distance itself
    (:func:`_tensor_error`).  The maximum over the sigmas between ``lo`` and ``hi``
    is refined from samples (:func:`_refined_max`; ``refine=False``: the samples'
    maximum, which is never above it).
    """
    terms = _tensor_terms(tuple(s[0][0] for s in shapes)) if _one_window(shapes) else None
    if terms is not None:
        return _refined_max(lambda u: _tensor_error(lo, hi, terms, u), refine)
    return _refined_max(lambda u: _axes_error(lo, hi, r, shapes, u), refine)


def _refined_max(error: Callable[[np.ndarray], np.ndarray], refine: bool = True) -> float:
    """The maximum of ``error(u)`` over ``0 < u < 1`` (0 at both ends): sampled at
    :data:`SAMPLES` points, then :data:`ZOOMS` times at as many points between the
    neighbours of each local maximum of the samples so far (a bump may have more than
    one; the :data:`MAX_PEAKS` highest)."""
    u = np.linspace(0.0, 1.0, SAMPLES + 2)
    e = np.concatenate(([0.0], error(u[1:-1]), [0.0]))
    for _ in range(ZOOMS if refine else 0):
        peaks = np.flatnonzero((e[1:-1] > e[:-2]) & (e[1:-1] >= e[2:])) + 1
        peaks = peaks[np.argsort(e[peaks])[::-1][:MAX_PEAKS]]
        if not len(peaks):  # (0 everywhere: lo == hi)
            break
        finer = [np.linspace(u[i - 1], u[i + 1], SAMPLES + 2)[1:-1] for i in peaks]
        finer = np.setdiff1d(np.concatenate(finer), u)
        u, e = np.concatenate((u, finer)), np.concatenate((e, error(finer)))
        order = np.argsort(u, kind="stable")
        u, e = u[order], e[order]
    return float(e.max())


def _axes_error(lo, hi, r, shapes: tuple, u: np.ndarray) -> np.ndarray:
    """Per sample of ``u``: the per-axis errors summed, with the cross terms of axes
    that mix the same two levels at once (:func:`mixing_error`)."""
    total = np.zeros_like(u)
    spread = []
    for shape in shapes:
        e, spread_a = _axis_error(lo, hi, r, shape, u)
        total += e
        spread.append(spread_a)
    if len(spread) > 1:
        big, small = np.prod([1 + v for v in spread]), np.prod([1 + u * v for v in spread], axis=0)
        total += u * (big - 1 - sum(spread)) - (small - 1 - u * sum(spread))
    return total


def _one_window(shapes: tuple) -> bool:
    """Several axes, each with one symmetric window (every mode but crop)."""
    return len(shapes) > 1 and all(len(s) == 1 and s[0][0] == s[0][1] for s in shapes)


@lru_cache(maxsize=64)
def _tensor_terms(half: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct taps of a symmetric tensor kernel with half-widths ``half``, one per
    orbit of the kernel's symmetries (sign flips; axis swaps where the half-widths are
    equal): their offsets ``|d|`` per axis and how many taps each stands for.  ``None``
    where there are more than :data:`MAX_TERMS`."""
    if len(set(half)) == 1:
        count = math.comb(half[0] + len(half), len(half))
        if count > MAX_TERMS:
            return None
        n = len(half)
        d = np.array(list(itertools.combinations_with_replacement(range(half[0] + 1), n)), np.int32)
        # A row's distinct orderings: n! over the factorial of each value's repeats
        # (``repeats[i]``: how often entry i's value occurs; its value's factorial,
        # taken to the power 1 / repeats[i] over the entries sharing it).
        repeats = (d[:, :, None] == d[:, None, :]).sum(axis=2)
        factorial = np.array([math.factorial(k) for k in range(n + 1)], np.float64)
        swaps = np.rint(math.factorial(n) / np.prod(factorial[repeats] ** (1.0 / repeats), axis=1))
    else:
        if math.prod(h + 1 for h in half) > MAX_TERMS:
            return None
        d = np.array(list(itertools.product(*(range(h + 1) for h in half))), np.int32)
        swaps = np.ones(len(d))
    flips = np.prod(np.where(d > 0, 2.0, 1.0), axis=1)
    return d, swaps * flips


def _tensor_error(lo, hi, terms, u) -> np.ndarray:
    """Per sample of ``u``: the exact L1 distance between the tensor kernel at the
    pixel's sigma and the mix ``(1 - u) K_lo + u K_hi`` of the tensor levels, summed
    over the distinct taps ``terms`` (:func:`_tensor_terms`)."""
    d, count = terms
    sig = np.concatenate(([lo, hi], np.sqrt(lo * lo + (hi * hi - lo * lo) * u)))
    values = np.ones((len(sig), len(d)))
    for a in range(d.shape[1]):
        half = np.arange(d[:, a].max() + 1, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):
            g = np.exp(-0.5 * (half[None, :] / np.maximum(sig[:, None], 1e-300)) ** 2)
        g[:, 0] = 1.0
        g /= 2 * g.sum(axis=1, keepdims=True) - 1  # the full window's sum: 1 + 2 sum_{d>0}
        values *= g[:, d[:, a]]
    mix = (1 - u)[:, None] * values[0] + u[:, None] * values[1]
    return np.abs(mix - values[2:]) @ count


def _axis_error(lo, hi, r, shape, u) -> tuple[np.ndarray, float]:
    """Per sample of ``u``: the worst 1-D mixing error over the windows ``shape``; and
    the largest ``||k_hi - k_lo||_1``."""
    sig = np.concatenate(([lo, hi], np.sqrt(lo * lo + (hi * hi - lo * lo) * u)))
    d = np.arange(-r, r + 1, dtype=np.float64)
    with np.errstate(divide="ignore", over="ignore"):
        g = np.exp(-0.5 * (d[None, :] / np.maximum(sig[:, None], 1e-300)) ** 2)
    g[:, r] = 1.0
    a = np.array([w[0] for w in shape])
    b = np.array([w[1] for w in shape])
    inside = (d[None, :] >= -a[:, None]) & (d[None, :] <= b[:, None])  # windows x taps
    k = g[:, None, :] * inside[None]
    k /= k.sum(axis=2, keepdims=True)  # sigmas x windows x taps
    mix = (1 - u)[:, None, None] * k[0] + u[:, None, None] * k[1]
    error = np.abs(mix - k[2:]).sum(axis=2).max(axis=1)
    return error, float(np.abs(k[1] - k[0]).sum(axis=1).max())


def distinct_values(values: np.ndarray, most: int = MAX_QUANTISED) -> np.ndarray | None:
    """The sorted distinct values of ``values`` if there are at most ``most``, else None.

    4096 pixels drawn at random reject a smooth map at once; a map that passes is
    checked whole, in chunks (small temporaries), stopping at the first chunk that
    holds more values than allowed.  Only what varies is read: axes of stride 0, or
    along which the map is constant, kept at length 1 (a 2048² map broadcast from one
    row took ~50 ms raveled whole; a 64x128x128 map of one sigma per z-plane, 7.8 ms
    read whole, is its 64 values).
    """
    flat = np.ravel(compact(np.asarray(values)))
    if not flat.size:
        return np.zeros(0)
    picks = np.random.default_rng(0).integers(0, flat.size, min(flat.size, 4096))
    found = np.unique(flat[picks])
    if len(found) > most:
        return None
    for lo in range(0, flat.size, LOCATE_CHUNK):
        part = flat[lo : lo + LOCATE_CHUNK]
        at = np.minimum(np.searchsorted(found, part), len(found) - 1)
        missing = part[found[at] != part]
        if missing.size:
            found = np.union1d(found, np.unique(missing))
            if len(found) > most:
                return None
    return found.astype(np.float64)


def level_weight(k, t, level: int, xp=np):
    """The weight of ``level`` in each pixel's mix: ``1 - t`` where the pixel's lower level
    ``k`` is ``level``, ``t`` where ``k`` is ``level - 1``, else 0 (``t`` is ``None`` for
    quantised levels: weight 1 on the pixel's own level).  NumPy or ``jax.numpy``."""
    if t is None:
        return k == level
    return xp.where(k == level, 1 - t, 0) + xp.where(k == level - 1, t, 0)
