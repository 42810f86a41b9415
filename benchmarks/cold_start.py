"""Cold start of the Numba backend: 10 varied sigma-map calls in a fresh process.

Maps of float32/float64/int/float16 dtype, C/F/strided/broadcast layouts, a per-axis
map, both precisions, with an empty Numba cache (``NUMBA_CACHE_DIR`` in a new temporary
folder), then again with that cache warm.  Target (issue 8): <= 20 s cold on a 2-core
machine (the engine compiled one kernel per map dtype and layout: ~65 s).

    python benchmarks/cold_start.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

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
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", CALLS], check=True, env=env)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as cache:
        cold, warm = run(cache), run(cache)
    print(f"10 varied sigma-map calls in a fresh process: cold {cold:.1f} s, warm {warm:.1f} s")


if __name__ == "__main__":
    main()
