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
other jobs share the cores.  Prints markdown tables and writes
``benchmarks/results/<date>_<machine>_global_vs_opencv.json`` and ``.md`` (or ``--out``;
``--quick``: ``results/quick/``).  Without OpenCV only the masked table runs.

    python benchmarks/global/global_vs_opencv.py                 # about a minute
    python benchmarks/global/global_vs_opencv.py --sizes 2048 --repeats 15 --clock cpu
    python benchmarks/global/global_vs_opencv.py --quick         # 256², 3 repeats
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common

from napari_varblur import gaussian_blur

SIGMA = 4.0
TRUNCATE = 3.0  # the package's default
MODES = ("reflect", "nearest")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
#: Seconds of rest before each timed call: Numba's OpenMP workers spin for a few
#: milliseconds after a parallel loop (GNU OpenMP's default wait policy), which would
#: slow down whatever call comes next on two cores.
REST = 0.02


def ours(image, mode, **kwargs):
    """napari_varblur's global blur: Numba, float32, sigma 4."""
    return gaussian_blur(image, SIGMA, mode=mode, truncate=TRUNCATE, backend="numba",
                         precision="float32", **kwargs)  # fmt: skip


def opencv(image, mode):
    """``cv2.GaussianBlur`` with our kernel: ``ksize = 2 * ceil(truncate * sigma) + 1``
    and our edge rule (``reflect`` is ``BORDER_REFLECT``, ``nearest`` ``BORDER_REPLICATE``)."""
    import cv2

    border = {"reflect": cv2.BORDER_REFLECT, "nearest": cv2.BORDER_REPLICATE}[mode]
    ksize = 2 * math.ceil(TRUNCATE * SIGMA) + 1
    return cv2.GaussianBlur(image, (ksize, ksize), SIGMA, sigmaY=SIGMA, borderType=border)


def medians(calls, repeats: int, clock) -> list[float]:
    """Median seconds of each call, timed in turns after a warm-up each, resting
    ``REST`` before each call."""
    named = {str(i): call for i, call in enumerate(calls)}
    times = common.interleaved(named, repeats, rotate=False, rest=REST, clock=clock)
    return [statistics.median(t) for t in times.values()]


def largest_difference(image, mode) -> float:
    """Largest difference between ours and OpenCV: both blur with the same kernel
    (OpenCV builds it in its own precision), so this is float32 rounding."""
    a, b = ours(image, mode), opencv(image, mode)
    return float(np.abs(a - b).max())


def opencv_rows(sizes, repeats, rng, clock) -> list[dict]:
    """Ours against OpenCV on random square images, both edge modes."""
    rows = []
    for n in sizes:
        image = rng.random((n, n), dtype=np.float32)
        for mode in MODES:
            calls = [partial(ours, image, mode), partial(opencv, image, mode)]
            t_ours, t_cv = medians(calls, repeats, clock)
            diff = largest_difference(image, mode)
            rows.append(dict(case=f"{n}² {mode}", ours_s=t_ours, opencv_s=t_cv,
                             ratio=t_cv / t_ours, max_diff=diff))  # fmt: skip
            print(opencv_line(rows[-1]), flush=True)
    return rows


def opencv_line(r: dict) -> str:
    return (f"| {r['case']} | {r['ours_s'] * 1e3:.2f} | {r['opencv_s'] * 1e3:.2f} | "
            f"{r['ratio']:.2f}x | {r['max_diff']:.1e} |")  # fmt: skip


def masked_rows(sizes, repeats, rng, clock) -> list[dict]:
    """The masked blur (``mask=``, and NaN with ``nan_policy="omit"``) over the plain one."""
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
        plain, masked, omitted = medians(calls, repeats, clock)
        for label, t in (("mask=", masked), ('NaN + nan_policy="omit"', omitted)):
            rows.append(dict(case=f"{n}² reflect, 1% invalid, {label}", masked_s=t,
                             plain_s=plain, ratio=t / plain))  # fmt: skip
            print(masked_line(rows[-1]), flush=True)
    return rows


def masked_line(r: dict) -> str:
    return (f"| {r['case']} | {r['masked_s'] * 1e3:.2f} | {r['plain_s'] * 1e3:.2f} | "
            f"{r['ratio']:.2f}x |")  # fmt: skip


OPENCV_HEAD = "| case | ours ms | OpenCV ms | speed vs OpenCV | max diff |\n|---|---|---|---|---|"
MASKED_HEAD = "| case | masked ms | plain ms | masked / plain |\n|---|---|---|---|"


def main(argv=None) -> int:
    """Both tables; print them and write the result."""
    parser = common.parser(__doc__, "global_vs_opencv", quick="--sizes 256 --repeats 3")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per side")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--skip-masked", action="store_true", help="only the OpenCV table")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [256], 3
    rng, clock = np.random.default_rng(0), CLOCKS[args.clock]
    info = common.machine(clock=args.clock, repeats=args.repeats, sigma=SIGMA)
    print(common.describe_machine(info))
    result: dict = {"opencv": [], "masked": []}
    lines = []
    if common.installed("cv2"):
        print("\n" + OPENCV_HEAD)
        result["opencv"] = opencv_rows(args.sizes, args.repeats, rng, clock)
        lines += ["", OPENCV_HEAD, *map(opencv_line, result["opencv"])]
    else:
        print("OpenCV is not installed: no OpenCV table")
    if not args.skip_masked:
        print("\n" + MASKED_HEAD)
        result["masked"] = masked_rows(args.sizes, args.repeats, rng, clock)
        lines += ["", MASKED_HEAD, *map(masked_line, result["masked"])]
    title = f"# Global blur against OpenCV ({args.clock} time, median of {args.repeats})"
    text = "\n".join([title, "", common.describe_machine(info), *lines]) + "\n"
    common.write_result("global_vs_opencv", result, info, out=args.out, markdown=text,
                               quick=args.quick)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
