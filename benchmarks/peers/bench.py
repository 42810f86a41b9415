"""Benchmark napari_varblur against scipy, OpenCV and the seed-naive baselines.

One command times every implementation side by side in one process, prints a markdown
table (with the machine and date on top, and the performance targets below) and writes
the same numbers as JSON::

    python benchmarks/peers/bench.py                # full sizes (about 10 minutes)
    python benchmarks/peers/bench.py --quick        # small sizes, under 2 minutes
    python benchmarks/peers/bench.py --cases G2,V2 --precisions float32 --out /tmp/x.json
    python benchmarks/peers/bench.py --gpu          # JAX only, GPU sizes (gpu/gpu_check.sh)

Cases (random data from ``np.random.default_rng(0)``):

- ``G2``: 2048x2048, global sigma 4, ``reflect`` (vs scipy and cv2).
- ``V2``: 2048x2048, ``crop``, sigma map uniform in [1, 4] (vs the seed-naive baselines).
- ``V2s``: as V2 with a smooth map ``1 + 3 (x + y) / (2 * 2047)``.
- ``G3``: 256^3 float32, global sigma 2, ``reflect`` (vs scipy).
- ``V3``: 128^3 float32, ``crop``, sigma map uniform in [0.5, 2] (vs seed-naive 3-D Numba).
- ``L``: latency of a fresh ``python -c`` that imports the package and blurs a 512x512
  float32 image with a sigma map, with empty (cold) and then filled (warm) disk caches.

Every timed row is the median of ``--repeats`` calls after one warm-up call, whose time
is reported separately as "first s" (it includes compilation or cache loading).

The code is split over four files next to this one: ``cases.py`` (the problems, their
data and float64 references), ``impls.py`` (the implementations that are timed),
``bench_report.py`` (table, targets, markdown report and result file) and this file
(timing, peak memory and latency subprocesses, the command line).  Results go to
``benchmarks/results/<date>_<machine>_bench.json`` (``bench_gpu`` with ``--gpu``) and
the markdown report next to it; ``--quick`` runs to ``results/quick/``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

from bench_report import Row, evaluate_targets, machine_info, report_text, write_json
from cases import (
    TOLERANCE,
    Case,
    make_cases,
    make_data,
    needs_sub_problem,
    reference,
    sub_problem,
)
from common import log, result_path, timed
from impls import Impl, make_impls

# --------------------------------------------------------------------------- measuring


def max_diff(result: np.ndarray, ref: np.ndarray) -> float:
    """Largest absolute difference, computed in float64."""
    return float(np.max(np.abs(result.astype(np.float64) - ref)))


def join_notes(*parts: str) -> str:
    """The non-empty ``parts``, joined with ``"; "``."""
    return "; ".join(p for p in parts if p)


def run_case(case: Case, precision: str, args: argparse.Namespace) -> list[Row]:
    """Time every implementation of ``case`` in ``precision``.

    Parameters
    ----------
    case, precision
        The problem and its precision.
    args
        Command-line options (``repeats``, ``budget``, ``gpu``, ``quick``).

    Returns
    -------
    list of Row
        One row per implementation, with timings, the difference to the float64
        reference (full image or sub-problem) and the speed-up against each peer. A
        failing implementation gets a row with the error in its note.
    """
    image, sigma = make_data(case, precision)
    use_sub = needs_sub_problem(case)
    sub_image, sub_sigma, index = sub_problem(case, image, sigma)
    if use_sub:
        steps = ", ".join(f"::{s.step}" for s in index)
        diff_on = f"{'x'.join(map(str, sub_image.shape))} sub-problem [{steps}]"
        ref_image, ref = sub_image, reference(case, sub_image, sub_sigma)
    else:
        diff_on = "full image"
        ref_image, ref = image, reference(case, image, sigma)
    log(f"  float64 reference on the {diff_on}")
    tolerance = TOLERANCE[precision] * max(1.0, float(np.abs(ref_image).max()))

    rows = []
    for impl in make_impls(case, precision, args):
        row = Row(case.name, impl.name, precision, list(case.shape), note=impl.note)
        rows.append(row)
        if impl.run is None or impl.skip:
            row.note = impl.skip
            continue
        try:
            result = measure(impl, row, case, image, sigma, sub_image, sub_sigma, use_sub, args)
        except Exception as err:  # one broken implementation must not stop the others
            row.note = join_notes(row.note, f"error: {type(err).__name__}: {err}"[:200])
            log(f"    {impl.name}: {row.note}")
            continue
        if result is not None:
            row.max_abs_diff = max_diff(result, ref)
            row.tolerance = tolerance
            row.diff_on = diff_on

    # Ratios: peer median / this median, "scipy/numba = 6.1x" = numba 6.1x faster.
    medians = {r.implementation: r.median_s for r in rows if r.median_s}
    for row in rows:
        if row.median_s:
            row.ratios = {
                f"{peer}/{row.implementation}": medians[peer] / row.median_s
                for peer in case.peers
                if peer in medians and peer != row.implementation
            }
    return rows


def measure(
    impl: Impl, row: Row, case: Case, image, sigma, sub_image, sub_sigma, use_sub: bool, args
) -> np.ndarray | None:
    """Fill ``row`` with the timings of ``impl`` and return the result to compare.

    Parameters
    ----------
    impl, row, case
        What to run, where to record it, and the problem.
    image, sigma
        The full problem.
    sub_image, sub_sigma
        The strided sub-problem (probe of the seed-naive baselines; the difference
        when ``use_sub``).
    use_sub
        Compare on the sub-problem instead of the full image.
    args
        Command-line options (``repeats``, ``budget``, ``gpu``).

    Returns
    -------
    numpy.ndarray or None
        The last full-size result, or with ``use_sub`` that of one more call on the
        sub-problem; ``None`` when the implementation was skipped.

    Notes
    -----
    One warm-up call ("first s") then ``args.repeats`` timed calls. A seed-naive
    baseline first runs twice on the sub-problem to estimate its cost and is skipped
    when that exceeds ``args.budget``.
    """
    sub_result = None
    if impl.slow and args.budget <= 0:
        row.note = "skipped: --budget 0"
        return None
    if impl.slow:
        probe_first_s, _ = timed(lambda: impl.call(sub_image, sub_sigma))
        probe_s, sub_result = timed(lambda: impl.call(sub_image, sub_sigma))
        estimate = probe_s * case.pixels / sub_image.size * (args.repeats + 1)
        if estimate > args.budget:
            row.note = f"skipped: estimated {estimate:.0f} s > --budget {args.budget:g} s"
            log(f"    {impl.name}: {row.note}")
            return None
        shape = "x".join(map(str, sub_image.shape))
        row.note = join_notes(row.note, f"compiled by a {shape} probe ({probe_first_s:.2f} s)")
    log(f"    {impl.name} ...")
    with impl.context():
        inputs = impl.prepare(image, sigma)
        row.first_s, out = timed(lambda: impl.run(*inputs))
        for _ in range(args.repeats):
            seconds, out = timed(lambda: impl.run(*inputs))
            row.times_s.append(seconds)
        result = impl.finish(out)
    row.median_s = statistics.median(row.times_s)
    row.min_s, row.max_s = min(row.times_s), max(row.times_s)
    row.mpx_s = case.pixels / row.median_s / 1e6
    if args.gpu:  # read once + write once per pass
        row.gb_s = impl.passes * 2 * image.nbytes / row.median_s / 1e9
    if "jax" in impl.name:
        row.jax_compile_s = row.first_s - row.median_s
    if use_sub:
        del result, out, inputs  # free the full-size buffers before the sub-problem call
        result = sub_result if sub_result is not None else impl.call(sub_image, sub_sigma)
    return result


# --------------------------------------------------------------------------- subprocesses

#: Child for peak memory: setup, a small warm-up (loads or compiles the kernels), then the
#: peak RSS around one full call. ``malloc_trim`` hands freed heap pages (the compiler's)
#: back to the OS, and writing "5" to /proc/self/clear_refs (Linux >= 4.0) resets the
#: peak to the current RSS, so neither the setup's nor the compiler's peak hides the
#: call's. It prints both ru_maxrss and VmHWM before and after: ru_maxrss also keeps the
#: peak recorded when any thread exited (e.g. after compiling), which the reset cannot
#: clear, so VmHWM is the one used when the reset worked.
MEMORY_CHILD = r"""
import ctypes, json, resource, sys
import numpy as np
from napari_varblur import gaussian_blur

def peaks():
    status = open("/proc/self/status").read().split()
    hwm = int(status[status.index("VmHWM:") + 1]) if "VmHWM:" in status else None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, hwm

shape, precision, sigma_range, mode = json.loads(sys.argv[1])
rng = np.random.default_rng(0)
image = rng.random(shape, dtype=precision)  # no float64 temporaries
if sigma_range[0] == sigma_range[1]:
    sigma = small_sigma = sigma_range[0]
else:
    sigma = rng.random(shape, dtype=precision)
    sigma *= sigma_range[1] - sigma_range[0]
    sigma += sigma_range[0]
    small_sigma = np.ascontiguousarray(sigma[:64, :64])
small = np.ascontiguousarray(image[:64, :64])
gaussian_blur(small, small_sigma, mode=mode, backend="numba", precision=precision)
try:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
except (OSError, AttributeError):
    pass
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
before = peaks()
out = gaussian_blur(image, sigma, mode=mode, backend="numba", precision=precision)
after = peaks()
print(json.dumps({"before": before, "after": after, "nbytes": image.nbytes, "reset": reset}))
"""


def peak_memory(case: Case, precision: str) -> dict | None:
    """Peak RSS of one Numba call above the warmed-up baseline, in image-sized units.

    Runs in a fresh subprocess (``tracemalloc`` does not see Numba's or XLA's buffers),
    after a throwaway run of the same child that fills Numba's disk cache. The result
    array itself counts: a call that allocates only its output reads 1.0.
    """
    spec = json.dumps([list(case.shape), precision, list(case.sigma_range), case.mode])
    # Arrays above 128 KiB get their own mmap, so RSS follows them exactly.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="131072")
    for _ in range(2):  # the first run only warms the disk cache
        proc = subprocess.run(
            [sys.executable, "-c", MEMORY_CHILD, spec], capture_output=True, text=True, env=env
        )
        if proc.returncode != 0:
            log(f"    peak memory failed: {proc.stderr.strip()[-300:]}")
            return None
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    (rss_before, hwm_before), (rss_after, hwm_after) = data["before"], data["after"]
    use_hwm = data["reset"] and hwm_before is not None
    before, after = (hwm_before, hwm_after) if use_hwm else (rss_before, rss_after)
    return {
        "case": case.name,
        "implementation": "numba",
        "precision": precision,
        "source": "VmHWM after peak reset" if use_hwm else "ru_maxrss",
        "ru_maxrss_kib": [rss_before, rss_after],
        "vm_hwm_kib": [hwm_before, hwm_after],
        "baseline_mib": before / 1024,  # both are in KiB on Linux
        "peak_mib": after / 1024,
        "image_mib": data["nbytes"] / 2**20,
        "extra_x_image": (after - before) * 1024 / data["nbytes"],
    }


LATENCY_TEXT = "fresh `python -c`: import + one 512x512 float32 sigma-map blur, cold/warm caches"

#: Child for latency: a fresh interpreter that imports the package and blurs once.
LATENCY_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from napari_varblur import gaussian_blur
t1 = time.perf_counter()
rng = np.random.default_rng(0)
image = rng.random((512, 512), dtype=np.float32)
sigma = 1 + 3 * rng.random((512, 512), dtype=np.float32)
gaussian_blur(image, sigma, backend=sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "blur_s": t2 - t1}))
"""


def latency_rows() -> list[Row]:
    """Case L: wall time of ``python -c`` (import + one 512x512 map blur), cold then warm.

    Cold means empty Numba and JAX disk caches (fresh ``NUMBA_CACHE_DIR`` and
    ``JAX_COMPILATION_CACHE_DIR``); the OS file cache is not dropped.
    """
    rows = []
    for backend in ("numba", "jax"):
        with tempfile.TemporaryDirectory(prefix="varblur-bench-") as tmp:
            env = dict(
                os.environ,
                NUMBA_CACHE_DIR=os.path.join(tmp, "numba"),
                JAX_COMPILATION_CACHE_DIR=os.path.join(tmp, "jax"),
                JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
            )
            for state in ("cold", "warm"):
                log(f"  L {backend} {state} ...")
                cmd = [sys.executable, "-c", LATENCY_CHILD, backend]
                wall, proc = timed(
                    lambda cmd=cmd, env=env: subprocess.run(
                        cmd, env=env, capture_output=True, text=True
                    )
                )
                row = Row("L", f"{backend} ({state} cache)", "float32", [512, 512])
                rows.append(row)
                if proc.returncode != 0:
                    row.note = f"failed: {proc.stderr.strip()[-200:]}"
                    continue
                inner = json.loads(proc.stdout.strip().splitlines()[-1])
                files = sum(len(f) for _, _, f in os.walk(tmp))
                row.median_s = row.min_s = row.max_s = wall
                row.times_s = [wall]
                row.note = (
                    f"wall of python -c; import {inner['import_s']:.2f} s + "
                    f"first blur {inner['blur_s']:.2f} s; {files} cache files"
                )
    return rows


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line and fill the defaults that depend on other options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repeats (< 2 min)")
    parser.add_argument("--cases", help="comma-separated: G2,V2,V2s,G3,V3,L (default all)")
    parser.add_argument(
        "--precisions", default="float32,float64", help="comma-separated (default both)"
    )
    parser.add_argument("--repeats", type=int, help="timed runs per row (default 5, quick 3)")
    parser.add_argument(
        "--budget",
        type=float,
        default=120.0,
        help="skip a seed-naive baseline whose estimated time for one row exceeds this many "
        "seconds (default 120; 0 skips them all)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the peak-memory runs")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="JAX only, G2/V2 at 4096x4096 and G3/V3 at 512x512x256, with GB/s",
    )
    parser.add_argument(
        "--gpu-sizes",
        choices=("full", "small"),
        default="full",
        help="with --gpu: 'small' (512x512, 64x64x32) to try the GPU path on a CPU",
    )
    parser.add_argument(
        "--out", type=Path, help="JSON output (default results/<date>_<machine>_bench.json)"
    )
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.repeats < 1:
        parser.error("--repeats: must be at least 1")
    return args


def run_cases(args, names: list[str], cases: dict, precisions: list[str], write) -> tuple:
    """Every case in every precision it has (the latency case ``L`` once), with the
    Numba call's peak memory for G2 and V2; ``write(rows, memory)`` after each case."""
    rows: list[Row] = []
    memory: list[dict] = []
    for name in names:
        if name == "L":
            rows += latency_rows()
            write(rows, memory)
            continue
        case = cases[name]
        for precision in (p for p in precisions if p in case.precisions):
            log(f"{case.name} {precision}: {case.describe()}")
            case_rows = run_case(case, precision, args)
            if name in ("G2", "V2") and not args.gpu and not args.no_memory:
                log("    numba peak memory (subprocess) ...")
                mem = peak_memory(case, precision)
                if mem:
                    memory.append(mem)
                    for r in case_rows:
                        if r.implementation == "numba":
                            r.peak_mem_x_image = mem["extra_x_image"]
            rows += case_rows
        write(rows, memory)
    return rows, memory


def main(argv: list[str] | None = None) -> int:
    """Run the selected cases, print the report and write the JSON; 0 on success."""
    args = parse_args(argv)
    if args.gpu:
        profile = "gpu" if args.gpu_sizes == "full" else "gpu-small"
        default_cases = "G2,V2,G3,V3"
    else:
        profile = "quick" if args.quick else "full"
        default_cases = "G2,V2,V2s,G3,V3,L"
    cases = make_cases(profile)
    names = (args.cases or default_cases).split(",")
    unknown = [n for n in names if n not in cases and n != "L"]
    if unknown:
        print(f"--cases: unknown {unknown}; choose from {[*cases, 'L']}", file=sys.stderr)
        return 2
    precisions = args.precisions.split(",")
    if not set(precisions) <= set(TOLERANCE):
        print("--precisions: choose from float32, float64", file=sys.stderr)
        return 2
    case_text = {n: cases[n].describe() if n in cases else LATENCY_TEXT for n in names}

    info = machine_info()
    if args.out is None:
        name = "bench_gpu" if args.gpu else "bench"
        args.out = result_path(name, info, quick=args.quick or args.gpu_sizes == "small")
    log(f"napari_varblur benchmark ({profile} sizes), {info['date']}")

    def write(rows, memory, complete=False):
        write_json(args, info, profile, case_text, rows, memory, complete=complete)

    rows, memory = run_cases(args, names, cases, precisions, write)
    print(report_text(args, info, profile, case_text, rows, memory, evaluate_targets(rows)))
    write(rows, memory, complete=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
