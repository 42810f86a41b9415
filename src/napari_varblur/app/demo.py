"""``varblur demo``: blur the built-in sample on every backend and check the contract."""

from __future__ import annotations

import sys
import time

import numpy as np

from .. import engine
from ..adapters.numpy_api import gaussian_blur
from ..core.rules import CONTRACT_TOLERANCE
from ..sample import fluorescence_sample

#: The table's header.
HEADER = (
    "| backend | device | precision | first call s | time s | max abs diff | tolerance | ok |\n"
    "|---|---|---|---|---|---|---|---|"
)
FOOTNOTE = (
    "\ntolerance: the contract's bound on max abs diff from the float64 reference, "
    "1e-5 (float32) or 1e-12 (float64) times max(1, max|image|); (compiled): the first "
    "call compiled kernels (first run only: Numba caches them on disk; JAX per process "
    "unless JAX_COMPILATION_CACHE_DIR is set)\n"
)


def demo(size: int = 256, out=sys.stdout) -> int:
    """Blur the built-in sample on every available backend and check the contract.

    Returns 0 when every backend is within tolerance of ``reference``, else 1.
    """
    image, sigma_map = fluorescence_sample(size)
    status = engine.available_backends()
    names = [n for n in ("numba", "jax") if not status[n].startswith("unavailable")]
    print(f"napari-varblur demo: {size}x{size} fluorescence sample, sigma map in "
          f"[{sigma_map.min():.2f}, {sigma_map.max():.2f}], mode='crop'", file=out)  # fmt: skip
    for name, text in status.items():
        print(f"  {name}: {text}", file=out)
    print(f"\n{HEADER}", file=out)
    failures = 0
    for precision in ("float32", "float64"):
        reference = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
        for name in ["reference", *names]:
            ok, row = _row(image, sigma_map, name, precision, reference)
            failures += not ok
            print(row, file=out)
    print(FOOTNOTE, file=out)
    broke = f"{failures} backend run(s) broke the contract"
    print(broke if failures else "all backends meet the contract", file=out)
    return 1 if failures else 0


def _row(image, sigma_map, name: str, precision: str, reference) -> tuple[bool, str]:
    """Time one backend (its first call, then a second) and compare with the reference."""
    before, t0 = engine.compiles(name), time.perf_counter()
    gaussian_blur(image, sigma_map, backend=name, precision=precision)
    first = time.perf_counter() - t0
    compiled = " (compiled)" if engine.compiles(name) > before else ""
    t0 = time.perf_counter()
    result = gaussian_blur(image, sigma_map, backend=name, precision=precision)
    elapsed = time.perf_counter() - t0
    diff = float(np.abs(result.astype(np.float64) - reference).max())
    tolerance = CONTRACT_TOLERANCE[precision] * max(1.0, float(np.abs(image).max()))
    ok = diff <= tolerance and result.dtype == np.dtype(precision)
    row = (f"| {name} | {engine.device_name(name)} | {precision} | {first:.3f}{compiled} | "
           f"{elapsed:.3f} | {diff:.3g} | {tolerance:.3g} | {'yes' if ok else 'NO'} |")  # fmt: skip
    return ok, row
