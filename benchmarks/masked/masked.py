"""Masked and NaN-aware blur: its cost against the plain blur, and astropy as a peer.

Times, in one process on this machine, napari_varblur's Numba backend (float32) with
``mask=`` and ``nan_policy="omit"`` against the same call without them, as ratios:

a) global sigma 4 on a 2048x2048 random image, ``reflect`` and ``crop``: masked / plain
   (goal <= 2.5x).  The mask: ~1% random dead pixels (NaN in the image too) and a disk.
b) the same on a 64x256x256 volume (sigma 2 on every axis), and a 2-D blur (axes 1, 2)
   of a 16x1024x1024 time series with a static 1024x1024 mask, once with
   ``nan_policy="propagate"`` on a finite series (the validity is the same in every
   frame) and once with ``"omit"`` and the dead pixels NaN in every frame (3-D validity).
c) a 1024x1024 sigma map, ``crop``: uniform random sigma in [1, 4] exact and at
   ``tolerance=1e-3``, and a smooth ramp 1 -> 8 along x exact and at 1e-3: masked /
   plain (goal <= 1.5x).
d) no slowdown: ``mask=None, nan_policy="propagate"`` spelled out against the plain call,
   and ``nan_policy="omit"`` on an all-finite image without a mask against the plain
   call (goal <= 1.1, i.e. within this machine's noise).

and, as a peer, ``astropy.convolution.convolve(nan_treatment="interpolate",
boundary="fill", fill_value=nan)`` with the explicit 13x13 Gaussian (sigma 2, radius 6)
on a 512x512 image with NaN dead pixels, against ``gaussian_blur(..., mode="crop",
nan_policy="omit")`` on the same image (the two are the same normalised convolution; the
largest difference is reported).

Each time is the median of ``repeats`` calls after one warm-up call (``common.median_time``);
a ratio's two calls are timed in alternating rounds and each side's round medians are
medianed again, so slow drifts of a shared machine hit both sides alike.

    python benchmarks/masked/masked.py            # about 4 minutes on 2 cores
    python benchmarks/masked/masked.py --quick    # small sizes, for a smoke test

Writes ``benchmarks/results/<date>_<machine>_masked.json`` and ``.md`` (``--quick``:
``results/quick/``), with the commit of the napari_varblur that was timed (to time a
clean commit while the working tree is being edited: ``git worktree add --detach
/tmp/head HEAD`` and run with ``PYTHONPATH=/tmp/head/src``).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
from common import md_table, median_time
from maps.sweep import ramp_map

from napari_varblur import gaussian_blur


def blur(image, sigma, **kwargs):
    """napari_varblur on the Numba backend in float32 (every timed call here)."""
    return gaussian_blur(image, sigma, backend="numba", precision="float32", **kwargs)


def paired(slow, fast, rounds: int, repeats: int) -> tuple[float, float, list[float]]:
    """Median seconds of ``slow`` and of ``fast`` over alternating rounds of
    ``common.median_time`` (one warm-up, then the median of ``repeats`` calls), and each
    round's ratio slow / fast (the two sides of a round share the machine's load)."""
    a, b = [], []
    for _ in range(rounds):
        a.append(median_time(slow, repeats))
        b.append(median_time(fast, repeats))
    return statistics.median(a), statistics.median(b), [x / y for x, y in zip(a, b, strict=True)]


def disk(shape, centre, radius) -> np.ndarray:
    """True inside the ball of ``radius`` (pixels) around ``centre`` (fractions of
    each side)."""
    grids = np.ogrid[tuple(slice(0, n) for n in shape)]
    dist2 = sum((g - c * n) ** 2 for g, c, n in zip(grids, centre, shape, strict=True))
    return dist2 <= radius**2


def masked_data(rng, shape, dead_share: float = 0.01):
    """A random float32 image, its copy with NaN dead pixels, the mask (False at the
    dead pixels and in a ball of radius shape/10 around 60%/35%/50% of each side) and
    the dead pixels."""
    image = rng.random(shape, dtype=np.float32)
    dead = rng.random(shape) < dead_share
    region = disk(shape, (0.6, 0.35, 0.5)[: len(shape)], 0.1 * min(shape))
    holed = image.copy()
    holed[dead] = np.nan
    return image, holed, ~(dead | region), dead


class Bench:
    def __init__(self, args):
        self.args = args
        self.rows: list[dict] = []

    def ratio(self, group, name, slow, fast, goal, note="", slow_name="masked",
              fast_name="plain"):  # fmt: skip
        """Time ``slow`` against ``fast``; record the median of the rounds' ratios
        ``slow / fast`` against ``<= goal``."""
        t_slow, t_fast, ratios = paired(slow, fast, self.args.rounds, self.args.repeats)
        r = statistics.median(ratios)
        row = dict(group=group, case=name, slow=slow_name, fast=fast_name, slow_s=t_slow,
                   fast_s=t_fast, ratio=r, round_ratios=ratios, goal=f"<= {goal}x",
                   ok=bool(r <= goal), note=note)  # fmt: skip
        self.rows.append(row)
        print(f"{group}) {name}: {slow_name} {t_slow * 1e3:.2f} ms, {fast_name} "
              f"{t_fast * 1e3:.2f} ms, ratio {r:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"(goal <= {goal}x) "
              f"{'ok' if row['ok'] else 'MISSED'}{'; ' + note if note else ''}",
              flush=True)  # fmt: skip
        return row


def nan_share(out) -> str:
    return f"output NaN {np.isnan(out).mean():.2%}"


def global_cases(bench: Bench, rng, s: int) -> None:
    n = 2048 // s
    image, holed, mask, _ = masked_data(rng, (n, n))
    for mode in ("reflect", "crop"):
        masked = partial(blur, holed, 4.0, mode=mode, mask=mask, nan_policy="omit")
        bench.ratio("a", f"2-D {n}x{n} sigma 4 {mode}, mask + omit", masked,
                    partial(blur, image, 4.0, mode=mode), 2.5, nan_share(masked()))  # fmt: skip

    shape = (64 // s, 256 // s, 256 // s)
    image, holed, mask, _ = masked_data(rng, shape)
    for mode in ("reflect", "crop"):
        masked = partial(blur, holed, 2.0, mode=mode, mask=mask, nan_policy="omit")
        name = f"3-D {'x'.join(map(str, shape))} sigma 2 {mode}, mask + omit"
        bench.ratio("b", name, masked, partial(blur, image, 2.0, mode=mode), 2.5,
                    nan_share(masked()))  # fmt: skip

    t, n = 16 // s, 1024 // s
    _, _, mask, dead = masked_data(rng, (n, n))
    series = rng.random((t, n, n), dtype=np.float32)
    holed = series.copy()
    holed[:, dead] = np.nan  # the same dead pixels in every frame
    for mode in ("reflect", "crop"):
        plain = partial(blur, series, 2.0, mode=mode, axes=(1, 2))
        name = f"time series {t}x{n}x{n} axes (1, 2) sigma 2 {mode}, static mask"
        bench.ratio("b", name + " + propagate (finite)",
                    partial(blur, series, 2.0, mode=mode, axes=(1, 2), mask=mask), plain, 2.5,
                    "finite frames: the validity is the same in every frame")  # fmt: skip
        bench.ratio("b", name + " + omit (NaN dead pixels)",
                    partial(blur, holed, 2.0, mode=mode, axes=(1, 2), mask=mask,
                            nan_policy="omit"), plain, 2.5,
                    "NaN in every frame: the validity is 3-D")  # fmt: skip


def map_cases(bench: Bench, rng, s: int) -> None:
    n = 1024 // s
    image, holed, mask, _ = masked_data(rng, (n, n))
    maps = {
        "uniform random [1, 4]": (1 + 3 * rng.random((n, n))).astype(np.float32),
        "ramp 1 -> 8 along x": ramp_map((n, n), 1.0, 8.0, 0.0),
    }
    for label, sigma in maps.items():
        for tol in (None, 1e-3):
            masked = partial(blur, holed, sigma, mode="crop", tolerance=tol, mask=mask,
                             nan_policy="omit")  # fmt: skip
            name = f"map {n}x{n} {label}, crop, tolerance {tol}, mask + omit"
            bench.ratio("c", name, masked,
                        partial(blur, image, sigma, mode="crop", tolerance=tol), 1.5,
                        nan_share(masked()))  # fmt: skip


def overhead_cases(bench: Bench, rng, s: int) -> None:
    n = 2048 // s
    image = rng.random((n, n), dtype=np.float32)
    plain = partial(blur, image, 4.0, mode="reflect")
    bench.ratio("d", f"2-D {n}x{n} sigma 4 reflect, mask=None + propagate spelled out",
                partial(blur, image, 4.0, mode="reflect", mask=None, nan_policy="propagate"),
                plain, 1.1, slow_name="keywords")  # fmt: skip
    bench.ratio("d", f"2-D {n}x{n} sigma 4 reflect, omit on an all-finite image, no mask",
                partial(blur, image, 4.0, mode="reflect", nan_policy="omit"), plain, 1.1,
                "pays one isfinite scan", slow_name="omit")  # fmt: skip
    m = 1024 // s
    image = rng.random((m, m), dtype=np.float32)
    sigma = (1 + 3 * rng.random((m, m))).astype(np.float32)
    bench.ratio("d", f"map {m}x{m} uniform [1, 4] crop, omit on an all-finite image, no mask",
                partial(blur, image, sigma, nan_policy="omit"), partial(blur, image, sigma),
                1.1, slow_name="omit")  # fmt: skip


def astropy_peer(bench: Bench, rng, s: int) -> dict:
    from astropy.convolution import convolve

    n = 512 // s
    _, holed, _, _ = masked_data(rng, (n, n))
    sigma, r = 2.0, 6
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-(x**2) / (2 * sigma**2))
    kernel = np.outer(g, g)
    kernel /= kernel.sum()
    theirs = partial(convolve, holed, kernel, boundary="fill", fill_value=np.nan,
                     nan_treatment="interpolate", normalize_kernel=True,
                     preserve_nan=False)  # fmt: skip
    ours = partial(blur, holed, sigma, mode="crop", nan_policy="omit")
    diff = float(np.nanmax(np.abs(theirs() - ours().astype(np.float64))))
    t_theirs, t_ours, ratios = paired(theirs, ours, bench.args.rounds, bench.args.repeats)
    import astropy

    row = dict(case=f"{n}x{n} float32 with 1% NaN, sigma 2 (13x13 kernel), crop + omit",
               astropy_s=t_theirs, ours_s=t_ours, speedup=statistics.median(ratios),
               round_speedups=ratios,
               max_abs_diff=diff, astropy=astropy.__version__)  # fmt: skip
    print(f"peer) astropy convolve {t_theirs * 1e3:.2f} ms, ours {t_ours * 1e3:.2f} ms: "
          f"astropy/ours {row['speedup']:.1f}x, max |diff| {diff:.1e}", flush=True)  # fmt: skip
    return row


def markdown(rows, peer, info, elapsed) -> str:
    """The report: the ratios' table and the astropy peer."""
    lines = ["# Masked blur cost", "", common.describe_machine(info), "",
             "Numba backend, float32.  The two calls of a row are timed in alternating rounds",
             "of `common.median_time` (one warm-up, then the median of the repeats); the",
             "seconds are the medians over rounds, the ratio (masked or NaN-aware / plain,",
             "lower is better) the median of the rounds' ratios, with their range.  Mask: ~1%",
             "random dead pixels (NaN in the image) and a disk (ball) of radius shape/10.",
             f"Whole run {elapsed:.0f} s; load average (1 min) {info['load'][0]:.1f} at the "
             f"start, {info['load_end'][0]:.1f} at the end (other jobs share the cores).",
             f"Rounds {info['rounds']} x repeats {info['repeats']}.", ""]  # fmt: skip
    lines += md_table(
        ["", "case", "masked s", "plain s", "ratio", "range", "goal", "met", "note"],
        [[r["group"], r["case"], f"{r['slow_s']:.4f}", f"{r['fast_s']:.4f}",
          f"{r['ratio']:.2f}x",
          f"{min(r['round_ratios']):.2f}-{max(r['round_ratios']):.2f}", r["goal"],
          "yes" if r["ok"] else "MISSED", r["note"]] for r in rows],
    )  # fmt: skip
    lines += ["", "## Peer: astropy", ""]
    lines += md_table(
        ["case", "astropy s", "ours s", "astropy / ours", "max abs diff"],
        [[peer["case"], f"{peer['astropy_s']:.4f}", f"{peer['ours_s']:.4f}",
          f"{peer['speedup']:.1f}x", f"{peer['max_abs_diff']:.1e}"]],
    )  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Run every case and the peer; write the result."""
    parser = common.parser(__doc__, "masked", quick="small sizes (a smoke test)")
    args = parser.parse_args(argv)
    scale = 4 if args.quick else 1
    args.rounds, args.repeats = (2, 2) if args.quick else (7, 5)
    start = time.perf_counter()
    info = common.machine()
    rng = np.random.default_rng(0)
    bench = Bench(args)
    global_cases(bench, rng, scale)
    map_cases(bench, rng, scale)
    overhead_cases(bench, rng, scale)
    peer = astropy_peer(bench, rng, scale)
    elapsed = time.perf_counter() - start
    info.update(quick=args.quick, rounds=args.rounds, repeats=args.repeats,
                elapsed_s=elapsed, load_end=[round(x, 2) for x in os.getloadavg()])  # fmt: skip
    text = markdown(bench.rows, peer, info, elapsed)
    common.write_result("masked", dict(rows=bench.rows, peer=peer), info, out=args.out,
                               markdown=text, quick=args.quick)  # fmt: skip
    print(text)
    return 0 if all(math.isfinite(r["ratio"]) for r in bench.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
