"""The tolerance bound on its sharpest adversary: every pixel's realised kernel.

A pixel's output error for the worst image (the sign of its kernel error, scaled to the
value range) is half the L1 distance between its realised kernel and the exact one,
times the range.  So the realised kernels, one blur of a batch of unit images (one per
pixel), give the worst error over *every* image at once: the bound holds iff
``max L1 / 2 <= tolerance``.  Maps: sigma drawn per pixel (every interval between levels
is hit at many weights), and a radial map; 2-D and 3-D, every edge mode; the level walk
forced on the Numba backend in float64 (every level route realises the same mix; the
tests hold the bands and the JAX loop to it), against the exact gather in float64
(Numba's; the tests hold it to the NumPy reference within 1e-12).

    python benchmarks/maps/worst_case.py          # about a minute on 2 cores

Writes ``benchmarks/results/<date>_<machine>_worst_case.json`` and ``.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common

from napari_varblur.backends import load
from napari_varblur.core.level_plan import plan_levels
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import cost, walk

MODES = ("nearest", "reflect", "wrap", "constant", "crop")
CASES = {  # name: (shape, sigma range)
    "2-D 20x20, sigma 0.5-6 per pixel": ((20, 20), (0.5, 6.0)),
    "2-D 20x20, radial 0.5-6": ((20, 20), "radial"),
    "3-D 10x10x10, sigma 0.4-3 per pixel": ((10, 10, 10), (0.4, 3.0)),
    "3-D 10x10x10, radial 0.4-3": ((10, 10, 10), "radial"),
}


def sigma_map(shape, spec, rng) -> np.ndarray:
    if spec == "radial":
        grid = np.indices(shape, dtype=np.float64)
        r = np.sqrt(sum((g - (n - 1) / 2) ** 2 for g, n in zip(grid, shape)))
        top = 6.0 if len(shape) == 2 else 3.0
        # (jittered: a grid this small has few distinct radii, which would be exact)
        return 0.4 + (top - 0.4) * r / r.max() + rng.uniform(0, 1e-3, shape)
    lo, hi = spec
    return rng.uniform(lo, hi, shape)


def realised(shape, sigma, mode, tolerance) -> tuple[float, int]:
    """Worst ``L1 / 2`` over the pixels, relative to ``tolerance``, and the levels."""
    n = int(np.prod(shape))
    deltas = np.eye(n).reshape((n, *shape))
    kw = dict(axes=tuple(range(1, len(shape) + 1)), mode=mode)
    spec = BlurSpec.from_args(deltas, sigma[None], backend="numba", precision="float64",
                              tolerance=tolerance, **kw)  # fmt: skip
    levels = plan_levels(spec)
    mixed = walk.blur(spec, cost.Plan(levels, shape), load("numba"))  # one tile
    exact_spec = BlurSpec.from_args(deltas, sigma[None], backend="numba", precision="float64",
                                    **kw)  # fmt: skip
    exact = load("numba").gather(exact_spec)
    l1 = np.abs(mixed - exact).sum(axis=0)
    return float(l1.max() / 2 / tolerance), len(levels.levels[0])


def main() -> None:
    parser = common.parser(__doc__, "worst_case")
    parser.add_argument("--tolerances", default="1e-3,1e-2")
    args = parser.parse_args()
    info = common.machine()
    rng = np.random.default_rng(7)
    rows = []
    for tolerance in (float(t) for t in args.tolerances.split(",")):
        for name, (shape, spec) in CASES.items():
            sigma = sigma_map(shape, spec, rng)
            for mode in MODES:
                worst, count = realised(shape, sigma, mode, tolerance)
                rows.append(dict(case=name, mode=mode, tolerance=tolerance, levels=count,
                                 worst=worst))  # fmt: skip
                print(f"{name} {mode} tol {tolerance:g}: worst {worst:.3f} of the bound "
                      f"({count} levels)", flush=True)  # fmt: skip
    head = "| case | mode | tolerance | levels | worst error / bound |\n|---|---|---:|---:|---:|"
    lines = [f"| {r['case']} | {r['mode']} | {r['tolerance']:g} | {r['levels']} | "
             f"{r['worst']:.3f} |" for r in rows]  # fmt: skip
    text = "\n".join(["# The tolerance bound on every pixel's realised kernel", "",
                      common.describe_machine(info), "", head, *lines, ""])  # fmt: skip
    common.write_result("worst_case", {"rows": rows}, info, out=args.out, markdown=text)


if __name__ == "__main__":
    main()
