"""Estimate a sigma map from a sharp and a blurred image: :func:`fit_sigma_map`.

:mod:`.validate` checks the arguments, :mod:`.model` is the B-spline map and its blur,
:mod:`.solver` runs L-BFGS and derives the standard errors.
"""

from __future__ import annotations

from .model import control_basis
from .pairs import focus_pair
from .solver import SigmaFit, fit_sigma_map, fit_sigma_map_steps

__all__ = ["SigmaFit", "control_basis", "fit_sigma_map", "fit_sigma_map_steps", "focus_pair"]
