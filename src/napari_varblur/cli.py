"""Command line: ``varblur demo`` (also ``python -m napari_varblur demo``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from . import backends
from .api import gaussian_blur
from .sample import fluorescence_sample

#: The contract's tolerances, relative to max(1, max|image|), against the reference.
TOLERANCE = {"float32": 1e-5, "float64": 1e-12}


def demo(size: int = 256, out=sys.stdout) -> int:
    """Blur the built-in sample on every available backend and check the contract.

    Returns 0 when every backend is within tolerance of ``reference``, else 1.
    """
    image, sigma_map = fluorescence_sample(size)
    scale = max(1.0, float(np.abs(image).max()))
    status = backends.available_backends()
    names = [n for n in ("numba", "jax") if not status[n].startswith("unavailable")]
    print(
        f"napari-varblur demo: {size}x{size} fluorescence sample, sigma map in "
        f"[{sigma_map.min():.2f}, {sigma_map.max():.2f}], mode='crop'",
        file=out,
    )
    for name, text in status.items():
        print(f"  {name}: {text}", file=out)
    print(file=out)
    print(
        "| backend | device | precision | first call s | time s | max abs diff | tolerance | ok |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|---|", file=out)
    failures = 0
    for precision in ("float32", "float64"):
        reference = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
        for name in ["reference", *names]:
            t0 = time.perf_counter()
            result = gaussian_blur(image, sigma_map, backend=name, precision=precision)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = gaussian_blur(image, sigma_map, backend=name, precision=precision)
            elapsed = time.perf_counter() - t0
            diff = float(np.abs(result.astype(np.float64) - reference).max())
            tolerance = TOLERANCE[precision] * scale
            ok = diff <= tolerance and result.dtype == np.dtype(precision)
            failures += not ok
            device = backends.load(name).device_name()
            print(
                f"| {name} | {device} | {precision} | {first:.3f} | {elapsed:.3f} | "
                f"{diff:.3g} | {tolerance:.3g} | {'yes' if ok else 'NO'} |",
                file=out,
            )
    print(file=out)
    print(
        "all backends meet the contract"
        if not failures
        else f"{failures} backend run(s) broke the contract",
        file=out,
    )
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="varblur", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="blur the built-in sample on every backend and compare")
    p_demo.add_argument("--size", type=int, default=256, help="sample size in pixels (default 256)")
    p_demo.add_argument(
        "--view", action="store_true", help="then open napari with the sample and the widget"
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.size < 8:
            parser.error("--size: must be at least 8")
        if args.view and not _has_display():
            print(
                "varblur demo --view: no display found (DISPLAY is not set); "
                "run without --view, or on a desktop or under Xvfb",
                file=sys.stderr,
            )
            return 2
        status = demo(args.size)
        if args.view:
            try:
                from .gui.viewer import open_demo_viewer
            except ImportError as err:
                print(
                    f"varblur demo --view needs napari ({err}); install it with: "
                    "pip install 'napari-varblur[all]'",
                    file=sys.stderr,
                )
                return 2
            open_demo_viewer()
        return status
    return 2  # pragma: no cover - argparse enforces a command


def _has_display() -> bool:
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
