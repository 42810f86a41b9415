"""The plugin's dock widgets: thin magicgui adapters over :mod:`.layers`.

Work runs off the GUI thread in napari's ``thread_worker`` (progress in the activity
dock, cancellable between pieces); bad choices become a napari notification and leave
every layer as it was.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from magicgui.widgets import CheckBox, ComboBox, Container, Label
from napari.layers import Image
from napari.utils.notifications import show_info

from .. import engine
from ..core.options import BlurOptions
from ..core.params import DEFAULT, help_of
from ..core.steps import map_steps
from ..engine import compiling, planner, warmup
from .forms import (
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
    plain,
    values_of,
    wrapping,
)
from .layer_data import blurred_axes, default_level, level_choices
from .layers import SIGMA, LayerBlur, difference_stats, publish
from .schema import fitting_sigma_map, is_sigma_map, map_fits, map_in_pixels

if TYPE_CHECKING:
    import napari


def backend_choices() -> list[tuple[str, str]]:
    """(label, name) pairs; labels show the device each backend would use."""
    status = engine.available_backends()
    choices = [(f"auto {status['auto']}", "auto")]
    for name in ("jax", "numba", "reference"):
        if status[name].startswith("unavailable"):
            continue
        choices.append((f"{name} ({engine.device_name(name)})", name))
    return choices


#: The level chooser's tooltip (it shows for multiscale layers only).
LEVEL_TIP = (
    "the level of a multiscale image to blur (its size as a float32 result); first the "
    "finest that fits in memory. The result is placed at that level's scale"
)
#: Why sigma in world units is off for a map made in pixels (its tooltip says).
IN_PIXELS_TIP = (
    "off: the sigma map {name!r} is already in pixels (world units were converted when "
    "it was made); dividing by the scale again would blur too little"
)

#: What ``auto`` also does here (added to the backend's one-line help).
AUTO_TIP = "; here auto also runs a click on JAX while Numba compiles its first kernels"

#: The blur form's fields, in order (the widgets' own fields go before ``mode``); the
#: declared parameters' fields come from their declarations (:mod:`..core.params`).
BLUR_FIELDS: tuple[Field, ...] = (
    ("image", layer_picker(Image, "image"), "image"),
    ("level", plain(ComboBox, choices=[], label="level", visible=False), LEVEL_TIP),
    ("sigma_map", layer_picker(Image | None, "sigma map"), "sigma_map"),
    declared("sigma", value=SIGMA),
    declared("world_units"),
    ("axes", axes_picker, "axes"),
    ("mask", mask_picker, "mask"),
    declared("mode"),
    declared("cval"),
    declared("truncate"),
    declared("precision"),
    declared("tolerance", name="accuracy"),
    declared("nan_policy"),
    declared("mask_marks"),
    declared("model"),
)
#: The fields folded under "Advanced" (rarely changed), in the order they show there.
BLUR_ADVANCED = advanced_of(BLUR_FIELDS)


class _BlurForm(Scrolling, Threaded, Container):
    """The inputs shared by both widgets, and the threaded run around them."""

    run_text = "Run"

    def __init__(self, viewer: napari.viewer.Viewer, extra: list[Any]) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        self._worker = None
        self._known_maps: set[int] = set()  # ids of the tagged sigma maps seen so far
        warmup.start_warm_up()  # compiles the common kernels before the first click
        fields = build(self, BLUR_FIELDS)
        at = [Field(*f).name for f in BLUR_FIELDS].index("mode")  # extras before the advanced
        fields = fold(self, fields[:at] + extra + fields[at:], BLUR_ADVANCED)
        self._assemble(fields, self.run_text, "the job")
        self.image.changed.connect(lambda _value: self._image_changed())
        self.sigma_map.changed.connect(lambda _value: self._map_changed())
        self.axes.changed.connect(lambda _value: self._preselect_map(image_changed=True))
        self._image_changed()

    def _image_changed(self) -> None:
        self._show_levels()
        self._preselect_map(image_changed=True)

    def _show_levels(self) -> None:
        """The level chooser shows for a multiscale image only, set to the finest level
        that fits in memory."""
        image = self.image.value
        multiscale = image is not None and image.multiscale
        self.level.choices = level_choices(image) if multiscale else []  # empty: None
        if multiscale:
            self.level.value = default_level(image, self.precision.value)
        self.level.visible = multiscale

    def _map_changed(self) -> None:
        """A map already in pixels turns sigma in world units off (and says why)."""
        current = self.sigma_map.value
        in_pixels = map_in_pixels(current)
        if in_pixels:
            self.world_units.value = False
        self.world_units.enabled = not in_pixels
        self.world_units.tooltip = (
            IN_PIXELS_TIP.format(name=current.name) if in_pixels else help_of("world_units")
        )

    def reset_choices(self, *args: Any) -> None:
        """Refresh the layer choices (napari calls this when layers come and go), then
        preselect a sigma map that was just added."""
        super().reset_choices(*args)
        self._preselect_map()

    def _preselect_map(self, image_changed: bool = False) -> None:
        """Choose a tagged sigma map (made by the sample or "Make sigma map") that fits
        the image, when the image changes or such a map appears.  A map the user chose
        that is not tagged is left alone."""
        if self._viewer is None:
            return
        layers = self._viewer.layers
        tagged = {id(layer) for layer in layers if is_sigma_map(layer)}
        new = tagged - self._known_maps
        self._known_maps = tagged
        if not (image_changed or new):
            return
        current, image = self.sigma_map.value, self.image.value
        if current is not None and not is_sigma_map(current):
            return
        naxes = self._naxes()
        if (current is not None and not new and image is not None
                and map_fits(current, image, naxes)):  # fmt: skip
            return
        self.sigma_map.value = fitting_sigma_map(layers, image, naxes)

    def _naxes(self) -> int | None:
        """How many axes the current choices blur (None if they do not fit the image)."""
        try:
            return len(blurred_axes(self.image.value, self.axes.value))
        except (ValueError, TypeError, AttributeError):
            return None

    # -- helpers for subclasses
    def request(self, backend: str) -> LayerBlur:
        """The blur the form describes, on ``backend``."""
        values = values_of(self)
        layer_args = {k: values.pop(k) for k in ("sigma", "world_units", "mask_marks")}
        options = BlurOptions(backend=backend, **values)
        return LayerBlur.from_layer(self.image.value, sigma_map=self.sigma_map.value,
                                    options=options, axes=self.axes.value, mask=self.mask.value,
                                    level=self.level.value, **layer_args)  # fmt: skip

    def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class BlurWidget(_BlurForm):
    """Gaussian blur of an image layer with a global sigma or a sigma-map layer."""

    run_text = "Blur"

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        self.backend = ComboBox(choices=backend_choices(), value=DEFAULT.backend, label="backend",
                                tooltip=help_of("backend") + AUTO_TIP)  # fmt: skip
        self.difference = CheckBox(
            value=False, text="add difference layer",
            tooltip="also add 'input minus result' as a layer below the result (hide the "
            "result to see it)",
        )  # fmt: skip
        super().__init__(viewer, [self.backend, self.difference])
        self.last_result = None
        self._interim_used = False

    def run(self) -> None:
        if self.busy:
            return
        try:
            request = self.request(self.backend.value)
            chosen = None if request.spec is None else planner.route(request.spec, interim=True)
            interim = chosen.name if chosen is not None and chosen.interim else None
            if interim is not None:  # Numba still compiles: this click runs elsewhere
                request = self.request(interim)
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        self._interim_used = interim is not None
        starting = "running..."
        if self._interim_used:
            where = {"jax": "JAX", "reference": "NumPy (reference)"}.get(interim, interim)
            starting = f"running on {where} while Numba compiles (first run only)..."
        elif request.options.backend in ("auto", "numba") and _waits(request, chosen):
            starting = "running (kernels still compiling in the background, first run only)..."
        self._start(request.run, len(request.batch_chunks), self._done, starting=starting)

    def _done(self, result) -> None:
        publish(result, self._viewer, difference=self.difference.value)
        self.last_result = result
        compiled = ", including compiling kernels (first run only)" if result.compiled else ""
        if self._interim_used:
            compiled = " (auto: Numba was still compiling its kernels, first run only)"
        self.status.value = (
            f"done in {result.seconds:.3f} s on {result.backend} ({result.device}){compiled}"
        )


class CompareWidget(_BlurForm):
    """Run one blur on two backends; add A's result and the difference A minus B."""

    run_text = "Compare"

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        choices = [c for c in backend_choices() if c[1] != "auto"]
        names = [name for _, name in choices]
        self.backend_a = ComboBox(
            choices=choices, value="jax" if "jax" in names else names[0], label="backend A",
            tooltip="the first engine; its result is added as a layer",
        )  # fmt: skip
        self.backend_b = ComboBox(
            choices=choices, value="numba" if "numba" in names else names[-1],
            label="backend B",
            tooltip="the second engine; the layer 'A minus B' shows where they differ",
        )  # fmt: skip
        self.report = wrapping(
            Label(
                value="", label="A vs B",
                tooltip="largest and RMS difference between the two results, and their times",
            )
        )  # fmt: skip
        super().__init__(viewer, [self.backend_a, self.backend_b])
        self.append(self.report)
        self.stats: dict[str, float] = {}

    def run(self) -> None:
        if self.busy:
            return
        try:
            first = self.request(self.backend_a.value)
            second = self.request(self.backend_b.value)
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return

        def work():
            results = []
            for request in (first, second):
                result = yield from _progress_of(request, len(results))
                results.append(result)
            a, b = results
            # The statistics compute (all of a lazy result): here, off the GUI thread, so
            # an error reaches worker.errored and the widget shows it.
            diff = a.data - b.data.astype(a.data.dtype)  # stays lazy for a lazy result
            start = time.perf_counter()
            stats = difference_stats(a.data, b.data)
            # A lazy result's blur runs here, for both backends at once.
            stats["seconds_compute"] = time.perf_counter() - start
            return a, b, diff, stats

        total = len(first.batch_chunks) * 2
        self._start(work, total, self._done)

    def _done(self, outcome) -> None:
        a, b, diff, stats = outcome
        self.stats = {**stats, "seconds_a": a.seconds, "seconds_b": b.seconds}
        publish(
            a,
            self._viewer,
            difference=True,
            role="compare",
            difference_data=diff,
            difference_name=f"{a.request.layer.name} {a.backend} minus {b.backend}",
            difference_limit=stats["max_abs_diff"],
        )
        s = self.stats
        if a.request.lazy:  # both were computed together by the statistics
            times = f"lazy: {a.backend} and {b.backend} computed in {s['seconds_compute']:.3f} s"
        else:
            times = f"{a.backend} {s['seconds_a']:.3f} s, {b.backend} {s['seconds_b']:.3f} s"
        self.report.value = f"max |A-B| {s['max_abs_diff']:.3g}, RMS {s['rms_diff']:.3g}; {times}"
        self.status.value = "done"
        show_info(f"VarBlur compare: {self.report.value}")


def _progress_of(request: LayerBlur, offset_pieces: int):
    """Drive ``request.run()``, re-yielding progress counted across several runs."""
    pieces = len(request.batch_chunks)
    return (yield from map_steps(request.run(), lambda done: offset_pieces * pieces + done))


def _waits(request: LayerBlur, chosen) -> bool:
    """Whether a warm-up still compiles the kernels of this click's route (any, where
    the request has no spec to route: a dask array)."""
    if request.spec is None or chosen is None:
        return compiling.busy()
    return compiling.busy(planner.warm_kind(request.spec, chosen))
