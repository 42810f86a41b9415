"""Fit the level walk's cost constants (the planner's cost model) to measured times.

Runs the level walk and the exact gather (Numba, or ``--backend jax``) on a set of
smooth and rough maps, tilings and sizes, and prints a least-squares fit of seconds
against the work counts of the cost model (``internals.level_walk_trials``), with each
case's estimate and measurement.  The fitted constants are for
``napari_varblur.engine.cost.NUMBA_COSTS`` or ``JAX_COSTS`` (see docs/design.md).

    python benchmarks/maps/calibrate_levels.py           # about 3 minutes on 2 cores
    python benchmarks/maps/calibrate_levels.py --backend jax   # about 4 minutes
    python benchmarks/maps/calibrate_levels.py --quick   # the smallest maps only

Writes ``benchmarks/results/<date>_<machine>_calibrate_levels[_jax].json``
(``--quick``: ``results/quick/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, internals

import common
import internals
from common import median_time

KEYS = ("taps", "calls", "tiles", "sums")


def best_of(fn, repeats=2) -> float:
    """The fastest of ``repeats`` calls after a warm-up."""
    return median_time(fn, repeats, summary=min)


def cases(rng, quick: bool):
    """(shape, sigma map): 2-D ramps (along x, tilted), 3-D ramps, a random map."""
    sides = (256, 512) if quick else (256, 512, 1024, 2048)
    for shape in ((n, n) for n in sides):
        for top, tilt in ((4.0, 0.0), (16.0, 0.0), (16.0, 0.3), (8.0, 0.5)):
            g = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
            yield shape, (1 + (top - 1) * ((1 - tilt) * g[-1] + tilt * g[-2])).astype(np.float32)
    volumes = ((16, 32, 32),) if quick else ((16, 32, 32), (32, 64, 64), (64, 128, 128))
    for shape in volumes:
        for top in (2.0, 8.0):
            ramp = np.linspace(0.5, top, shape[-1], dtype=np.float32)
            yield shape, np.broadcast_to(ramp, shape).copy()
    yield (512, 512), rng.uniform(1, 4, (512, 512)).astype(np.float32)


def measure(rng, quick: bool, backend: str = "numba") -> list[dict]:
    """Every case's tilings: the walk's and the gather's seconds, measured and estimated."""
    rows = []
    for shape, sigma in cases(rng, quick):
        image = rng.random(shape, dtype=np.float32)
        gather, trials = internals.level_walk_trials(image, sigma, backend=backend)
        gather_s = best_of(gather, 1)
        for trial in trials:
            walk_s = best_of(trial["walk"])
            rows.append(dict(shape=list(shape), sigma_max=float(sigma.max()),
                             tiles=list(trial["tiles"]), work=trial["work"], walk_s=walk_s,
                             walk_estimate_s=trial["estimate"], gather_s=gather_s,
                             gather_estimate_s=trial["gather_estimate"]))  # fmt: skip
            print(
                f"{shape} sigma<= {float(sigma.max()):.0f} tiles {trial['tiles']}: walk "
                f"{walk_s:.4f} s (est {trial['estimate']:.4f}), gather {gather_s:.4f} s "
                f"(est {trial['gather_estimate']:.4f})",
                flush=True,
            )
    return rows


def fit(rows: list[dict], keys=KEYS) -> dict:
    """Non-negative least squares of the walk's seconds on its work counts ``keys``
    (relative errors), and the gather's seconds per work unit by dimension (median).
    Rows the current table misjudges by more than 10x are left out of the walk's fit
    and listed (a per-axis walk's count of level combinations is an upper bound: it
    visits only those its pixels mix)."""
    from scipy.optimize import nnls

    kept = [r for r in rows if 0.1 <= r["walk_estimate_s"] / r["walk_s"] <= 10]
    a = np.array([[r["work"][k] for k in keys] for r in kept])
    b = np.array([r["walk_s"] for r in kept])
    weights = 1 / b
    walk_fit, _ = nnls(a * weights[:, None], b * weights)
    gather = {}
    for dims in (2, 3):
        part = [r["gather_s"] / r["work"]["gather"] for r in rows if len(r["shape"]) == dims]
        if part:
            gather[dims] = float(np.median(part))
    ratios = np.sort((a @ walk_fit) / b)
    left_out = [(r["shape"], r["sigma_max"]) for r in rows if r not in kept]
    return dict(walk=dict(zip(keys, map(float, walk_fit), strict=True)), gather=gather,
                estimate_over_measured=[round(float(x), 2) for x in ratios],
                left_out=left_out)  # fmt: skip


def main(argv=None) -> int:
    """Measure, fit, print and write the result."""
    parser = common.parser(__doc__, "calibrate_levels", quick="the smallest maps only")
    parser.add_argument("--backend", choices=("numba", "jax"), default="numba")
    args = parser.parse_args(argv)
    info = common.machine()
    rows = measure(np.random.default_rng(0), args.quick, args.backend)
    # A whole-image walk (JAX) has one tile: no tile term to fit.
    fitted = fit(rows, KEYS if args.backend == "numba" else ("taps", "calls", "sums"))
    print("walk fit:", fitted["walk"])
    for dims, value in fitted["gather"].items():
        print(f"gather fit {dims}-D:", value)
    print("walk estimate / measured:", fitted["estimate_over_measured"])
    print("left out of the walk's fit:", fitted["left_out"])
    name = "calibrate_levels" + ("" if args.backend == "numba" else f"_{args.backend}")
    common.write_result(name, dict(backend=args.backend, rows=rows, fit=fitted), info,
                               out=args.out, quick=args.quick)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
