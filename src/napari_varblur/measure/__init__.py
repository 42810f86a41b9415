"""Measure the blur: a sigma map from an image of sub-resolution beads
(:func:`sigma_map_from_beads`), and synthetic bead images to try it on
(:mod:`.synthetic`)."""

from .beads import Progress, sigma_map_from_beads, sigma_map_from_beads_steps
from .result import BeadFit, BeadTable

__all__ = ["BeadFit", "BeadTable", "Progress", "sigma_map_from_beads",
           "sigma_map_from_beads_steps"]  # fmt: skip
