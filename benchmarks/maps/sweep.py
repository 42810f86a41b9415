"""Sigma-map speed against sigma max: exact gather, tolerance levels, quantised maps.

Times, in one process on this machine, napari_varblur's Numba backend on sigma maps
(the exact per-pixel gather, and the level walk at ``tolerance`` 1e-3 and 1e-4)
against a global blur at the map's largest sigma (Numba, and OpenCV in 2-D), checks
each tolerance result against the exact one, and measures the issue-9 targets: the
3-D and 2-D tolerance speed-ups, a quantised map against one global blur, the peak
memory of the tolerance mode, and global passes against OpenCV.

    .venv/bin/python benchmarks/sweep.py            # about 5 minutes on 2 cores
    .venv/bin/python benchmarks/sweep.py --quick    # small sizes, for a smoke test

Writes ``benchmarks/sweep.json`` and ``benchmarks/sweep.md``, and the plot
``docs/images/sigma_sweep.png`` (needs matplotlib: ``pip install -e ".[bench]"``), with a
panel of ``orientation.py``'s ratios by map orientation when ``--orientation`` (default
``benchmarks/orientation_after_1thread.json``) exists; ``--replot`` redraws the plot
from the JSON alone.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import time
import tracemalloc
from functools import partial
from pathlib import Path

import numpy as np

from napari_varblur import gaussian_blur
from napari_varblur.backends import load
from napari_varblur.core.spec import BlurSpec

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOLERANCES = (1e-3, 1e-4)


def timed(fn, repeats: int, summary=statistics.median) -> float:
    """Seconds of ``repeats`` calls after one warm-up call (their median)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return summary(times)


def ramp_map(shape, low: float, high: float, tilt: float) -> np.ndarray:
    """A smooth float32 map from ``low`` to ``high``: along the last axis, and with
    ``tilt`` of the rise along the second last (0: a pure ramp along x)."""
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    rise = (1 - tilt) * grids[-1] + tilt * grids[-2]
    return (low + (high - low) * rise).astype(np.float32)


def exact_gather(image, sigma):
    """The exact per-pixel gather (never the level walk), compiled before it is timed
    (a warm-up call on a small corner)."""
    corner = tuple(slice(0, 8) for _ in image.shape)
    for x, s in ((image[corner], sigma[corner]), (image, sigma)):
        start = time.perf_counter()
        out = load("numba").gather(BlurSpec.from_args(x, s, backend="numba"))
    return out, time.perf_counter() - start


def sweep_rows(args) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for dims, shape, low, tops, tilt in args.sweeps:
        image = rng.random(shape, dtype=np.float32)
        for top in tops:
            sigma = ramp_map(shape, low, top, tilt)
            row = dict(dims=dims, shape=list(shape), sigma_min=low, sigma_max=top, tilt=tilt)
            row["global_numba_s"] = timed(partial(gaussian_blur, image, top, backend="numba"), 3)
            if dims == 2:
                row["global_opencv_s"] = timed(partial(cv2_blur, image, top, "reflect"), 3)
            exact, row["exact_s"] = exact_gather(image, sigma)
            for tol in TOLERANCES:
                out = gaussian_blur(image, sigma, tolerance=tol, backend="numba")
                key = f"tol{tol:g}"
                row[f"{key}_s"] = timed(
                    partial(gaussian_blur, image, sigma, tolerance=tol, backend="numba"),
                    args.repeats,
                )
                err = float(np.abs(out.astype(np.float64) - exact).max() / np.ptp(image))
                row[f"{key}_error"] = err
                row[f"{key}_speedup"] = row["exact_s"] / row[f"{key}_s"]
            rows.append(row)
            print(
                f"{dims}-D {shape} sigma {low}->{top}: exact {row['exact_s']:.3f} s, "
                f"tol 1e-3 {row['tol0.001_s']:.4f} s ({row['tol0.001_speedup']:.1f}x, "
                f"err {row['tol0.001_error']:.1e}), global {row['global_numba_s']:.4f} s",
                flush=True,
            )
    return rows


def cv2_blur(image, sigma: float, mode: str):
    import cv2

    border = {"reflect": cv2.BORDER_REFLECT, "nearest": cv2.BORDER_REPLICATE}[mode]
    k = 2 * math.ceil(3 * sigma) + 1
    return cv2.GaussianBlur(image, (k, k), sigma, sigmaY=sigma, borderType=border)


def record(target: str, measured: float, goal: str, ok: bool, detail: str) -> dict:
    """One target's line, printed as it is measured."""
    row = dict(target=target, measured=measured, goal=goal, ok=bool(ok), detail=detail)
    print(f"{target}: {measured:.2f} (goal {goal}) {'ok' if ok else 'MISSED'}; {detail}")
    return row


def target_rows(args) -> list[dict]:
    """The issue's targets, each a ratio measured in this run."""
    rng = np.random.default_rng(1)
    out = []

    def tolerance_target(name, shape, low, high, tilt, goal, aim=None):
        image = rng.random(shape, dtype=np.float32)
        sigma = ramp_map(shape, low, high, tilt)
        _, exact_s = exact_gather(image, sigma)
        tol_s = timed(partial(gaussian_blur, image, sigma, tolerance=1e-3, backend="numba"), 3)
        ratio = exact_s / tol_s
        goal_text = f">= {goal}x" + (f" (aim {aim}x)" if aim else "")
        detail = f"exact {exact_s:.3f} s, tolerance 1e-3 {tol_s:.4f} s"
        out.append(record(name, ratio, goal_text, ratio >= goal, detail))

    s = args.scale
    tolerance_target(f"3-D {64 // s}x{128 // s}x{128 // s} ramp 0.5->8, tol 1e-3 vs exact",
                     (64 // s, 128 // s, 128 // s), 0.5, 8.0, 0.0, 15, 50)  # fmt: skip
    tolerance_target(f"3-D {32 // s}x{64 // s}x{64 // s} ramp 0.5->16, tol 1e-3 vs exact",
                     (32 // s, 64 // s, 64 // s), 0.5, 16.0, 0.0, 30, 100)  # fmt: skip
    n = 2048 // s
    tolerance_target(f"2-D {n}^2 ramp along x 1->16, tol 1e-3 vs exact", (n, n), 1.0, 16.0,
                     0.0, 5)  # fmt: skip
    tolerance_target(f"2-D {n}^2 tilted ramp 1->16, tol 1e-3 vs exact", (n, n), 1.0, 16.0,
                     0.3, 5)  # fmt: skip

    # A quantised map: 6 values up to sigma 6, blocks of labels, against one global blur.
    shape = (64 // s, 128 // s, 128 // s)
    labels = np.kron(rng.integers(0, 6, tuple(max(1, n // 8) for n in shape)),
                     np.ones((8, 8, 8), int))[: shape[0], : shape[1], : shape[2]]  # fmt: skip
    sigma = np.array([0.5, 1.0, 2.0, 3.0, 4.5, 6.0], np.float32)[labels]
    image = rng.random(shape, dtype=np.float32)
    quantised = timed(partial(gaussian_blur, image, sigma, backend="numba"), 5)
    single = timed(partial(gaussian_blur, image, 6.0, backend="numba"), 5)
    ratio = quantised / single
    detail = f"quantised {quantised:.4f} s, global sigma 6 {single:.4f} s"
    name = f"quantised map, 6 values up to 6, 3-D {shape}, vs one global blur"
    out.append(record(name, ratio, "<= 12x", ratio <= 12, detail))

    # Peak memory of the tolerance mode (NumPy allocations, in image-sized units).
    for shape, high, tilt in (((64 // s, 128 // s, 128 // s), 8.0, 0.0), ((n, n), 16.0, 0.3)):
        image = rng.random(shape, dtype=np.float32)
        sigma = ramp_map(shape, 0.5, high, tilt)
        gaussian_blur(image, sigma, tolerance=1e-3, backend="numba")
        tracemalloc.start()
        gaussian_blur(image, sigma, tolerance=1e-3, backend="numba")
        peak = tracemalloc.get_traced_memory()[1] / image.nbytes
        tracemalloc.stop()
        name = f"peak memory of tolerance 1e-3, {shape} (x image bytes)"
        out.append(record(name, peak, "<= 4x", peak <= 4, "tracemalloc peak / image bytes"))

    # Global passes against OpenCV (the time ratio numba / OpenCV; <= 1 is faster).
    for n in (2048 // s, 4096 // s):
        for mode in ("reflect", "nearest"):
            for precision, goal in (("float32", 1.0), ("float64", 1.5)):
                image = rng.random((n, n)).astype(precision)
                ours = timed(partial(gaussian_blur, image, 4.0, mode=mode, backend="numba",
                                     precision=precision), 5)  # fmt: skip
                theirs = timed(partial(cv2_blur, image, 4.0, mode), 5)
                detail = f"numba {ours * 1e3:.2f} ms, OpenCV {theirs * 1e3:.2f} ms"
                name = f"global {n}^2 sigma 4 {mode} {precision}: numba/OpenCV"
                out.append(record(name, ours / theirs, f"<= {goal}", ours / theirs <= goal, detail))
    return out


def markdown(rows, targets, info) -> str:
    lines = [f"# Sigma-map sweep ({info['date']}, {info['cpu']}, {info['threads']} threads)", ""]
    lines += [
        "Numba backend, float32, `crop`, map from sigma min to max (2-D: tilted 30% along y;",
        "3-D: along x).  Speed-up: exact gather time / tolerance time.  Error: max |tolerance",
        "- exact| / image range (the promise: <= tolerance).",
        "",
        "| dims | shape | sigma | global numba s | global OpenCV s | exact s | tol 1e-3 s | "
        "speed-up | error | tol 1e-4 s | speed-up | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cv = f"{r['global_opencv_s']:.4f}" if "global_opencv_s" in r else "-"
        lines.append(
            f"| {r['dims']} | {'x'.join(map(str, r['shape']))} | {r['sigma_min']}->"
            f"{r['sigma_max']} | {r['global_numba_s']:.4f} | {cv} | {r['exact_s']:.3f} | "
            f"{r['tol0.001_s']:.4f} | {r['tol0.001_speedup']:.1f}x | {r['tol0.001_error']:.1e} | "
            f"{r['tol0.0001_s']:.4f} | {r['tol0.0001_speedup']:.1f}x | {r['tol0.0001_error']:.1e} |"
        )
    lines += ["", "## Targets", "", "| target | measured | goal | met | detail |",
              "|---|---|---|---|---|"]  # fmt: skip
    for t in targets:
        lines.append(f"| {t['target']} | {t['measured']:.2f} | {t['goal']} | "
                     f"{'yes' if t['ok'] else 'MISSED'} | {t['detail']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(rows, path: Path, orientation: Path | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims_list = sorted({r["dims"] for r in rows})
    extra = orientation is not None and orientation.exists()
    panels = len(dims_list) + extra
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 4.2))
    axes = np.atleast_1d(axes)
    if extra:
        orientation_panel(axes[-1], json.loads(orientation.read_text())["rows"])
    for ax, dims in zip(axes, dims_list):
        part = [r for r in rows if r["dims"] == dims]
        x = [r["sigma_max"] for r in part]
        series = [("exact gather", "exact_s", "o-"), ("tolerance 1e-4", "tol0.0001_s", "s-"),
                  ("tolerance 1e-3", "tol0.001_s", "^-"),
                  ("global blur at sigma max (numba)", "global_numba_s", "k--"),
                  ("global blur at sigma max (OpenCV)", "global_opencv_s", "k:")]  # fmt: skip
        for label, key, style in series:
            if key in part[0]:
                ax.plot(x, [r[key] for r in part], style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sigma max (map from sigma min to max)")
        ax.set_ylabel("seconds")
        ax.set_title(f"{dims}-D {'x'.join(map(str, part[0]['shape']))}, float32, 2 cores")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def orientation_panel(ax, rows) -> None:
    """``orientation.py``'s rows (its JSON): tolerance 1e-3 and the plain stack over one
    global blur at sigma max, map by map."""
    x = np.arange(len(rows))
    labels = [f"{r['case'].split()[0]} {r['map']}" for r in rows]
    ax.bar(x - 0.2, [r["tol_over_global"] for r in rows], 0.4, label="tolerance 1e-3")
    ax.bar(x + 0.2, [r["stack_over_global"] for r in rows], 0.4, label="plain stack (ratio 1.19)")
    ax.axhline(4, color="k", ls="--", lw=0.8, label="target 4x")
    ax.axhline(8, color="k", ls=":", lw=0.8, label="bound 8x")
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=7)
    ax.set_ylabel("time / one global blur at sigma max")
    ax.set_title("by map orientation (orientation.py)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7)


def machine() -> dict:
    import numba

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return dict(date=datetime.date.today().isoformat(), cpu=cpu,
                threads=numba.get_num_threads(), numba=numba.__version__)  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--out", default=str(HERE / "sweep.json"))
    parser.add_argument("--plot", default=str(ROOT / "docs" / "images" / "sigma_sweep.png"))
    parser.add_argument("--orientation", default=str(HERE / "orientation_after_1thread.json"),
                        help="orientation.py's JSON: a panel by map, if it exists")  # fmt: skip
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the plot from the JSON at --out")  # fmt: skip
    args = parser.parse_args(argv)
    if args.replot:
        plot(json.loads(Path(args.out).read_text())["sweep"], Path(args.plot),
             Path(args.orientation))  # fmt: skip
        return 0
    args.scale = 4 if args.quick else 1
    args.repeats = 1 if args.quick else 3
    s = args.scale
    args.sweeps = [
        (2, (2048 // s, 2048 // s), 1.0, (2.0, 4.0, 8.0, 16.0), 0.3),
        (3, (64 // s, 128 // s, 128 // s), 0.5, (2.0, 4.0, 8.0), 0.0),
    ]
    info = machine()
    rows = sweep_rows(args)
    targets = target_rows(args)
    Path(args.out).write_text(json.dumps(dict(machine=info, sweep=rows, targets=targets),
                                         indent=1))  # fmt: skip
    Path(args.out).with_suffix(".md").write_text(markdown(rows, targets, info))
    try:
        plot(rows, Path(args.plot), Path(args.orientation))
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -e '.[bench]')")
    print(markdown(rows, targets, info))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
