"""napari's sample data (File > Open Sample > VarBlur): the package's sample arrays
(:mod:`napari_varblur.sample`) as napari ``LayerData`` tuples, tagged as this plugin
tags its layers (:mod:`.schema`)."""

from __future__ import annotations

import numpy as np

from ..measure.synthetic import bead_image
from ..sample import fluorescence_sample, focus_pair_sample
from .schema import METADATA_KEY, PIXELS, SIGMA_MAP_ROLE

#: Names of the focus pair's layers.
SHARP_NAME = "focus pair sharp"
BLURRED_NAME = "focus pair blurred"
TRUTH_NAME = "focus pair true sigma map"
#: Names of the bead sample's layers, and its pixel size (µm, as a microscope's).
BEADS_NAME = "varblur beads"
BEADS_TRUTH_NAME = "varblur beads true sigma map per axis"
BEAD_PIXEL = 0.1


def defocus_sample_layers() -> list[tuple]:
    """The fluorescence sample and its defocus sigma map, tagged so that the blur
    widget preselects it."""
    image, sigma_map = fluorescence_sample(512)
    tag = {"role": SIGMA_MAP_ROLE, "kind": "sample", "units": PIXELS}
    return [
        (image, {"name": "varblur cells", "colormap": "gray"}, "image"),
        (
            sigma_map,
            {
                "name": "varblur sigma map",
                "colormap": "viridis",
                "visible": False,
                "metadata": {METADATA_KEY: tag},
            },
            "image",
        ),
    ]


def focus_pair_sample_layers() -> list[tuple]:
    """A sharp and a blurred image of one scene, and the true map.

    The true sigma map is hidden and is deliberately *not* tagged with the sigma-map
    role that the blur widget preselects: it is the answer to compare the estimate with,
    so the map the blur widget offers is always the one the fit produced, never the
    ground truth by accident.  Its metadata names it as the sample's true map instead.
    """
    sharp, blurred, truth = focus_pair_sample()
    high = float(truth.max())
    truth_layer = {
        "name": TRUTH_NAME,
        "colormap": "viridis",
        "contrast_limits": (0.0, high if high > 0 else 1.0),
        "visible": False,
        "metadata": {METADATA_KEY: {"role": "true-sigma-map", "kind": "sample"}},
    }
    return [
        (sharp, {"name": SHARP_NAME, "colormap": "gray"}, "image"),
        (blurred, {"name": BLURRED_NAME, "colormap": "gray"}, "image"),
        (truth, truth_layer, "image"),
    ]


def bead_sample_layers() -> list[tuple]:
    """A synthetic 2-D bead image (60 beads, a few doublets, saturated and cut by the
    border) for "Measure blur from beads", and its true per-axis map, hidden and not
    tagged as a sigma map (the answer to compare with, never preselected).

    Its counts are a 12-bit camera's written high-aligned in 16 bits (16 ADU per
    photon, as many cameras store them), so it saturates at the dtype's maximum, which
    is the dock's default saturation: the saturated beads are left out as such.
    """
    image, truth = bead_image(
        (512, 512), 60, doublets=3, saturated=2, edge=4, seed=0,
        gain=16.0, offset=1600.0, saturation=65535.0,
    )  # fmt: skip
    scale = (BEAD_PIXEL, BEAD_PIXEL)
    # The beads' peaks, not the few saturated ones, set the contrast.
    contrast = (float(image.min()), float(np.percentile(image, 99.95)))
    beads = {"name": BEADS_NAME, "colormap": "gray", "scale": scale, "contrast_limits": contrast}
    truth_layer = {
        "name": BEADS_TRUTH_NAME,
        "colormap": "viridis",
        "scale": (1.0, *scale),
        "visible": False,
        "metadata": {METADATA_KEY: {"role": "true-sigma-map", "kind": "sample"}},
    }
    return [(image, beads, "image"), (np.moveaxis(truth.sigma_map, -1, 0), truth_layer, "image")]
