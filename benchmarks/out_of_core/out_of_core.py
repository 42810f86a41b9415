"""Out-of-core benchmark: Zarr in, Zarr out, a 2 GiB float32 volume blurred with a sigma map.

Writes a (128, 2048, 2048) float32 Zarr array (chunks 4 x 1024 x 1024) and a smooth sigma
map of shape (128, 1, 2048) (defocus growing with depth and across X), then runs

    python -m napari_varblur blur in.zarr out.zarr --sigma 1 --sigma-map map.npy --axes 1 2

in a fresh process and reports its wall time and peak resident memory (the child's
``ru_maxrss``).  Finally it checks a few planes against the in-memory blur.

    python benchmarks/out_of_core.py [--planes 128] [--size 2048] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def make_inputs(workdir: Path, planes: int, size: int) -> tuple[Path, Path]:
    import dask.array as da

    image = da.random.default_rng(0).random(
        (planes, size, size), dtype=np.float32, chunks=(4, 1024, 1024)
    )
    source = workdir / "in.zarr"
    da.to_zarr(image * 1000, str(source))
    z = np.linspace(0, 1, planes)[:, None, None]
    x = np.linspace(0, 1, size)[None, None, :]
    sigma_map = (1 + 3 * (0.7 * z + 0.3 * x)).astype(np.float32)  # [1, 4]
    map_path = workdir / "map.npy"
    np.save(map_path, sigma_map)
    return source, map_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planes", type=int, default=128)
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--backend", default="numba")
    parser.add_argument("--workdir", help="where to put the data (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data afterwards")
    args = parser.parse_args()

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="varblur-ooc-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        source, map_path = make_inputs(workdir, args.planes, args.size)
        made = time.perf_counter() - t0
        nbytes = args.planes * args.size * args.size * 4
        target = workdir / "out.zarr"
        command = [
            sys.executable, "-m", "napari_varblur", "blur", str(source), str(target),
            "--sigma", "1", "--sigma-map", str(map_path), "--axes", "1", "2",
            "--backend", args.backend,
        ]  # fmt: skip
        t0 = time.perf_counter()
        run = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if run.returncode:
            print(run.stdout + run.stderr)
            return 1
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024

        import zarr

        from napari_varblur import gaussian_blur

        stored = zarr.open_array(str(source), mode="r")
        result = zarr.open_array(str(target), mode="r")
        sigma_map = np.load(map_path)
        worst = 0.0
        for plane in (0, args.planes // 2, args.planes - 1):
            expected = gaussian_blur(
                stored[plane], np.broadcast_to(sigma_map[plane], stored.shape[1:]),
                backend=args.backend,
            )  # fmt: skip
            worst = max(worst, float(np.abs(result[plane] - expected).max()))

        print(f"# Out-of-core blur ({time.strftime('%Y-%m-%d')}, {args.backend})\n")
        print("| volume | data | map | wall s | MB/s | peak RSS | vs data | planes checked |")
        print("|---|---|---|---|---|---|---|---|")
        print(
            f"| {args.planes}x{args.size}x{args.size} float32 | {nbytes / 2**30:.2f} GiB | "
            f"{sigma_map.shape} in [1, 4] | {wall:.1f} | {nbytes / wall / 1e6:.0f} | "
            f"{peak / 2**30:.2f} GiB | {peak / nbytes:.2f}x | max abs diff {worst:.2g} |"
        )
        print(f"\n(inputs written in {made:.1f} s; the blur is a fresh `varblur blur` process)")
        return 0 if worst <= 1e-5 * 1000 else 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
