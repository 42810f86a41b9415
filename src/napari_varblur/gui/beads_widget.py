"""The "Measure blur from beads" dock widget: a thin magicgui adapter over :mod:`..measure`.

It measures the blur an Image layer of sub-resolution beads shows
(:func:`napari_varblur.measure.sigma_map_from_beads_steps`) in napari's
``thread_worker``: progress between batches of beads (at most five reports a second)
and Cancel between them.  The arguments are checked on the GUI thread first, so a bad
choice starts nothing.  The voxel size is the spatial part of the layer's ``scale``:
the FWHMs are in the layer's units, the sigmas stay in pixels (what the blur takes).

Its layers are tagged with the image's id, so a re-run updates them in place and never
touches a layer it did not make; all are placed like the image:

* ``"<image> beads"``: a Points layer, one point per candidate bead at its fitted
  centre (the image's data coordinates), its border coloured by status
  (:data:`STATUS_COLORS`: kept beads green), the bead table as its ``features``;
* ``"<image> bead sigma map"``: the measured map, tagged ``role: sigma-map`` so that
  the blur widget preselects it; with one sigma per axis ``"<image> bead sigma map per
  axis"``, one plane per axis first (role ``sigma-map-per-axis``), as the "Estimate
  sigma map" widget shows such a map.  The other form's map of an earlier run is
  re-tagged superseded (kept, no longer preselected).

The status line shows the fit's one-line summary; the whole fit (its uncertainty and
extrapolated pixels too) is ``last_fit``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import Container
from napari.layers import Image, Layer, Points

from .._version import __version__
from ..core.bead_params import BEAD_PARAMS
from ..measure import BeadFit, Progress, sigma_map_from_beads_steps
from ..measure.result import FWHM
from .forms import (
    STATUS_TIP,
    Field,
    Scrolling,
    Threaded,
    advanced_of,
    build,
    declared,
    fold,
    layer_picker,
    throttled,
    values_of,
)
from .schema import (
    METADATA_KEY,
    PER_AXIS_ROLE,
    PIXELS,
    SIGMA_MAP_ROLE,
    find_tagged,
    layer_id,
    placement,
    upsert,
)

if TYPE_CHECKING:
    import napari

#: ``metadata[METADATA_KEY]["kind"]`` of every layer this widget makes.
BEADS_KIND = "beads"
POINTS_ROLE = "beads"
#: Added to the role of an earlier run's map of the other form (per axis or not).
SUPERSEDED = "-superseded"
#: Each status's colour (RGBA): kept beads green, each reason to leave one out its own.
STATUS_COLORS: dict[str, tuple[float, ...]] = {
    "ok": (0.2, 0.9, 0.3, 1.0),
    "edge": (0.6, 0.6, 0.6, 1.0),
    "saturated": (1.0, 0.2, 0.2, 1.0),
    "doublet": (1.0, 0.6, 0.1, 1.0),
    "faint": (0.4, 0.65, 1.0, 1.0),
    "poor_fit": (0.85, 0.3, 1.0, 1.0),
    "outlier": (1.0, 0.9, 0.2, 1.0),
}
#: A status the table may gain later: white rather than a failure to show the beads.
OTHER_COLOR = (1.0, 1.0, 1.0, 1.0)

BEAD_FIELDS: tuple[Field, ...] = (
    ("image", layer_picker(Image, "beads"),
     "the bead image: 2-D, or a 3-D z-stack (z first); its scale is the voxel size (FWHM "
     "in its units); left unchanged"),
    *(declared(name, BEAD_PARAMS)
      for name in ("threshold", "per_axis", "min_separation", "saturation", "degree",
                   "truncate")),
)  # fmt: skip
BEAD_ADVANCED = advanced_of(BEAD_FIELDS, BEAD_PARAMS)


class BeadsWidget(Scrolling, Threaded, Container):
    """Measure a sigma map from an Image layer of sub-resolution beads."""

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        self._worker = None
        self.last_fit: BeadFit | None = None
        fields = fold(self, build(self, BEAD_FIELDS), BEAD_ADVANCED)
        self._assemble(fields, "Measure", "the bead measurement")

    def arguments(self) -> dict[str, Any]:
        """``sigma_map_from_beads``'s arguments for the current choices (checked by it,
        not here): the layer's data, its scale as the voxel size, the declared fields.
        A 4-D layer is a stack of z-stacks (its beads pooled), the first axis the stack."""
        layer = self.image.value
        image = bead_data(layer)
        spatial = min(image.ndim, 3)
        axes = tuple(range(image.ndim - spatial, image.ndim)) if image.ndim > 3 else None
        spacing = tuple(float(s) for s in layer.scale[-spatial:])
        return dict(image=image, spacing=spacing, axes=axes, **values_of(self))

    def run(self, _value=None) -> None:
        """Check the choices and start the measurement in the background."""
        if self.busy:
            return
        try:
            args = self.arguments()
            steps = sigma_map_from_beads_steps(**args)  # every argument checked here
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        source = self.image.value
        settings = {k: (list(v) if isinstance(v, tuple) else v)
                    for k, v in args.items() if k != "image"}  # fmt: skip

        def work():
            return (yield from throttled(steps))

        self._start(work, 0, lambda fit: self._done(fit, source, settings),
                    desc="VarBlur beads", progress=progress_text,
                    starting="finding beads...")  # fmt: skip

    def _done(self, fit: BeadFit, source: Image, settings: dict) -> None:
        self.last_fit = fit
        publish_beads(fit, self._viewer, source, settings)
        summary = fit.summary
        self.status.value = f"done: {fit}"
        self.status.tooltip = (
            f"{fit}\nnoise {summary['noise']:.3g}, gain {summary['gain']:.3g}; FWHM in the "
            f"layer's units (its scale), sigmas in pixels\n{STATUS_TIP}"
        )


def progress_text(step: Progress) -> str:
    """The status line of a report: ``"fitting beads, plane 1/1: 64/120"``."""
    if step.stage == "field":
        return "fitting the field over the kept beads..."
    return f"{step.stage}: {step.done}/{step.total}"


def bead_data(layer: object) -> np.ndarray:
    """A single-channel, single-scale Image layer's data as a NumPy array."""
    if layer is None:
        raise ValueError("image: add or choose an Image layer of beads")
    if not isinstance(layer, Image):
        raise TypeError(f"image: {getattr(layer, 'name', layer)!r} is not an Image layer")
    if layer.multiscale:
        raise ValueError(f"image: {layer.name!r} is multiscale; choose a single-scale layer")
    if layer.rgb:
        raise ValueError(
            f"image: {layer.name!r} is an RGB layer; measure one channel at a time (split "
            "the colours into layers first)"
        )
    return np.asarray(layer.data)


def bead_points(fit: BeadFit, ndim: int) -> np.ndarray:
    """The beads' centres, ``(beads, ndim)``, in the image's data coordinates: the
    table's ``z``/``y``/``x`` columns on the fitted axes, ``plane`` on a stack axis."""
    table = fit.beads
    points = np.zeros((table.rows, ndim))
    for axis, name in zip(fit.axes, fit.names):
        points[:, axis] = table[name]
    for axis in (a for a in range(ndim) if a not in fit.axes):
        points[:, axis] = table["plane"]
    return points


def status_colors(status: np.ndarray) -> np.ndarray:
    """One RGBA row per bead, by its status."""
    return np.array([STATUS_COLORS.get(str(s), OTHER_COLOR) for s in status]).reshape(-1, 4)


def publish_beads(
    fit: BeadFit, viewer: napari.Viewer, source: Image, settings: dict[str, Any]
) -> dict[str, Layer]:
    """Add the measurement's layers to ``viewer`` (the beads and the map), or update
    those an earlier run made from ``source``; returns them by role.  Without a viewer
    the layers are only made."""
    made = _Made(fit, viewer, source, settings)
    made.points()
    made.sigma_map()
    return made.out


class _Made:
    """The layers one measurement publishes, by role, tagged with its metadata."""

    def __init__(self, fit: BeadFit, viewer, source: Image, settings: dict) -> None:
        self.fit, self.viewer, self.source, self.settings = fit, viewer, source, settings
        self.source_id = layer_id(source)
        self.out: dict[str, Layer] = {}

    def meta(self, role: str) -> dict[str, Any]:
        info = {"role": role, "kind": BEADS_KIND, "source_layer": self.source.name,
                "source_id": self.source_id, "parameters": dict(self.settings),
                "summary": self.fit.summary, "version": __version__}  # fmt: skip
        if role in (SIGMA_MAP_ROLE, PER_AXIS_ROLE):
            info["units"] = PIXELS
        return {METADATA_KEY: info}

    def upsert(self, cls, role: str, data, name: str, settings: dict, **options) -> Layer:
        self.out[role] = upsert(self.viewer, cls, role, self.source_id, data,
                                f"{self.source.name} {name}", self.meta(role), settings,
                                kind=BEADS_KIND, keep_name=True, **options)  # fmt: skip
        return self.out[role]

    def points(self) -> None:
        """One point per candidate, its border by status, the table as its features;
        the points' size a few FWHMs of the typical kept bead (pixels, across)."""
        fit, ndim = self.fit, self.source.ndim
        across = fit.summary["sigma"].get(fit.names[-1], 1.0)
        size = max(4.0, 3.0 * FWHM * across) if np.isfinite(across) else 6.0
        display = {
            "features": fit.beads.to_pandas(),  # before the colours: one row per point
            "face_color": "transparent",
            "border_color": status_colors(fit.beads["status"]),
            "border_width": 0.15,
            "size": size,
        }
        self.upsert(Points, POINTS_ROLE, bead_points(fit, ndim), "beads",
                    {**placement(self.source), **display}, ndim=ndim)  # fmt: skip

    def sigma_map(self) -> None:
        """The map the blur widget takes, or one plane per axis first (napari shows the
        last axes); an earlier map of the other form is re-tagged superseded."""
        values, source = self.fit.sigma_map, self.source
        high = float(np.nanmax(values)) if values.size else 1.0
        display = {"colormap": "viridis", "contrast_limits": (0.0, high if high > 0 else 1.0)}
        role, other, name, place = SIGMA_MAP_ROLE, PER_AXIS_ROLE, "bead sigma map", None
        if values.ndim != source.ndim:
            values = np.moveaxis(values, -1, 0)
            role, other, name = PER_AXIS_ROLE, SIGMA_MAP_ROLE, "bead sigma map per axis"
            place = {"scale": (1.0, *source.scale), "translate": (0.0, *source.translate)}
        if self.viewer is not None:
            _retag(self.viewer, self.source_id, other, other + SUPERSEDED)
            if find_tagged(self.viewer, self.source_id, role, BEADS_KIND) is None:
                _retag(self.viewer, self.source_id, role + SUPERSEDED, role)  # not duplicated
        self.upsert(Image, role, values, name, {**(place or placement(source)), **display})


def _retag(viewer, source_id: str, role: str, new: str) -> Layer | None:
    """Give the layer an earlier run made for (source, ``role``) the role ``new``;
    returns it (None if there is none)."""
    layer = find_tagged(viewer, source_id, role, BEADS_KIND)
    if layer is not None:
        info = {**layer.metadata[METADATA_KEY], "role": new}
        layer.metadata = {**layer.metadata, METADATA_KEY: info}
    return layer
