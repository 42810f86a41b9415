"""Global float32 blur against OpenCV, and the masked global blur against the plain one.

Times, in one process, ``gaussian_blur(image, sigma, mode=..., backend="numba",
precision="float32")`` against ``cv2.GaussianBlur`` with the same kernel (sigma 4,
truncate 3: radius 12, ``ksize`` 25) and the same edge rule (scipy ``reflect`` is
OpenCV's ``BORDER_REFLECT``, ``nearest`` is ``BORDER_REPLICATE``) on random float32
square images, and the masked blur (1% random invalid pixels, given as ``mask=`` or as
NaN with ``nan_policy="omit"``) against the plain blur of the same image.

The calls of one case are interleaved (a, b, a, b, ...) after a warm-up call each, so
slow drifts of a shared machine hit both sides alike; each time is the median of
``--repeats`` calls.  ``--clock cpu`` times the process's CPU seconds instead of wall
seconds (every thread's work, both sides run two threads here): a steadier figure when
other jobs share the cores.  Prints markdown tables.

    .venv/bin/python benchmarks/global_vs_opencv.py
    .venv/bin/python benchmarks/global_vs_opencv.py --sizes 2048 --repeats 15 --clock cpu
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from functools import partial

import cv2
import numba
import numpy as np

from napari_varblur import gaussian_blur

SIGMA = 4.0
TRUNCATE = 3.0  # the package's default
BORDERS = {"reflect": cv2.BORDER_REFLECT, "nearest": cv2.BORDER_REPLICATE}


def ours(image, mode, **kwargs):
    return gaussian_blur(image, SIGMA, mode=mode, truncate=TRUNCATE, backend="numba",
                         precision="float32", **kwargs)  # fmt: skip


def opencv(image, mode):
    """``cv2.GaussianBlur`` with our kernel: ``ksize = 2 * ceil(truncate * sigma) + 1``."""
    ksize = 2 * math.ceil(TRUNCATE * SIGMA) + 1
    return cv2.GaussianBlur(image, (ksize, ksize), SIGMA, sigmaY=SIGMA,
                            borderType=BORDERS[mode])  # fmt: skip


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
#: Seconds of rest before each timed call: Numba's OpenMP workers spin for a few
#: milliseconds after a parallel loop (GNU OpenMP's default wait policy), which would
#: slow down whatever call comes next on two cores.
REST = 0.02


def interleaved(calls, repeats: int, clock=time.perf_counter) -> list[float]:
    """Median seconds of each call in ``calls``, timed in turns after a warm-up each."""
    for call in calls:
        call()
    times = [[] for _ in calls]
    for _ in range(repeats):
        for call, seen in zip(calls, times):
            time.sleep(REST)
            start = clock()
            call()
            seen.append(clock() - start)
    return [statistics.median(t) for t in times]


def largest_difference(image, mode) -> float:
    """Largest difference between ours and OpenCV: both blur with the same kernel
    (OpenCV builds it in its own precision), so this is float32 rounding."""
    a, b = ours(image, mode), opencv(image, mode)
    return float(np.abs(a - b).max())


def opencv_rows(sizes, repeats, rng, clock) -> list[str]:
    rows = []
    for n in sizes:
        image = rng.random((n, n), dtype=np.float32)
        for mode in BORDERS:
            calls = [partial(ours, image, mode), partial(opencv, image, mode)]
            t_ours, t_cv = interleaved(calls, repeats, clock)
            diff = largest_difference(image, mode)
            rows.append(f"| {n}² {mode} | {t_ours * 1e3:.2f} | {t_cv * 1e3:.2f} | "
                        f"{t_cv / t_ours:.2f}x | {diff:.1e} |")  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def masked_rows(sizes, repeats, rng, clock) -> list[str]:
    rows = []
    for n in sizes:
        image = rng.random((n, n), dtype=np.float32)
        valid = rng.random((n, n)) >= 0.01
        holed = np.where(valid, image, np.float32(np.nan))
        calls = [
            partial(ours, image, "reflect"),
            partial(ours, image, "reflect", mask=valid),
            partial(ours, holed, "reflect", nan_policy="omit"),
        ]
        plain, masked, omitted = interleaved(calls, repeats, clock)
        for label, t in (("mask=", masked), ('NaN + nan_policy="omit"', omitted)):
            rows.append(f"| {n}² reflect, 1% invalid, {label} | {t * 1e3:.2f} | "
                        f"{plain * 1e3:.2f} | {t / plain:.2f}x |")  # fmt: skip
            print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per side")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--skip-masked", action="store_true", help="only the OpenCV table")
    args = parser.parse_args(argv)
    rng, clock = np.random.default_rng(0), CLOCKS[args.clock]
    print(f"sigma {SIGMA}, truncate {TRUNCATE}, float32; median of {args.repeats} "
          f"({args.clock} time), numba threads {numba.get_num_threads()}, "
          f"OpenCV threads {cv2.getNumThreads()}")  # fmt: skip
    print("\n| case | ours ms | OpenCV ms | speed vs OpenCV | max diff |")
    print("|---|---|---|---|---|")
    opencv_rows(args.sizes, args.repeats, rng, clock)
    if not args.skip_masked:
        print("\n| case | masked ms | plain ms | masked / plain |")
        print("|---|---|---|---|")
        masked_rows(args.sizes, args.repeats, rng, clock)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
