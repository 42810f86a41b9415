"""What a bead measurement returns: :class:`BeadFit` (the map, its uncertainty, the
beads' table and a summary) and :class:`BeadTable`."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .status import STATUSES

#: A Gaussian's full width at half maximum over its sigma.
FWHM = 2.0 * np.sqrt(2.0 * np.log(2.0))


class BeadTable(Mapping):
    """One row per candidate bead, its columns by name (NumPy arrays of equal length):
    ``table["sigma_x"]``, ``table["status"] == "ok"``.  :meth:`to_pandas` and
    :meth:`to_csv` give it to other tools."""

    def __init__(self, columns: Mapping[str, np.ndarray]) -> None:
        self._columns = {name: np.asarray(values) for name, values in columns.items()}
        for values in self._columns.values():
            values.setflags(write=False)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._columns[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._columns)

    def __len__(self) -> int:
        return len(self._columns)

    @property
    def rows(self) -> int:
        return len(next(iter(self._columns.values()), ()))

    @property
    def ok(self) -> np.ndarray:
        """The kept beads (``status == "ok"``)."""
        return self._columns["status"] == "ok"

    def to_pandas(self):
        """A ``pandas.DataFrame`` (pandas must be installed)."""
        import pandas

        return pandas.DataFrame(dict(self._columns))

    def to_csv(self, path: str | Path) -> None:
        """Write a CSV file: a header of column names, then one line per bead."""
        names = list(self._columns)
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(names)
            for i in range(self.rows):
                writer.writerow(_cell(self._columns[name][i]) for name in names)

    def __repr__(self) -> str:
        return f"BeadTable({self.rows} beads; columns {', '.join(self._columns)})"


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{value:.6g}"
    return str(value)


@dataclass(frozen=True)
class BeadFit:
    """A sigma map measured from a bead image.

    Attributes
    ----------
    sigma_map
        The image's shape (isotropic) or the image's shape plus one sigma per spatial
        axis (in ``axes`` order), in pixels, float32: pass it as ``sigma`` to
        ``gaussian_blur`` or ``deblur(..., model="scatter")``.
    uncertainty
        The map's standard error per pixel (same layout).
    extrapolated
        True where the pixel lies outside the kept beads' convex hull (the image's
        shape): the field is held at the beads' bounding box there.
    beads
        The table of candidates (:class:`BeadTable`).
    summary
        Median FWHM per axis and its spread (in ``spacing``'s unit), beads kept and left
        out by reason, the field's degree and scatter per axis, the noise and gain.
    axes
        The spatial axes of the image, and their names (``z``, ``y``, ``x``).
    """

    sigma_map: np.ndarray
    uncertainty: np.ndarray
    extrapolated: np.ndarray
    beads: BeadTable
    summary: dict
    axes: tuple[int, ...]
    names: tuple[str, ...] = field(default=("y", "x"))

    def __str__(self) -> str:
        return describe(self.summary, self.names)


def describe(summary: dict, names: tuple[str, ...]) -> str:
    """One line: beads kept and left out, the median FWHM per axis and the field."""
    left = ", ".join(f"{n} {s}" for s, n in summary["left_out"].items() if n)
    widths = ", ".join(f"{a} {summary['fwhm'][a]:.3g} ± {summary['fwhm_spread'][a]:.2g}"
                       for a in names)  # fmt: skip
    degrees = "/".join(str(d) for d in summary["degree"].values())
    return (f"{summary['kept']} beads kept" + (f" ({left} left out)" if left else "")
            + f"; FWHM {widths}; field degree {degrees}")  # fmt: skip


def summarise(sigmas, kept, status, names, spacing, fields, noise, gain) -> dict:
    """The summary of :class:`BeadFit` (``sigmas``: ``(n, ndim)`` pixels)."""
    widths = FWHM * sigmas[kept] * spacing
    median = np.median(widths, axis=0)
    spread = 1.4826 * np.median(np.abs(widths - median), axis=0)
    counts = {s: int(np.count_nonzero(status == s)) for s in STATUSES[1:]}
    return {
        "kept": int(np.count_nonzero(kept)),
        "candidates": len(status),
        "left_out": counts,
        "fwhm": dict(zip(names, median.tolist())),
        "fwhm_spread": dict(zip(names, spread.tolist())),
        "sigma": dict(zip(names, np.median(sigmas[kept], axis=0).tolist())),
        "degree": {name: f.degree for name, f in fields.items()},
        "scatter": {name: f.tau for name, f in fields.items()},
        "noise": noise,
        "gain": gain,
    }
