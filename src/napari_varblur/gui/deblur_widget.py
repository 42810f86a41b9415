"""The "Deblur" dock widget: a thin magicgui adapter over :mod:`..restore`.

It undoes the blur an Image layer shows (a global sigma, or a sigma-map layer times
sigma) with Richardson-Lucy or RL-TV, in napari's ``thread_worker``: progress per
iteration (at most five reports a second), Cancel between iterations, and the estimate
shown as it improves.  The arguments are checked on the GUI thread first, so a bad
choice starts nothing.

Its layers are tagged with the image's id, so a re-run updates them in place and never
touches a layer it did not make: ``"<image> deblurred"`` (the estimate) and
``"<image> deblur residual"`` (observed minus the re-blurred estimate), both placed
like the image, with the settings in their metadata.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import Container
from napari.layers import Image

from .._version import __version__
from ..adapters.numpy_api import gaussian_blur
from ..core.params import DEBLUR_PARAMS
from ..restore.deblur import deblur_steps
from .forms import (
    REPORT_EVERY_S,
    Field,
    Scrolling,
    Threaded,
    advanced_of,
    build,
    declared,
    fold,
    layer_picker,
)
from .forms import values_of as _values_of
from .layers import DIFFERENCE_COLORMAP, SIGMA
from .schema import METADATA_KEY, layer_id, placement, upsert

if TYPE_CHECKING:
    import napari

DEBLUR_KIND = "deblur"
ESTIMATE_ROLE, RESIDUAL_ROLE = "deblurred", "deblur-residual"

DEBLUR_FIELDS: tuple[Field, ...] = (
    ("image", layer_picker(Image, "image"), "the observed (blurred) image; left unchanged"),
    ("sigma_map", layer_picker(Image | None, "sigma map"),
     "optional per-pixel sigma (pixels) of the image's shape; sigma multiplies it"),
    declared("sigma", value=SIGMA),
    *(declared(name, DEBLUR_PARAMS)
      for name in ("method", "iterations", "regularization", "model", "mode")),
    declared("backend", DEBLUR_PARAMS, kind="choice", label="backend", advanced=True),
    *(declared(name, DEBLUR_PARAMS) for name in ("precision", "acceleration")),
)  # fmt: skip
DEBLUR_ADVANCED = advanced_of(DEBLUR_FIELDS, DEBLUR_PARAMS)


class DeblurWidget(Scrolling, Threaded, Container):
    """Deblur an Image layer with a global sigma or a sigma-map layer."""

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        self._worker = None
        self.last_estimate: np.ndarray | None = None
        fields = fold(self, build(self, DEBLUR_FIELDS), DEBLUR_ADVANCED)
        self._assemble(fields, "Deblur", "the deblur")

    def arguments(self) -> dict[str, Any]:
        """``deblur``'s arguments for the current choices (checked by it, not here)."""
        layer = self.image.value
        if not isinstance(layer, Image) or layer.multiscale or layer.rgb:
            raise ValueError("image: choose a single-scale, single-channel Image layer")
        values = _values_of(self)
        sigma = values.pop("sigma")
        if self.sigma_map.value is not None:
            if np.ndim(sigma):
                raise ValueError("sigma: one number multiplies a sigma map")
            sigma = float(sigma) * np.asarray(self.sigma_map.value.data, dtype=np.float64)
        if values["method"] != "rl_tv":
            values.pop("regularization")  # only RL-TV has one: the field's value is ignored
        elif values["regularization"] is None:
            values["regularization"] = 0.0
        return dict(image=np.asarray(layer.data), sigma=sigma, **values)

    def run(self, _value=None) -> None:
        """Check the choices and start the deblur in the background."""
        if self.busy:
            return
        try:
            args = self.arguments()
            steps = deblur_steps(**args)  # every argument checked here, on this thread
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        source, total = self.image.value, int(args["iterations"])
        settings = {k: v for k, v in args.items() if k not in ("image", "sigma")}
        settings["sigma_map"] = getattr(self.sigma_map.value, "name", None)
        latest: dict[str, Any] = {}

        def work():
            reported = time.monotonic()
            for k, x in steps:
                latest.update(k=k, x=x)
                if time.monotonic() - reported >= REPORT_EVERY_S:
                    reported = time.monotonic()
                    yield k, x.copy()
            return latest.get("x")

        def progress(report: tuple[int, np.ndarray]) -> str:
            k, x = report
            self._publish_estimate(source, x, settings, k)
            return f"iteration {k}/{total}"

        self._start(work, total, lambda x: self._done(x, source, args, settings, latest),
                    desc="VarBlur deblur", progress=progress)  # fmt: skip

    def _meta(self, source: Image, role: str, settings: dict, k: int) -> dict:
        info = {"role": role, "kind": DEBLUR_KIND, "source_layer": source.name,
                "source_id": layer_id(source), "parameters": dict(settings), "iterations": k,
                "version": __version__}  # fmt: skip
        return {METADATA_KEY: info}

    def _publish_estimate(self, source: Image, x: np.ndarray, settings: dict, k: int):
        return upsert(self._viewer, Image, ESTIMATE_ROLE, layer_id(source), x,
                      f"{source.name} deblurred", self._meta(source, ESTIMATE_ROLE, settings, k),
                      {**placement(source), "colormap": source.colormap.name},
                      kind=DEBLUR_KIND, keep_name=True)  # fmt: skip

    def _done(self, x, source: Image, args: dict, settings: dict, latest: dict) -> None:
        if x is None:
            return
        k = latest["k"]
        self.last_estimate = np.asarray(x).copy()
        self._publish_estimate(source, self.last_estimate, settings, k)
        blur = {key: args[key] for key in ("mode", "backend", "precision", "model")}
        residual = np.asarray(args["image"], np.float64) - gaussian_blur(
            self.last_estimate, args["sigma"], **blur
        )
        limit = float(np.nanmax(np.abs(residual), initial=0.0)) or 1.0
        display = {"colormap": DIFFERENCE_COLORMAP, "contrast_limits": (-limit, limit)}
        upsert(self._viewer, Image, RESIDUAL_ROLE, layer_id(source), residual,
               f"{source.name} deblur residual", self._meta(source, RESIDUAL_ROLE, settings, k),
               {**placement(source), **display}, kind=DEBLUR_KIND, keep_name=True)  # fmt: skip
        self.status.value = f"done: {k} iterations ({args['method']})"
