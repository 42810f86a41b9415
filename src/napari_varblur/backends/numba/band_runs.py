"""The bookkeeping of level bands (:mod:`.bands`): each pixel's levels, the runs of
every level along the contiguous axis, and what each pass must write to serve the next:
runs widened by a pass's reach, and the union of the runs of the lines that read a
line.  Every step is one kernel call for all levels together."""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from .common import parallel_section

#: The runs' lines and ends (a line's index, a position along the contiguous axis):
#: int32 halves the plans of 3-D maps, which are mostly runs; the bands take no
#: shape with more lines than that holds.
RUN = np.int32


@njit(parallel=True, cache=True, nogil=True)
def reach(src, taps, n, left):  # pragma: no cover - jitted
    """Per level ``v`` and output ``i``: the smallest and largest source index its taps
    read (``src[v, i : i + taps[v]]``, skipping the fill), as int32 (an axis is shorter
    than 2**31; two tables of levels x axis length per slot).  A window inside the axis
    reads ``i - left .. i - left + taps - 1``; only windows that touch an extension are
    scanned."""
    levels = src.shape[0]
    lo, hi = np.empty((levels, n), np.int32), np.empty((levels, n), np.int32)
    for v in prange(levels):
        for i in range(n):
            a, b = i - left[v], i - left[v] + taps[v] - 1
            if a >= 0 and b <= n - 1:
                lo[v, i], hi[v, i] = a, b
                continue
            lo[v, i], hi[v, i] = n, -1
            for j in range(i, i + taps[v]):
                s = src[v, j]
                if s >= 0:
                    lo[v, i], hi[v, i] = min(lo[v, i], s), max(hi[v, i], s)
            if hi[v, i] < 0:  # every tap reads the fill: no pixel needed
                lo[v, i], hi[v, i] = i, i
    return lo, hi


@njit(cache=True, nogil=True)
def inverse_reach(lo, hi):  # pragma: no cover - jitted
    """Per level and source index ``j``: the first and last output whose reach covers
    it (``n`` and -1 where none does)."""
    levels, n = lo.shape
    first = np.full((levels, n), n, np.int64)
    last = np.full((levels, n), -1, np.int64)
    for v in range(levels):
        for i in range(n):
            for j in range(lo[v, i], hi[v, i] + 1):
                first[v, j] = min(first[v, j], i)
                last[v, j] = max(last[v, j], i)
    return first, last


def mix_tables(lsig: np.ndarray, joined: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The levels' squared sigmas, and ``1 / (s1^2 - s0^2)`` where a level mixes with
    the next (else 0): what :func:`upper_weight` reads, in float64."""
    square = np.asarray(lsig, np.float64) ** 2
    inverse = np.zeros(len(square))
    mixed = np.flatnonzero(joined[:-1])
    inverse[mixed] = 1.0 / (square[mixed + 1] - square[mixed])
    return square, inverse


@njit(cache=True, nogil=True, inline="always")
def upper_weight(s, square, inverse):  # pragma: no cover - jitted
    """The weight of the next level in a pixel of sigma ``s`` on a level of squared
    sigma ``square`` (``inverse``: :func:`mix_tables`'), in float64: what
    :func:`locate` stores, and what the blur recomputes from a float32 map.  Of a
    float32 ``s`` it rounds the same bits with fast-math or without: ``s * s`` is
    exact, so a fused multiply-add rounds only where the subtraction does."""
    return min(max((s * s - square) * inverse, 0.0), 1.0)


@njit(parallel=True, cache=True, nogil=True)
def locate(sigma, key, t, counts, lsig, square, inverse, first, last, truncate,
           limit):  # pragma: no cover  # fmt: skip
    """Each pixel's key ``2 * level + (upper weight > 0)`` (the lower level, and
    whether the next one mixes in) and, where ``t`` is not empty, its upper weight
    (:meth:`AxisLevels.mix` in a kernel), and each line's count of :func:`segments`.
    The contract's float64 radius picks the bucket; the level is the bucket's last
    whose sigma is at most the pixel's (its first if none is), searched from the
    previous pixel's level in the same bucket."""
    top = first.shape[0] - 1
    stored = t.shape[0] > 0
    for row in prange(sigma.shape[0]):
        values, keys = sigma[row], key[row]
        c, kept = 0, -1  # segments; the previous key
        # The previous pixel's bucket and level, and what the next pixel is tested
        # against, in locals: the last level of the bucket that may start an
        # interval, and the sigmas around level j (none: no previous pixel).
        before, j, stop, below, above = -1, 0, 0, np.inf, -np.inf
        sq, inv = 0.0, 0.0
        for x in range(values.shape[0]):
            s = np.float64(values[x])
            # Strictly between the previous pixel's level and the next one of its bucket
            # (most pixels of a smooth map): the same bucket and level, without the
            # radius (the bucket's levels lie within its sigmas).
            if not (j < stop and below < s < above):
                r = min(np.ceil(truncate * s), limit)
                b = top if r >= top else (int(r) if r > 0 else 0)
                if b != before or lsig[j] > s:
                    j, before = first[b], b
                while j < last[b] and lsig[j + 1] <= s:
                    j += 1
                stop, below = last[b], lsig[j]
                above = lsig[j + 1] if j + 1 < lsig.shape[0] else np.inf
                sq, inv = square[j], inverse[j]
            w = t.dtype.type(upper_weight(s, sq, inv))
            if stored:
                t[row, x] = w
            k = 2 * j + (w > 0)  # (the weight in the blur's precision, as it mixes)
            keys[x] = k
            c += k != kept
            kept = k
        counts[row] = c


@njit(parallel=True, cache=True, nogil=True)
def _fill_segments(key, at, line, start, stop, level, upper):  # pragma: no cover
    for row in prange(key.shape[0]):
        i, kept = at[row], key[row, 0]
        line[i], start[i], level[i], upper[i] = row, 0, kept >> 1, kept & 1
        for x in range(key.shape[1]):
            k = key[row, x]
            key[row, x] = k >> 1  # (read: the level is what the blur needs)
            if k != kept:
                stop[i] = x
                i += 1
                line[i], start[i], level[i], upper[i] = row, x, k >> 1, k & 1
                kept = k
        stop[i] = key.shape[1]


def segments(key: np.ndarray, counts: np.ndarray) -> tuple:
    """Runs of constant key (level, has-upper-weight: :func:`locate`'s) along every
    line, in line order, from each line's count of them.  Each key is left as its
    pixel's level (``key >> 1``), which the blur reads."""
    with parallel_section():
        at = np.concatenate(([0], np.cumsum(counts)))
        total = int(at[-1])
        out = [np.empty(total, RUN) for _ in range(4)] + [np.empty(total, np.bool_)]
        _fill_segments(key, at, *out)
    return tuple(out)


def by_level(line, start, stop, level, upper, nlevels: int) -> tuple:
    """Each level's runs (the segments that mix it: their own level, and the next one
    where the upper weight is not 0), sorted by line and start, touching runs merged,
    as ``(ptr, lines, starts, stops)``.  Chunks of whole lines run in parallel, each
    into its own room per level (runs touch only within a line)."""
    chunks = max(1, min(4 * numba.get_num_threads(), len(line)))
    bounds = np.linspace(0, len(line), chunks + 1).astype(np.int64)
    with parallel_section():
        return _by_level(line, start, stop, level, upper, nlevels, _line_starts(line, bounds))


@njit(cache=True, nogil=True)
def _line_starts(line, bounds):  # pragma: no cover - jitted
    """``bounds`` moved forwards to the first segment of a line."""
    for c in range(1, bounds.shape[0] - 1):
        i = max(bounds[c], bounds[c - 1])
        while 0 < i < line.shape[0] and line[i] == line[i - 1]:
            i += 1
        bounds[c] = i
    return bounds


@njit(parallel=True, cache=True, nogil=True)
def _by_level(line, start, stop, level, upper, nlevels, bounds):  # pragma: no cover - jitted
    chunks = bounds.shape[0] - 1
    count = np.zeros((chunks, nlevels), np.int64)  # (a chunk's own row: no false sharing)
    for c in prange(chunks):
        for i in range(bounds[c], bounds[c + 1]):
            upper[i] = upper[i] and level[i] + 1 < nlevels
            count[c, level[i]] += 1
            if upper[i]:
                count[c, level[i] + 1] += 1
    room = np.zeros(nlevels * chunks + 1, np.int64)  # level-major: a level's chunks in turn
    room[1:] = np.cumsum(count.T.copy().ravel())
    lines, starts, stops = (np.empty(room[-1], RUN), np.empty(room[-1], RUN),
                            np.empty(room[-1], RUN))  # fmt: skip
    fill = np.empty((chunks, nlevels), np.int64)
    for c in prange(chunks):
        for lv in range(nlevels):
            fill[c, lv] = room[lv * chunks + c]
        for i in range(bounds[c], bounds[c + 1]):
            own = np.int64(level[i])
            _put(lines, starts, stops, fill, room, own, c, chunks, line[i], start[i], stop[i])
            if upper[i]:
                _put(lines, starts, stops, fill, room, own + 1, c, chunks, line[i], start[i],
                     stop[i])  # fmt: skip
    used = fill.T - room[:-1].reshape(nlevels, chunks)
    ptr = np.zeros(nlevels + 1, np.int64)
    ptr[1:] = np.cumsum(used.sum(axis=1))
    out = (np.empty(ptr[-1], RUN), np.empty(ptr[-1], RUN), np.empty(ptr[-1], RUN))
    for lv in prange(nlevels):  # each level's chunks, one after another
        o = ptr[lv]
        for c in range(chunks):
            a = room[lv * chunks + c]
            for j in range(a, fill[c, lv]):
                out[0][o], out[1][o], out[2][o] = lines[j], starts[j], stops[j]
                o += 1
    return ptr, out[0], out[1], out[2]


@njit(cache=True, nogil=True, inline="always")
def _put(lines, starts, stops, fill, room, lv, c, chunks, line, start, stop):  # pragma: no cover
    """A segment into level ``lv``'s room of chunk ``c``: appended, or the previous run
    extended where it touches it."""
    j = fill[c, lv]
    if j > room[lv * chunks + c] and lines[j - 1] == line and stops[j - 1] == start:
        stops[j - 1] = stop
        return
    lines[j], starts[j], stops[j] = line, start, stop
    fill[c, lv] += 1


@njit(cache=True, nogil=True)
def dilate(ptr, lines, starts, stops, lo, hi):  # pragma: no cover - jitted
    """The pixels the last pass reads to write each level's runs: every run widened to
    its outputs' reach, overlapping runs of a line merged."""
    m = lines.shape[0]
    optr = np.zeros_like(ptr)
    ol, os_, oe = np.empty(m, RUN), np.empty(m, RUN), np.empty(m, RUN)
    c = 0
    for v in range(ptr.shape[0] - 1):
        base = c
        # Reaches that never step back (every mode but wrap): a run's ends suffice.
        monotone = True
        for x in range(1, lo.shape[1]):
            monotone = monotone and lo[v, x] >= lo[v, x - 1] and hi[v, x] >= hi[v, x - 1]
        for i in range(ptr[v], ptr[v + 1]):
            a, b = lo[v, starts[i]], hi[v, stops[i] - 1]
            if not monotone:
                for x in range(starts[i], stops[i]):
                    a, b = min(a, lo[v, x]), max(b, hi[v, x])
            b += 1
            # Merge with earlier runs of the line it overlaps (in wrap mode an edge
            # run reaches the far side, so not only the last one).
            while c > base and ol[c - 1] == lines[i] and a <= oe[c - 1] and b >= os_[c - 1]:
                c -= 1
                a, b = min(a, os_[c]), max(b, oe[c])
            ol[c], os_[c], oe[c] = lines[i], a, b
            c += 1
        optr[v + 1] = c
    return optr, ol[:c], os_[:c], oe[:c]


@njit(parallel=True, cache=True, nogil=True)
def work(ptr, starts, stops, taps):  # pragma: no cover - jitted
    """Multiply-adds of a pass over level ``v``'s runs ``ptr[v] .. ptr[v + 1] - 1`` with
    ``taps[v]`` taps each, over every level (a loop: NumPy's sum of run lengths made
    two temporaries as long as the runs, 6 ms a plan on a 3-D map), levels in
    parallel."""
    levels = ptr.shape[0] - 1
    total = np.zeros(levels)
    for v in prange(levels):
        pixels = 0
        for i in range(ptr[v], ptr[v + 1]):
            pixels += stops[i] - starts[i]
        total[v] = pixels * float(taps[v])
    return total.sum()


def slot_one(ptr, lines, starts, stops, first, final, planes: int, n2: int, n3: int, gaps,
             chunks: int, spare: int) -> tuple:  # fmt: skip
    """Slot 1's runs (:func:`union`, joined across gaps of up to ``gaps[v]`` pixels
    in a plane: :func:`_join`) in one pass, as ``(ptr, lines, starts, stops)``:
    each chunk of levels writes into room for twice its slot-2 runs and ``spare`` per
    level (a 3-D radial map's union has 1.6 times as many runs), and the few chunks
    that need more are run again with their counts.  (Counting first, then writing,
    did the union's work twice: 11 of a 64x128x128 radial map's 46 ms of planning.)"""
    nlevels = len(ptr) - 1
    chunks = max(1, min(nlevels, chunks))
    owner = np.arange(nlevels) % chunks  # levels dealt out in turn
    room = np.bincount(owner, 2 * np.diff(ptr) + spare, chunks).astype(np.int64)
    at, counts = np.empty(nlevels * planes, np.int64), np.empty(nlevels * planes, np.int64)
    with parallel_section():
        for _ in range(2):
            base = np.concatenate(([0], np.cumsum(room)))
            out = [np.empty(base[-1], RUN) for _ in range(3)]
            union(ptr, lines, starts, stops, first, final, planes, n2, n3, gaps, base, at,
                  counts, *out)  # fmt: skip
            needed = np.bincount(owner, counts.reshape(nlevels, planes).sum(axis=1), chunks)
            if (needed <= room).all():
                break
            room = np.maximum(room, needed.astype(np.int64))
        return gather_jobs(at, counts, planes, *out)


@njit(parallel=True, cache=True, nogil=True)
def union(ptr, lines, starts, stops, first, final, planes, n2, n3, gaps, base, at, counts,
          olines, ostarts, ostops):  # pragma: no cover  # fmt: skip
    """Slot 1's runs: per level and line ``(b, i1, j)``, the union of the runs of the
    lines ``(b, i1, i2)`` whose slot-2 pass reads line ``j`` (``first[j] <= i2 <=
    final[j]``).  One job per level and plane; the levels are dealt out in turn to
    the chunks (``len(base) - 1`` of them, several per thread: levels differ in cost,
    and a thread's share is fixed), each with its own scratch.  Chunk ``c`` writes
    its jobs one after another from ``base[c]``, only below ``base[c + 1]``: each
    job's first index goes to ``at``, its count (all of it, written or not) to
    ``counts``."""
    levels = ptr.shape[0] - 1
    chunks = base.shape[0] - 1
    words = (n3 + 63) // 64
    for chunk in prange(chunks):
        bits = np.empty((3, n2, words), np.uint64)  # each line's pixels, and block ORs
        window = np.empty(words, np.uint64)
        scratch = np.empty((5, n2 + 1), np.int64)  # a plane's lines, and the hull's queues
        o, end = base[chunk], base[chunk + 1]
        for v in range(chunk, levels, chunks):
            for plane in range(planes):
                job = v * planes + plane
                at[job] = o
                counts[job] = _union_job(v, plane, ptr, lines, starts, stops, first, final,
                                         n2, n3, gaps[v], bits, window, scratch, o, end,
                                         olines, ostarts, ostops)  # fmt: skip
                o += counts[job]


@njit(parallel=True, cache=True, nogil=True)
def gather_jobs(at, counts, planes, olines, ostarts, ostops):  # pragma: no cover - jitted
    """:func:`union`'s runs in level order (each level's jobs, one per plane, lie one
    after another in its chunk): the levels' pointers and the runs, copied."""
    levels = counts.shape[0] // planes
    ptr = np.zeros(levels + 1, np.int64)
    for v in range(levels):
        ptr[v + 1] = ptr[v] + counts[v * planes : (v + 1) * planes].sum()
    total = ptr[levels]
    lines, starts, stops = (
        np.empty(total, RUN),
        np.empty(total, RUN),
        np.empty(total, RUN),
    )
    for v in prange(levels):
        a = at[v * planes]
        for i in range(ptr[v + 1] - ptr[v]):
            lines[ptr[v] + i] = olines[a + i]
            starts[ptr[v] + i] = ostarts[a + i]
            stops[ptr[v] + i] = ostops[a + i]
    return ptr, lines, starts, stops


@njit(cache=True, nogil=True)
def _join(lines, starts, stops, a, b, n3, gap):  # pragma: no cover - jitted
    """Runs ``a .. b - 1`` (sorted by line, all in one plane: the caller's job) joined in
    place where the next one starts at most ``gap`` pixels after the run being built
    ends, in memory order: one run from its first line's start, its stop past ``n3``
    where it spans lines.  The first pass sums such a run in one sweep over memory,
    its gaps included (they read the image, so they are right, and nothing reads
    them).  A run costs bookkeeping and short vector loops, about what ``gap`` pixels
    cost (:data:`~.bands.JOIN_TAPS`).  Returns the count."""
    top = np.iinfo(RUN).max
    c, first, start, stop = 0, 0, 0, 0  # the run being built
    for i in range(a, b):
        at = (lines[i] - first) * n3  # (line i's offset from the run's first line)
        if c > 0 and at + starts[i] - stop <= gap and at + stops[i] <= top:
            stop = max(stop, at + stops[i])
            continue
        if c > 0:  # (at or before run i - 1: nothing still to be read)
            lines[a + c - 1], starts[a + c - 1], stops[a + c - 1] = first, start, stop
        first, start, stop = lines[i], starts[i], stops[i]
        c += 1
    if c > 0:
        lines[a + c - 1], starts[a + c - 1], stops[a + c - 1] = first, start, stop
    return c


@njit(cache=True, nogil=True, inline="always")
def _union_job(v, plane, ptr, lines, starts, stops, first, final, n2, n3, gap, bits, window,
               scratch, o, end, olines, ostarts, ostops):  # pragma: no cover  # fmt: skip
    """One job of :func:`union`: level ``v`` on one plane, written from ``o`` (below
    ``end``); returns its count of runs."""
    a, b = ptr[v], ptr[v + 1]
    # This plane's runs, by line: the plane's lines are contiguous.
    lo = a + np.searchsorted(lines[a:b], plane * n2)
    hi = a + np.searchsorted(lines[a:b], (plane + 1) * n2)
    if lo == hi:
        return 0
    line_at, low, high = scratch[0], scratch[1], scratch[2]
    single = _plane_lines(lines, starts, stops, lo, hi, plane, n2, n3, gap, line_at, low, high)
    if single:
        c = _hull_lines(v, plane, n2, first, final, line_at, low, high, scratch[3], scratch[4],
                        o, end, olines, ostarts, ostops)  # fmt: skip
    else:
        c = _bit_lines(v, plane, n2, n3, first, final, line_at, starts, stops, bits, window, o,
                       end, olines, ostarts, ostops)  # fmt: skip
    if o + c > end:  # not all written: counted as they are, for the chunk's second run
        return c
    return _join(olines, ostarts, ostops, o, o + c, n3, gap)


@njit(cache=True, nogil=True)
def _hull_lines(v, plane, n2, first, final, line_at, low, high, qlo, qhi, o, end, olines,
                ostarts, ostops):  # pragma: no cover  # fmt: skip
    """A plane of single runs (or runs the join closes up): each window's hull (a
    smooth map's runs overlap from line to line, so the hull is their union; where
    they do not, the hull only adds work), from monotone queues (``qlo``, ``qhi``:
    scratch) of the lines' extents sliding down the plane; written from ``o`` while
    below ``end``.  Returns the count (one run per window that has any)."""
    elo, ehi = np.zeros(2, np.int64), np.zeros(2, np.int64)
    w0, w1 = 0, -1  # the window the queues hold
    c = 0
    for j in range(n2):
        i0, i1 = first[v, j], final[v, j]
        if i1 < i0 or line_at[i0] == line_at[i1 + 1]:
            continue
        c += 1
        if o + c > end:
            continue
        if i0 < w0 or i1 < w1:  # not a slide down: restart the queues
            elo[:], ehi[:], w1 = 0, 0, i0 - 1
        span_lo = _slide(qlo, elo, low, i0, i1, w1, 1)
        span_hi = _slide(qhi, ehi, high, i0, i1, w1, -1)
        w0, w1 = i0, i1
        olines[o + c - 1], ostarts[o + c - 1], ostops[o + c - 1] = plane * n2 + j, span_lo, span_hi
    return c


@njit(cache=True, nogil=True)
def _bit_lines(v, plane, n2, n3, first, final, line_at, starts, stops, bits, window, o, end,
               olines, ostarts, ostops):  # pragma: no cover  # fmt: skip
    """A plane where some line has several runs: the exact union, as bitsets.  Each
    line's pixels are a row of 64-bit words; a window of lines is the OR of a block's
    suffix and the next block's prefix (blocks as long as the longest window), or of
    its lines where it lies inside one block.  The union's runs are read off the
    window's bit transitions, written from ``o`` while below ``end``; returns their
    count."""
    own, pre, suf = bits[0], bits[1], bits[2]
    longest = _block_ors(own, pre, suf, v, first, final, line_at, starts, stops)
    c = 0
    for j in range(n2):
        i0, i1 = first[v, j], final[v, j]
        if i1 < i0 or line_at[i0] == line_at[i1 + 1]:
            continue
        if i0 // longest == i1 // longest:
            window[:] = 0
            for i in range(i0, i1 + 1):
                for w in range(window.shape[0]):
                    window[w] |= own[i, w]
        else:
            for w in range(window.shape[0]):
                window[w] = suf[i0, w] | pre[i1, w]
        c += _bit_runs(window, n3, plane * n2 + j, olines, ostarts, ostops, o + c, end)
    return c


@njit(cache=True, nogil=True)
def _block_ors(own, pre, suf, v, first, final, line_at, starts, stops):  # pragma: no cover
    """Each line's bits (``own``), and in blocks of lines as long as level ``v``'s
    longest window, the ORs from each block's start (``pre``) and to its end
    (``suf``); returns the block length."""
    n2 = own.shape[0]
    own[:] = 0
    longest = 1
    for j in range(n2):
        _set_runs(own[j], starts, stops, line_at[j], line_at[j + 1])
        longest = max(longest, final[v, j] - first[v, j] + 1)
    for j in range(n2):
        start = j % longest == 0
        for w in range(own.shape[1]):
            pre[j, w] = own[j, w] if start else pre[j - 1, w] | own[j, w]
    for j in range(n2 - 1, -1, -1):
        end = j % longest == longest - 1 or j == n2 - 1
        for w in range(own.shape[1]):
            suf[j, w] = own[j, w] if end else suf[j + 1, w] | own[j, w]
    return longest


@njit(cache=True, nogil=True, inline="always")
def _set_runs(row, starts, stops, a, b):  # pragma: no cover - jitted
    """Set the bits of runs ``a .. b - 1`` (``[start, stop)`` each) in ``row``."""
    ones = np.uint64(0xFFFFFFFFFFFFFFFF)
    for i in range(a, b):
        s, e = starts[i], stops[i]
        if s >= e:
            continue
        ws, we = s >> 6, (e - 1) >> 6
        head = ones << np.uint64(s & 63)
        tail = ones >> np.uint64(63 - ((e - 1) & 63))
        if ws == we:
            row[ws] |= head & tail
            continue
        row[ws] |= head
        for w in range(ws + 1, we):
            row[w] = ones
        row[we] |= tail


@njit(cache=True, nogil=True, inline="always")
def _bit_runs(window, n3, line, olines, ostarts, ostops, o, end):  # pragma: no cover - jitted
    """The runs of set bits of ``window`` (``n3`` pixels), written from ``o`` while below
    ``end``; returns how many there are.  Each word's transitions (a bit unlike the one
    before it) alternate between a run's start and its stop."""
    c, inside = 0, False
    carry = np.uint64(0)
    one = np.uint64(1)
    for w in range(window.shape[0]):
        x = window[w]
        flips = x ^ ((x << one) | carry)
        carry = x >> np.uint64(63)
        while flips != 0:
            lowest = flips & (~flips + one)
            at = w * 64 + trailing_zeros(flips)  # the lowest set bit
            if inside:
                if o + c < end:
                    ostops[o + c] = at
                c += 1
            elif o + c < end:
                olines[o + c], ostarts[o + c] = line, at
            inside = not inside
            flips ^= lowest
    if inside:  # (bits past n3 are never set: a run open here ends at the last word)
        if o + c < end:
            ostops[o + c] = n3
        c += 1
    return c


@njit(cache=True, nogil=True)
def _plane_lines(lines, starts, stops, lo, hi, plane, n2, n3, gap, line_at, low,
                 high):  # pragma: no cover  # fmt: skip
    """A plane's runs ``lo .. hi - 1`` by line, into the scratch rows given: each
    line's first run (``line_at``, one past the end for the last), each line's extent
    (``low``, ``high``: the hull of its runs; empty: ``low > high``); returns whether
    every line's runs lie at most ``gap`` apart (the join would close their gaps: its
    hull is as good as its runs)."""
    line_at[:] = hi
    for i in range(hi - 1, lo - 1, -1):
        line_at[lines[i] - plane * n2] = i
    for j in range(n2 - 1, -1, -1):
        line_at[j] = min(line_at[j], line_at[j + 1])
    single = True
    for j in range(n2):
        low[j], high[j] = n3, 0
        for i in range(line_at[j], line_at[j + 1]):
            single = single and (i == line_at[j] or starts[i] - stops[i - 1] <= gap)
            low[j], high[j] = min(low[j], starts[i]), max(high[j], stops[i])
    return single


@njit(cache=True, nogil=True, inline="always")
def _slide(q, ends, values, i0, i1, top, sign):  # pragma: no cover - jitted
    """A monotone queue ``q`` (head ``ends[0]``, tail ``ends[1]``) of line indices whose
    ``sign * values`` increase: extended with lines ``top + 1 .. i1`` and cut to those
    from ``i0``; returns the extreme (smallest ``sign * value``) of ``i0 .. i1``."""
    for i in range(top + 1, i1 + 1):
        while ends[1] > ends[0] and sign * values[q[ends[1] - 1]] >= sign * values[i]:
            ends[1] -= 1
        q[ends[1]] = i
        ends[1] += 1
    while q[ends[0]] < i0:
        ends[0] += 1
    return values[q[ends[0]]]
