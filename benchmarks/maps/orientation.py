"""Sigma-map orientation sweep: the tolerance mode's cost as ratios, map by map.

For each sigma map (2-D: a ramp along x, a ramp tilted 30 degrees from x, radial, an
off-centre field-curvature bowl; 3-D: a ramp along x, a ramp along z, a diagonal ramp
along all three axes, spherical radial), on napari_varblur's Numba backend, float32,
``mode="nearest"``, in one process, every ratio measured within one run of interleaved
rounds (one warm-up round, then the median of ``--repeats`` rounds; the order of the
calls rotates from round to round; a call under 0.1 s runs 5 times per round and the
round keeps their median):

- ``tolerance=1e-3`` / ONE global blur at the map's largest sigma (same image, mode);
- ``tolerance=1e-3`` / the exact per-pixel gather;
- max |tolerance - exact| / the image's value range (the promise: <= 1e-3);
- the plain stack: global blurs from the smallest to the largest sigma at a ratio of
  1.19 between levels (17 blurs for 1 -> 16), the blurs only, / one global blur;
- the route the library chose (``internals.route``) where it can be read.

An exact gather slower than ``--once-above`` seconds (the 3-D maps) is timed once, by
the call that makes the exact result, and marked so.

Images: 2-D, the built-in sample (``napari_varblur.sample.fluorescence_sample``: blobs,
filaments and Poisson noise); 3-D, smooth noise plus white noise (``scipy.ndimage``
``gaussian_filter(sigma 4)`` of a normal field, unit std, + 0.25 x white noise).

Peers, on the 2-D maps at ``--peer-size`` (default 1024, the built-in sample at that
size), skipped with a note when not installed: ImageMagick's ``-compose blur`` and
GEGL's ``variable-blur`` (``orientation_peers.py``).  The maps and images are in
``orientation_cases.py``, the report in ``orientation_report.py``.

    python benchmarks/maps/orientation.py            # 9 min on 2 cores (17 at load 5)
    python benchmarks/maps/orientation.py --quick    # 512^2 and 32x64x64, 2-3 minutes
    python benchmarks/maps/orientation.py --threads 1 --no-peers   # steadier when busy
    python benchmarks/maps/orientation.py --render --out X.json  # X.md from X.json

Writes ``benchmarks/results/<date>_<machine>_orientation.json`` (or ``--out``; quick
runs: ``results/quick/``) and the markdown report next to it (``.md``).  To time a clean
commit while the tree is being edited, export it (``git archive HEAD src | tar -x -C
/tmp/head``) and run with ``PYTHONPATH=/tmp/head/src`` and ``--label``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, internals

import common
import internals
import numpy as np
from common import interleaved
from orientation_cases import (
    TOLERANCE,
    exact_call,
    image_2d,
    image_3d,
    maps_2d,
    maps_3d,
    stack_levels,
)
from orientation_peers import peer_rows, tool_versions
from orientation_report import PEER_TEXT, markdown, route_text

from napari_varblur import gaussian_blur


def calls(image, smap, mode, levels) -> dict:
    """The calls timed against each other: one global blur at the map's largest sigma,
    the tolerance mode, and the plain stack of global blurs."""
    high = float(smap.max())
    return {
        "global": partial(gaussian_blur, image, high, mode=mode, backend="numba"),
        "tolerance": partial(
            gaussian_blur, image, smap, tolerance=TOLERANCE, mode=mode, backend="numba"
        ),
        "stack": partial(_stack, image, levels, mode),
    }


def _stack(image, levels, mode) -> None:
    """The plain stack, as a user would loop over it: each blur's result is dropped
    before the next.  (Keeping all 17 in a list holds 17 fresh image-sized arrays and
    cost 8.2x one global blur against 7.2x for this loop, 2-D tilted map, 2026-12-06;
    a run beside the test suite said 16-22x: busy cores, not the method.)"""
    for s in levels:
        gaussian_blur(image, s, mode=mode, backend="numba")


def measure(case: str, name: str, what: str, image, smap, args) -> dict:
    """One map's row: every ratio from one set of interleaved rounds."""
    mode = args.mode
    low, high = float(smap.min()), float(smap.max())
    levels = stack_levels(low, high)
    row = dict(case=case, map=name, description=what, shape=list(image.shape),
               sigma_min=low, sigma_max=high, mode=mode, stack_levels=len(levels))  # fmt: skip
    row["route_tolerance"] = internals.route(image, smap, mode, TOLERANCE)
    row["route_exact"] = internals.route(image, smap, mode, None)
    exact_fn, row["exact_impl"] = exact_call(image, smap, mode)
    probe, exact = common.timed(exact_fn)
    fns = calls(image, smap, mode, levels)
    once = probe > args.once_above
    if not once:
        fns["exact"] = exact_fn
    times = interleaved(fns, args.repeats, short=0.1)
    med = {k: statistics.median(v) for k, v in times.items()}
    if once:
        med["exact"], times["exact"] = probe, [probe]
    row.update(exact_timed_once=once, times_s=times, median_s=med)
    tol_out = fns["tolerance"]()
    row["error"] = float(np.abs(tol_out.astype(np.float64) - exact).max() / np.ptp(image))
    for key, top, bottom in (("tol_over_global", "tolerance", "global"),
                             ("tol_over_exact", "tolerance", "exact"),
                             ("exact_over_global", "exact", "global"),
                             ("stack_over_global", "stack", "global")):  # fmt: skip
        row[key] = med[top] / med[bottom]
    print(
        f"{case} {name}: tol/global {row['tol_over_global']:.1f}x, tol/exact "
        f"{row['tol_over_exact']:.3f}, err {row['error']:.1e}, stack/global "
        f"{row['stack_over_global']:.1f}x, route {route_text(row['route_tolerance'])} "
        f"(global {med['global']:.4f} s, tol {med['tolerance']:.4f} s, exact "
        f"{med['exact']:.3f} s{' once' if once else ''})",
        flush=True,
    )
    return row


def parse(argv) -> argparse.Namespace:
    """The command line."""
    parser = common.parser(__doc__, "orientation", quick="512^2 and 32x64x64 (a smoke test)")
    parser.add_argument("--mode", default="nearest")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--once-above", type=float, default=5.0,
                        help="time an exact gather slower than this (s) once")  # fmt: skip
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--peer-size", type=int, default=None, help="default 1024 (quick 256)")
    parser.add_argument("--peer-maps", default="", help="comma list of 2-D map names (all)")
    parser.add_argument("--only", default="", help="run only '2-D' or '3-D'")
    parser.add_argument("--label", default=None, help="a note on the code timed")
    parser.add_argument("--threads", type=int, default=None,
                        help="Numba threads (default all; 1 is steadier when busy)")  # fmt: skip
    parser.add_argument("--render", action="store_true",
                        help="only rewrite the markdown from the JSON at --out")  # fmt: skip
    args = parser.parse_args(argv)
    args.peer_size = args.peer_size or (256 if args.quick else 1024)
    args.peer_maps = [m.strip() for m in args.peer_maps.split(",") if m.strip()]
    return args


class Run:
    """One sweep: its data, saved with the markdown after every row."""

    def __init__(self, args, info: dict, n2: int, s3: tuple[int, ...]):
        self.args, self.info, self.ranges = args, info, {}
        self.images = (
            f"2-D: `fluorescence_sample({n2})` (the built-in sample: blobs, filaments, "
            f"Poisson noise; range {{r2}}); 3-D: {'x'.join(map(str, s3))} smooth noise "
            "(`scipy.ndimage.gaussian_filter(normal, 4)`, unit std) + 0.25 x white noise "
            "(range {r3})."
        )
        settings = dict(mode=args.mode, repeats=args.repeats, once_above=args.once_above,
                        quick=args.quick, tolerance=TOLERANCE, precision="float32")  # fmt: skip
        self.data = dict(settings=settings, rows=[], complete=False)
        self.out = Path(args.out) if args.out else common.result_path(
            "orientation", info, quick=args.quick)  # fmt: skip

    def save(self) -> None:
        """Write the JSON and the markdown as they are now."""
        self.data["images"] = self.images.format(r2=self.ranges.get(2, "-"),
                                                 r3=self.ranges.get(3, "-"))  # fmt: skip
        text = markdown({"machine": self.info, **self.data})
        common.write_result("orientation", self.data, self.info, out=self.out, markdown=text)

    def sweep(self, dims: int, case: str, image, maps: dict) -> None:
        """Every map of one image, saving after each row."""
        digits = "g" if dims == 2 else ".2f"
        self.ranges[dims] = f"{image.min():{digits}} to {image.max():{digits}}"
        for name, (what, smap) in maps.items():
            self.data["rows"].append(measure(case, name, what, image, smap, self.args))
            self.save()


def main(argv=None) -> int:
    """Run the sweep (or only re-render the markdown of a result)."""
    args = parse(argv)
    if args.render:
        out = Path(args.out) if args.out else common.latest_result("orientation")
        out.with_suffix(".md").write_text(markdown(json.loads(out.read_text())))
        return 0
    n2 = 512 if args.quick else 2048
    s3 = (32, 64, 64) if args.quick else (64, 128, 128)
    if args.threads:
        import numba

        numba.set_num_threads(args.threads)
    info = common.machine(label=args.label, **tool_versions())
    print(common.describe_machine(info), flush=True)
    run = Run(args, info, n2, s3)
    if args.only in ("", "2-D"):
        run.sweep(2, f"2-D {n2}²", image_2d(n2), maps_2d((n2, n2)))
    if args.only in ("", "3-D"):
        run.sweep(3, f"3-D {'x'.join(map(str, s3))}", image_3d(s3), maps_3d(s3))
    if not args.no_peers and args.only in ("", "2-D", "peers"):
        run.data["peer_text"] = PEER_TEXT
        run.data["peers"] = peer_rows(args)
    run.data["complete"] = True
    info["load_end"] = [round(x, 2) for x in os.getloadavg()]
    run.save()
    print(run.out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
