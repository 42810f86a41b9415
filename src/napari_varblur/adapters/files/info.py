"""What a file says about its image (:class:`FileInfo`), and the names and
constants every format shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

SUFFIXES = (".tif", ".tiff", ".zarr", ".npy")
#: The NGFF version of an OME-Zarr output whose input was not OME-Zarr: 0.4 (Zarr v2) is
#: the one most readers know.
NGFF_VERSION = "0.4"
#: An OME-Zarr output's pyramid halves its last two spatial axes (block mean) until the
#: smaller of them is under this.
PYRAMID_MIN_SIDE = 256
#: The key of the record of how a file was made: a Zarr attribute, a key of a TIFF's
#: JSON description, an ImageJ ``Info`` line, an OME MapAnnotation's key.
RECORD_KEY = "napari_varblur"
_RECORD_NAMESPACE = "napari-varblur.provenance"
#: Details that describe a whole file, not its axes: kept by :meth:`FileInfo.select`.
_FILE_EXTRAS = ("zarr_format", "ngff_version")


class ImageFileError(ValueError):
    """A file that cannot be read or written as asked; the message names it."""


@dataclass(frozen=True)
class FileInfo:
    """What a file says about its array beyond the pixels: enough to write a result like it.

    Attributes
    ----------
    format : str
        ``"tiff"``, ``"imagej"``, ``"ome-tiff"``, ``"zarr"``, ``"ome-zarr"`` or ``"npy"``;
        ``""`` for none (an array made in memory).
    axes : str or None
        One letter per axis, tifffile's code: ``T`` time, ``C`` channel, ``Z``, ``Y``,
        ``X``, ``S`` samples of a pixel (RGB(A)), ``Q`` unknown; None when not known.
    scale : tuple of float or None
        Pixel size per axis (1.0 where the file gives none); None when it gives none.
    units : tuple of (str or None) or None
        Unit per axis, as an NGFF (UDUNITS-2) name such as ``"micrometer"``.
    translation : tuple of float or None
        Position of the first pixel per axis (OME-Zarr), in ``units``.
    channel_axis : int or None
        The axis of colour (RGB(A) samples) or of channels the file names: never
        blurred unless asked.
    rgb : bool
        The samples axis holds RGB(A) colour (photometric RGB).
    channel_names : tuple of str or None
        One name per index of ``channel_axis``.
    provenance : dict or None
        The record of how napari-varblur made the file (:func:`provenance_record`).
    extra : dict
        The format's own details, written back to an output of that format: ImageJ
        display ranges, LUTs and ``Info``, TIFF extra samples, NGFF axes and ``omero``
        block, the Zarr format.
    """

    format: str = ""
    axes: str | None = None
    scale: tuple[float, ...] | None = None
    units: tuple[str | None, ...] | None = None
    translation: tuple[float, ...] | None = None
    channel_axis: int | None = None
    rgb: bool = False
    channel_names: tuple[str, ...] | None = None
    provenance: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def select(self, axes: Sequence[int]) -> FileInfo:
        """This description for an array of some of these axes, in the order given (e.g.
        a sigma map of the blurred axes): per-axis entries follow them; details of the
        whole file (ImageJ ranges, NGFF axes, the record) are left out."""
        ndim = next((len(v) for v in (self.axes, self.scale, self.units) if v), None)
        axes = [int(a) % ndim if ndim else int(a) for a in axes]

        def pick(values):
            return None if values is None else tuple(values[a] for a in axes)

        channel = axes.index(self.channel_axis) if self.channel_axis in axes else None
        return FileInfo(
            format=self.format,
            axes="".join(pick(self.axes)) if self.axes else None,
            scale=pick(self.scale),
            units=pick(self.units),
            translation=pick(self.translation),
            channel_axis=channel,
            rgb=self.rgb and channel is not None,
            channel_names=self.channel_names if channel is not None else None,
            extra={k: v for k, v in self.extra.items() if k in _FILE_EXTRAS},
        )


class ImageFile(NamedTuple):
    """What :func:`read_image` returns; unpacks as ``data, info = read_image(path)``."""

    data: Any  #: the pixels, a lazy dask array
    info: FileInfo


def file_format(path: Path) -> str:
    """``"tif"``, ``"zarr"`` or ``"npy"`` by the name of ``path`` (an array inside a
    ``.zarr`` group, such as ``image.ome.zarr/0``, is Zarr)."""
    name = path.name.lower()
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return "tif" if suffix in (".tif", ".tiff") else suffix[1:]
    if any(parent.name.lower().endswith(".zarr") for parent in path.parents):
        return "zarr"
    raise ImageFileError(f"{str(path)!r}: unsupported format; use " + ", ".join(SUFFIXES))


def _channel_of(axes: str | None) -> int | None:
    """RGB(A) samples, else a channel axis: the axis a blur leaves alone by default."""
    for letter in "SC":
        if axes and letter in axes:
            return axes.index(letter)
    return None


#: Unit spellings of TIFF, ImageJ and OME files, and their NGFF (UDUNITS-2) names.
_UNIT_NAMES = {
    "µm": "micrometer", "\u03bcm": "micrometer", "um": "micrometer", "micron": "micrometer",
    "microns": "micrometer", "\\u00b5m": "micrometer", "nm": "nanometer",
    "mm": "millimeter", "cm": "centimeter", "m": "meter", "å": "angstrom",
    "pm": "picometer", "s": "second", "sec": "second", "ms": "millisecond",
    "µs": "microsecond", "min": "minute", "h": "hour", "pixel": None, "pixels": None,
}  # fmt: skip


#: OME-TIFF's symbol for an NGFF unit name (ImageJ's: "micron" for micrometer).
_UNIT_SYMBOLS = {
    "micrometer": "µm", "nanometer": "nm", "millimeter": "mm", "centimeter": "cm",
    "meter": "m", "angstrom": "Å", "picometer": "pm", "second": "s", "millisecond": "ms",
    "microsecond": "µs", "minute": "min", "hour": "h",
}  # fmt: skip


def _unit_name(text: str | None) -> str | None:
    if not text:
        return None
    text = str(text).strip()
    return _UNIT_NAMES.get(text.lower(), _UNIT_NAMES.get(text, text))


def _listed_scale(meta: Mapping, ndim: int) -> dict[str, tuple | None]:
    """Our own record of pixel sizes (``scale``, ``units``: one per axis) in a plain
    TIFF's description or a Zarr array's attributes, where it fits the array."""
    scale, units = meta.get("scale"), meta.get("units")
    fits = [isinstance(v, list | tuple) and len(v) == ndim for v in (scale, units)]
    return {
        "scale": tuple(float(v) for v in scale) if fits[0] else None,
        "units": tuple(units) if fits[1] else None,
    }


def _own_keys(like: FileInfo, record) -> dict[str, Any]:
    """Pixel sizes, units and the record under our own keys (plain TIFF and Zarr have
    no standard place for them)."""
    keys: dict[str, Any] = {}
    if like.scale is not None:
        keys["scale"] = list(like.scale)
    if like.units is not None:
        keys["units"] = list(like.units)
    if record is not None:
        keys[RECORD_KEY] = record
    return keys


def _guess_axes(ndim: int) -> str:
    """Axis letters for an array that has none: ``YX`` last, then Z, T, C before them
    (a channel axis only when there is no other place: it would not be blurred)."""
    return {1: "X", 2: "YX", 3: "ZYX", 4: "TZYX"}.get(ndim) or ("Q" * ndim + "TCZYX")[-ndim:]
