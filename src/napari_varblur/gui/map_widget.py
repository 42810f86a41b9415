"""The "Make sigma map" dock widget: a thin magicgui adapter over :mod:`..sigma_maps`.

The map is added as an Image layer with the source layer's scale and translate, tagged
in its metadata (``role: sigma-map``) so that the blur widget preselects it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from magicgui.widgets import (
    CheckBox,
    ComboBox,
    Container,
    FloatSpinBox,
    Label,
    LineEdit,
    PushButton,
    SpinBox,
    Table,
)
from napari.layers import Image, Labels
from qtpy.QtWidgets import QHeaderView

from .. import sigma_maps
from .forms import (
    STATUS_TIP,
    Field,
    Scrolling,
    build,
    compact_choices,
    parse_numbers,
    plain,
    show_failure,
    wrapping,
)
from .schema import METADATA_KEY, PIXELS, SIGMA_MAP_ROLE

if TYPE_CHECKING:
    import napari

#: The kinds of map, as (label, key); the key names the function in ``sigma_maps``.
KINDS = {
    "labels": "labels: one sigma per label",
    "defocus": "defocus: grows away from a focal plane",
    "radial": "radial: grows towards the edge",
    "from_image": "from image: values mapped onto sigmas",
}
#: Which parameter fields each kind shows.
FIELDS = {
    "labels": ("table", "fill_button", "default"),
    "defocus": ("focus", "slope", "sigma0", "axis"),
    "radial": ("center", "sigma_center", "sigma_edge", "radius"),
    "from_image": ("lo", "hi", "sigma_lo", "sigma_hi"),
}
#: How many labels "fill from layer" lists at most.
MAX_TABLE_LABELS = 200
#: The sigma (px) "fill from layer" gives each label: a visible blur to edit from (the
#: background's "default sigma", 0, would make an all-zero map).
FILL_SIGMA = 1.0
#: The largest sigma (px) of the default defocus map: the slope is capped so that the
#: farthest plane from focus gets at most this.
MAX_DEFAULT_SIGMA = 8.0
#: The slope field's default (per plane), kept where the axis is short.
DEFAULT_SLOPE = 0.5
#: Decimals of the slope field: a long axis needs slopes well below 0.01.
SLOPE_DECIMALS = 4
WORLD_TIP = (
    "give every sigma (and the slope) in the layer's world units: each is divided by the "
    "layer's scale on its last axis (the Y and X scales must agree); positions stay in pixels"
)


def _sigma_box(value: float, label: str):
    return plain(FloatSpinBox, value=value, min=0.0, max=1e6, step=0.5, label=label)


def _table_value(rows: list[list[Any]]) -> dict[str, Any]:
    # magicgui's Table reads a dict as a table only with all three keys.
    return {"data": rows, "index": list(range(len(rows))), "columns": ["label", "sigma"]}


def _source_picker(form, tip: str) -> ComboBox:
    return ComboBox(choices=form._sources, nullable=False, label="source layer", tooltip=tip)


def _label_table(form, tip: str) -> Table:
    return Table(value=_table_value([[1, 2.0]]), label="label → sigma", tooltip=tip)


def fit_columns(table: Table) -> None:
    """Share the dock's width between the table's columns (none cut off, no sideways
    scrolling); the mode holds for columns magicgui makes again when rows are set."""
    table.native.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)


#: The form's fields, in order (``FIELDS`` says which kinds show which).
MAP_FIELDS: tuple[Field, ...] = (
    ("kind", plain(ComboBox, choices=[(label, key) for key, label in KINDS.items()],
                   value="labels", label="kind"),
     "how the map is made: per label, by distance from focus, by distance from a centre, or "
     "from an image's values"),
    ("source", _source_picker,
     "the layer the map is made for (its shape, scale and translate): Labels for 'labels', an "
     "Image for 'from image', an Image or Labels otherwise"),
    ("table", _label_table,
     "one row per label: its sigma (pixels, or world units when ticked); double-click a cell "
     "to edit it"),
    ("fill_button", plain(PushButton, text="fill labels from layer"),
     "list the source layer's labels (background 0 left out) in the table, each with sigma "
     f"{FILL_SIGMA:g}"),
    ("default", _sigma_box(0.0, "default sigma"),
     "sigma of every label not in the table, background included"),
    ("focus", plain(LineEdit, value="0", label="focus"),
     "index of the sharp plane along the axis below (pixels; fractional allowed)"),
    ("slope", _sigma_box(DEFAULT_SLOPE, "slope"),
     "how much sigma grows per plane away from focus; set from the layer's extent along the "
     f"axis when it is chosen (at most {MAX_DEFAULT_SIGMA:g} px at the farthest plane)"),
    ("sigma0", _sigma_box(0.0, "sigma in focus"), "sigma at the focal plane"),
    ("axis", plain(SpinBox, value=0, min=-32, max=31, label="axis"),
     "the axis along which focus changes (0: the first, e.g. Z; -1: the last)"),
    ("center", plain(LineEdit, value="", label="centre"),
     "the sharp point, one index per axis ('y, x'; pixels); empty: the image centre"),
    ("sigma_center", _sigma_box(0.0, "sigma at centre"), "sigma at the centre"),
    ("sigma_edge", _sigma_box(3.0, "sigma at edge"),
     "sigma at 'radius' from the centre and beyond (grows with the distance squared)"),
    ("radius", plain(FloatSpinBox, value=0.0, min=0.0, max=1e9, step=10.0, label="radius"),
     "distance (pixels) at which the edge sigma is reached; 0: from the centre to the "
     "farthest corner"),
    ("lo", plain(FloatSpinBox, value=0.0, min=-1e12, max=1e12, label="low value"),
     "image value that gets the low sigma (smaller values too); set from the layer's "
     "contrast limits when it is chosen"),
    ("hi", plain(FloatSpinBox, value=1.0, min=-1e12, max=1e12, label="high value"),
     "image value that gets the high sigma (larger values too)"),
    ("sigma_lo", _sigma_box(0.0, "sigma at low"), "sigma of the low value"),
    ("sigma_hi", _sigma_box(3.0, "sigma at high"), "sigma of the high value"),
    ("world_units", plain(CheckBox, value=False, text="sigmas in world units"), WORLD_TIP),
    ("add_button", plain(PushButton, text="Add sigma map"),
     "add the map as an Image layer over the source layer; the blur widget preselects it"),
)  # fmt: skip


class SigmaMapWidget(Scrolling, Container):
    """Make a sigma map from a Labels layer, a defocus model, a radial falloff or an
    image, and add it as a layer the blur widget preselects."""

    def __init__(self, viewer: napari.viewer.Viewer) -> None:
        super().__init__(labels=True)
        self._viewer = viewer
        fields = build(self, MAP_FIELDS)
        self.status = wrapping(Label(value="", label="status", tooltip=STATUS_TIP))
        self.extend([*fields, self.status])
        compact_choices(self)  # a long layer name must not widen the dock
        fit_columns(self.table)
        for box in (self.lo, self.hi):  # image values can be small (e.g. 0..1e-3)
            box.native.setDecimals(6)
        self.slope.native.setDecimals(SLOPE_DECIMALS)
        self.kind.changed.connect(self._kind_changed)
        self.source.changed.connect(self._source_changed)
        self.axis.changed.connect(self._source_changed)
        self.fill_button.changed.connect(self.fill_labels)
        self.add_button.changed.connect(self.add)
        self._kind_changed()

    # -- choices and visibility
    def _sources(self, _widget=None) -> list[tuple[str, Any]]:
        layers = self._viewer.layers if self._viewer is not None else []
        kind = self.kind.value if hasattr(self, "kind") else "labels"
        types = {"labels": (Labels,), "from_image": (Image,)}.get(kind, (Image, Labels))
        return [(layer.name, layer) for layer in layers if isinstance(layer, types)]

    def _kind_changed(self, _value=None) -> None:
        self.source.reset_choices()
        shown = set(FIELDS[self.kind.value])
        for name in {n for names in FIELDS.values() for n in names}:
            getattr(self, name).visible = name in shown
        self._source_changed()

    def _source_changed(self, _value=None) -> None:
        layer = self.source.value
        if self.kind.value == "from_image" and isinstance(layer, Image) and not layer.rgb:
            low, high = (float(v) for v in layer.contrast_limits)
            self.lo.value, self.hi.value = low, high
        if self.kind.value == "defocus" and layer is not None:
            self._fit_slope(layer.data.shape)

    def _fit_slope(self, shape: tuple[int, ...]) -> None:
        """Cap the slope so that the farthest plane along the axis gets at most
        ``MAX_DEFAULT_SIGMA`` (the fixed default gives e.g. 127 px on a 256-pixel axis)."""
        axis = int(self.axis.value)
        if not -len(shape) <= axis < len(shape):
            return  # make() reports the bad axis
        room = max(MAX_DEFAULT_SIGMA - self.sigma0.value, 0.0)
        slope = min(DEFAULT_SLOPE, room / max(shape[axis] - 1, 1))
        step = 10.0**SLOPE_DECIMALS  # round down: rounding up could pass the cap
        self.slope.value = np.floor(slope * step) / step

    def fill_labels(self, _value=None) -> None:
        """Put the source Labels layer's labels (not 0) in the table, each with
        ``FILL_SIGMA``; the background keeps the "default sigma"."""
        layer = self.source.value
        if not isinstance(layer, Labels):
            self.fail("fill labels: choose a Labels layer as the source")
            return
        labels = [int(v) for v in np.unique(np.asarray(layer.data)) if v != 0]
        rows = [[label, FILL_SIGMA] for label in labels[:MAX_TABLE_LABELS]]
        self.set_rows(rows)
        self.status.value = f"{len(labels)} labels" + (
            f" (first {MAX_TABLE_LABELS} listed)" if len(labels) > MAX_TABLE_LABELS else ""
        )

    def set_rows(self, rows: list[list[Any]]) -> None:
        """Replace the table's rows (each ``[label, sigma]``)."""
        self.table.value = _table_value(rows)

    # -- the map
    def table_sigmas(self) -> dict[int, float]:
        """The table's rows as label -> sigma (empty rows skipped)."""
        table: dict[int, float] = {}
        for row in self.table.data.to_list():
            if all(str(cell).strip() in ("", "None") for cell in row):
                continue
            try:
                label_value = float(str(row[0]))
                if label_value != int(label_value):
                    raise ValueError
                label, sigma = int(label_value), float(str(row[1]))
            except (ValueError, IndexError):
                raise ValueError(
                    f"label → sigma: could not read the row {row!r} as a whole-number label "
                    "and a sigma"
                ) from None
            table[label] = sigma
        return table

    def _pixel_size(self, layer) -> float:
        """What a world-unit sigma is divided by: the layer's scale on its last axis."""
        scale = np.asarray(layer.scale, dtype=float)
        if not self.world_units.value:
            return 1.0
        if len(scale) >= 2 and not np.isclose(scale[-1], scale[-2]):
            raise ValueError(
                f"world units: the layer's Y and X scales differ ({scale[-2]}, {scale[-1]}); "
                "give the sigmas in pixels"
            )
        return float(scale[-1])

    def make(self) -> tuple[np.ndarray, Any, dict[str, Any]]:
        """Compute the map for the current choices: (map, source layer, parameters).
        Raises ValueError/TypeError with the reason."""
        layer, kind = self.source.value, self.kind.value
        if layer is None:
            raise ValueError("source layer: add or choose a layer to make the map for")
        if layer.multiscale:
            raise ValueError(f"source layer {layer.name!r}: multiscale layers are not supported")
        if getattr(layer, "rgb", False):
            raise ValueError(f"source layer {layer.name!r}: choose a single-channel layer")
        data = layer.data
        size = self._pixel_size(layer)
        if kind == "labels":
            if not isinstance(layer, Labels):
                raise ValueError(f"source layer {layer.name!r}: 'labels' needs a Labels layer")
            sigmas = {k: v / size for k, v in self.table_sigmas().items()}
            params = {"sigmas": sigmas, "default": self.default.value / size}
            values = sigma_maps.from_labels(np.asarray(data), **params)
        elif kind == "defocus":
            focus = parse_numbers(self.focus.value, "focus")
            if len(focus) != 1:
                raise ValueError(f"focus: give one plane index, got {self.focus.value!r}")
            params = {
                "focus": focus[0],
                "slope": self.slope.value / size,
                "sigma0": self.sigma0.value / size,
                "axis": int(self.axis.value),
            }
            values = sigma_maps.defocus(data.shape, **params)
        elif kind == "radial":
            shape = data.shape
            center = parse_numbers(self.center.value, "centre") or [(n - 1) / 2 for n in shape]
            radius = self.radius.value
            if radius == 0:  # the farthest corner
                radius = float(np.sqrt(sum(max(c, n - 1 - c) ** 2 for c, n in zip(center, shape))))
                radius = radius or 1.0
            params = {
                "center": tuple(center),
                "sigma_center": self.sigma_center.value / size,
                "sigma_edge": self.sigma_edge.value / size,
                "radius": radius,
            }
            values = sigma_maps.radial(shape, **params)
        else:
            if not isinstance(layer, Image):
                raise ValueError(f"source layer {layer.name!r}: 'from image' needs an Image")
            params = {
                "lo": self.lo.value,
                "hi": self.hi.value,
                "sigma_lo": self.sigma_lo.value / size,
                "sigma_hi": self.sigma_hi.value / size,
            }
            values = sigma_maps.from_image(np.asarray(data), **params)
        values = np.ascontiguousarray(np.broadcast_to(values, data.shape))
        return values, layer, params

    def add(self, _value=None) -> Image | None:
        """Make the map and add it to the viewer; an error is shown, nothing is added."""
        try:
            values, layer, params = self.make()
        except (ValueError, TypeError) as err:
            self.fail(str(err))
            return None
        kind = self.kind.value
        parameters = {k: (dict(v) if isinstance(v, dict) else v) for k, v in params.items()}
        metadata = {
            METADATA_KEY: {
                "role": SIGMA_MAP_ROLE,
                "kind": kind,
                "source_layer": layer.name,
                "parameters": parameters,
                "world_units": self.world_units.value,
                "units": PIXELS,  # world-unit sigmas were divided by the scale
            }
        }
        high = float(values.max()) if values.size else 1.0
        out = Image(
            values,
            name=f"sigma map ({kind}) of {layer.name}",
            scale=layer.scale,
            translate=layer.translate,
            metadata=metadata,
            colormap="viridis",
            contrast_limits=(0.0, high if high > 0 else 1.0),
        )
        self._viewer.add_layer(out)
        self.status.value = f"added {out.name!r} (sigma {values.min():.3g} to {high:.3g} px)"
        self.status.tooltip = STATUS_TIP
        return out

    def fail(self, message: str) -> None:
        """Show an error as the blur widget does (notification and status line)."""
        show_failure(self.status, message)
