"""Undo a blur: :func:`deblur` (spatially varying Richardson-Lucy and RL-TV) and
:func:`blur_operator` (the blur and its exact transpose as a SciPy ``LinearOperator``).

Both are built on the two models of the engine: the gather (the contract's blur) and
the scatter (its exact transpose), run on the route the planner chooses, so a deblur
takes every keyword that describes the blur and runs on every backend.
"""

from __future__ import annotations

from .deblur import deblur
from .operator import blur_operator

__all__ = ["blur_operator", "deblur"]
