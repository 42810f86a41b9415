"""Sigma-map speed against sigma max: exact gather, tolerance levels, quantised maps.

Times, in one process on this machine, napari_varblur's Numba backend on sigma maps
(the exact per-pixel gather, and the level walk at ``tolerance`` 1e-3 and 1e-4)
against a global blur at the map's largest sigma (Numba, and OpenCV in 2-D when it is
installed), checks each tolerance result against the exact one, and measures the
issue-9 targets: the 3-D and 2-D tolerance speed-ups, a quantised map against one
global blur, the peak memory of the tolerance mode, and global passes against OpenCV.

    python benchmarks/maps/sweep.py            # about 6 minutes on 2 cores
    python benchmarks/maps/sweep.py --quick    # small sizes, for a smoke test

Writes ``benchmarks/results/<date>_<machine>_sweep.json`` and ``.md`` (``--quick``:
``results/quick/``), and the plot ``docs/images/sigma_sweep.png`` (needs matplotlib:
``pip install -e ".[bench]"``), with a panel of ``orientation.py``'s ratios by map
orientation from its latest result (``--orientation``); ``--replot`` redraws the plot
from the JSON at ``--out`` alone.
"""

from __future__ import annotations

import json
import math
import sys
import tracemalloc
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, internals

import common
import internals
from common import md_table, median_time, timed

from napari_varblur import gaussian_blur

TOLERANCES = (1e-3, 1e-4)


def ramp_map(shape, low: float, high: float, tilt: float) -> np.ndarray:
    """A smooth float32 map from ``low`` to ``high``: along the last axis, and with
    ``tilt`` of the rise along the second last (0: a pure ramp along x)."""
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    rise = (1 - tilt) * grids[-1] + tilt * grids[-2]
    return (low + (high - low) * rise).astype(np.float32)


def exact_gather(image, sigma):
    """The exact per-pixel gather's result and seconds (never the level walk; compiled
    on a small corner before it is timed)."""
    seconds, out = timed(internals.exact_gather(image, sigma))
    return out, seconds


def sweep_rows(args) -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for dims, shape, low, tops, tilt in args.sweeps:
        image = rng.random(shape, dtype=np.float32)
        for top in tops:
            sigma = ramp_map(shape, low, top, tilt)
            row = dict(dims=dims, shape=list(shape), sigma_min=low, sigma_max=top, tilt=tilt)
            row["global_numba_s"] = median_time(
                partial(gaussian_blur, image, top, backend="numba"), 3
            )
            if dims == 2 and common.installed("cv2"):
                row["global_opencv_s"] = median_time(partial(cv2_blur, image, top, "reflect"), 3)
            exact, row["exact_s"] = exact_gather(image, sigma)
            for tol in TOLERANCES:
                out = gaussian_blur(image, sigma, tolerance=tol, backend="numba")
                key = f"tol{tol:g}"
                row[f"{key}_s"] = median_time(
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


def tolerance_target(rng, name, shape, low, high, tilt, goal, aim=None) -> dict:
    """Tolerance 1e-3 against the exact gather on a ramp map: ``>= goal`` times faster."""
    image = rng.random(shape, dtype=np.float32)
    sigma = ramp_map(shape, low, high, tilt)
    _, exact_s = exact_gather(image, sigma)
    tol_s = median_time(partial(gaussian_blur, image, sigma, tolerance=1e-3, backend="numba"), 3)
    ratio = exact_s / tol_s
    goal_text = f">= {goal}x" + (f" (aim {aim}x)" if aim else "")
    detail = f"exact {exact_s:.3f} s, tolerance 1e-3 {tol_s:.4f} s"
    return record(name, ratio, goal_text, ratio >= goal, detail)


def tolerance_targets(rng, s: int) -> list[dict]:
    """The tolerance speed-ups: 3-D ramps to sigma 8 and 16, 2-D ramps along x and
    tilted (``s``: the sizes' divisor, 4 with ``--quick``)."""
    n, v, w = 2048 // s, (64 // s, 128 // s, 128 // s), (32 // s, 64 // s, 64 // s)
    size = "x".join
    return [
        tolerance_target(rng, f"3-D {size(map(str, v))} ramp 0.5->8, tol 1e-3 vs exact", v,
                         0.5, 8.0, 0.0, 15, 50),
        tolerance_target(rng, f"3-D {size(map(str, w))} ramp 0.5->16, tol 1e-3 vs exact", w,
                         0.5, 16.0, 0.0, 30, 100),
        tolerance_target(rng, f"2-D {n}^2 ramp along x 1->16, tol 1e-3 vs exact", (n, n),
                         1.0, 16.0, 0.0, 5),
        tolerance_target(rng, f"2-D {n}^2 tilted ramp 1->16, tol 1e-3 vs exact", (n, n),
                         1.0, 16.0, 0.3, 5),
    ]  # fmt: skip


def quantised_target(rng, s: int) -> dict:
    """A quantised map (6 values up to sigma 6, blocks of labels) against one global
    blur at sigma 6: at most 12x its time."""
    shape = (64 // s, 128 // s, 128 // s)
    labels = np.kron(rng.integers(0, 6, tuple(max(1, n // 8) for n in shape)),
                     np.ones((8, 8, 8), int))[: shape[0], : shape[1], : shape[2]]  # fmt: skip
    sigma = np.array([0.5, 1.0, 2.0, 3.0, 4.5, 6.0], np.float32)[labels]
    image = rng.random(shape, dtype=np.float32)
    quantised = median_time(partial(gaussian_blur, image, sigma, backend="numba"), 5)
    single = median_time(partial(gaussian_blur, image, 6.0, backend="numba"), 5)
    ratio = quantised / single
    detail = f"quantised {quantised:.4f} s, global sigma 6 {single:.4f} s"
    name = f"quantised map, 6 values up to 6, 3-D {shape}, vs one global blur"
    return record(name, ratio, "<= 12x", ratio <= 12, detail)


def memory_targets(rng, s: int) -> list[dict]:
    """Peak memory of the tolerance mode (NumPy allocations, in image-sized units)."""
    out = []
    n = 2048 // s
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
    return out


def opencv_targets(rng, s: int) -> list[dict]:
    """Global passes against OpenCV: the time ratio numba / OpenCV (<= 1: faster)."""
    if not common.installed("cv2"):
        print("OpenCV is not installed: no global-pass targets")
        return []
    out = []
    for n in (2048 // s, 4096 // s):
        for mode in ("reflect", "nearest"):
            for precision, goal in (("float32", 1.0), ("float64", 1.5)):
                image = rng.random((n, n)).astype(precision)
                ours = median_time(partial(gaussian_blur, image, 4.0, mode=mode,
                                           backend="numba", precision=precision), 5)  # fmt: skip
                theirs = median_time(partial(cv2_blur, image, 4.0, mode), 5)
                detail = f"numba {ours * 1e3:.2f} ms, OpenCV {theirs * 1e3:.2f} ms"
                name = f"global {n}^2 sigma 4 {mode} {precision}: numba/OpenCV"
                out.append(record(name, ours / theirs, f"<= {goal}", ours / theirs <= goal, detail))
    return out


def target_rows(args) -> list[dict]:
    """The issue's targets, each a ratio measured in this run."""
    rng = np.random.default_rng(1)
    s = args.scale
    return [
        *tolerance_targets(rng, s),
        quantised_target(rng, s),
        *memory_targets(rng, s),
        *opencv_targets(rng, s),
    ]


def markdown(rows, targets, info) -> str:
    """The sweep's table and the targets' table."""
    lines = [
        "# Sigma-map sweep",
        "",
        common.describe_machine(info),
        "",
        "Numba backend, float32, `crop`, map from sigma min to max (2-D: tilted 30% along y;",
        "3-D: along x).  Speed-up: exact gather time / tolerance time.  Error: max |tolerance",
        "- exact| / image range (the promise: <= tolerance).",
        "",
    ]
    head = ["dims", "shape", "sigma", "global numba s", "global OpenCV s", "exact s",
            "tol 1e-3 s", "speed-up", "error", "tol 1e-4 s", "speed-up", "error"]  # fmt: skip
    table = []
    for r in rows:
        cv = f"{r['global_opencv_s']:.4f}" if "global_opencv_s" in r else "-"
        table.append([
            r["dims"], "x".join(map(str, r["shape"])), f"{r['sigma_min']}->{r['sigma_max']}",
            f"{r['global_numba_s']:.4f}", cv, f"{r['exact_s']:.3f}",
            f"{r['tol0.001_s']:.4f}", f"{r['tol0.001_speedup']:.1f}x", f"{r['tol0.001_error']:.1e}",
            f"{r['tol0.0001_s']:.4f}", f"{r['tol0.0001_speedup']:.1f}x",
            f"{r['tol0.0001_error']:.1e}",
        ])  # fmt: skip
    lines += md_table(head, table)
    lines += ["", "## Targets", ""]
    lines += md_table(
        ["target", "measured", "goal", "met", "detail"],
        [[t["target"], f"{t['measured']:.2f}", t["goal"], "yes" if t["ok"] else "MISSED",
          t["detail"]] for t in targets],
    )  # fmt: skip
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
    for ax, dims in zip(axes, dims_list, strict=False):
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


def main(argv=None) -> int:
    """Run the sweep and the targets (or only redraw the plot); write the result."""
    parser = common.parser(__doc__, "sweep", quick="small sizes (a smoke test)")
    parser.add_argument("--plot", default=str(common.IMAGES / "sigma_sweep.png"))
    parser.add_argument("--orientation", default=common.latest_result("orientation"),
                        help="orientation.py's JSON: a panel by map, if it exists "
                        "(default: its latest result)")  # fmt: skip
    parser.add_argument("--replot", action="store_true",
                        help="only redraw the plot from the JSON at --out")  # fmt: skip
    args = parser.parse_args(argv)
    orientation = Path(args.orientation) if args.orientation else None
    if args.replot:
        source = Path(args.out) if args.out else common.latest_result("sweep")
        plot(json.loads(source.read_text())["sweep"], Path(args.plot), orientation)
        return 0
    args.scale = 4 if args.quick else 1
    args.repeats = 1 if args.quick else 3
    s = args.scale
    args.sweeps = [
        (2, (2048 // s, 2048 // s), 1.0, (2.0, 4.0, 8.0, 16.0), 0.3),
        (3, (64 // s, 128 // s, 128 // s), 0.5, (2.0, 4.0, 8.0), 0.0),
    ]
    info = common.machine()
    rows = sweep_rows(args)
    targets = target_rows(args)
    text = markdown(rows, targets, info)
    common.write_result("sweep", dict(sweep=rows, targets=targets), info, out=args.out,
                               markdown=text, quick=args.quick)  # fmt: skip
    if args.quick:
        print("--quick: the plot is left as it is")
    else:
        try:
            plot(rows, Path(args.plot), orientation)
        except ImportError:
            print("matplotlib is not installed: no plot (pip install -e '.[bench]')")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
