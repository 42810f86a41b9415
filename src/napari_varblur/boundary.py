"""Edge modes: names, aliases and the index extension that defines them.

Every backend reads pixels outside the image through :func:`extend_indices`, so the
meaning of a mode is written down exactly once.  The extensions follow
``scipy.ndimage`` for filters (``_ni_support._extend_mode_to_code(..., is_filter=True)``).
"""

from __future__ import annotations

import numpy as np

#: Canonical mode names.  ``crop`` is ours; the others are scipy.ndimage's.
MODES: tuple[str, ...] = ("crop", "reflect", "mirror", "nearest", "wrap", "constant")

#: scipy's aliases; for filters they mean the same as their targets.
MODE_ALIASES: dict[str, str] = {
    "grid-mirror": "reflect",
    "grid-wrap": "wrap",
    "grid-constant": "constant",
}


def canonical_mode(mode: object) -> str:
    """Return the canonical name of ``mode`` or raise ``ValueError`` listing valid ones."""
    if isinstance(mode, str):
        name = MODE_ALIASES.get(mode, mode)
        if name in MODES:
            return name
    valid = ", ".join(repr(m) for m in MODES + tuple(MODE_ALIASES))
    raise ValueError(f"mode: unknown edge mode {mode!r}; valid modes are {valid}")


def extend_indices(indices: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Map integer positions along an axis of length ``n`` to source positions.

    Parameters
    ----------
    indices
        Any integers, in bounds or not.
    n
        Length of the axis (>= 1).
    mode
        Canonical mode name.

    Returns
    -------
    numpy.ndarray
        int64 positions in ``[0, n)``, or ``-1`` where the value is not read from the
        image (``constant`` reads ``cval`` there; ``crop`` drops the tap).
    """
    i = np.asarray(indices, dtype=np.int64)
    if mode == "reflect":  # d c b a | a b c d | d c b a  (period 2n)
        m = np.mod(i, 2 * n)
        return np.where(m >= n, 2 * n - 1 - m, m)
    if mode == "mirror":  # d c b | a b c d | c b a  (period 2n - 2)
        if n == 1:
            return np.zeros_like(i)
        m = np.mod(i, 2 * n - 2)
        return np.where(m >= n, 2 * n - 2 - m, m)
    if mode == "nearest":
        return np.clip(i, 0, n - 1)
    if mode == "wrap":
        return np.mod(i, n)
    if mode in ("constant", "crop"):
        return np.where((i >= 0) & (i < n), i, -1)
    raise ValueError(f"mode: unknown edge mode {mode!r}")


def period(n: int, mode: str) -> int | None:
    """Period of the extension along an axis of length ``n``, or ``None`` if not periodic."""
    if mode == "reflect":
        return 2 * n
    if mode == "mirror":
        return max(2 * n - 2, 1)
    if mode == "wrap":
        return n
    return None
