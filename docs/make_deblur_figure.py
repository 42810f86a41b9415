"""Figure: deblurring a field-dependent blur with its sigma map, against one global sigma.

One row of four panels on a corner of scikit-image's ``astronaut`` (grey) at a peak of
1e4 photons, blurred by ``sigma_maps.radial`` (1 px at the centre rising to 4 px in the
corners, ``reflect``) and made Poisson-noisy, exactly as case 1 of
``benchmarks/deblur/quality.py`` (same seed): observed | the best single-sigma
Richardson-Lucy (sigma 1..4 in 0.25 steps and 1..200 iterations, the best PSNR) |
``deblur`` with the true sigma map (its best iteration) | truth.  The panels show the
corner where the blur is strongest; the titles give the PSNR over the whole image (and
over the corner shown); an inset in the first panel marks the corner in the full frame.

    python docs/make_deblur_figure.py [--image astronaut] [--out PATH]

Needs matplotlib (the ``bench`` extra); writes docs/images/deblur_figure.png.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "benchmarks" / "deblur"))

import quality  # benchmarks/deblur/quality.py: the same scenes

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "deblur_figure.png"
PEAK = 1e4
#: The corner shown, per image: (rows, columns) slices of the full frame.
CORNERS = {
    "astronaut": (slice(0, 192), slice(0, 192)),
    "camera": (slice(320, 512), slice(320, 512)),
    "coins": (slice(0, 160), slice(224, 384)),
}


def best_estimate(observed, sigma, truth, iterations: int) -> tuple[float, int, np.ndarray]:
    """The PSNR, iteration and estimate of the best of ``iterations`` RL iterations."""
    best = [-np.inf, 0, None]

    def keep(k, estimate):
        value = quality.psnr(estimate, truth, PEAK)
        if value > best[0]:
            best[:] = [value, k, np.array(estimate, dtype=np.float64)]

    quality.run(observed, sigma, iterations, mode="reflect", callback=keep)
    return best[0], best[1], best[2]


def panels(name: str, iterations: int) -> tuple[list, tuple]:
    """(title, image) for the four panels, and the truth's shape."""
    seed = 100 * quality.IMAGES.index(name)  # quality.py's seed for (name, P = 1e4)
    truth, sigma, observed = quality.scene(name, PEAK, seed)
    ours = best_estimate(observed, sigma, truth, iterations)
    single = max(
        ((*best_estimate(observed, s, truth, iterations), s) for s in quality.SIGMAS),
        key=lambda r: r[0],
    )
    rows, cols = CORNERS[name]

    def label(text, image):
        whole = quality.psnr(image, truth, PEAK)
        corner = quality.psnr(image[rows, cols], truth[rows, cols], PEAK)
        return f"{text}\n{whole:.2f} dB (corner {corner:.2f} dB)"

    out = [
        (label("observed", observed), observed),
        (label(f"best single-sigma RL (σ {single[3]}, {single[1]} it)", single[2]), single[2]),
        (label(f"ours: sigma map ({ours[1]} it)", ours[2]), ours[2]),
        ("truth\n(PSNR: whole image, corner)", truth),
    ]
    return out, truth.shape


def draw(name: str, items: list, shape: tuple, out: Path) -> None:
    """The row of panels, the corner only, with the frame as an inset in the first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    rows, cols = CORNERS[name]
    fig, axes = plt.subplots(1, 4, figsize=(14, 4.1), layout="constrained")
    for ax, (title, image) in zip(axes, items, strict=True):
        ax.imshow(image[rows, cols], cmap="gray", vmin=0, vmax=PEAK, interpolation="nearest")
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    inset = axes[0].inset_axes([0.0, 0.0, 0.3, 0.3])
    inset.imshow(items[0][1][::4, ::4], cmap="gray", vmin=0, vmax=PEAK)
    box = (
        (cols.start / 4, rows.start / 4),
        (cols.stop - cols.start) / 4,
        (rows.stop - rows.start) / 4,
    )
    inset.add_patch(Rectangle(*box, fill=False, color="red", lw=1))
    inset.set_xticks([])
    inset.set_yticks([])
    fig.suptitle(f"{name}, peak {PEAK:g} photons, radial blur 1 px (centre) -> 4 px (corners) "
                 "+ Poisson noise: the corner", fontsize=11)  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="astronaut", choices=sorted(CORNERS))
    parser.add_argument("--iterations", type=int, default=quality.ITERATIONS)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return 1
    items, shape = panels(args.image, args.iterations)
    draw(args.image, items, shape, Path(args.out))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size // 1024} kB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
