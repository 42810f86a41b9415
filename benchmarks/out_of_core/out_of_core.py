"""Out-of-core benchmark: Zarr in, Zarr out, a 2 GiB float32 volume blurred with a sigma map.

Writes a (128, 2048, 2048) float32 Zarr array (chunks 4 x 1024 x 1024) and a smooth sigma
map of shape (128, 1, 2048) (defocus growing with depth and across X), then runs

    python -m napari_varblur blur in.zarr out.zarr --sigma 1 --sigma-map map.npy --axes 1 2

in a fresh process and reports its wall time and peak resident memory (the child's
``ru_maxrss``).  Finally it checks a few planes against the in-memory blur.

    python benchmarks/out_of_core/out_of_core.py      # 2 GiB, about a minute on 2 cores
    python benchmarks/out_of_core/out_of_core.py --quick   # 8x1024x1024, seconds
    python benchmarks/out_of_core/out_of_core.py [--planes 128] [--size 2048] [--keep]

Writes ``benchmarks/results/<date>_<machine>_out_of_core.json`` and ``.md`` (or
``--out``; ``--quick``: ``results/quick/``).
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common


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


def blur_command(source: Path, target: Path, map_path: Path, backend: str) -> list[str]:
    """The ``varblur blur`` command line (``python -m napari_varblur``)."""
    return [
        sys.executable, "-m", "napari_varblur", "blur", str(source), str(target),
        "--sigma", "1", "--sigma-map", str(map_path), "--axes", "1", "2",
        "--backend", backend,
    ]  # fmt: skip


def check_planes(source: Path, target: Path, map_path: Path, planes: int, backend: str) -> float:
    """The largest difference from the in-memory blur on the first, middle, last planes."""
    import zarr

    from napari_varblur import gaussian_blur

    stored = zarr.open_array(str(source), mode="r")
    result = zarr.open_array(str(target), mode="r")
    sigma_map = np.load(map_path)
    worst = 0.0
    for plane in (0, planes // 2, planes - 1):
        expected = gaussian_blur(
            stored[plane], np.broadcast_to(sigma_map[plane], stored.shape[1:]), backend=backend
        )
        worst = max(worst, float(np.abs(result[plane] - expected).max()))
    return worst


def report(args, row: dict, info: dict) -> str:
    """The markdown table of the run."""
    table = common.md_table(
        ["volume", "data", "map", "wall s", "MB/s", "peak RSS", "vs data", "planes checked"],
        [[f"{args.planes}x{args.size}x{args.size} float32", f"{row['gib']:.2f} GiB",
          f"{row['map_shape']} in [1, 4]", f"{row['wall_s']:.1f}", f"{row['mb_s']:.0f}",
          f"{row['peak_gib']:.2f} GiB", f"{row['peak_over_data']:.2f}x",
          f"max abs diff {row['max_abs_diff']:.2g}"]],
    )  # fmt: skip
    return "\n".join([
        f"# Out-of-core blur ({info['date'][:10]}, {args.backend})", "",
        common.describe_machine(info), "", *table, "",
        f"(inputs written in {row['inputs_s']:.1f} s; the blur is a fresh `varblur blur` process)",
    ]) + "\n"  # fmt: skip


def main(argv=None) -> int:
    """Write the inputs, run the command, check it, report; 1 if it failed or differs."""
    parser = common.parser(__doc__, "out_of_core", quick="--planes 8 --size 1024")
    parser.add_argument("--planes", type=int, default=128)
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--backend", default="numba")
    parser.add_argument("--workdir", help="where to put the data (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data afterwards")
    args = parser.parse_args(argv)
    if args.quick:
        args.planes, args.size = 8, 1024
    info = common.machine()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="varblur-ooc-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        source, map_path = make_inputs(workdir, args.planes, args.size)
        made = time.perf_counter() - t0
        nbytes = args.planes * args.size * args.size * 4
        target = workdir / "out.zarr"
        wall, run = common.timed(lambda: subprocess.run(
            blur_command(source, target, map_path, args.backend), capture_output=True, text=True
        ))  # fmt: skip
        if run.returncode:
            print(run.stdout + run.stderr)
            return 1
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        worst = check_planes(source, target, map_path, args.planes, args.backend)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    row = dict(shape=[args.planes, args.size, args.size], gib=nbytes / 2**30,
               map_shape=[args.planes, 1, args.size], wall_s=wall, mb_s=nbytes / wall / 1e6,
               peak_gib=peak / 2**30, peak_over_data=peak / nbytes, max_abs_diff=worst,
               inputs_s=made, backend=args.backend)  # fmt: skip
    text = report(args, row, info)
    print(text)
    common.write_result("out_of_core", row, info, out=args.out, markdown=text,
                               quick=args.quick)  # fmt: skip
    return 0 if worst <= 1e-5 * 1000 else 1


if __name__ == "__main__":
    sys.exit(main())
