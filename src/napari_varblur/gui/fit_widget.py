"""The "Estimate sigma map" dock widget: a thin magicgui adapter over :mod:`..fit`.

It fits the sigma map that blurs a sharp Image layer into a blurred one
(:func:`napari_varblur.fit_sigma_map_steps`), in napari's ``thread_worker`` with a
progress bar and Cancel.  The arguments are checked on the GUI thread first, so a bad
choice is shown at once and starts nothing.

Its layers are tagged in their metadata with the blurred layer's id, so a re-run updates
them in place and never touches a layer it did not make:

* ``"<blurred> sigma map"``: the fit's ``model_map`` (finite everywhere), tagged
  ``role: sigma-map`` so that the blur widget preselects it; not added when no pixel is
  observable (the images are then not a blur pair at these settings), and an earlier
  fit's map is then re-tagged ``sigma-map-superseded`` (kept, no longer preselected; a
  later fit that observes something takes it back and updates it);
* ``"<blurred> fit residual"``: blurred minus the model (NaN at invalid pixels);
* ``"<blurred> not observable"``: a Labels layer, 1 where the blur is not observable
  (added only when some pixel is not).

With "one map per axis", the map gets a leading axis (one plane per blurred axis) and
the role ``sigma-map-per-axis``: the blur widget does not take per-axis map layers.

What can make a result wrong reaches the user as a napari notification, a status line
and a log record: the two layers sitting differently in the world (warned before the
run, which still runs: the arrays are compared pixel for pixel), the library's own
warnings (caught in the worker, shown once each on the GUI thread) and a fit that
observed no pixel.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import Container
from napari.layers import Image, Labels, Layer
from napari.utils.notifications import show_warning

from .._version import __version__
from ..adapters.request import marked_pixels
from ..core.params import FIT_PARAMS
from ..fit import SigmaFit, fit_sigma_map_steps
from .forms import (
    STATUS_TIP,
    Field,
    Scrolling,
    Threaded,
    advanced_of,
    axes_picker,
    build,
    declared,
    fold,
    layer_picker,
    mask_picker,
    shorten,
    values_of,
)
from .layer_data import blurred_axes
from .layers import DIFFERENCE_COLORMAP
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
FIT_KIND = "fit"
#: Roles of the layers besides the (isotropic) sigma map.
RESIDUAL_ROLE = "fit-residual"
NOT_OBSERVABLE_ROLE = "fit-not-observable"
#: Added to an earlier map's role when a later fit of its pair observed no pixel.
SUPERSEDED = "-superseded"
#: Why a fit that observed no pixel adds no sigma map.
NOTHING_OBSERVABLE = (
    "no pixel is observable: the blurred image is not a blur of the sharp one at these "
    "settings (check gain/offset, max sigma, the pair's order)"
)
#: The most lines the status shows besides the summary (all are in its tooltip).
STATUS_LINES = 2

logger = logging.getLogger(__name__)


#: The fit form's fields, in order; the declared parameters' fields come from their
#: declarations (:data:`~napari_varblur.core.params.FIT_PARAMS`).
FIT_FIELDS: tuple[Field, ...] = (
    ("sharp", layer_picker(Image, "sharp"),
     "the sharper image of the scene (e.g. in focus); it is left unchanged"),
    ("blurred", layer_picker(Image, "blurred"),
     "the blurrier image of the same scene, same shape and aligned pixel for pixel; the "
     "results are named after it"),
    ("mask", mask_picker,
     "optional Labels or Image layer of the images' shape (or of the fitted axes'); only its "
     "non-zero pixels are used in the fit"),
    declared("max_sigma", FIT_PARAMS),
    ("axes", axes_picker,
     "which axes are blurred: each 2-D plane (all planes share one map), whole 3-D volumes, "
     "or every axis"),
    *(declared(name, FIT_PARAMS)
      for name in ("spacing", "smoothness", "mode", "nan_policy", "max_steps", "per_axis")),
)  # fmt: skip
#: The fields folded under "Advanced" (rarely changed), in the order they show there.
FIT_ADVANCED = advanced_of(FIT_FIELDS, FIT_PARAMS)


class FitWidget(Scrolling, Threaded, Container):
    """Estimate the sigma map that blurs a sharp image layer into a blurred one."""

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        self._worker = None
        self.last_fit: SigmaFit | None = None
        #: The last run's warnings: the layers' placement, then the library's.
        self.last_warnings: list[str] = []
        fields = fold(self, build(self, FIT_FIELDS), FIT_ADVANCED)
        self._assemble(fields, "Estimate", "the fit")

    # -- choices
    def reset_choices(self, *args: Any) -> None:
        """Refresh the layer choices; when both images are the same layer (as when the
        widget opens), take the next Image layer of the same shape as the blurred one."""
        super().reset_choices(*args)
        sharp = self.sharp.value
        if self._viewer is None or sharp is None or self.blurred.value is not sharp:
            return
        layers = list(self._viewer.layers)
        after = layers[layers.index(sharp) + 1 :] if sharp in layers else []
        for layer in after:
            if (
                isinstance(layer, Image)
                and not layer.multiscale
                and layer.data.shape == sharp.data.shape
                and METADATA_KEY not in layer.metadata
            ):
                self.blurred.value = layer
                return

    # -- the run
    def arguments(self) -> dict[str, Any]:
        """The library's arguments for the current choices (not yet checked by it).
        Raises ValueError/TypeError with the reason."""
        sharp = _image_data(self.sharp.value, "sharp")
        blurred = _image_data(self.blurred.value, "blurred")
        axes = blurred_axes(self.blurred.value, self.axes.value)
        mask = None
        layer = self.mask.value
        if layer is not None:
            if layer.multiscale:
                raise ValueError(f"mask {layer.name!r}: multiscale layers are not supported")
            mask = marked_pixels(np.asarray(layer.data), blurred.shape, axes,
                                 f"mask {layer.name!r}")  # fmt: skip
        # The declared fields by name (fit_sigma_map_steps checks them), and the axes.
        return dict(sharp=sharp, blurred=blurred, mask=mask, axes=axes, **values_of(self))

    def run(self, _value=None) -> None:
        """Check the choices and start the fit in the background; a bad choice is shown
        as an error and starts nothing."""
        if self.busy:
            return
        try:
            args = self.arguments()
            # Checks every argument now, on this thread; the fit runs in the worker.
            steps = fit_sigma_map_steps(**args)
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        sharp, blurred = self.sharp.value, self.blurred.value
        settings = {
            k: (list(v) if isinstance(v, tuple) else v)
            for k, v in args.items()
            if k not in ("sharp", "blurred", "mask")
        }
        settings["mask"] = self.mask.value.name if self.mask.value is not None else None
        # Warned, not refused: the arrays have the same shape, and the user may know best.
        notes = [note for note in [placement_mismatch(sharp, blurred)] if note]
        for note in notes:
            warn_user(note)
        self._start_fit(
            steps,
            args["max_steps"],
            lambda outcome: self._done(outcome, sharp, blurred, settings, notes),
        )

    def _start_fit(self, steps, total: int, on_done) -> None:
        def work():
            # Recorded here and shown by _done on the GUI thread; Python's warning state
            # is process-wide, so this is the worker's whole run (as napari's own is).
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")  # every run reports its own, repeats too
                fit = yield from steps  # passes the fit's (step, loss) on
            return fit, distinct_messages(caught)

        def progress(out: tuple[int, float]) -> str:
            return f"step {out[0]}/{total}, loss {out[1]:.4g}"

        self._start(work, total, on_done, desc="VarBlur fit", progress=progress,
                    starting="starting (the first step compiles the model)...")  # fmt: skip

    # -- the result
    def _done(
        self, outcome: tuple[SigmaFit, list[str]], sharp: Image, blurred: Image,
        settings: dict, notes: list[str],
    ) -> None:  # fmt: skip
        fit, caught = outcome
        self.last_fit = fit
        self.last_warnings = [*notes, *caught]
        for message in caught:  # the notes were shown before the run
            warn_user(message)
        made = publish_fit(fit, self._viewer, sharp, blurred, settings)
        lines = [summary(fit)]
        if nothing_observable(fit):
            lines.append(_no_map_reason(made))
            warn_user(lines[-1])
        self._show(lines + [f"warning: {message}" for message in self.last_warnings])

    def _show(self, lines: list[str]) -> None:
        """The summary and the first few further lines in the status, shortened; every
        line in full in its tooltip."""
        shown = [lines[0], *(shorten(line) for line in lines[1 : 1 + STATUS_LINES])]
        if len(lines) > 1 + STATUS_LINES:
            shown.append(f"and {len(lines) - 1 - STATUS_LINES} more (hover for all)")
        self.status.value = "\n".join(shown)
        self.status.tooltip = "\n".join(lines) if len(lines) > 1 else STATUS_TIP


def summary(fit: SigmaFit) -> str:
    """The status line of a finished fit: steps, time, noise and how much is observable."""
    state = "converged" if fit.converged else "stopped at max steps (not converged)"
    hidden = _not_observable(fit)
    share = percent_of(hidden.size - int(np.count_nonzero(hidden)), hidden.size)
    return (
        f"done: {fit.steps} steps, {state}, {fit.seconds:.1f} s; noise {fit.noise:.3g}; "
        f"{share} of pixels observable"
    )


def percent_of(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage that reads 0% or 100% only when it is: one
    decimal where a whole number would round there, then "<0.1%" or ">99.9%"."""
    if part <= 0 or whole <= 0:
        return "0%"
    if part >= whole:
        return "100%"
    for digits in (0, 1):
        text = f"{100 * part / whole:.{digits}f}"
        if 0 < float(text) < 100:
            return f"{text}%"
    return "<0.1%" if 2 * part < whole else ">99.9%"


def nothing_observable(fit: SigmaFit) -> bool:
    """Whether the fit observed no pixel (along no axis): its map is no measurement."""
    return not np.any(fit.observable)


def _no_map_reason(made: dict[str, Layer]) -> str:
    reason = f"no sigma map added: {NOTHING_OBSERVABLE}; the residual shows the misfit"
    earlier = [made[role + SUPERSEDED] for role in (SIGMA_MAP_ROLE, PER_AXIS_ROLE)
               if role + SUPERSEDED in made]  # fmt: skip
    if earlier:
        reason += f"; {earlier[0].name!r} is an earlier fit's, no longer marked current"
    return reason


def warn_user(message: str) -> None:
    """A warning as a napari notification (on the GUI thread) and a log record."""
    show_warning(f"VarBlur fit: {message}")
    logger.warning(message)


def distinct_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    """The caught warnings' messages, each once and in order; deprecations (notes to
    developers about some library, not about this fit) left out."""
    messages: list[str] = []
    for record in caught:
        text = str(record.message)
        deprecation = issubclass(record.category, (DeprecationWarning, PendingDeprecationWarning))
        if not deprecation and text not in messages:
            messages.append(text)
    return messages


def placement_mismatch(sharp: Layer, blurred: Layer) -> str | None:
    """Why the fit may pair the wrong pixels: the two layers sit differently in the
    world (the fit pairs pixels by index); None when they sit alike."""
    a, b = placement(sharp), placement(blurred)
    differ = [key for key in a if not _same_transform(a[key], b[key])]
    if not differ:
        return None
    shown = ", ".join(
        f"{key} {_numbers(a[key])} vs {_numbers(b[key])}" if key in ("scale", "translate") else key
        for key in differ
    )
    return (
        f"sharp {sharp.name!r} and blurred {blurred.name!r} differ in {shown}: the fit "
        "pairs their pixels by index, as if they lined up; check that they show the same place"
    )


def _same_transform(a: Any, b: Any) -> bool:
    a, b = (np.asarray(getattr(v, "affine_matrix", v), dtype=float) for v in (a, b))
    return a.shape == b.shape and bool(np.allclose(a, b))


def _numbers(values: Any) -> str:
    return "(" + ", ".join(f"{float(v):g}" for v in np.ravel(values)) + ")"


def publish_fit(
    fit: SigmaFit,
    viewer: napari.Viewer,
    sharp: Layer,
    blurred: Layer,
    settings: dict[str, Any],
) -> dict[str, Layer]:
    """Add the fit's layers to ``viewer``, or update those an earlier fit of ``blurred``
    made; returns them by role.  A stale "not observable" layer is removed when every
    pixel is observable now.  When no pixel is observable, no map is added and an
    earlier fit's map is re-tagged superseded (returned under that role)."""
    made = _Made(fit, viewer, sharp, blurred, settings)
    made.residual()
    made.sigma_map()
    made.not_observable()
    return made.out


class _Made:
    """The layers one fit publishes, by role, tagged with its metadata."""

    def __init__(self, fit, viewer, sharp, blurred, settings) -> None:
        self.fit, self.viewer, self.sharp, self.blurred = fit, viewer, sharp, blurred
        self.settings = settings
        self.source_id = layer_id(blurred)
        self.transforms = placement(blurred)
        self.out: dict[str, Layer] = {}

    def meta(self, role: str) -> dict[str, Any]:
        fit = self.fit
        info = {
            "role": role,
            "kind": FIT_KIND,
            "source_layer": self.blurred.name,
            "source_id": self.source_id,
            "sharp_layer": self.sharp.name,
            "parameters": dict(self.settings),
            "steps": fit.steps,
            "converged": bool(fit.converged),
            "noise": fit.noise,
            "seconds": round(fit.seconds, 6),
            "version": __version__,
        }
        if role in (SIGMA_MAP_ROLE, PER_AXIS_ROLE):
            info["units"] = PIXELS
        return {METADATA_KEY: info}

    def upsert(self, cls, role: str, data, name: str, settings: dict) -> Layer:
        self.out[role] = upsert(self.viewer, cls, role, self.source_id, data,
                                f"{self.blurred.name} {name}", self.meta(role), settings,
                                kind=FIT_KIND, keep_name=True)  # fmt: skip
        return self.out[role]

    def residual(self) -> None:
        residual = self.fit.residual
        limit = float(np.nanmax(np.abs(residual), initial=0.0))
        limit = limit if np.isfinite(limit) and limit > 0 else 1.0  # napari needs low < high
        display = {"colormap": DIFFERENCE_COLORMAP, "contrast_limits": (-limit, limit)}
        self.upsert(Image, RESIDUAL_ROLE, residual, "fit residual", {**self.transforms, **display})

    def sigma_map(self) -> None:
        """The map the blur widget takes, or one plane per blurred axis first (napari
        shows the last axes); nothing observable: no map, an earlier one superseded."""
        values, blurred = self.fit.model_map, self.blurred
        high = float(np.max(values)) if values.size else 1.0
        display = {"colormap": "viridis", "contrast_limits": (0.0, high if high > 0 else 1.0)}
        role, name, place = SIGMA_MAP_ROLE, "sigma map", self.transforms
        if values.ndim != self.fit.residual.ndim:
            values = np.moveaxis(values, -1, 0)
            role, name = PER_AXIS_ROLE, "sigma map per axis"
            place = {"scale": (1.0, *blurred.scale), "translate": (0.0, *blurred.translate)}
        viewer, source_id = self.viewer, self.source_id
        if nothing_observable(self.fit):  # not a measurement: nothing to offer the blur
            earlier = _retag(viewer, source_id, role, role + SUPERSEDED)
            if earlier is not None:
                self.out[role + SUPERSEDED] = earlier
            return
        if viewer is not None and find_tagged(viewer, source_id, role, FIT_KIND) is None:
            _retag(viewer, source_id, role + SUPERSEDED, role)  # updated, not duplicated
        self.upsert(Image, role, values, name, {**place, **display})

    def not_observable(self) -> None:
        hidden = _not_observable(self.fit)
        if hidden.any():
            self.upsert(Labels, NOT_OBSERVABLE_ROLE, hidden.astype(np.uint8), "not observable",
                        self.transforms)  # fmt: skip
            return
        stale = find_tagged(self.viewer, self.source_id, NOT_OBSERVABLE_ROLE, kind=FIT_KIND)
        if stale is not None:
            self.viewer.layers.remove(stale)


def _retag(viewer: napari.Viewer | None, source_id: str, role: str, new: str) -> Layer | None:
    """Give the layer an earlier fit made for (source, ``role``) the role ``new``;
    returns it (None if there is none)."""
    layer = None if viewer is None else find_tagged(viewer, source_id, role, FIT_KIND)
    if layer is not None:
        info = {**layer.metadata[METADATA_KEY], "role": new}
        layer.metadata = {**layer.metadata, METADATA_KEY: info}
    return layer


def _not_observable(fit: SigmaFit) -> np.ndarray:
    """True where the blur is not observable, in the images' shape (a per-axis fit:
    where it is not observable along some axis)."""
    hidden = ~np.asarray(fit.observable, dtype=bool)
    if hidden.ndim > fit.residual.ndim:
        hidden = hidden.any(axis=-1)
    return hidden


def _image_data(layer: object, what: str) -> np.ndarray:
    """A single-channel, single-scale Image layer's data as a NumPy array."""
    if layer is None:
        raise ValueError(f"{what}: add or choose an Image layer")
    if not isinstance(layer, Image):
        raise TypeError(f"{what}: {getattr(layer, 'name', layer)!r} is not an Image layer")
    if layer.multiscale:
        raise ValueError(f"{what}: {layer.name!r} is multiscale; choose a single-scale layer")
    if layer.rgb:
        raise ValueError(
            f"{what}: {layer.name!r} is an RGB layer; fit one channel at a time (split the "
            "colours into layers first)"
        )
    return np.asarray(layer.data)
