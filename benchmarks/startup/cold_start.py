"""Cold start: the first calls in a fresh process with an empty Numba cache.

1. Issue 8: ten sigma-map calls with maps of float32/float64/int/float16 dtype,
   C/F/strided/broadcast layouts, a per-axis map, both precisions; target <= 20 s cold
   on a 2-core machine (the engine compiled one kernel per map dtype and layout: ~65 s).
2. Issue 20: import + the first float32 sigma map (256²) and the first float64 global
   blur (256²), each in its own fresh process (``first_call.py``); target <= 3 s, must
   <= 8 s.
3. Issue 20: the first click in a real napari viewer, at once after docking the blur
   widget (``first_click.py``; needs a display, e.g. ``xvfb-run -a``); skipped without
   napari or a display.

    xvfb-run -a python benchmarks/startup/cold_start.py   # about 2 minutes on 2 cores
    python benchmarks/startup/cold_start.py --quick       # part 1 only, under a minute

Writes ``benchmarks/results/<date>_<machine>_cold_start.json`` (or ``--out``;
``--quick``: ``results/quick/``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
from first_call import measure

CALLS = """
import numpy as np
from napari_varblur import gaussian_blur

rng = np.random.default_rng(0)
image = rng.random((64, 300))
base = rng.uniform(0, 3, image.shape)
maps = [base, base.astype(np.float32), (base * 2).astype(np.int32), np.asfortranarray(base),
        base[:, ::-1], np.broadcast_to(base[:1], image.shape), base.astype(np.float16),
        np.stack([base, base], -1), base[::-1], np.ascontiguousarray(base.T).T]
for i, m in enumerate(maps):
    gaussian_blur(image, m, backend="numba", precision=("float32", "float64")[i % 2])
"""


def run(cache: str) -> float:
    """Wall seconds of the ten calls in a fresh process with ``cache`` as Numba's cache."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CALLS], check=True, env=env)
    return time.perf_counter() - start


def first_click_at_once() -> dict | None:
    """The first click on the sigma map and on a global blur, or None without a display."""
    if not os.environ.get("DISPLAY") and sys.platform.startswith("linux"):
        return None
    try:
        from first_click import child
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as cache:
        mapped = child("map", 0.0, cache)
    with tempfile.TemporaryDirectory() as cache:
        plain = child("global", 0.0, cache)
    return {"map": mapped, "global": plain}


def main(argv=None) -> int:
    """The three parts (``--quick``: the first); print them and write the result."""
    parser = common.parser(__doc__, "cold_start", quick="only the ten varied calls")
    args = parser.parse_args(argv)
    info = common.machine()
    with tempfile.TemporaryDirectory() as cache:
        cold, warm = run(cache), run(cache)
    print(f"10 varied sigma-map calls in a fresh process: cold {cold:.1f} s, warm {warm:.1f} s")
    result: dict = {"varied_calls": {"cold_s": cold, "warm_s": warm}}
    if not args.quick:
        result["first_call"] = {}
        for case in ("map f32 256²", "global f64 256²"):
            got = measure("numba", case, None)["cold"]
            result["first_call"][case] = got
            print(f"import + first {case}, empty cache: {got['import'] + got['first']:.2f} s")
        result["first_click"] = clicks = first_click_at_once()
        if clicks is None:
            print("first click in napari: skipped (no display; run under xvfb-run -a)")
        for case, got in (clicks or {}).items():
            print(f"first click in napari on {case}, at once, empty cache: {got['click']:.2f} s "
                  f"({got['status']})")  # fmt: skip
    common.write_result("cold_start", result, info, out=args.out, quick=args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
