"""Peak memory of the tolerance mode, in image-sized units, as the process sees it.

``tracemalloc`` (the sweep's memory target) sees NumPy's allocations only: arrays a
Numba kernel allocates (the level bands' runs, their unions) escape it.  Each case here
runs in a fresh process: a small call first (it loads the kernels from Numba's cache),
then the resident memory (the peak reset, Linux's ``clear_refs``), then the call, then
the peak resident memory; the extra
peak over the image's bytes is the figure (the result itself is one image).  The
tracemalloc peak of a second call is given beside it.  Numba backend, float32,
tolerance 1e-3; maps from ``orientation_cases.py`` (``nearest``) and the sweep's ramps
(``crop``).  Issue 30: "about one image beyond the input at 4096²".

    python benchmarks/maps/peak_memory.py        # about a minute on 2 cores

Writes ``benchmarks/results/<date>_<machine>_peak_memory.json`` and ``.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common

CASES = [
    ("2-D 2048² radial 1->16", "2d", 2048, "radial", "nearest"),
    ("2-D 2048² tilted 30° 1->16", "2d", 2048, "tilted 30°", "nearest"),
    ("2-D 4096² radial 1->16", "2d", 4096, "radial", "nearest"),
    ("2-D 4096² tilted 30° 1->16", "2d", 4096, "tilted 30°", "nearest"),
    ("3-D 64x128x128 radial 0.5->8", "3d", 64, "radial", "nearest"),
    ("3-D 64x128x128 ramp x 0.5->8", "3d", 64, "ramp x", "nearest"),
    ("2-D 2048² sweep ramp 0.5->16 tilt 0.3", "sweep2", 2048, "", "crop"),
    ("3-D 64x128x128 sweep ramp 0.5->8", "sweep3", 64, "", "crop"),
]

CHILD = """
import json, resource, sys, tracemalloc
import numpy as np
sys.path[:0] = [{bench!r}, {maps!r}]
import orientation_cases as oc
import sweep
from napari_varblur import gaussian_blur

kind, n, name, mode = {kind!r}, {n!r}, {name!r}, {mode!r}
rng = np.random.default_rng(0)
if kind == "2d":
    sigma, image = oc.maps_2d((n, n))[name][1], oc.image_2d(n)
elif kind == "3d":
    sigma = oc.maps_3d((64, 128, 128))[name][1]
    image = oc.image_3d(sigma.shape)
elif kind == "sweep2":
    image = rng.random((n, n), dtype=np.float32)
    sigma = sweep.ramp_map(image.shape, 0.5, 16.0, 0.3)
else:
    image = rng.random((64, 128, 128), dtype=np.float32)
    sigma = sweep.ramp_map(image.shape, 0.5, 8.0, 0.0)
call = lambda im, s: gaussian_blur(im, s, mode=mode, backend="numba", tolerance=1e-3)
small = tuple(slice(0, max(1, k // 4)) for k in image.shape)
call(image[small].copy(), sigma[small].copy())  # loads the kernels


def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak resident size restarts from the current one
before = resident()
out = call(image, sigma)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
del out
tracemalloc.start()
call(image, sigma)
traced = tracemalloc.get_traced_memory()[1]
print("RESULT", json.dumps({{"rss_extra": (peak - before) / image.nbytes,
                            "traced": traced / image.nbytes, "image_mb": image.nbytes / 2**20}}))
"""


def measure(kind: str, n: int, name: str, mode: str) -> dict:
    """One case in a fresh process."""
    here = Path(__file__).resolve().parent
    code = CHILD.format(bench=str(here.parent), maps=str(here), kind=kind, n=n, name=name,
                        mode=mode)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True)  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[7:])


def main(argv=None) -> int:
    parser = common.parser(__doc__, "peak_memory")
    args = parser.parse_args(argv)
    info = common.machine()
    rows, results = [], []
    for label, kind, n, name, mode in CASES:
        got = measure(kind, n, name, mode)
        results.append({"case": label, "mode": mode, **got})
        rows.append([label, mode, f"{got['image_mb']:.0f}", f"{got['rss_extra']:.2f}",
                     f"{got['traced']:.2f}"])  # fmt: skip
        print(rows[-1], flush=True)
    head = ["map", "mode", "image MiB", "peak resident memory beyond the input (x image)",
            "tracemalloc peak (x image)"]  # fmt: skip
    text = "\n".join(common.md_table(head, rows, "llrrr")) + "\n"
    print(text)
    common.write_result("peak_memory", {"results": results}, info, out=args.out, markdown=text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
