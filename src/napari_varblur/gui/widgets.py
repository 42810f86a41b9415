"""The plugin's dock widgets: thin magicgui adapters over :mod:`.layers`.

Work runs off the GUI thread in napari's ``thread_worker`` (progress in the activity
dock, cancellable between pieces); bad choices become a napari notification and leave
every layer as it was.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    FloatSpinBox,
    Label,
    LineEdit,
    PushButton,
    create_widget,
)
from napari.layers import Image, Labels
from napari.qt.threading import thread_worker
from napari.utils.notifications import show_error, show_info
from qtpy.QtWidgets import QComboBox, QSizePolicy

from .. import backends
from ..core.modes import MODE_ALIASES, MODE_NAMES
from ..core.spec import NAN_POLICIES
from .layers import (
    AXES_CHOICES,
    MASK_MARKS,
    LayerBlur,
    difference_stats,
    publish,
)
from .schema import fitting_sigma_map, is_sigma_map, map_fits

if TYPE_CHECKING:
    import napari


#: The accuracy choices: the exact contract, or a tolerance (fraction of the range).
ACCURACY = {"exact": None, "1e-3": 1e-3, "1e-4": 1e-4}

#: What the status line says when hovered (an error's full text replaces it).
STATUS_TIP = "what the last run did; errors also appear as a napari notification"
#: The most characters of an error the status line shows (a few wrapped lines; the dock
#: does not grow taller for a long error).  The full text is in its tooltip and in the
#: notification.
STATUS_CHARS = 100


def wrapping(label: Label) -> Label:
    """Let ``label`` wrap its text and never widen the dock: its width comes from the
    dock, not from its text (a long word is cut off; the full text is in the tooltip)."""
    native = label.native
    native.setWordWrap(True)
    native.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
    native.setMinimumWidth(0)
    return label


def shorten(text: str, limit: int = STATUS_CHARS) -> str:
    """``text``, or its first ``limit`` characters cut at a space and marked '…'."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip() + " … (hover for all)"


def parse_sigma(text: str) -> float | tuple[float, ...]:
    """``"2"`` -> 2.0, ``"1, 2.5"`` -> (1.0, 2.5); a clear error for anything else."""
    parts = [p for p in str(text).replace(";", ",").split(",") if p.strip()]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if not values:
        raise ValueError(
            f"sigma: could not read {text!r} as a number or as comma-separated numbers"
        )
    return values[0] if len(values) == 1 else tuple(values)


def backend_choices() -> list[tuple[str, str]]:
    """(label, name) pairs; labels show the device each backend would use."""
    status = backends.available_backends()
    choices = [(f"auto {status['auto']}", "auto")]
    for name in ("jax", "numba", "reference"):
        if status[name].startswith("unavailable"):
            continue
        choices.append((f"{name} ({backends.load(name).device_name()})", name))
    return choices


class Threaded:
    """The threaded run every dock widget shares: one worker at a time, progress in the
    activity dock and the status line, Cancel between pieces, errors shown (never
    raised into Qt's event loop).  Subclasses set ``_worker = None`` and have
    ``status``, ``run_button`` and ``cancel_button``."""

    _worker = None

    def _make_run_controls(self, text: str, what: str) -> None:
        """The run button, Cancel and the status line (to be added to the form)."""
        self.run_button = PushButton(text=text, tooltip=f"start {what}; it runs in the background")
        self.cancel_button = PushButton(
            text="Cancel", enabled=False, tooltip=f"stop {what}; no layer is changed"
        )
        self.status = wrapping(Label(value="", label="status", tooltip=STATUS_TIP))

    def fail(self, message: str) -> None:
        """Show an error: a napari notification with the full text, and a short status
        line that wraps and keeps the dock's size (its tooltip holds the full text)."""
        show_failure(self.status, message)

    @property
    def busy(self) -> bool:
        return self._worker is not None

    def cancel(self, _value=None) -> None:
        if self._worker is not None:
            self._worker.quit()
            self.status.value = "cancelling..."

    def _start(self, work, total: int, on_done, *, desc: str = "VarBlur", progress=None,
               starting: str = "running...") -> None:  # fmt: skip
        """Run ``work`` (a generator function) in napari's ``thread_worker``; each value
        it yields becomes the status ``progress(value)`` (default: "k/total done")."""
        progress = progress or (lambda done: f"{done}/{total} done")
        # The widget reports the worker's errors itself (ignore_errors: napari would
        # otherwise re-raise them into the Qt event loop, where no user sees them).
        worker = thread_worker(work, progress={"total": total, "desc": desc}, ignore_errors=True)()
        worker.yielded.connect(lambda value: setattr(self.status, "value", progress(value)))
        worker.returned.connect(lambda value: self._deliver(on_done, value))
        worker.errored.connect(lambda err: self.fail(str(err)))
        worker.aborted.connect(lambda: setattr(self.status, "value", "cancelled"))
        worker.finished.connect(self._finished)
        self._worker = worker
        self.run_button.enabled = False
        self.cancel_button.enabled = True
        self.status.value = starting
        self.status.tooltip = STATUS_TIP
        worker.start()

    def _deliver(self, on_done, value) -> None:
        """Run ``on_done`` on the GUI thread; an error there becomes a shown error
        (a Qt slot would only print it to the console)."""
        try:
            on_done(value)
        except Exception as err:  # any failure must reach the user, not the console
            self.fail(f"could not show the result: {err}")

    def _finished(self) -> None:
        self._worker = None
        self.run_button.enabled = True
        self.cancel_button.enabled = False


def compact_choices(container: Container) -> None:
    """Let the drop-downs shrink below their longest item (a long layer name)."""
    for field in container:
        if isinstance(field.native, QComboBox):
            field.native.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            field.native.setMinimumContentsLength(12)


def mask_field(choices, tooltip: str) -> ComboBox:
    """An optional mask layer: Labels or Image (magicgui has no widget for a union of
    layer types, hence a ComboBox over ``choices``)."""
    return ComboBox(choices=choices, nullable=True, value=None, label="mask", tooltip=tooltip)


def axes_field(tooltip: str) -> ComboBox:
    """Which axes are blurred (see ``AXES_CHOICES``): 2-D planes by default."""
    return ComboBox(choices=[(label, key) for key, label in AXES_CHOICES.items()], value="2d",
                    label="axes", tooltip=tooltip)  # fmt: skip


def mask_choices(viewer) -> list[tuple[str, Any]]:
    """The viewer's Labels and Image layers, as a mask field's choices."""
    layers = viewer.layers if viewer is not None else []
    return [(lyr.name, lyr) for lyr in layers if isinstance(lyr, (Labels, Image))]


def show_failure(status: Label, message: str) -> None:
    """A napari notification with the full text, and a short wrapping status line."""
    status.value = shorten(f"error: {message}")
    status.tooltip = f"error: {message}"
    show_error(f"VarBlur: {message}")


class _BlurForm(Threaded, Container):
    """The inputs shared by both widgets, and the threaded run around them."""

    run_text = "Run"

    def __init__(self, viewer: napari.viewer.Viewer, extra: list[Any]) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        self._worker = None
        self._known_maps: set[int] = set()  # ids of the tagged sigma maps seen so far
        self.image = create_widget(
            annotation=Image, label="image",
            options={"tooltip": "the image layer to blur; it is left unchanged"},
        )  # fmt: skip
        self.sigma_map = create_widget(
            annotation=Image | None, label="sigma map",
            options={"tooltip": "optional layer giving each pixel its own sigma (times the "
                     "sigma below); None blurs every pixel with the same sigma"},
        )  # fmt: skip
        self.mask = mask_field(
            self._mask_layers,
            "optional Labels or Image layer of the image's shape (or of the blurred axes'); "
            "its non-zero pixels are marked",
        )
        self.mask_marks = ComboBox(
            choices=[(label, key) for key, label in MASK_MARKS.items()], value="valid",
            label="mask marks",
            tooltip="valid: blur over the marked pixels only; invalid: leave the marked "
            "pixels out (they are filled from their valid neighbours)",
        )  # fmt: skip
        self.nan_policy = ComboBox(
            choices=list(NAN_POLICIES), value="propagate", label="NaN policy",
            tooltip="propagate: NaN and inf spread over their windows; omit: left out like "
            "masked pixels; raise: refuse an image with NaN or inf in valid pixels",
        )  # fmt: skip
        self.sigma = LineEdit(
            value="2.0", label="sigma (× map)",
            tooltip="blur width in pixels (one number, or one per axis: '1, 2'); with a "
            "sigma map, each pixel's map value is multiplied by it",
        )  # fmt: skip
        self.world_units = CheckBox(
            value=False, text="sigma in world units",
            tooltip="read sigma in the layer's units (its scale, e.g. µm) instead of pixels",
        )  # fmt: skip
        self.axes = axes_field(
            "which axes are blurred: each 2-D plane on its own, whole 3-D volumes, or every "
            "axis; the other axes (time, channels) are not blurred"
        )
        self.mode = ComboBox(
            choices=list(MODE_NAMES) + list(MODE_ALIASES), value="crop", label="mode",
            tooltip="what lies beyond the image edge: crop uses only pixels inside (no "
            "darkened border); reflect, mirror, nearest, wrap or constant (cval) pad it",
        )  # fmt: skip
        self.cval = FloatSpinBox(
            value=0.0, min=-1e12, max=1e12, label="cval",
            tooltip="the value assumed outside the image in 'constant' mode (ignored otherwise)",
        )  # fmt: skip
        self.truncate = FloatSpinBox(
            value=3.0, min=0.1, max=50.0, step=0.5, label="truncate",
            tooltip="how far the blur reaches, in sigmas (3: radius 3 × sigma); larger is a "
            "little more exact and slower",
        )  # fmt: skip
        self.precision = ComboBox(
            choices=["float32", "float64"], value="float32", label="precision",
            tooltip="number type of the computation and result: float32 is faster and "
            "smaller, float64 more exact",
        )  # fmt: skip
        self.accuracy = ComboBox(
            choices=list(ACCURACY), value="exact", label="accuracy",
            tooltip="sigma maps only: exact, or within 1e-3 / 1e-4 of the value range "
            "(mixes a few global blurs per pixel; much faster on smooth maps)",
        )  # fmt: skip
        self._make_run_controls(self.run_text, "the job")
        self.extend(
            [
                self.image,
                self.sigma_map,
                self.sigma,
                self.world_units,
                self.axes,
                self.mask,
                self.mask_marks,
                self.nan_policy,
                *extra,
                self.mode,
                self.cval,
                self.truncate,
                self.precision,
                self.accuracy,
                self.run_button,
                self.cancel_button,
                self.status,
            ]
        )
        compact_choices(self)  # a long layer name must not widen the dock
        self.run_button.changed.connect(self.run)
        self.cancel_button.changed.connect(self.cancel)
        self.image.changed.connect(lambda _value: self._preselect_map(image_changed=True))

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
        if current is not None and not new and image is not None and map_fits(current, image):
            return
        self.sigma_map.value = fitting_sigma_map(layers, image)

    def _mask_layers(self, _widget=None) -> list[tuple[str, Any]]:
        return mask_choices(self._viewer)

    # -- helpers for subclasses
    def request(self, backend: str) -> LayerBlur:
        return LayerBlur.from_layer(
            self.image.value,
            parse_sigma(self.sigma.value),
            self.sigma_map.value,
            world_units=self.world_units.value,
            axes=self.axes.value,
            mode=self.mode.value,
            cval=self.cval.value,
            truncate=self.truncate.value,
            backend=backend,
            precision=self.precision.value,
            tolerance=ACCURACY[self.accuracy.value],
            mask=self.mask.value,
            mask_marks=self.mask_marks.value,
            nan_policy=self.nan_policy.value,
        )

    def run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class BlurWidget(_BlurForm):
    """Gaussian blur of an image layer with a global sigma or a sigma-map layer."""

    run_text = "Blur"

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        self.backend = ComboBox(
            choices=backend_choices(), value="auto", label="backend",
            tooltip="the engine that computes the blur (and the device it uses); auto: JAX "
            "on a GPU, else Numba",
        )  # fmt: skip
        self.difference = CheckBox(
            value=False, text="add difference layer",
            tooltip="also add 'input minus result' as a layer below the result (hide the "
            "result to see it)",
        )  # fmt: skip
        super().__init__(viewer, [self.backend, self.difference])
        self.last_result = None

    def run(self) -> None:
        if self.busy:
            return
        try:
            request = self.request(self.backend.value)
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return
        self._start(request.run, len(request.batch_chunks), self._done)

    def _done(self, result) -> None:
        publish(result, self._viewer, difference=self.difference.value)
        self.last_result = result
        compiled = ", including compiling kernels (first run only)" if result.compiled else ""
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
    gen = request.run()
    while True:
        try:
            done = next(gen)
        except StopIteration as stop:
            return stop.value
        yield offset_pieces * pieces + done
