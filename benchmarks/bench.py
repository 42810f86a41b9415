"""Benchmark napari_varblur against scipy, OpenCV and the seed-naive baselines.

One command times every implementation side by side in one process, prints a markdown
table (with the machine and date on top, and the performance targets below) and writes
the same numbers as JSON::

    python benchmarks/bench.py                      # full sizes (minutes)
    python benchmarks/bench.py --quick              # small sizes, under 2 minutes
    python benchmarks/bench.py --cases G2,V2 --precisions float32 --out results.json
    python benchmarks/bench.py --gpu                # JAX only, GPU sizes (see gpu_check.sh)

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
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # seed_naive.py lives next to this file

#: The contract's tolerances, relative to max(1, max|image|), against the float64 reference.
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}

#: H200 HBM3e peak bandwidth, for the GPU mode's "% of peak" column.
H200_GB_S = 4800.0

#: Largest problem (pixels) whose float64 reference is computed at full size: the
#: reference backend for sigma maps is slow, scipy for global sigma is not.
FULL_REFERENCE_LIMIT = {"global": 1 << 24, "map2": 512 * 512, "map3": 64**3}

#: Side of the strided sub-problem used for the difference when the full reference is
#: too slow (256x256 in 2-D, 64^3 in 3-D); also the probe for time estimates.
SUB_SIDE = {2: 256, 3: 64}


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One benchmark problem.

    Attributes
    ----------
    name
        Short id used on the command line (``G2``, ``V2``, ...).
    shape
        Image shape.
    sigma
        ``"global"``, ``"uniform"`` (random map in ``sigma_range``) or ``"smooth"``
        (a linear ramp over ``sigma_range``).
    sigma_range
        ``(sigma, sigma)`` for a global sigma, else the map's ``(low, high)``.
    mode
        Edge mode passed to every implementation.
    precisions
        Precisions this case runs in.
    peers
        Implementations that the others' speed is compared with.
    """

    name: str
    shape: tuple[int, ...]
    sigma: str
    sigma_range: tuple[float, float]
    mode: str
    precisions: tuple[str, ...]
    peers: tuple[str, ...]

    @property
    def is_map(self) -> bool:
        """Whether sigma is a per-pixel map (else one global value)."""
        return self.sigma != "global"

    @property
    def pixels(self) -> int:
        """Output pixels (voxels) of one call."""
        return math.prod(self.shape)

    def describe(self) -> str:
        """One line for the report, e.g. ``2048x2048, sigma 4, reflect``."""
        size = "x".join(map(str, self.shape))
        if self.is_map:
            low, high = self.sigma_range
            return f"{size}, {self.sigma} sigma map in [{low:g}, {high:g}], {self.mode}"
        return f"{size}, sigma {self.sigma_range[0]:g}, {self.mode}"


def make_cases(profile: str) -> dict[str, Case]:
    """The cases at the sizes of ``profile``: ``full``, ``quick``, ``gpu`` or ``gpu-small``."""
    side2, side3g, side3v = {
        "full": (2048, (256,) * 3, (128,) * 3),
        "quick": (512, (64,) * 3, (64,) * 3),
        "gpu": (4096, (512, 512, 256), (512, 512, 256)),
        "gpu-small": (512, (64, 64, 32), (64, 64, 32)),
    }[profile]
    both, single = ("float32", "float64"), ("float32",)
    gpu = profile.startswith("gpu")
    # On the GPU only JAX runs; its numpy-in/out call is the peer of the device-resident one.
    g2_peers = ("jax",) if gpu else ("scipy", "cv2")
    v2_peers = ("jax",) if gpu else ("naive-numba", "naive-jax")
    g3_peers = ("jax",) if gpu else ("scipy",)
    v3_peers = ("jax",) if gpu else ("naive-numba",)
    sq = (side2, side2)
    return {
        "G2": Case("G2", sq, "global", (4.0, 4.0), "reflect", both, g2_peers),
        "V2": Case("V2", sq, "uniform", (1.0, 4.0), "crop", both, v2_peers),
        "V2s": Case("V2s", sq, "smooth", (1.0, 4.0), "crop", both, v2_peers),
        "G3": Case("G3", side3g, "global", (2.0, 2.0), "reflect", single, g3_peers),
        "V3": Case("V3", side3v, "uniform", (0.5, 2.0), "crop", single, v3_peers),
    }


def make_data(case: Case, precision: str) -> tuple[np.ndarray, float | np.ndarray]:
    """The image and sigma of ``case``.

    Parameters
    ----------
    case
        The problem.
    precision
        ``"float32"`` or ``"float64"``: the dtype of the image and of a sigma map.

    Returns
    -------
    image : numpy.ndarray
        Uniform random values in [0, 1) from ``np.random.default_rng(0)``.
    sigma : float or numpy.ndarray
        The global sigma, or the sigma map (same shape as the image).
    """
    rng = np.random.default_rng(0)
    image = rng.random(case.shape).astype(precision)
    low, high = case.sigma_range
    if case.sigma == "global":
        return image, low
    if case.sigma == "uniform":
        sigma = rng.uniform(low, high, case.shape)
    else:  # smooth: mean of the normalised coordinates, 0 at one corner and 1 at the other
        grids = np.meshgrid(*(np.arange(n) / max(n - 1, 1) for n in case.shape), indexing="ij")
        sigma = low + (high - low) * sum(grids) / len(grids)
    return image, sigma.astype(precision)


def sub_problem(case: Case, image: np.ndarray, sigma: float | np.ndarray):
    """A strided ``256x256`` (2-D) or ``64^3`` (3-D) slice of the image and map.

    Parameters
    ----------
    case
        The problem (its shape sets the strides).
    image, sigma
        The full problem's image and sigma (float or map).

    Returns
    -------
    sub_image : numpy.ndarray
        Contiguous strided slice of ``image`` (the whole image if it is small).
    sub_sigma : float or numpy.ndarray
        The same slice of the map, or the global sigma.
    index : tuple of slice
        The slice used.

    Notes
    -----
    The stride keeps the whole range of a smooth map in the slice. The slice is a new,
    smaller problem (its own borders), not a crop of the full result.
    """
    side = SUB_SIDE[len(case.shape)]
    index = tuple(slice(None, None, max(1, n // side)) for n in case.shape)
    index = tuple(slice(0, side * s.step, s.step) for s in index)
    sub_sigma = sigma if np.isscalar(sigma) else np.ascontiguousarray(sigma[index])
    return np.ascontiguousarray(image[index]), sub_sigma, index


def reference(case: Case, image, sigma) -> np.ndarray:
    """The float64 oracle: scipy for a global sigma, the reference backend for a map."""
    image64 = image.astype(np.float64)
    if case.is_map:
        from napari_varblur import gaussian_blur

        return gaussian_blur(
            image64, sigma, mode=case.mode, backend="reference", precision="float64"
        )
    from scipy import ndimage

    return ndimage.gaussian_filter(
        image64, float(sigma), mode=case.mode, radius=math.ceil(3 * float(sigma))
    )


def needs_sub_problem(case: Case) -> bool:
    """Whether the full-size float64 reference would be too slow for ``case``."""
    key = f"map{len(case.shape)}" if case.is_map else "global"
    return case.pixels > FULL_REFERENCE_LIMIT[key]


# --------------------------------------------------------------------------- implementations


@dataclass
class Impl:
    """One implementation of a case.

    ``prepare`` (untimed) turns the NumPy image and sigma into the arguments of ``run``
    (timed); ``finish`` (untimed) turns ``run``'s result into a NumPy array. All three
    run inside ``context()`` (e.g. ``jax.enable_x64``).
    """

    name: str
    run: Callable[..., Any] | None
    prepare: Callable[..., tuple] = lambda image, sigma: (image, sigma)
    finish: Callable[[Any], np.ndarray] = np.asarray
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    slow: bool = False  # a seed-naive baseline: subject to --budget
    passes: int = 1  # full read + write sweeps over the image (for GB/s)
    skip: str = ""  # why it does not run, when it does not
    note: str = ""

    def call(self, image, sigma) -> np.ndarray:
        """One untimed end-to-end call (for the sub-problem difference)."""
        with self.context():
            return self.finish(self.run(*self.prepare(image, sigma)))


def cv2_impl(case: Case) -> Impl:
    """``cv2.GaussianBlur`` with ``k = 2 ceil(3 sigma) + 1`` and the matching border."""
    try:
        import cv2
    except ImportError:
        return Impl("cv2", None, skip="not installed")
    border = {"reflect": cv2.BORDER_REFLECT, "mirror": cv2.BORDER_REFLECT_101}[case.mode]
    sigma = case.sigma_range[0]
    k = 2 * math.ceil(3 * sigma) + 1
    return Impl("cv2", lambda im, s: cv2.GaussianBlur(im, (k, k), s, borderType=border))


def jax_x64(precision: str) -> Callable[[], contextlib.AbstractContextManager]:
    """A context factory: JAX's x64 mode on for float64, off for float32."""

    def context():
        import jax  # imported on use: scipy/cv2-only runs need no JAX

        return jax.enable_x64(precision == "float64")

    return context


def jax_device_impl(case: Case, precision: str) -> Impl:
    """``napari_varblur.jax.gaussian_blur`` under ``jax.jit`` on device-resident arrays.

    Timed with ``block_until_ready``: compute only, no host<->device transfer and no host
    planning. A sigma map is passed as a traced array with a static ``max_radius``.
    """
    import jax

    from napari_varblur.jax import gaussian_blur as blur

    mode = case.mode
    if case.is_map:
        max_radius = math.ceil(3 * case.sigma_range[1])
        fn = jax.jit(lambda x, s: blur(x, s, mode=mode, max_radius=max_radius))
    else:
        sigma = case.sigma_range[0]
        fn = jax.jit(lambda x, s: blur(x, sigma, mode=mode))

    def prepare(image, sigma):
        s = jax.device_put(sigma) if case.is_map else None
        return jax.device_put(image), s

    return Impl(
        "jax-device",
        lambda x, s: fn(x, s).block_until_ready(),
        prepare=prepare,
        context=jax_x64(precision),
        passes=len(case.shape) if not case.is_map else 1,
        note="jit, device-resident, block_until_ready",
    )


def make_impls(case: Case, precision: str, args: argparse.Namespace) -> list[Impl]:
    """The implementations of ``case`` in ``precision``, peers first.

    Parameters
    ----------
    case, precision
        The problem and its precision.
    args
        Command-line options (``gpu``: JAX only; ``quick``: skip the seed-naive JAX
        above 512x512).

    Returns
    -------
    list of Impl
        scipy and cv2 (global 2-D), scipy (global 3-D) or the seed-naive baselines (maps),
        then the ``numba`` and ``jax`` backends; in GPU mode ``jax`` and ``jax-device``.
    """
    from napari_varblur import gaussian_blur

    def ours(backend: str) -> Impl:
        def run(image, sigma):
            return gaussian_blur(image, sigma, mode=case.mode, backend=backend, precision=precision)

        passes = 1 if case.is_map else len(case.shape)
        return Impl(backend, run, passes=passes)

    if args.gpu:
        numpy_io = ours("jax")
        numpy_io.note = "numpy in/out (includes transfers and host planning)"
        return [numpy_io, jax_device_impl(case, precision)]

    impls = []
    if not case.is_map:
        from scipy import ndimage

        sigma = case.sigma_range[0]
        radius = math.ceil(3 * sigma)
        impls.append(
            Impl(
                "scipy",
                lambda im, s: ndimage.gaussian_filter(im, s, mode=case.mode, radius=radius),
            )
        )
        if len(case.shape) == 2:
            impls.append(cv2_impl(case))
    else:
        from seed_naive import naive_jax_2d, naive_numba_2d, naive_numba_3d

        if len(case.shape) == 2:
            impls.append(Impl("naive-numba", naive_numba_2d, slow=True))
            naive_jax = Impl("naive-jax", naive_jax_2d, slow=True, note="vmap in chunks (lax.map)")
            if args.quick and case.pixels > 512 * 512:
                naive_jax.skip = "skipped in --quick (bigger than 512x512)"
            impls.append(naive_jax)
        else:
            impls.append(Impl("naive-numba", naive_numba_3d, slow=True, note="3-D"))
    impls += [ours("numba"), ours("jax")]
    return impls


# --------------------------------------------------------------------------- measuring


@dataclass
class Row:
    """One line of the table and of the JSON ``rows`` list."""

    case: str
    implementation: str
    precision: str
    shape: list[int]
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    first_s: float | None = None
    times_s: list[float] = field(default_factory=list)
    jax_compile_s: float | None = None
    mpx_s: float | None = None
    gb_s: float | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    max_abs_diff: float | None = None
    tolerance: float | None = None
    diff_on: str = ""
    peak_mem_x_image: float | None = None
    note: str = ""


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by ``fn()`` and its result."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def log(message: str) -> None:
    """Progress on stderr, so that stdout is only the report."""
    print(message, file=sys.stderr, flush=True)


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


# --------------------------------------------------------------------------- report


def machine_info() -> dict[str, Any]:
    """CPU, library versions, JAX devices, thread counts and the source revision."""
    import jax
    import numba
    import scipy

    import napari_varblur

    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import cv2

        cv2_version = f"{cv2.__version__} ({cv2.getNumThreads()} threads)"
    except ImportError:
        cv2_version = "not installed"
    try:
        root = HERE.parent
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        revision = f"{rev}{' + uncommitted changes in src/' if dirty else ''}"
    except OSError:
        revision = "unknown"
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model or "unknown",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": f"{numba.__version__} ({numba.get_num_threads()} threads)",
        "jax": jax.__version__,
        "jax_devices": [str(d) for d in jax.devices()],
        "cv2": cv2_version,
        "napari_varblur": f"{napari_varblur.__version__} at {revision}",
    }


def _num(x: float | None, digits: int = 3) -> str:
    """Compact number for the table: 3 significant digits, no exponent above 1000."""
    if x is None:
        return ""
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def table(rows: list[Row], gpu: bool) -> str:
    """The markdown table of ``rows``."""
    head = [
        "case", "impl", "prec", "median s", "min s", "max s", "first s", "JAX compile s",
        "Mpx/s", "speed-up (peer/impl)", "max abs diff", "note",
    ]  # fmt: skip
    if gpu:
        head.insert(9, f"GB/s (% of {H200_GB_S / 1000:g} TB/s)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratios = ", ".join(f"{k} {v:.2g}x" for k, v in r.ratios.items())
        diff = ""
        if r.max_abs_diff is not None:
            diff = f"{r.max_abs_diff:.2e}"
            if r.tolerance is not None and r.max_abs_diff > r.tolerance:
                diff += f" (> tol {r.tolerance:.0e})"
        note = "; ".join(
            x
            for x in (
                r.note,
                f"diff on {r.diff_on}" if r.diff_on not in ("", "full image") else "",
                f"peak +{r.peak_mem_x_image:.1f}x image" if r.peak_mem_x_image is not None else "",
            )
            if x
        )
        cells = [
            r.case, r.implementation, r.precision, _num(r.median_s), _num(r.min_s),
            _num(r.max_s), _num(r.first_s), _num(r.jax_compile_s), _num(r.mpx_s), ratios,
            diff, note,
        ]  # fmt: skip
        if gpu:
            gb = "" if r.gb_s is None else f"{_num(r.gb_s)} ({100 * r.gb_s / H200_GB_S:.2g}%)"
            cells.insert(9, gb)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: Speed targets (float32): (case, implementation, peer, least peer/implementation ratio).
SPEED_TARGETS = [
    ("G2", "numba", "scipy", 5.0),
    ("G2", "numba", "cv2", 0.5),  # numba within 2x of cv2
    ("G2", "jax", "scipy", 1.5),
    ("V2", "numba", "naive-numba", 15.0),
    ("V2", "jax", "naive-numba", 3.0),
    ("V2", "jax", "naive-jax", 10.0),
    ("V2s", "numba", "naive-numba", 15.0),
    ("V2s", "jax", "naive-numba", 3.0),
    ("V2s", "jax", "naive-jax", 10.0),
    ("V3", "numba", "naive-numba", 15.0),
]

#: Time targets in seconds: JAX compile (first call - median) per case, warm latency.
MAX_JAX_COMPILE_S = 3.0
MAX_WARM_LATENCY_S = 3.0


def evaluate_targets(rows: list[Row]) -> list[dict[str, Any]]:
    """The targets that apply to the rows that ran, with measured values and verdicts.

    A speed target whose case ran in float32 but whose row was skipped (e.g. by
    ``--budget``) is listed with ``measured: None`` and ``pass: None``.
    """
    targets = []

    def add(label: str, value: float | None, threshold: float, unit: str, at_most: bool):
        ok = None if value is None else (value <= threshold if at_most else value >= threshold)
        targets.append(
            {
                "target": label,
                "measured": value,
                "threshold": threshold,
                "unit": unit,
                "comparison": "<=" if at_most else ">=",
                "pass": ok,
            }
        )

    by_key = {(r.case, r.implementation, r.precision): r for r in rows}
    for case, impl, peer, threshold in SPEED_TARGETS:
        row = by_key.get((case, impl, "float32"))
        if row is None or (case, peer, "float32") not in by_key:
            continue  # the case (or this comparison) did not run
        label = f"{case} float32: {impl} vs {peer} ({peer}/{impl})"
        add(label, row.ratios.get(f"{peer}/{impl}"), threshold, "x", at_most=False)
    for r in rows:
        if r.implementation in ("jax", "jax-device") and r.case != "L":
            label = f"{r.case} {r.precision}: {r.implementation} compile (first - median)"
            add(label, r.jax_compile_s, MAX_JAX_COMPILE_S, "s", at_most=True)
    for r in rows:
        if r.case == "L" and "warm" in r.implementation:
            add(f"L: {r.implementation} wall", r.median_s, MAX_WARM_LATENCY_S, "s", at_most=True)
    return targets


def target_lines(targets: list[dict[str, Any]]) -> list[str]:
    """One markdown bullet per target: measured value, threshold, PASS/MISS."""
    lines = []
    for t in targets:
        if t["measured"] is None:
            lines.append(f"- {t['target']}: not measured (target {t['comparison']} "
                         f"{t['threshold']:g} {t['unit']})")  # fmt: skip
            continue
        verdict = "PASS" if t["pass"] else "MISS"
        lines.append(
            f"- {t['target']}: {t['measured']:.3g} {t['unit']} "
            f"(target {t['comparison']} {t['threshold']:g} {t['unit']}) {verdict}"
        )
    return lines


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
    parser.add_argument("--out", type=Path, help="JSON output (default benchmarks/results.json)")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    if args.repeats < 1:
        parser.error("--repeats: must be at least 1")
    if args.out is None:
        args.out = HERE / ("results_gpu.json" if args.gpu else "results.json")
    return args


def print_report(args, info, profile, case_text, rows, memory, targets) -> None:
    """The markdown report on stdout: machine, table, notes, peak memory, targets."""
    print(f"# napari_varblur benchmark ({profile} sizes, {args.repeats} timed runs per row)")
    print()
    print(f"- date: {info['date']}")
    print(
        f"- CPU: {info['cpu_model']}, {info['cpu_count']} cores "
        f"({info['cpu_affinity']} usable); {info['platform']}"
    )
    print(
        f"- python {info['python']}, numpy {info['numpy']}, scipy {info['scipy']}, "
        f"numba {info['numba']}, jax {info['jax']}, cv2 {info['cv2']}"
    )
    print(f"- jax devices: {', '.join(info['jax_devices'])}")
    print(f"- napari_varblur {info['napari_varblur']}")
    print()
    print("Cases: " + "; ".join(f"{n}: {text}" for n, text in case_text.items()))
    print()
    print(table(rows, args.gpu))
    print()
    print("Speed-up `peer/impl = N x`: impl's median time is N times shorter than peer's.")
    print("max abs diff: against the float64 reference (scipy for a global sigma, the")
    print("`reference` backend for a map); '(> tol)' marks a difference beyond the contract.")
    print("JAX compile s = first s - median s (about 0 when an earlier row compiled the same")
    print("shapes, e.g. V2s after V2).")
    if args.gpu:
        print("GB/s assumes each pass reads and writes the image once (2 x image bytes per")
        print("pass; one pass per axis for a global sigma, one pass for a map, map reads not")
        print(f"counted), against the H200's {H200_GB_S / 1000:g} TB/s HBM peak.")
    if memory:
        print()
        print("Peak memory of one numba call (fresh process, peak RSS above the warmed-up")
        print("baseline, in units of the image's bytes; the output array counts as 1):")
        for m in memory:
            print(
                f"- {m['case']} {m['precision']}: +{m['extra_x_image']:.2f}x image "
                f"({m['image_mib']:.0f} MiB image, baseline {m['baseline_mib']:.0f} MiB, "
                f"peak {m['peak_mib']:.0f} MiB, from {m['source']})"
            )
    print()
    print("Targets" + (" (quick sizes: indicative only)" if args.quick else "") + ":")
    print("\n".join(target_lines(targets)) or "- none apply to the cases run")


def write_json(args, info, profile, case_text, rows, memory, complete: bool) -> None:
    """Write the results so far (also after each case, so a killed run leaves data)."""
    payload = {
        "complete": complete,
        "machine": info,
        "date": info["date"],
        "profile": profile,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cases": case_text,
        "rows": [vars(r) for r in rows],
        "memory": memory,
        "targets": evaluate_targets(rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")


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
    log(f"napari_varblur benchmark ({profile} sizes), {info['date']}")
    rows: list[Row] = []
    memory: list[dict] = []
    for name in names:
        if name == "L":
            rows += latency_rows()
        else:
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
        write_json(args, info, profile, case_text, rows, memory, complete=False)

    print_report(args, info, profile, case_text, rows, memory, evaluate_targets(rows))
    write_json(args, info, profile, case_text, rows, memory, complete=True)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
