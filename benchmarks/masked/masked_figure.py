"""Figure: dead pixels and an excluded region, propagated against left out.

Renders ``docs/images/masked_blur.png`` (matplotlib, Agg) from the package's synthetic
fluorescence sample (``napari_varblur.sample.fluorescence_sample``, 512x512) with ~1%
dead pixels set to NaN and a saturated disk that the mask excludes, in three panels:
the input (NaN in red, the excluded disk outlined), ``gaussian_blur(...,
nan_policy="propagate")`` (every NaN spreads over its window: the holes grow), and
``gaussian_blur(..., nan_policy="omit", mask=region_mask)`` (dead pixels and the disk
are filled from their valid neighbours; pixels with no valid tap in reach stay NaN).

    python benchmarks/masked/masked_figure.py [--out PATH] [--sigma 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common

from napari_varblur import gaussian_blur
from napari_varblur.sample import fluorescence_sample


def data(size: int = 512, seed: int = 0, dead: float = 0.001):
    """The sample image with a fraction ``dead`` of NaN pixels and a saturated disk,
    and the mask (False in the disk)."""
    image, _ = fluorescence_sample(size, seed=seed)
    rng = np.random.default_rng(seed + 1)
    image[rng.random(image.shape) < dead] = np.nan
    y, x = np.ogrid[:size, :size]
    cy, cx, r = 0.62 * size, 0.3 * size, 0.08 * size
    region = (y - cy) ** 2 + (x - cx) ** 2 <= r**2
    image[region] = 4000.0  # saturated: excluded by the mask
    return image, ~region, (cy, cx, r)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(common.IMAGES / "masked_blur.png"))
    parser.add_argument("--sigma", type=float, default=3.0)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--dead", type=float, default=0.001, help="fraction of NaN pixels")
    args = parser.parse_args(argv)

    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]')", file=sys.stderr)
        return 1

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    image, mask, (cy, cx, r) = data(args.size, dead=args.dead)
    s = args.sigma
    propagated = gaussian_blur(image, s, mode="reflect", nan_policy="propagate", backend="numba")
    omitted = gaussian_blur(image, s, mode="reflect", nan_policy="omit", mask=mask, backend="numba")

    finite = image[mask & np.isfinite(image)]
    vmin, vmax = np.percentile(finite, [1, 99.7])
    cmap = matplotlib.colormaps["gray"].with_extremes(bad="red")
    panels = [
        (image, f"input: {np.isnan(image).mean():.1%} dead pixels (NaN, red),\n"
                "saturated disk (outlined, masked out)"),
        (propagated, f'nan_policy="propagate", no mask, sigma {s:g}:\n'
                     f"any NaN in a window makes it NaN: {np.isnan(propagated).mean():.0%} NaN"),
        (omitted, f'nan_policy="omit", mask=disk excluded, sigma {s:g}:\n'
                  f"holes filled, {np.isnan(omitted).mean():.1%} NaN (no valid tap in reach)"),
    ]  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.7), layout="constrained")
    for ax, (img, title) in zip(axes, panels, strict=True):
        ax.imshow(np.ma.masked_invalid(img), cmap=cmap, vmin=vmin, vmax=vmax,
                  interpolation="nearest")  # fmt: skip
        ax.add_patch(plt.Circle((cx, cy), r, fill=False, color="orange", lw=1, ls="--"))
        ax.set_title(title, fontsize=9.5)
        ax.set_axis_off()
    fig.suptitle(f"napari_varblur.gaussian_blur on a {args.size}x{args.size} sample with "
                 "dead pixels and an excluded region (numba, float32, reflect)",
                 fontsize=11)  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
