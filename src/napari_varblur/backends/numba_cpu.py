"""The Numba backend: parallel CPU kernels (``prange``), compiled once and cached on disk.

Global sigma: one 1-D pass per axis; each pass copies a block of lines into an extended
buffer (so edge modes cost nothing in the inner loop) and slides the taps over it with
a contiguous innermost loop.  Sigma map: tiles of neighbouring pixels along the last
axis share one window, vectorised across the tile, with per-pixel weight tables from one
Gaussian recurrence (:func:`_gauss_table`); a tile whose window holds NaN or inf is
summed pixel by pixel over each pixel's own window, so a non-finite value never reaches
a pixel whose window does not hold it.

Every kernel is compiled for one array type per precision: maps are handed over as
C-contiguous float64 arrays with 0/1 broadcast flags, so a new map dtype or layout
never triggers a new compilation.  Parallel kernels run under a lock when Numba's
threading layer is not threadsafe (``workqueue``), so napari's worker threads and
dask's threaded scheduler can call this backend concurrently.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import replace

import numba
import numpy as np
from numba import njit, prange

from ..core.rules import MAX_EXPONENT
from ..core.spec import BlurSpec
from ..core.taps import (
    AxisPass,
    MapAxis,
    extend_along,
    from_working_layout,
    global_plan,
    map_plan,
    padding_order,
    working_layout,
)
from ..engine.masked import numerator, ratio


def describe() -> str:
    return f"numba {numba.__version__}, {device_name()}"


def device_name() -> str:
    return f"cpu ({numba.get_num_threads()} threads)"


def compiles() -> int:
    """How many kernels this process compiled so far (not read from Numba's cache)."""
    kernels = [v for v in globals().values() if isinstance(v, numba.core.dispatcher.Dispatcher)]
    return sum(sum(k.stats.cache_misses.values()) for k in kernels)


def blur(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None) -> np.ndarray:
    # Kernels write only into new arrays, so the input is read in place when it already
    # has the working dtype; an untouched image is copied (never the caller's array).
    x = spec.image.astype(spec.precision, copy=False)
    if spec.sigma is not None:
        passes = global_plan(spec)
        if not passes:
            return x.copy()
        last = x.ndim - 1
        pair = (
            len(passes) >= 2
            and (passes[-2].axis, passes[-1].axis) == (last - 1, last)
            and passes[-2].taps <= _FUSED_TAPS
        )
        for p in passes[:-2] if pair else passes:
            x = _correlate_axis(x, p)
        return _fused_last_two(x, *passes[-2:]) if pair else x
    return _varying_blur(x, spec, map_plan(spec, pad_floor))


# ------------------------------------------------------------------- thread safety

_LOCK = threading.Lock()
#: Whether the active threading layer is threadsafe; unknown until the first launch.
_THREADSAFE: bool | None = None


@contextlib.contextmanager
def _parallel_section():
    """Serialise parallel kernel launches unless the threading layer is threadsafe
    (``tbb`` and ``omp`` are; ``workqueue``, Numba's fallback, aborts the process when
    two threads launch at once)."""
    global _THREADSAFE
    if _THREADSAFE:
        yield
        return
    with _LOCK:
        yield
        if _THREADSAFE is None:
            _THREADSAFE = numba.threading_layer() != "workqueue"


# ------------------------------------------------------------------- global sigma


def _correlate_axis(x: np.ndarray, p: AxisPass) -> np.ndarray:
    return correlate(x, p.axis, p.source(), p.fill, p.weights, p.scale)


def correlate(x, axis: int, source, fill: float, weights, scale) -> np.ndarray:
    """One 1-D pass: ``out[i] = scale[i] * sum_t weights[t] * x[source[i + t]]`` along
    ``axis`` (``fill`` where ``source`` is -1), for ``i < len(scale)``: the whole axis
    of a global blur, or a tile's outputs read from a block of the image."""
    dtype = np.dtype(x.dtype)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1 :], dtype=np.int64))
    lines = _kernel_array(x, dtype).reshape(outer, x.shape[axis], inner)
    shape = x.shape[:axis] + (len(scale),) + x.shape[axis + 1 :]
    out = np.empty((outer, len(scale), inner), dtype)
    weights, scale = weights.astype(dtype), scale.astype(dtype)
    source = np.ascontiguousarray(source, np.int64)
    with _parallel_section():
        if inner == 1:
            # Along the contiguous axis: one extended row at a time, vectorised over
            # positions.
            _rows_kernel(lines[:, :, 0], out[:, :, 0], source, dtype.type(fill), weights, scale)
        else:
            # Along a strided axis: whole rows of the other axes at once.
            _columns_kernel(lines, out, source, dtype.type(fill), weights, scale, _ROW_BLOCK)
    return out.reshape(shape)


def _fused_last_two(x: np.ndarray, p0: AxisPass, p1: AxisPass) -> np.ndarray:
    """The passes along the last two axes in one sweep over memory (``_fused_kernel``)."""
    dtype = np.dtype(x.dtype)
    lines = _kernel_array(x, dtype).reshape(-1, p0.n, p1.n)
    out = np.empty_like(lines)
    args = []
    for p in (p0, p1):
        args += [p.source(), dtype.type(p.fill), p.weights.astype(dtype), p.scale.astype(dtype)]
    # Enough runs of rows to balance the threads, each long enough that its first
    # taps - 1 rows (filtered once more by the run before) cost little.
    runs = max(1, 4 * numba.get_num_threads() // lines.shape[0])
    block = max(_FUSED_BLOCK, -(-p0.n // runs))
    with _parallel_section():
        _fused_kernel(lines, out, *args, block)
    return out.reshape(x.shape)


def masked(spec: BlurSpec, valid: np.ndarray, counts: bool) -> np.ndarray | None:
    """A masked blur in one sweep: both sums of the normalised convolution and their
    ratio, or ``None`` where this backend has no such kernel (the generic path of
    :mod:`napari_varblur.engine.masked` runs two blurs).  ``valid`` has the image's ndim and
    broadcasts to it; ``counts``: whether constant-mode taps outside the image count."""
    if spec.sigma is not None:
        return _masked_global(spec, valid, counts)
    return _masked_map(spec, valid, counts)


def _masked_global(spec: BlurSpec, valid: np.ndarray, counts: bool) -> np.ndarray | None:
    """Global passes that include the fused last two axes: ``_fused_masked_kernel``
    splits the image into its valid values and its validity and filters both along
    the last two axes; other axes filter both sums, then they are divided.  (Passes
    commute: also in constant mode, where a filtered fill plane is still the fill.)"""
    passes = global_plan(spec)
    last = spec.image.ndim - 1
    fused = passes[-2:]
    if [p.axis for p in fused] != [last - 1, last] or fused[0].taps > _FUSED_TAPS:
        return None
    dtype = np.dtype(spec.precision)

    def fills(p: AxisPass) -> tuple[float, float]:  # (values, validity) of fill taps
        return (p.mode.fill(spec.cval), p.mode.fill(1.0)) if counts else (0.0, 0.0)

    p0, p1 = fused
    image = spec.image.astype(dtype, copy=False)
    lines = _kernel_array(image, dtype).reshape(-1, p0.n, p1.n)
    flags = np.broadcast_to(valid, valid.shape[:-2] + spec.shape[-2:])
    if flags.shape[:-2] != spec.shape[:-2]:  # varies along some batch axes only
        flags = np.broadcast_to(flags, spec.shape)
    flags = np.ascontiguousarray(flags).view(np.uint8).reshape(-1, p0.n, p1.n)
    out = np.empty_like(lines)
    den = np.empty_like(lines) if len(passes) > 2 else np.empty((0, 0, 0), dtype)
    args = []
    for p in fused:
        fill, one = fills(p)
        args += [p.source(), dtype.type(fill), p.weights.astype(dtype), p.scale.astype(dtype),
                 dtype.type(one)]  # fmt: skip
    runs = max(1, 4 * numba.get_num_threads() // lines.shape[0])
    block = max(_FUSED_BLOCK, -(-p0.n // runs))
    with _parallel_section():
        _fused_masked_kernel(lines, flags, out, den, *args, block)
    if len(passes) == 2:
        return out.reshape(spec.shape)
    num, den = out.reshape(spec.shape), den.reshape(spec.shape)
    for p in passes[:-2]:
        fill, one = fills(p)
        num = correlate(num, p.axis, p.source(), fill, p.weights, p.scale)
        den = correlate(den, p.axis, p.source(), one, p.weights, p.scale)
    return ratio(num, den)


def _masked_map(spec: BlurSpec, valid: np.ndarray, counts: bool) -> np.ndarray | None:
    """A sigma map's gather summing the valid values and the valid weights at once,
    when every value it reads is finite (else the generic path keeps NaN in place)."""
    if len(spec.axes) > 3:
        return None
    dtype = np.dtype(spec.precision)
    values = replace(spec, image=numerator(spec.image, valid, dtype),
                     cval=spec.cval if counts else 0.0)  # fmt: skip
    plan = map_plan(values)
    work = working_layout(values.image, spec.axes)
    padded = _padded(work, plan)
    if not np.isfinite(padded).all():
        return None
    # The validity, extended like the image (fill taps: 1 where they count, crop's 0).
    flags = working_layout(np.broadcast_to(valid, spec.shape).view(np.uint8), spec.axes)
    weights = map_plan(replace(spec, cval=float(counts)))
    return _varying_blur(values.image, spec, plan, padded, _padded(flags, weights))


# Only reassociation and FMA contraction are allowed to the compiler (so sums
# vectorise); NaN and inf keep their IEEE meaning.
_FAST = {"reassoc", "contract"}

#: Output rows handled by one parallel job in a pass along a strided axis, and in the
#: fused passes along the last two axes.
_ROW_BLOCK = 32
_FUSED_BLOCK = 64
#: The fused passes keep ``taps`` filtered rows in a ring; longer kernels go pass by pass.
_FUSED_TAPS = 257


@njit(cache=True, nogil=True, fastmath=_FAST)
def _row_pass(row, dst, buf, source, fill, weights, scale):  # pragma: no cover - jitted
    """One line along the contiguous axis: extend it into ``buf`` (``fill`` where
    ``source`` is -1), slide the taps, scale.  Vectorised over positions."""
    n = dst.shape[0]
    for j in range(source.shape[0]):
        s = source[j]
        buf[j] = row[s] if s >= 0 else fill
    dst[:] = 0
    for t in range(weights.shape[0]):
        w = weights[t]
        for i in range(n):
            dst[i] += w * buf[i + t]
    for i in range(n):
        dst[i] *= scale[i]


@njit(cache=True, nogil=True, fastmath=_FAST)
def _column_sum(dst, rows, index, weights, fill, sc):  # pragma: no cover - jitted
    """``dst = sc * sum_t weights[t] * rows[index[t]]`` over whole rows (``fill`` where
    ``index`` is -1).  Taps that read the fill value (constant mode) add ``w * cval``
    each, exactly as scipy does: with cval NaN or inf only they make the output
    non-finite."""
    dst[:] = 0
    filled = dst.dtype.type(0)
    for t in range(weights.shape[0]):
        s = index[t]
        w = weights[t]
        if s < 0:
            filled += w * fill
            continue
        row = rows[s]
        for c in range(dst.shape[0]):
            dst[c] += w * row[c]
    for c in range(dst.shape[0]):
        dst[c] = (dst[c] + filled) * sc


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def _rows_kernel(rows, out, source, fill, weights, scale):  # pragma: no cover - jitted
    for o in prange(out.shape[0]):
        buf = np.empty(source.shape[0], rows.dtype)
        _row_pass(rows[o], out[o], buf, source, fill, weights, scale)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def _columns_kernel(lines, out, source, fill, weights, scale, block):  # pragma: no cover
    outer, n = out.shape[:2]
    taps = weights.shape[0]
    nblocks = (n + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        for i in range(i0, min(n, i0 + block)):
            _column_sum(out[o, i], lines[o], source[i : i + taps], weights, fill, scale[i])


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def _fused_kernel(
    lines, out, src0, fill0, w0, scale0, src1, fill1, w1, scale1, block
):  # pragma: no cover
    """The passes along the last two axes of ``lines`` (outer, n0, n1) in one sweep:
    each job walks a run of output rows, filtering every input row it needs along the
    contiguous axis once, into a ring of ``taps`` rows that stays in cache, and sums
    the ring along the other axis; no intermediate image."""
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        ring = np.empty((taps0, n1), out.dtype)
        buf = np.empty(src1.shape[0], out.dtype)
        index = np.empty(taps0, np.int64)
        for e in range(i0, i0 + taps0 - 1):
            if src0[e] >= 0:
                _row_pass(lines[o, src0[e]], ring[e % taps0], buf, src1, fill1, w1, scale1)
        for i in range(i0, i1):
            e = i + taps0 - 1
            if src0[e] >= 0:
                _row_pass(lines[o, src0[e]], ring[e % taps0], buf, src1, fill1, w1, scale1)
            for t in range(taps0):
                index[t] = (i + t) % taps0 if src0[i + t] >= 0 else -1
            _column_sum(out[o, i], ring, index, w0, fill0, scale0[i])


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST, error_model="numpy")
def _fused_masked_kernel(
    lines, valid, out, den_out, src0, fill0, w0, scale0, one0, src1, fill1, w1, scale1, one1, block
):  # pragma: no cover
    """``_fused_kernel`` for a normalised convolution: every input row is split into
    its valid values (0 where invalid: a NaN there is dropped, not multiplied) and its
    validity, both filtered into rings, both summed, and divided (0/0: NaN), or the
    sums kept (``out``, ``den_out``) when ``den_out`` is not empty.  ``valid`` (uint8
    flags) has one plane, or one per outer index; ``one*`` is the validity of fill
    taps."""
    outer, n0, n1 = out.shape
    taps0 = w0.shape[0]
    nblocks = (n0 + block - 1) // block
    for job in prange(outer * nblocks):
        o = job // nblocks
        v = o if valid.shape[0] > 1 else 0
        i0 = (job % nblocks) * block
        i1 = min(n0, i0 + block)
        ring = np.empty((taps0, n1), out.dtype)
        weight_ring = np.empty((taps0, n1), out.dtype)
        buf = np.empty(src1.shape[0], out.dtype)
        values = np.empty(n1, out.dtype)
        flags = np.empty(n1, out.dtype)
        den = np.empty(n1, out.dtype)
        index = np.empty(taps0, np.int64)
        for e in range(i0, i1 + taps0 - 1):
            s = src0[e]
            if s >= 0:
                row, ok = lines[o, s], valid[v, s]
                for c in range(n1):
                    flags[c] = ok[c]
                    values[c] = row[c] if ok[c] else 0
                _row_pass(values, ring[e % taps0], buf, src1, fill1, w1, scale1)
                _row_pass(flags, weight_ring[e % taps0], buf, src1, one1, w1, scale1)
            i = e - (taps0 - 1)
            if i < i0:
                continue
            for t in range(taps0):
                index[t] = (i + t) % taps0 if src0[i + t] >= 0 else -1
            _column_sum(out[o, i], ring, index, w0, fill0, scale0[i])
            if den_out.shape[0]:
                _column_sum(den_out[o, i], weight_ring, index, w0, one0, scale0[i])
                continue
            _column_sum(den, weight_ring, index, w0, one0, scale0[i])
            for c in range(n1):
                out[o, i, c] /= den[c]


# ------------------------------------------------------------------- sigma maps


def _varying_blur(x, spec, plan, padded=None, flags=None) -> np.ndarray:
    """The exact gather of ``x`` (already extended as ``padded`` when given).  With
    ``flags`` (the extended validity, uint8, 1-3 blurred axes) it divides by the sum
    of the valid weights instead of all of them: a normalised convolution."""
    work = working_layout(x, spec.axes)
    padded = _padded(work, plan) if padded is None else padded
    # One pass over the padded image: tiles need a per-tile check only if it holds
    # NaN or inf anywhere (the image, or a non-finite cval in the extension).
    finite = flags is not None or bool(np.isfinite(padded).all())
    out = np.empty(work.shape, dtype=x.dtype)
    if len(plan) > 3:
        _generic_varying(padded, work.shape, x, spec, plan, out)
        return from_working_layout(out, x.shape, spec.axes)

    # 1-D and 2-D run as 3-D with untouched leading axes of length 1 (sigma 0, no pad).
    missing = 3 - len(plan)
    lead = work.shape[:1] + (1,) * missing
    padded = padded.reshape(lead + padded.shape[1:])
    flags = _NO_FLAGS if flags is None else flags.reshape(padded.shape)
    target = out.reshape(lead + work.shape[1:])
    # An isotropic map is converted once and serves every axis.
    compact = [_compact_map(m.sigma, spec.shape, spec.axes, missing)
               for m in (plan[:1] if spec.isotropic else plan)]  # fmt: skip
    maps = [(_ZERO_MAP, np.zeros(4, np.int64))] * missing + compact * (
        len(plan) if spec.isotropic else 1
    )
    # float32 maps go in as they are (no float64 copy), float64 maps likewise: each axis
    # gets one array of each type, the unused one a 1-element stand-in.
    wide = [m if m.dtype == np.float64 else _ZERO_MAP for m, _ in maps]
    narrow = [m if m.dtype == np.float32 else _ZERO_MAP32 for m, _ in maps]
    is32 = [[int(m.dtype == np.float32)] for m, _ in maps]
    with _parallel_section():
        _varying3d(
            padded,
            np.array([0] * missing + [m.pad for m in plan], np.int64),
            np.array([True] * missing + [m.crop for m in plan], np.bool_),
            np.array([0] * missing + [m.limit for m in plan], np.int64),
            *wide,
            *narrow,
            np.hstack([np.stack([flags for _, flags in maps]), np.array(is32, np.int64)]),
            spec.truncate,
            finite,
            flags,
            *_holes(flags),
            target,
        )
    return from_working_layout(out, x.shape, spec.axes)


_ZERO_MAP = np.zeros((1, 1, 1, 1), np.float64)
_NO_FLAGS = np.zeros((0, 0, 0, 0), np.uint8)


def _holes(flags: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The invalid positions of every row of the padded validity, as (row starts,
    positions): row r's are ``positions[starts[r] : starts[r + 1]]``, ascending.
    Not listed (positions ``[-1]``: every row summed against its flags) when there
    are many: above ``_SPARSE`` of the pixels."""
    rows, columns = flags.reshape(-1, flags.shape[-1]).shape if flags.size else (0, 1)
    invalid = flags.size - int(np.count_nonzero(flags))
    if rows == 0 or invalid > _SPARSE * flags.size:
        return np.zeros(rows + 1, np.int64), np.full(1, -1, np.int64)
    row, positions = np.nonzero(flags.reshape(rows, columns) == 0)
    starts = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=rows))))
    return starts.astype(np.int64), positions.astype(np.int64)


_ZERO_MAP32 = np.zeros((1, 1, 1, 1), np.float32)


def _compact_map(sigma, shape, axes, missing: int) -> tuple[np.ndarray, np.ndarray]:
    """A sigma map as a C-contiguous float32 or float64 array (the spec widened every
    other dtype to float64) in the 3-D working layout, without its broadcast axes, and
    the 0/1 flags that say which working axes it varies along.

    Two array types for every map dtype and layout (one compiled kernel takes both), and
    no copy of a C-contiguous map or of the broadcast axes.
    """
    full = sigma if sigma.shape == tuple(shape) else np.broadcast_to(sigma, shape)
    # Keep length 1 where the map does not vary (a length-1 or a zero-stride axis).
    index = tuple(
        slice(0, 1) if n == 1 or stride == 0 else slice(None)
        for n, stride in zip(full.shape, full.strides)
    )
    compact = full[index]
    work = working_layout(compact, axes)
    batch = int(np.prod([shape[a] for a in range(len(shape)) if a not in axes], dtype=np.int64))
    if work.shape[0] not in (1, batch):  # some batch axes vary, others do not
        work = working_layout(np.broadcast_to(compact, shape), axes)
    work = work.reshape(work.shape[:1] + (1,) * missing + work.shape[1:])
    target = (batch,) + (1,) * missing + tuple(shape[a] for a in axes)
    flags = np.array([int(c == t and t > 1) for c, t in zip(work.shape, target)], np.int64)
    dtype = np.float32 if work.dtype == np.float32 else np.float64
    return _kernel_array(work, dtype), flags


def _kernel_array(a: np.ndarray, dtype) -> np.ndarray:
    """C-contiguous and writeable (Numba compiles read-only arrays separately), copied
    only when it is neither."""
    out = np.ascontiguousarray(a, dtype=dtype)
    return out if out.flags.writeable else out.copy()


def _generic_varying(padded, shape, x, spec, plan, out) -> None:
    """Any number of blurred axes (the 1-3 axis kernels are specialised)."""

    def per_pixel(values: np.ndarray, dtype: type) -> np.ndarray:
        full = np.broadcast_to(values, x.shape)
        return np.ascontiguousarray(working_layout(full, spec.axes), dtype=dtype).ravel()

    with _parallel_section():
        _varying_kernel(
            np.ascontiguousarray(padded).ravel(),
            np.array(padded.shape, dtype=np.int64),
            np.array(shape, dtype=np.int64),
            np.array([m.pad for m in plan], dtype=np.int64),
            np.array([m.crop for m in plan], dtype=np.bool_),
            np.stack([per_pixel(m.radius(), np.int32) for m in plan]),
            np.stack([per_pixel(m.exponent(), np.float64) for m in plan]),
            out.reshape(-1),
            max(m.pad for m in plan),
        )


def _padded(work: np.ndarray, plan: list[MapAxis]) -> np.ndarray:
    """``work`` extended on every blurred axis by its padding, in its mode, in
    :func:`~napari_varblur.core.taps.padding_order` (crop axes, padded with zeros, last)."""
    padded = work
    for i in padding_order([m.mode for m in plan]):
        if plan[i].pad:
            padded = extend_along(padded, i + 1, plan[i].source(), plan[i].fill)
    return _kernel_array(padded, work.dtype)


#: The Gaussian recurrence restarts from exact exponentials every RESTART offsets.
#: Between restarts w(d+1) = w(d) g(d) and g(d+1) = g(d) q2, with q = exp(-h) and
#: q2 = q^2 (the first block starts from q alone, so radii up to RESTART cost one exp
#: per pixel and axis): after i steps g carries at most ~2.5 i ulp of error and w
#: ~1.25 i^2 + 2 i ulp, so with 16 steps in float64 every weight is within ~350 ulp
#: (8e-14) of exp(-d^2 h), at any sigma.  Without restarts the rounding of q alone
#: grows as d^2 ulp: 1.5e-12 at sigma 3500 (the contract's float64 bound is 1e-12).
RESTART = 16


@njit(cache=True, nogil=True, fastmath=_FAST, error_model="numpy")
def _gauss_table(table, pad, radius, h, lo, hi, width, den, w, g, q2, sums):  # pragma: no cover
    """Fill rows pad - R .. pad + R of ``table`` (R = the lanes' largest radius) with
    each lane's weights exp(-d^2 h), 0 beyond the lane's own radius, multiply ``den``
    by each lane's sum over its counted offsets lo..hi (of the stored weights, so the
    numerator and the normaliser agree), and return R.  Vectorised across lanes: one
    recurrence step per offset for all of them."""
    big = 0
    for v in range(width):
        big = max(big, radius[v])
        table[pad, v] = 1.0
        q = np.exp(-h[v])  # the only exp for radii up to RESTART
        q2[v] = q * q
        w[v] = q  # w(1) = q, and g(1) = q^3 takes it to w(2) = q^4
        g[v] = q * q2[v]
        sums[v] = 1.0
    for d in range(1, big + 1):
        if d > 1:
            if (d - 1) % RESTART == 0:
                for v in range(width):
                    w[v] = np.exp(-(d * d) * h[v])
                    g[v] = np.exp(-(2 * d + 1) * h[v])
            else:
                for v in range(width):
                    w[v] *= g[v]
                    g[v] *= q2[v]
        for v in range(width):
            table[pad + d, v] = w[v] if d <= radius[v] else 0.0
            value = table[pad + d, v]
            table[pad - d, v] = value
            sums[v] += (value if d <= hi[v] else 0.0) + (value if -d >= lo[v] else 0.0)
    for v in range(width):
        den[v] *= sums[v]
    return big


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _radius_exponent(sigma, truncate, limit):  # pragma: no cover - jitted
    """The contract's per-pixel radius ceil(truncate * sigma) in float64, capped at
    ``limit``, and h = 1/(2 sigma^2) (0 where sigma is 0)."""
    r = np.ceil(truncate * sigma)
    if r > limit:
        r = limit
    h = 0.0
    if sigma > 0:
        h = min(0.5 / (sigma * sigma), MAX_EXPONENT)
    return np.int64(r), h


@njit(cache=True, nogil=True, inline="always")
def _range(r, i, n, crop):  # pragma: no cover - jitted
    """The counted offsets lo..hi of a pixel at ``i`` with radius ``r``."""
    if crop:
        return max(-r, -i), min(r, n - 1 - i)
    return -r, r


#: Neighbouring pixels along the last axis blurred together, one per vector lane: each
#: tile sums the window of its largest radius, with zero weights beyond each pixel's own.
TILE = 128


@njit(cache=True, nogil=True, fastmath=_FAST)
def _axpy(acc, weights, values, start, width):  # pragma: no cover - jitted
    """acc[v] += weights[v] * values[start + v] for v < width.

    A function of its own (not inlined), so LLVM sees a simple loop and vectorises it.
    """
    src = values[start : start + width]
    for v in range(width):
        acc[v] += weights[v] * src[v]


@njit(cache=True, nogil=True, inline="always", error_model="numpy")
def _tile_axis(
    s, s32, f, a, b, i, j, m0, width, crop, limit, truncate, n, rad, lo, hi, hs
):  # pragma: no cover
    """Each lane's radius, h and counted range on axis ``a`` (0, 1, 2) of the tile;
    ``s``/``s32`` is the axis's compact map (float64 or float32 as ``f[4]`` says) and
    ``f[:4]`` its broadcast flags.  The sigma is widened to float64 exactly."""
    for v in range(width):
        m = m0 + v
        at = (b * f[0], i * f[1], j * f[2], m * f[3])
        sigma = np.float64(s32[at]) if f[4] else s[at]
        r, h = _radius_exponent(sigma, truncate, limit)
        rad[a, v] = r
        hs[a, v] = h
        position = i if a == 0 else j if a == 1 else m
        lo[a, v], hi[a, v] = _range(r, position, n, crop)


@njit(cache=True, nogil=True, error_model="numpy")
def _window_finite(xp, b, i, j, m0, width, pads, bigs):  # pragma: no cover - jitted
    """Whether the tile's shared window holds only finite values."""
    for d0 in range(-bigs[0], bigs[0] + 1):
        for d1 in range(-bigs[1], bigs[1] + 1):
            line = xp[b, i + pads[0] + d0, j + pads[1] + d1]
            for c in range(m0 + pads[2] - bigs[2], m0 + width + pads[2] + bigs[2]):
                if not np.isfinite(line[c]):
                    return False
    return True


@njit(cache=True, nogil=True, fastmath=_FAST)
def _tile_sum(xp, b, i, j, m0, width, pads, bigs, w0, w1, w2, acc, mid, part):  # pragma: no cover
    """acc[v] = sum over the tile's shared window of w0 w1 w2 x (vectorised over v)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    acc[:width] = 0
    for d0 in range(-bigs[0], bigs[0] + 1):
        plane = xp[b, i + p0 + d0]
        mid[:width] = 0
        for d1 in range(-bigs[1], bigs[1] + 1):
            line = plane[j + p1 + d1]
            part[:width] = 0
            for d2 in range(-bigs[2], bigs[2] + 1):
                _axpy(part, w2[p2 + d2], line, m0 + p2 + d2, width)
            _axpy(mid, w1[p1 + d1], part, 0, width)
        _axpy(acc, w0[p0 + d0], mid, 0, width)


@njit(cache=True, nogil=True, fastmath=_FAST)
def _valid_row(
    part_d, row_weight, w2, p2, big, flags, listed, holes, start, width
):  # pragma: no cover
    """part_d[v] = each lane's sum of w2 over the valid taps of one window row: the
    positions ``start .. start + width + 2 big - 1`` of ``flags``, whose invalid
    positions (ascending) are ``holes`` when ``listed``.  A few holes are subtracted
    from the full weight (each from the 2 big + 1 lanes that reach it) when what is
    left keeps at least
    1/_KEEP of it: the difference then carries at most ~_KEEP * 2 (2 big + 1) ulp of
    relative error; otherwise the row is summed against its flags, which never
    cancels.  Returns False when no tap is valid (known only when ``listed``)."""
    span = width + 2 * big
    if listed:
        first = np.searchsorted(holes, start)
        count = np.searchsorted(holes, start + span) - first
        if count == span:
            return False
        if count <= 2 * big + 1:
            part_d[:width] = row_weight[:width]
            for q in range(first, first + count):  # lane v reads c at offset c - big - v
                c = holes[q] - start
                for v in range(max(0, c - 2 * big), min(width, c + 1)):
                    part_d[v] -= w2[p2 + c - big - v, v]
            kept = True
            for v in range(width):
                kept &= part_d[v] * _KEEP >= row_weight[v]
            if kept:
                return True
    part_d[:width] = 0
    for d in range(-big, big + 1):
        row = w2[p2 + d]
        for v in range(width):
            part_d[v] += row[v] * flags[start + big + d + v]
    return True


#: Subtracting a row's holes from its full weight is used while at least 1/_KEEP of
#: the weight stays valid (at most 1/_KEEP of cancellation).
_KEEP = 16.0
#: Holes are listed (for subtraction) when at most this share of the padded validity
#: is invalid: the list then costs at most 2 bytes per pixel.
_SPARSE = 1 / 8


@njit(cache=True, nogil=True, fastmath=_FAST)
def _tile_sum_valid(
    xp,
    valid,
    rows,
    holes,
    b,
    i,
    j,
    m0,
    width,
    pads,
    bigs,
    w0,
    w1,
    w2,
    acc,
    den,
    mid,
    part,
    sums,
):  # pragma: no cover
    """``_tile_sum`` of a normalised convolution: acc[v] sums w0 w1 w2 x (the values
    are 0 where invalid) and den[v] the same weights over the valid taps only.  A row
    with few invalid taps (``holes[rows[r] : rows[r + 1]]`` for padded row r) costs
    two binary searches and one subtraction per hole on top of the plain sum."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    big = bigs[2]
    row_weight, mid_d, part_d = sums[0], sums[1], sums[2]
    row_weight[:width] = 0
    for d2 in range(-big, big + 1):
        for v in range(width):
            row_weight[v] += w2[p2 + d2, v]
    acc[:width] = 0
    den[:width] = 0
    n0, n1 = xp.shape[1], xp.shape[2]
    listed = holes.shape[0] == 0 or holes[0] >= 0
    for d0 in range(-bigs[0], bigs[0] + 1):
        plane, flag_plane = xp[b, i + p0 + d0], valid[b, i + p0 + d0]
        mid[:width] = 0
        mid_d[:width] = 0
        for d1 in range(-bigs[1], bigs[1] + 1):
            r = (b * n0 + i + p0 + d0) * n1 + j + p1 + d1
            hole = holes[rows[r] : rows[r + 1]]
            if not _valid_row(part_d, row_weight, w2, p2, big, flag_plane[j + p1 + d1], listed,
                              hole, m0 + p2 - big, width):  # fmt: skip
                continue  # no valid tap: the values there are 0 too
            line = plane[j + p1 + d1]
            part[:width] = 0
            for d2 in range(-big, big + 1):
                _axpy(part, w2[p2 + d2], line, m0 + p2 + d2, width)
            _axpy(mid, w1[p1 + d1], part, 0, width)
            _axpy(mid_d, w1[p1 + d1], part_d, 0, width)
        _axpy(acc, w0[p0 + d0], mid, 0, width)
        _axpy(den, w0[p0 + d0], mid_d, 0, width)


@njit(cache=True, nogil=True)
def _pixel_sums(xp, b, i, j, m0, width, pads, lo, hi, w0, w1, w2, acc):  # pragma: no cover
    """acc[v] = the sum over lane v's own counted window only (never reads a value
    outside it, so a NaN there cannot leak in)."""
    p0, p1, p2 = pads[0], pads[1], pads[2]
    for v in range(width):
        total = 0.0
        for d0 in range(lo[0, v], hi[0, v] + 1):
            plane = xp[b, i + p0 + d0]
            partial = 0.0
            for d1 in range(lo[1, v], hi[1, v] + 1):
                line = plane[j + p1 + d1]
                row_sum = 0.0
                for d2 in range(lo[2, v], hi[2, v] + 1):
                    row_sum += w2[p2 + d2, v] * line[m0 + v + p2 + d2]
                partial += w1[p1 + d1, v] * row_sum
            total += w0[p0 + d0, v] * partial
        acc[v] = total


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _varying3d(
    xp,
    pads,
    crops,
    limits,
    s0,
    s1,
    s2,
    t0,
    t1,
    t2,
    flags,
    truncate,
    finite,
    valid,
    rows,
    holes,
    out,
):  # pragma: no cover
    nb, n0, n1, n2 = out.shape
    n = np.array([n0, n1, n2], np.int64)
    tiles = (n2 + TILE - 1) // TILE
    width_max = min(TILE, n2)
    for row in prange(nb * n0 * n1):
        b = row // (n0 * n1)
        i = (row // n1) % n0
        j = row % n1
        w0 = np.empty((2 * pads[0] + 1, width_max), np.float64)
        w1 = np.empty((2 * pads[1] + 1, width_max), np.float64)
        w2 = np.empty((2 * pads[2] + 1, width_max), out.dtype)
        den = np.empty(width_max, np.float64)
        acc = np.empty(width_max, np.float64)
        mid = np.empty(width_max, np.float64)
        part = np.empty(width_max, out.dtype)
        rad = np.empty((3, width_max), np.int64)
        lo = np.empty((3, width_max), np.int64)
        hi = np.empty((3, width_max), np.int64)
        hs = np.empty((3, width_max), np.float64)
        scratch = np.empty((4, width_max), np.float64)
        sums = np.empty((4, width_max), np.float64)
        bigs = np.empty(3, np.int64)
        for tile in range(tiles):
            m0 = tile * TILE
            width = min(TILE, n2 - m0)
            for a, sa, ta in ((0, s0, t0), (1, s1, t1), (2, s2, t2)):
                _tile_axis(sa, ta, flags[a], a, b, i, j, m0, width, crops[a], limits[a],
                           truncate, n[a], rad, lo, hi, hs)  # fmt: skip
            den[:width] = 1.0
            for a, table in ((0, w0), (1, w1)):
                bigs[a] = _gauss_table(table, pads[a], rad[a], hs[a], lo[a], hi[a], width, den,
                                       scratch[0], scratch[1], scratch[2], scratch[3])  # fmt: skip
            bigs[2] = _gauss_table(w2, pads[2], rad[2], hs[2], lo[2], hi[2], width, den,
                                   scratch[0], scratch[1], scratch[2], scratch[3])  # fmt: skip
            if valid.shape[0]:
                _tile_sum_valid(xp, valid, rows, holes, b, i, j, m0, width, pads, bigs, w0, w1,
                                w2, acc, den, mid, part, sums)  # fmt: skip
            elif finite or _window_finite(xp, b, i, j, m0, width, pads, bigs):
                _tile_sum(xp, b, i, j, m0, width, pads, bigs, w0, w1, w2, acc, mid, part)
            else:
                _pixel_sums(xp, b, i, j, m0, width, pads, lo, hi, w0, w1, w2, acc)
            for v in range(width):
                out[b, i, j, m0 + v] = acc[v] / den[v]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def _varying_kernel(xp, pshape, shape, pad, crop, radius, exponent, out, rmax):  # pragma: no cover
    k = shape.shape[0] - 1
    nk = shape[k]
    rows = out.shape[0] // nk
    pstride = np.empty(k + 1, np.int64)
    step = 1
    for a in range(k, -1, -1):
        pstride[a] = step
        step *= pshape[a]
    for row in prange(rows):
        idx = np.zeros(k, np.int64)
        lo = np.zeros(k, np.int64)
        hi = np.zeros(k, np.int64)
        d = np.zeros(k, np.int64)
        w = np.zeros((k, 2 * rmax + 1, 1), np.float64)
        r1 = np.zeros(1, np.int64)
        h1 = np.zeros(1, np.float64)
        lo1 = np.zeros(1, np.int64)
        hi1 = np.zeros(1, np.int64)
        den1 = np.ones(1, np.float64)
        scratch = np.zeros((4, 1), np.float64)
        rem = row * 1  # a copy: numba forbids writing to the prange index
        for a in range(k - 2, -1, -1):
            idx[a] = rem % shape[a + 1]
            rem //= shape[a + 1]
        b = rem
        for j in range(nk):
            idx[k - 1] = j
            pix = row * nk + j
            den1[0] = 1.0
            for a in range(k):
                r1[0] = radius[a, pix]
                h1[0] = exponent[a, pix]
                lo[a], hi[a] = _range(r1[0], idx[a], shape[a + 1], crop[a])
                lo1[0], hi1[0] = lo[a], hi[a]
                _gauss_table(w[a], rmax, r1, h1, lo1, hi1, 1, den1,
                             scratch[0], scratch[1], scratch[2], scratch[3])  # fmt: skip
            den = den1[0]
            base = b * pstride[0]
            for a in range(k):
                base += (idx[a] + pad[a]) * pstride[a + 1]
            for a in range(k - 1):
                d[a] = lo[a]
            total = 0.0
            while True:  # odometer over the window's outer axes; the last axis is a row
                w_outer = 1.0
                offset = base
                for a in range(k - 1):
                    w_outer *= w[a, rmax + d[a], 0]
                    offset += d[a] * pstride[a + 1]
                row_sum = 0.0
                for t in range(lo[k - 1], hi[k - 1] + 1):
                    row_sum += w[k - 1, rmax + t, 0] * xp[offset + t]
                total += w_outer * row_sum
                a = k - 2
                while a >= 0:
                    d[a] += 1
                    if d[a] <= hi[a]:
                        break
                    d[a] = lo[a]
                    a -= 1
                if a < 0:
                    break
            out[pix] = total / den
