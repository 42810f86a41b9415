"""Figure for the README: input | sigma map | result, with maps made without code.

Two rows on the built-in sample: field curvature (``sigma_maps.radial``: sharp in the
centre, blurred towards the corners) and a tilted focal plane (``sigma_maps.defocus``
with a focal surface).  Run: ``python docs/make_sigma_map_figure.py`` (needs matplotlib,
the ``bench`` extra); writes docs/images/sigma_map_figure.png.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from napari_varblur import gaussian_blur
from napari_varblur.sample import fluorescence_sample
from napari_varblur.sigma_maps import defocus, radial

OUT = Path(__file__).resolve().parent / "images" / "sigma_map_figure.png"


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    image, _ = fluorescence_sample(384, seed=3)
    n = image.shape[0]
    curvature = radial(image.shape, center=(n / 2, n / 2), sigma_center=0.0, sigma_edge=5.0,
                       radius=n / np.sqrt(2))  # fmt: skip
    # A tilted coverslip: in a 21-plane stack the focal surface runs from plane 0 on the
    # left to plane 20 on the right; the figure shows plane 10.
    surface = np.broadcast_to(np.linspace(0, 20, n), (n, n))
    focus = defocus((21, n, n), focus=surface, slope=0.4, axis=0)[10]
    rows = [
        ("radial(sigma_center=0, sigma_edge=5): field curvature", curvature),
        ("defocus(focus=tilted surface, slope=0.4), plane 10", focus),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(11, 7.6), layout="constrained")
    vmin, vmax = np.percentile(image, [1, 99.7])
    for (title, sigma), ax in zip(rows, axes):
        result = gaussian_blur(image, sigma, tolerance=1e-3)
        ax[0].imshow(image, cmap="gray", vmin=vmin, vmax=vmax)
        ax[0].set_title("input", fontsize=10)
        shown = ax[1].imshow(np.broadcast_to(sigma, image.shape), cmap="magma")
        ax[1].set_title(f"sigma map: {title}", fontsize=9)
        fig.colorbar(shown, ax=ax[1], shrink=0.8, label="sigma (pixels)")
        ax[2].imshow(result, cmap="gray", vmin=vmin, vmax=vmax)
        ax[2].set_title("gaussian_blur(image, sigma_map, tolerance=1e-3)", fontsize=9)
        for a in ax:
            a.set_axis_off()
    fig.savefig(OUT, dpi=80)
    print(f"wrote {OUT} ({OUT.stat().st_size / 1024:.0f} KB)")


if __name__ == "__main__":
    main()
