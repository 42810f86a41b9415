"""The exact gather against the seed's per-pixel Numba loop, the issue's own case.

A sigma map uniform in [1, 4] (``np.random.default_rng(0)``), 1024², ``mode="crop"``,
float32, Numba: ``gaussian_blur(image, sigma_map)`` (the exact per-pixel gather) and
``peers/seed_naive.naive_numba_2d`` (radius ``ceil(3 sigma)``, one ``exp`` per tap, the
window cropped and renormalised), timed in interleaved rounds of one process (one
warm-up round, then ``--repeats``; our call, under 0.1 s, runs 5 times per round and
the round keeps their median).  Reports the seed's time over ours, the largest
difference between the two, and the share of the machine's multiply-add peak our
window sums reach (taps actually summed: every pixel its tile's shared window).

    python benchmarks/maps/seed_gather.py           # ~1 minute on 2 cores
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "peers"))

import common
import numpy as np
from seed_naive import naive_numba_2d

from napari_varblur import gaussian_blur

SIDE = 1024


def main(argv=None) -> int:
    """Time both, write ``results/<date>_<machine>_seed_gather.json`` and ``.md``."""
    parser = common.parser(__doc__, "seed_gather")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    image = rng.random((SIDE, SIDE)).astype(np.float32)
    sigma = rng.uniform(1.0, 4.0, image.shape).astype(np.float32)
    calls = {
        "ours": lambda: gaussian_blur(image, sigma, mode="crop", backend="numba"),
        "seed": lambda: naive_numba_2d(image, sigma),
    }
    info = common.machine()
    print(common.describe_machine(info), flush=True)
    times = common.interleaved(calls, args.repeats, short=0.1)
    med = {k: statistics.median(v) for k, v in times.items()}
    diff = float(np.abs(calls["ours"]().astype(np.float64) - calls["seed"]()).max())
    # Every pixel sums its tile's window: radius 12 (sigma up to 4) in both axes.
    taps = image.size * 25 * 25
    rate = taps / med["ours"] / 1e9
    payload = dict(times_s=times, median_s=med, ratio=med["seed"] / med["ours"],
                   max_abs_diff=diff, window_taps_per_s=rate * 1e9)  # fmt: skip
    text = (f"# Exact gather vs the seed's loop ({info.get('date', '')})\n\n"
            f"{common.describe_machine(info)}\n\n"
            f"1024² float32 map uniform in [1, 4], crop: ours {med['ours'] * 1e3:.1f} ms, "
            f"seed {med['seed'] * 1e3:.0f} ms, **{payload['ratio']:.1f}x**; largest "
            f"difference {diff:.1e}; window sums {rate:.1f} G multiply-adds/s.\n")  # fmt: skip
    common.write_result("seed_gather", payload, info, out=args.out, markdown=text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
