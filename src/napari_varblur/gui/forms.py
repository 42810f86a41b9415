"""What the four dock widgets share: forms built from tables of fields (each field's
tooltip is a parameter's one-line help from :mod:`napari_varblur.core.params`, or its own
text), the threaded run with progress and Cancel, the status line, and the number
parser their text fields use."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    FloatSpinBox,
    Label,
    LineEdit,
    PushButton,
    SpinBox,
    Widget,
    create_widget,
)
from napari.layers import Image, Labels
from napari.qt.threading import thread_worker
from napari.utils.notifications import show_error
from qtpy.QtCore import QEvent, QObject, Qt
from qtpy.QtWidgets import QComboBox, QScrollArea, QSizePolicy

from ..core.checks import ArgumentError
from ..core.params import PARAMS, Param, help_of
from .layer_data import AXES_CHOICES


class Field(NamedTuple):
    """A form's field: the attribute it is stored as, how to make it (given the form
    and its tooltip) and its tooltip (a parameter's name in ``core.params``, or the text
    itself); for a declared parameter (:func:`declared`) also its name and how the
    field's value becomes the argument."""

    name: str
    make: Callable[[Any, str], Widget]
    tip: str
    param: str | None = None
    parse: Callable[[Any], Any] | None = None


def build(form: Container, fields: Sequence[Field | tuple]) -> list[Widget]:
    """Make each field, store it on ``form`` under its name and return them in order;
    the declared ones are listed in ``form.declared`` (field name -> (parameter, parse))."""
    made = []
    form.declared = getattr(form, "declared", {})
    for entry in fields:
        field = Field(*entry)
        widget = field.make(form, help_of(field.tip) if field.tip in PARAMS else field.tip)
        setattr(form, field.name, widget)
        made.append(widget)
        if field.param is not None:
            form.declared[field.name] = (field.param, field.parse or (lambda value: value))
    return made


def declared(param: str, params: Mapping[str, Param] = PARAMS, *, name: str | None = None,
             **overrides: Any) -> Field:  # fmt: skip
    """The field of a declared parameter: the widget its hints describe (``kind``,
    ``label``, ``choices``, ``min``/``max``/``step``, ``text``; ``overrides`` win), its
    default, and its one-line help as the tooltip."""
    p = params[param]
    hints = {**(p.widget or {}), **overrides}
    make = lambda form, tip: _widget(p, hints, tip)  # noqa: E731
    return Field(name or param, make, p.help, param, _parser(param, hints))


def _parser(param: str, hints: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """How the field's value becomes the argument: the ``parse`` hint; a text field's
    number (``number``: ``"several"`` takes one or one per axis, ``"1, 2.5"``)."""
    if "parse" in hints:
        return hints["parse"]
    if hints["kind"] != "text":
        return None
    if hints.get("number") == "several":
        return parse_sigma
    return lambda text: parse_number(text, param)


def _widget(p: Param, hints: Mapping[str, Any], tip: str) -> Widget:
    kind, label = hints["kind"], hints.get("label", p.name)
    value = hints.get("value", None if p.required else p.default)
    if kind == "choice":
        choices, labels = hints.get("choices", p.choices), hints.get("labels")
        choices = [(labels[c], c) for c in choices] if labels else list(choices)
        return ComboBox(choices=choices, value=value, label=label, tooltip=tip)
    if kind == "check":
        return CheckBox(value=bool(value), text=hints["text"], tooltip=tip)
    if kind == "text":
        return LineEdit(value=_text(value), label=label, tooltip=tip)
    limits = {k: hints[k] for k in ("min", "max", "step") if k in hints}
    cls = FloatSpinBox if kind == "float" else SpinBox
    return cls(value=value, label=label, tooltip=tip, **limits)


def _text(value: Any) -> str:
    """A number as a text field shows it (``0.001`` as ``1e-3``)."""
    return f"{value:g}".replace("e-0", "e-") if isinstance(value, float) else str(value)


def values_of(form: Container) -> dict[str, Any]:
    """The arguments of the form's declared fields, by parameter name (each parsed)."""
    return {param: parse(getattr(form, name).value)
            for name, (param, parse) in form.declared.items()}  # fmt: skip


def advanced_of(fields: Sequence[Field | tuple], params: Mapping[str, Param] = PARAMS):
    """The names of the fields whose declaration folds them under "Advanced"."""
    out = []
    for entry in fields:
        field = Field(*entry)
        hints = field.param and (params[field.param].widget or {})
        if hints and hints.get("advanced"):
            out.append(field.name)
    return tuple(out)


def plain(cls, **options) -> Callable[[Any, str], Widget]:
    """A field of magicgui class ``cls`` with these options."""
    return lambda form, tip: cls(tooltip=tip, **options)


def layer_picker(annotation, label: str) -> Callable[[Any, str], Widget]:
    """A layer chooser (magicgui's widget for a layer annotation, ``Image | None`` too)."""
    return lambda form, tip: create_widget(annotation=annotation, label=label,
                                           options={"tooltip": tip})  # fmt: skip


def mask_picker(form, tip: str) -> ComboBox:
    """An optional mask layer: Labels or Image (magicgui has no widget for a union of
    layer types, hence a ComboBox over the viewer's layers)."""
    return ComboBox(choices=lambda _widget=None: mask_choices(form._viewer), nullable=True,
                    value=None, label="mask", tooltip=tip)  # fmt: skip


def axes_picker(form, tip: str) -> ComboBox:
    """Which axes are blurred (see ``AXES_CHOICES``): 2-D planes by default."""
    return ComboBox(choices=[(label, key) for key, label in AXES_CHOICES.items()], value="2d",
                    label="axes", tooltip=tip)  # fmt: skip


def mask_choices(viewer) -> list[tuple[str, Any]]:
    """The viewer's Labels and Image layers, as a mask field's choices."""
    layers = viewer.layers if viewer is not None else []
    return [(lyr.name, lyr) for lyr in layers if isinstance(lyr, (Labels, Image))]


def parse_numbers(text: str, name: str) -> list[float]:
    """``"2"`` -> [2.0], ``"1, 2.5"`` -> [1.0, 2.5] (``;`` also separates); an error
    naming ``name`` for anything else.  Empty text gives []."""
    parts = [p for p in str(text).replace(";", ",").split(",") if p.strip()]
    try:
        return [float(p) for p in parts]
    except ValueError:
        raise ArgumentError(f"{name}: could not read {text!r} as comma-separated numbers") from None


def parse_sigma(text: str) -> float | tuple[float, ...]:
    """``"2"`` -> 2.0, ``"1, 2.5"`` -> (1.0, 2.5); a clear error for anything else."""
    try:
        values = parse_numbers(text, "sigma")
    except ArgumentError:
        values = []
    if not values:
        raise ArgumentError(
            f"sigma: could not read {text!r} as a number or as comma-separated numbers"
        )
    return values[0] if len(values) == 1 else tuple(values)


def parse_number(text: str, name: str) -> float:
    """One number from a text field; an error naming ``name`` for anything else."""
    try:
        return float(str(text).strip())
    except ValueError:
        raise ArgumentError(f"{name}: could not read {text!r} as a number") from None


#: The Advanced toggle's text, folded and unfolded.
FOLDED, UNFOLDED = "▸ Advanced", "▾ Advanced"


def fold(form: Container, fields: list[Widget], advanced: Sequence[str]) -> list[Widget]:
    """``fields`` with the ``advanced`` ones (attribute names on ``form``) moved after an
    "Advanced" toggle, stored as ``form.advanced``: the default view stays short."""
    hidden = [getattr(form, name) for name in advanced]
    form.advanced = advanced_toggle(hidden)
    shown = [field for field in fields if all(field is not h for h in hidden)]
    return [*shown, form.advanced, *hidden]


def advanced_toggle(fields: Sequence[Widget]) -> PushButton:
    """A checkable button that shows ``fields`` while it is down; they start hidden.
    Hidden fields keep their values, and the run still reads them."""
    names = ", ".join(field.label or field.text for field in fields)
    button = PushButton(text=FOLDED, tooltip=f"show or hide the rarely changed options: {names}")
    button.native.setCheckable(True)

    def show(opened: bool) -> None:
        button.text = UNFOLDED if opened else FOLDED
        for field in fields:
            field.visible = opened

    button.native.toggled.connect(show)  # also when set in code (value = True)
    show(False)
    return button


class Scrolling:
    """A form in a vertical scroll area, so that its dock can be short (a laptop screen
    holds several docks).  Put it before ``Container`` in the bases."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(scrollable=True, **kwargs)
        self._settle_scroll()

    @property
    def native(self) -> QScrollArea:
        """The scroll area: what napari docks (magicgui's ``native`` of a scrollable
        Container is the form inside it, which napari would take out of the scroll)."""
        return self.root_native_widget

    def _settle_scroll(self) -> None:
        """Rows at the top (extra height goes below them); the form never squeezed below
        its size hint (the area scrolls instead); a horizontal bar only if ever needed."""
        scroll = self.root_native_widget
        inner = scroll.widget()
        inner.layout().addStretch(1)
        inner.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        watcher = _ScrollWatcher(self, scroll)
        inner.installEventFilter(watcher)
        scroll.installEventFilter(watcher)


class _ScrollWatcher(QObject):
    """Keeps a scroll area as wide as its form's minimum plus a vertical scroll bar (the
    form is never cut off or scrolled sideways), and tells the form when the scroll area
    is docked: magicgui watches only the form's own parent, and a docked form refreshes
    its layer choices."""

    def __init__(self, form: Container, scroll: QScrollArea) -> None:
        super().__init__(scroll)  # lives as long as the scroll area
        self._form, self._scroll = form, scroll

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        scroll = self._scroll
        if event.type() == QEvent.Type.LayoutRequest and watched is scroll.widget():
            bar = scroll.verticalScrollBar().sizeHint().width()
            scroll.setMinimumWidth(
                watched.minimumSizeHint().width() + bar + 2 * scroll.frameWidth()
            )
        elif event.type() == QEvent.Type.ParentChange and watched is scroll:
            self._form.native_parent_changed.emit(scroll.parent())
        return False


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


#: The least time between two reports of a run (status and layers): fast steps would
#: otherwise flood Qt's event loop with updates (each one a redraw).
REPORT_EVERY_S = 0.2


def throttled(steps: Iterator, every: float = REPORT_EVERY_S) -> Generator[Any, None, Any]:
    """Pass on the first of ``steps``' values, then at most one per ``every`` seconds,
    and return its return value: a worker's generator that reports without flooding Qt
    (a Cancel is taken at the values passed on)."""
    reported = None
    while True:
        try:
            value = next(steps)
        except StopIteration as done:
            return done.value
        if reported is None or time.monotonic() - reported >= every:
            reported = time.monotonic()
            yield value


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

    def _assemble(self, fields: list, text: str, what: str) -> None:
        """Add ``fields``, then the run button, Cancel and the status line; wire the two
        buttons to ``self.run`` and ``self.cancel``."""
        self._make_run_controls(text, what)
        self.extend([*fields, self.run_button, self.cancel_button, self.status])
        compact_choices(self)  # a long layer name must not widen the dock
        self.run_button.changed.connect(self.run)
        self.cancel_button.changed.connect(self.cancel)

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


def show_failure(status: Label, message: str) -> None:
    """A napari notification with the full text, and a short wrapping status line."""
    status.value = shorten(f"error: {message}")
    status.tooltip = f"error: {message}"
    show_error(f"VarBlur: {message}")
