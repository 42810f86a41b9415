"""Edge modes: one :class:`Mode` object per mode, holding everything a mode decides.

A mode says how an axis is extended past its ends (:meth:`Mode.extend`, following
``scipy.ndimage`` for filters, ``_ni_support._extend_mode_to_code(..., is_filter=True)``),
whether that extension repeats (:meth:`Mode.period`), how a global kernel longer than the
axis folds onto it (:meth:`Mode.fold`), which value fills taps read from outside
(:meth:`Mode.fill`), how far a sigma map's radius may reach (:meth:`Mode.map_limit`) and
what halo a dask chunk needs (:attr:`Mode.dask_boundary`).  Nothing else in the package
tests mode names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import ArgumentError

#: Canonical mode names.  ``crop`` is ours; the others are scipy.ndimage's.
MODE_NAMES: tuple[str, ...] = ("crop", "reflect", "mirror", "nearest", "wrap", "constant")

#: scipy's aliases; for filters they mean the same as their targets.
MODE_ALIASES: dict[str, str] = {
    "grid-mirror": "reflect",
    "grid-wrap": "wrap",
    "grid-constant": "constant",
}

#: Largest radius a sigma map may reach in a mode other than crop on an axis of length
#: n: max(MAP_RADIUS_FACTOR * n, MAP_RADIUS_FLOOR).  Per-pixel kernels cannot be folded
#: cheaply, and beyond this the work grows without changing the image much.
MAP_RADIUS_FACTOR = 4
MAP_RADIUS_FLOOR = 256


@dataclass(frozen=True)
class Mode:
    """An edge mode (hashable, so it can be a static argument of ``jax.jit``)."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def crop(self) -> bool:
        """Out-of-bounds taps are dropped and the kernel renormalised over the rest."""
        return self.name == "crop"

    @property
    def dask_boundary(self) -> str:
        """The halo dask adds at the array's border: only ``wrap`` reads the far side;
        every other mode is applied by the backend at the chunk's own edge."""
        return "periodic" if self.name == "wrap" else "none"

    def fill(self, cval: float) -> float:
        """The value of a tap that reads no pixel: ``cval`` in constant mode, else 0
        (crop's dropped taps read 0 with weight counted nowhere)."""
        return cval if self.name == "constant" else 0.0

    def extend(self, indices: np.ndarray, n: int) -> np.ndarray:
        """Map integer positions along an axis of length ``n`` (>= 1) to source positions.

        Returns int64 positions in ``[0, n)``, or ``-1`` where the value is not read from
        the image (``constant`` reads ``cval`` there; ``crop`` drops the tap).
        """
        i = np.asarray(indices, dtype=np.int64)
        name = self.name
        if name == "reflect":  # d c b a | a b c d | d c b a  (period 2n)
            m = np.mod(i, 2 * n)
            return np.where(m >= n, 2 * n - 1 - m, m)
        if name == "mirror":  # d c b | a b c d | c b a  (period 2n - 2)
            if n == 1:
                return np.zeros_like(i)
            m = np.mod(i, 2 * n - 2)
            return np.where(m >= n, 2 * n - 2 - m, m)
        if name == "nearest":
            return np.clip(i, 0, n - 1)
        if name == "wrap":
            return np.mod(i, n)
        return np.where((i >= 0) & (i < n), i, -1)  # constant, crop

    def period(self, n: int) -> int | None:
        """Period of the extension along an axis of length ``n``, or ``None``."""
        return {"reflect": 2 * n, "mirror": max(2 * n - 2, 1), "wrap": n}.get(self.name)

    def fold(self, weights: np.ndarray, radius: int, n: int) -> tuple[np.ndarray, int]:
        """Fold normalised taps ``d = -radius..radius`` onto an axis of length ``n``.

        Returns the taps and the offset of the first one (``left``), such that a 1-D
        correlation over the extended axis gives the same result as the full kernel:
        periodic modes add taps that agree modulo the period; ``nearest`` and
        ``constant`` lump the taps beyond the farthest distinct source onto it.
        """
        per = self.period(n)
        if per is not None and 2 * radius + 1 > per:
            offsets = np.mod(np.arange(-radius, radius + 1), per)
            return np.bincount(offsets, weights=weights, minlength=per), 0
        keep = {"nearest": n - 1, "constant": n}.get(self.name)
        if keep is not None and radius > keep:
            out = weights[radius - keep : radius + keep + 1].copy()
            out[0] += weights[: radius - keep].sum()
            out[-1] += weights[radius + keep + 1 :].sum()
            return out, keep
        return weights, radius

    def map_limit(self, n: int) -> int | None:
        """Largest useful radius of a per-pixel kernel on an axis of length ``n``:
        ``n - 1`` in crop mode (farther taps are never in bounds, so dropping them is
        exact), ``None`` (no cap) otherwise."""
        return n - 1 if self.crop else None

    def map_allowed(self, n: int) -> int | None:
        """Largest radius a sigma map may ask for (``None``: any), see
        :data:`MAP_RADIUS_FACTOR`."""
        return None if self.crop else max(MAP_RADIUS_FACTOR * n, MAP_RADIUS_FLOOR)


#: The one object of each mode.
MODE_OBJECTS: dict[str, Mode] = {name: Mode(name) for name in MODE_NAMES}


def canonical_mode(mode: object) -> Mode:
    """Return the :class:`Mode` for ``mode`` (a name, an alias or a Mode), or raise
    ``ValueError`` listing the valid names."""
    if isinstance(mode, Mode):
        return mode
    if isinstance(mode, str):
        name = MODE_ALIASES.get(mode, mode)
        if name in MODE_OBJECTS:
            return MODE_OBJECTS[name]
    valid = ", ".join(repr(m) for m in MODE_NAMES + tuple(MODE_ALIASES))
    raise ArgumentError(f"mode: unknown edge mode {mode!r}; valid modes are {valid}")
