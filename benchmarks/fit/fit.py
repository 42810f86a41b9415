"""fit_sigma_map on synthetic focus pairs: accuracy against the true map, and time.

Cases (``napari_varblur.fit.focus_pair``: blobs and lines on noise, blurred
with a smooth map plus Gaussian noise of 1% of the blurred image's range):

a) ``2d``: the issue's scene, 112x136, map in [0.7, 3] (goal: median relative error
   <= 4% and RMS <= 8% away from a 4-pixel border, <= 60 s on this 2-core CPU);
b) ``per_axis``: 112x136, one map along Y and its mirror image along X;
c) ``3d``: a 24x40x48 volume, map in [0.7, 3], node spacing 12;
d) ``batch``: two different scenes (2x112x136) blurred with one map, fitted as one
   (batch axis 0 shares the map).

Each case runs in a fresh process, so "first fit" includes importing and compiling,
as a user's first call does; "second fit" is the same call again (compiled programs
are cached).  Besides the errors the table shows the share of pixels marked
observable, how many standard errors the error is (RMS of error / stderr: about 1 when
the error is noise, larger when the map varies faster than the node spacing), and the
estimated noise against the true one.

As a peer for accuracy, the obvious hand-made method: for each 16x16 tile, the global
sigma (a grid of 0.02 steps, scipy.ndimage.gaussian_filter, reflect mode) whose blur of
``sharp`` best matches ``blurred`` in that tile, on case a).

    python benchmarks/fit/fit.py          # about 3 minutes on 2 cores
    python benchmarks/fit/fit.py --quick  # case a) only, no figure

Writes ``benchmarks/results/<date>_<machine>_fit.json`` and ``.md`` (``--quick``:
``results/quick/``) and the figure ``docs/images/fit_sigma_map.png`` (matplotlib, in
the ``bench`` extra).  ``fit.py --case 2d`` runs one case in this process and prints
it as one JSON line (``gpu/gpu_check.sh`` uses it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
from common import md_table

BORDER = 4
CASES = {
    "2d": dict(shape=(112, 136), fit=dict(max_sigma=4.0)),
    "per_axis": dict(shape=(112, 136), per_axis=True, fit=dict(max_sigma=4.0, per_axis=True)),
    "3d": dict(shape=(24, 40, 48), fit=dict(max_sigma=4.0, spacing=12.0)),
    "batch": dict(shape=(112, 136), batch=2, fit=dict(max_sigma=4.0, axes=(1, 2))),
}


def scene(name: str):
    """(sharp, blurred, truth, clean noise level) of a case."""
    from napari_varblur import gaussian_blur
    from napari_varblur.fit import focus_pair

    case = CASES[name]
    sharp, blurred, truth = focus_pair(case["shape"], per_axis=case.get("per_axis", False))
    noise = 0.01 * float(np.ptp(gaussian_blur(sharp, truth, backend="reference")))
    if case.get("batch"):
        other = focus_pair(case["shape"], seed=1)[0]
        rng = np.random.default_rng(2)
        other_blurred = gaussian_blur(other, truth, backend="reference")
        other_blurred = other_blurred + noise * rng.standard_normal(other.shape)
        sharp = np.stack([sharp, other])
        blurred = np.stack([blurred, other_blurred.astype(np.float32)])
    return sharp, blurred, truth, noise


def run_case(name: str) -> dict:
    """One case in this (fresh) process: the first fit, a second one, the metrics."""
    t0 = time.perf_counter()
    from napari_varblur import fit_sigma_map

    sharp, blurred, truth, noise = scene(name)
    t1 = time.perf_counter()
    fit = fit_sigma_map(sharp, blurred, **CASES[name]["fit"])
    first = time.perf_counter() - t1
    again = fit_sigma_map(sharp, blurred, **CASES[name]["fit"])
    model, stderr = fit.model_map, fit.stderr
    if CASES[name].get("batch"):  # one shared map: read the first plane
        model, stderr = model[0], stderr[0]
    inner = tuple(slice(BORDER, n - BORDER) for n in CASES[name]["shape"])
    z = (model[inner] - truth[inner]) / stderr[inner]
    rel = (model[inner] - truth[inner]) / truth[inner]
    settings = CASES[name]["fit"]
    return dict(
        case=name,
        shape=list(sharp.shape),
        settings={k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
        median=float(np.median(np.abs(rel))),
        rms=float(np.sqrt(np.mean(rel**2))),
        worst=float(np.abs(rel).max()),
        observable=float(fit.observable.mean()),
        z_rms=float(np.sqrt(np.mean(z**2))),
        noise=fit.noise,
        true_noise=noise,
        steps=fit.steps,
        converged=fit.converged,
        first_fit_s=first,
        with_import_s=time.perf_counter() - t0 - again.seconds,
        second_fit_s=again.seconds,
    )


def tile_peer(tile: int = 16) -> dict:
    """Per tile, the best global sigma by grid search (scipy), on case a)."""
    from scipy.ndimage import gaussian_filter

    sharp, blurred, truth, _ = scene("2d")
    t0 = time.perf_counter()
    grid = np.arange(0.3, 4.0001, 0.02)
    blurs = np.stack([gaussian_filter(sharp.astype(np.float64), s, truncate=3.0) for s in grid])
    fitted = np.empty_like(truth)
    for y in range(0, truth.shape[0], tile):
        for x in range(0, truth.shape[1], tile):
            window = (slice(y, y + tile), slice(x, x + tile))
            sse = ((blurs[(slice(None), *window)] - blurred[window]) ** 2).sum(axis=(1, 2))
            fitted[window] = grid[int(np.argmin(sse))]
    inner = tuple(slice(BORDER, n - BORDER) for n in truth.shape)
    rel = (fitted[inner] - truth[inner]) / truth[inner]
    return dict(method=f"best global sigma per {tile}x{tile} tile (scipy grid search)",
                median=float(np.median(np.abs(rel))), rms=float(np.sqrt(np.mean(rel**2))),
                seconds=time.perf_counter() - t0)  # fmt: skip


def figure(path: Path) -> None:
    """Case a): the images, the true and fitted maps, the error and the residual."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from napari_varblur import fit_sigma_map

    sharp, blurred, truth, _ = scene("2d")
    fit = fit_sigma_map(sharp, blurred, **CASES["2d"]["fit"])
    panels = [
        ("sharp", sharp, "gray", None),
        ("blurred (+1% noise)", blurred, "gray", None),
        ("true sigma map", truth, "viridis", (0.5, 3.2)),
        ("fitted sigma map", fit.sigma_map, "viridis", (0.5, 3.2)),
        ("relative error (%)", 100 * (fit.model_map - truth) / truth, "RdBu_r", (-5, 5)),
        ("residual", fit.residual, "RdBu_r", (-0.04, 0.04)),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(10.5, 6.2), constrained_layout=True)
    for ax, (title, data, cmap, limits) in zip(axes.ravel(), panels, strict=True):
        vmin, vmax = limits or (None, None)
        shown = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_title(title)
        ax.set_axis_off()
        if limits:
            fig.colorbar(shown, ax=ax, shrink=0.8)
    fig.suptitle(f"fit_sigma_map: {fit.steps} L-BFGS steps; map NaN (white) where not "
                 f"observable ({100 * (1 - fit.observable.mean()):.1f}%)")  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def markdown(rows: list[dict], peer: dict, info: dict) -> str:
    """The report: one line per case, the peer and the goal."""
    table = []
    for r in rows:
        settings = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
        table.append([
            r["case"], "x".join(map(str, r["shape"])), settings, f"{100 * r['median']:.2f}%",
            f"{100 * r['rms']:.2f}%", f"{100 * r['worst']:.1f}%", f"{100 * r['observable']:.1f}%",
            f"{r['z_rms']:.2f}", f"{r['noise']:.4f} / {r['true_noise']:.4f}", r["steps"],
            f"{r['first_fit_s']:.1f}", f"{r['second_fit_s']:.2f}",
        ])  # fmt: skip
    head = ["case", "shape", "settings", "median rel. error", "RMS", "worst", "observable",
            "error / stderr (RMS)", "noise est. / true", "steps", "first fit (s)",
            "second fit (s)"]  # fmt: skip
    return "\n".join([
        "# fit_sigma_map: accuracy and time", "", f"Machine: {common.describe_machine(info)}.",
        "", *md_table(head, table), "",
        f"Peer on case 2d, {peer['method']}: median {100 * peer['median']:.1f}%, RMS "
        f"{100 * peer['rms']:.1f}% ({peer['seconds']:.1f} s).",
        "", "Goal (case 2d): median <= 4%, RMS <= 8% away from a 4-pixel border, <= 60 s.",
    ]) + "\n"  # fmt: skip


def main(argv=None) -> int:
    """Every case in a fresh process, the peer, the result and the figure."""
    parser = common.parser(__doc__, "fit", quick="case 2d only, no figure")
    parser.add_argument("--case", help="run one case in this process; print it as JSON")
    parser.add_argument("--figure", default=str(common.IMAGES / "fit_sigma_map.png"))
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case)))
        return 0
    info = common.machine()
    rows = []
    for name in ["2d"] if args.quick else list(CASES):
        child = subprocess.run([sys.executable, __file__, "--case", name], check=True,
                               capture_output=True, text=True)  # fmt: skip
        rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
        print(rows[-1], flush=True)
    peer = tile_peer()
    text = markdown(rows, peer, info)
    common.write_result("fit", dict(rows=rows, peer=peer), info, out=args.out,
                               markdown=text, quick=args.quick)  # fmt: skip
    print(text)
    if not args.quick:
        try:
            figure(Path(args.figure))
        except ImportError:
            print("matplotlib is not installed: no figure (pip install -e '.[bench]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
