"""On a GPU: the tolerance mode by levels against the exact gather, map by map.

``napari_varblur.jax.gaussian_blur(image, sigma_map, tolerance=1e-3, max_radius=R)``
can run a loop of whole-image level passes or the exact per-pixel gather (which is
always within the bound).  The GPU rule's threshold (``internals.gpu_gather_taps``)
picks the gather on a GPU while the gather's window has at most that many taps.  This
script times both programs (jitted, device-resident, ``block_until_ready``; the first
call compiles, then the minimum of ``--repeats``) on the orientation sweep's maps
(``maps/orientation_cases.py``) and wider windows, and one global blur at the map's
largest sigma, so the threshold follows from measured figures.  One JSON line per case;
writes ``benchmarks/results/<date>_<machine>_gpu_tolerance.json`` (or ``--out``;
``--small``: ``results/quick/``).

    python benchmarks/gpu/gpu_tolerance.py            # where JAX sees a GPU
    python benchmarks/gpu/gpu_tolerance.py --small    # small sizes (tries it on a CPU)
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, maps

import common
import internals
from maps.orientation_cases import TOLERANCE, image_2d, image_3d, maps_2d, maps_3d


def cases(small: bool):
    """(name, image, map, max_radius): 2-D and 3-D maps, windows from 49² to 97³ taps."""
    n2, shape3 = (256, (16, 32, 32)) if small else (2048, (64, 128, 128))
    image2, image3 = image_2d(n2), image_3d(shape3)
    m2, m3 = maps_2d((n2, n2)), maps_3d(shape3)
    yield f"2-D {n2}² tilted 30°, sigma 1->16", image2, m2["tilted 30°"][1], 48
    yield f"2-D {n2}² radial, sigma 1->16", image2, m2["radial"][1], 48
    yield f"2-D {n2}² tilted 30°, sigma 2.5->40", image2, 2.5 * m2["tilted 30°"][1], 120
    yield f"3-D {shape3} diagonal, sigma 0.5->4", image3, 0.5 * m3["diagonal"][1], 12
    yield f"3-D {shape3} diagonal, sigma 0.5->8", image3, m3["diagonal"][1], 24
    yield f"3-D {shape3} radial, sigma 0.5->8", image3, m3["radial"][1], 24


def timed(fn, *args, repeats: int) -> tuple[float, float, object]:
    """The first call's seconds (compiling), the fastest of ``repeats`` more, the output."""
    start = time.perf_counter()
    out = fn(*args).block_until_ready()
    first = time.perf_counter() - start
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        best = min(best, time.perf_counter() - start)
    return first, best, out


def measure(name, image, smap, radius, repeats: int) -> dict:
    import jax

    import napari_varblur.jax as vjax

    internals.pretend_gpu()  # the GPU rule, also when trying the script on a CPU
    x, s = jax.device_put(image), jax.device_put(smap)
    smax = float(smap.max())
    row = {"case": name, "max_radius": radius, "taps": (2 * radius + 1) ** image.ndim}
    outs = {}
    for label, threshold in (("levels", -1), ("gather", math.inf), ("chosen", None)):
        fn = jax.jit(lambda a, b: vjax.gaussian_blur(a, b, tolerance=TOLERANCE, max_radius=radius))
        if threshold is None:  # the package's own threshold
            first, best, outs[label] = timed(fn, x, s, repeats=repeats)
        else:
            with internals.gpu_gather_taps(threshold):  # read when the program is traced
                first, best, outs[label] = timed(fn, x, s, repeats=repeats)
        row[f"{label}_s"], row[f"{label}_first_s"] = best, first
    row["chosen"] = "gather" if internals.gpu_takes_gather(radius, image.ndim) else "levels"
    glob = jax.jit(lambda a: vjax.gaussian_blur(a, smax))
    row["global_s"] = timed(glob, x, repeats=repeats)[1]
    diff = np.abs(np.asarray(outs["levels"], np.float64) - np.asarray(outs["gather"]))
    row["levels_vs_gather"] = float(diff.max() / np.ptp(image))
    row["levels_over_gather"] = row["levels_s"] / row["gather_s"]
    row["gather_over_global"] = row["gather_s"] / row["global_s"]
    row["device"] = str(jax.devices()[0])
    return row


def main(argv=None) -> int:
    """Every case; one JSON line each, and the result file after each."""
    parser = common.parser(__doc__, "gpu_tolerance")
    parser.add_argument("--small", action="store_true", help="small sizes (try it on a CPU)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import jax

    info = common.machine(jax_devices=[str(d) for d in jax.devices()])
    rows = []
    for name, image, smap, radius in cases(args.small):
        rows.append(measure(name, image, smap, radius, args.repeats))
        print(json.dumps(rows[-1]), flush=True)
        common.write_result("gpu_tolerance", dict(rows=rows), info, out=args.out,
                                   quick=args.small)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
