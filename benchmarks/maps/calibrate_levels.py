"""Fit the level walk's cost constants (``napari_varblur.engine.walk``) to measured times.

Runs the level walk and the exact gather (Numba) on a set of smooth and rough maps,
tilings and sizes, and prints a least-squares fit of seconds against the work counts
of ``napari_varblur.engine.cost._walk_work``, with each case's estimate and measurement.

    .venv/bin/python benchmarks/calibrate_levels.py
"""

from __future__ import annotations

from functools import partial

import numpy as np
from sweep import timed  # a sibling script: its folder is on sys.path

from napari_varblur.backends import load
from napari_varblur.core.spec import BlurSpec
from napari_varblur.core.taps import map_plan
from napari_varblur.engine import cost, walk


def best_of(fn, repeats=2):
    return timed(fn, repeats, min)


def cases(rng):
    for shape in ((256, 256), (512, 512), (1024, 1024), (2048, 2048)):
        for top, tilt in ((4.0, 0.0), (16.0, 0.0), (16.0, 0.3), (8.0, 0.5)):
            g = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
            yield shape, (1 + (top - 1) * ((1 - tilt) * g[-1] + tilt * g[-2])).astype(np.float32)
    for shape in ((16, 32, 32), (32, 64, 64), (64, 128, 128)):
        for top in (2.0, 8.0):
            ramp = np.linspace(0.5, top, shape[-1], dtype=np.float32)
            yield shape, np.broadcast_to(ramp, shape).copy()
    yield (512, 512), rng.uniform(1, 4, (512, 512)).astype(np.float32)


def main() -> None:
    rng = np.random.default_rng(0)
    numba = load("numba")
    rows = []
    for shape, sigma in cases(rng):
        image = rng.random(shape, dtype=np.float32)
        spec = BlurSpec.from_args(image, sigma, tolerance=1e-3, backend="numba")
        maps = map_plan(spec)
        levels, diagonal = cost.levels_for(spec, maps)
        survey = cost.Survey(spec, maps)
        change = survey.change
        gather_s = best_of(partial(numba.blur, spec), 1)
        for length in cost._tile_candidates(spec, maps)[::2]:
            tiles = cost._tile_lengths(maps, change, length)
            plan = cost.Plan(levels, tiles, diagonal, False, survey)
            walk_s = best_of(partial(walk.blur, spec, plan, numba))
            work = cost._walk_work(spec, maps, survey, levels, tiles, diagonal)
            est, est_gather = cost._estimate(
                spec, maps, survey, levels, tiles, diagonal, cost.NUMBA_COSTS
            )
            rows.append((work, walk_s, gather_s, len(shape)))
            print(
                f"{shape} sigma<= {float(sigma.max()):.0f} tiles {tiles}: walk {walk_s:.4f} s "
                f"(est {est:.4f}), gather {gather_s:.4f} s (est {est_gather:.4f})",
                flush=True,
            )
    keys = ["taps", "calls", "tiles", "sums"]
    a = np.array([[w[k] for k in keys] for w, _, _, _ in rows])
    b = np.array([t for _, t, _, _ in rows])
    weights = 1 / b  # fit relative errors, non-negative costs
    from scipy.optimize import nnls

    fit, _ = nnls(a * weights[:, None], b * weights)
    print("walk fit:", dict(zip(keys, fit)))
    for dims in (2, 3):
        part = [(w["gather"], t) for w, _, t, d in rows if d == dims]
        print(f"gather fit {dims}-D:", float(np.median([t / g for g, t in part])))
    predicted = a @ fit
    print("walk estimate / measured:", np.round(np.sort(predicted / b), 2))


if __name__ == "__main__":
    main()
