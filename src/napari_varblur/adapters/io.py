"""Reading and writing image files for the batch commands: TIFF, Zarr and .npy.

Inputs are opened lazily as dask arrays (nothing is loaded until blocks are needed),
with what the file says about them (:class:`FileInfo`: axes, pixel sizes, units,
channels, RGB(A)).  Outputs are written in the input's kind (RGB(A), ImageJ hyperstack,
OME-TIFF, OME-Zarr, Zarr) with that description and a record of how they were made,
to a temporary name beside the target that is moved into place at the end, so an
interrupted run never leaves a half-written file under the output's name.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .interrupts import committing

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


def read_image(path: str | os.PathLike) -> ImageFile:
    """Open ``path`` lazily: its pixels as a dask array, and what the file says of them.

    Reads TIFF (the first series: plain, RGB(A), ImageJ hyperstack, OME-TIFF), Zarr (an
    array, or an OME-Zarr group: level 0 of its first multiscale image) and ``.npy``.

    Returns
    -------
    ImageFile
        ``(data, info)``: a dask array and its :class:`FileInfo`.

    Raises
    ------
    ImageFileError
        One line naming the file and the problem.
    """
    path = Path(path)
    kind = file_format(path)
    if not path.exists():
        raise ImageFileError(f"{str(path)!r} does not exist")
    try:
        return _READERS[kind](path)
    except ImageFileError:
        raise
    except KeyError as err:  # metadata without an entry its format requires
        raise ImageFileError(f"{str(path)!r}: could not read it as {kind}: no {err} in its "
                             "metadata") from err  # fmt: skip
    except Exception as err:  # the readers raise many types; name the file and the cause
        raise ImageFileError(f"{str(path)!r}: could not read it as {kind}: {err}") from err


def channel_axis_of(path: str | os.PathLike) -> int | None:
    """The channel axis ``path`` declares (RGB(A) samples, or the channel axis of ImageJ,
    OME-TIFF or OME-Zarr metadata), or ``None``; None for an unreadable file too
    (:func:`read_image` reports it)."""
    try:
        return read_image(path).info.channel_axis
    except ImageFileError:
        return None


def _channel_of(axes: str | None) -> int | None:
    """RGB(A) samples, else a channel axis: the axis a blur leaves alone by default."""
    for letter in "SC":
        if axes and letter in axes:
            return axes.index(letter)
    return None


def _read_npy(path: Path) -> ImageFile:
    import dask.array as da

    data = np.load(path, mmap_mode="r")
    return ImageFile(da.from_array(data, chunks="auto"), FileInfo(format="npy"))


# --- TIFF: plain (tifffile's JSON description), ImageJ, OME ----------------------------

#: ImageJ metadata carried to an ImageJ output as it was read.
_IMAGEJ_KEPT = ("Ranges", "LUTs", "Labels", "mode", "min", "max", "fps", "loop", "Properties")
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


def _read_tiff(path: Path) -> ImageFile:
    import dask.array as da
    import tifffile

    with tifffile.TiffFile(path) as tif:
        info = _tiff_info(tif)
    store = tifffile.imread(path, aszarr=True, series=0, level=0)
    return ImageFile(da.from_zarr(store), info)


def _tiff_info(tif) -> FileInfo:
    series = tif.series[0]
    axes, page = series.axes, series.keyframe
    info = FileInfo(
        format="tiff",
        axes=axes,
        channel_axis=_channel_of(axes),
        rgb="S" in axes and page.photometric in (2, 6),  # RGB, or YCbCr read as RGB
        extra={"extrasamples": tuple(int(e) for e in page.extrasamples)},
    )
    if tif.is_ome and tif.ome_metadata:
        info, names = _ome_tiff_info(info, tif.ome_metadata)
        channel = info.channel_axis
        if channel is not None and not info.rgb and len(names) == series.shape[channel]:
            info = replace(info, channel_names=names)
        return info
    if tif.is_imagej:
        return _imagej_info(info, tif.imagej_metadata or {}, page)
    meta = tif.shaped_metadata[0] if tif.shaped_metadata else {}
    listed = _listed_scale(meta, len(axes))
    if listed["scale"] is None:  # a file from another tool: its resolution tags, if any
        listed = _per_axis(axes, *_resolution_sizes(page)) or listed
    return replace(info, provenance=meta.get(RECORD_KEY), **listed)


#: TIFF ResolutionUnit 3 (centimetre): pixels per cm, as scientific writers store them
#: (tifffile, scikit-image, Bio-Formats).  Inch (2) is left out: it is a print DPI, 72 or
#: 300 for any photograph, not a pixel size.
_PER_CENTIMETRE = 3


def _resolution_sizes(page) -> tuple[dict[str, float], dict[str, str | None]]:
    """Pixel sizes in µm from a plain TIFF's X/YResolution in pixels per centimetre."""
    tags = page.tags
    if "ResolutionUnit" not in tags or int(tags["ResolutionUnit"].value) != _PER_CENTIMETRE:
        return {}, {}
    sizes = {}
    for letter, tag in (("X", "XResolution"), ("Y", "YResolution")):
        num, den = tags[tag].value if tag in tags else (0, 1)
        if num and den:
            sizes[letter] = 1e4 * den / num  # µm per pixel
    if len(sizes) < 2:
        return {}, {}
    return sizes, {"X": "micrometer", "Y": "micrometer"}


def _listed_scale(meta: Mapping, ndim: int) -> dict[str, tuple | None]:
    """Our own record of pixel sizes (``scale``, ``units``: one per axis) in a plain
    TIFF's description or a Zarr array's attributes, where it fits the array."""
    scale, units = meta.get("scale"), meta.get("units")
    fits = [isinstance(v, list | tuple) and len(v) == ndim for v in (scale, units)]
    return {
        "scale": tuple(float(v) for v in scale) if fits[0] else None,
        "units": tuple(units) if fits[1] else None,
    }


def _per_axis(axes: str, sizes: dict[str, float], units: dict[str, str | None]) -> dict:
    """``scale`` and ``units`` per axis from values per axis letter (none: None)."""
    if not sizes:
        return {}
    named = [units.get(letter) for letter in axes]
    return {
        "scale": tuple(sizes.get(letter, 1.0) for letter in axes),
        "units": tuple(named) if any(named) else None,
    }


def _ome_tiff_info(info: FileInfo, xml: str) -> tuple[FileInfo, tuple[str, ...]]:
    """Pixel sizes, channel names and our record from OME-XML (its first image)."""
    root = ET.fromstring(xml)
    pixels = next(e for e in root.iter() if _local(e.tag) == "Pixels")
    sizes: dict[str, float] = {}
    units: dict[str, str | None] = {}
    for letter, key, default in (*((a, f"PhysicalSize{a}", "µm") for a in "XYZ"),
                                 ("T", "TimeIncrement", "s")):  # fmt: skip
        if pixels.get(key) is not None:
            sizes[letter] = float(pixels.get(key))
            units[letter] = _unit_name(pixels.get(key + "Unit", default))
    names = tuple(c.get("Name", "") for c in pixels if _local(c.tag) == "Channel")
    notes = [m.text for m in root.iter() if _local(m.tag) == "M" and m.get("K") == RECORD_KEY]
    info = replace(info, format="ome-tiff", provenance=json.loads(notes[0]) if notes else None,
                   **_per_axis(info.axes, sizes, units))  # fmt: skip
    return info, names if any(names) else ()


def _local(tag: str) -> str:
    """An XML tag without its namespace."""
    return tag.rpartition("}")[2]


def _imagej_info(info: FileInfo, meta: dict, page) -> FileInfo:
    """Pixel sizes (resolution, spacing, frame interval), unit, display settings and
    ``Info`` of an ImageJ TIFF; our record is the ``Info`` line that starts with it."""
    sizes: dict[str, float] = {}
    for letter, tag in (("X", "XResolution"), ("Y", "YResolution")):
        if tag in page.tags:
            num, den = page.tags[tag].value
            if num:
                sizes[letter] = den / num
    if "spacing" in meta:
        sizes["Z"] = float(meta["spacing"])
    if meta.get("finterval"):
        sizes["T"] = float(meta["finterval"])
    unit = _unit_name(meta.get("unit"))
    units = {"X": unit, "Y": unit, "Z": unit, "T": "second" if "T" in sizes else None}
    lines = str(meta.get("Info", "")).splitlines()
    ours = [line for line in lines if line.startswith(f"{RECORD_KEY} = ")]
    extra = {
        **info.extra,
        "imagej": {key: meta[key] for key in _IMAGEJ_KEPT if key in meta},
        "imagej_unit": meta.get("unit"),
        "imagej_info": "\n".join(line for line in lines if line not in ours),
    }
    record = json.loads(ours[-1].partition(" = ")[2]) if ours else None
    return replace(info, format="imagej", extra=extra, provenance=record,
                   **_per_axis(info.axes, sizes, units))  # fmt: skip


# --- Zarr: arrays and OME-Zarr (NGFF 0.4: Zarr v2; 0.5: Zarr v3, under "ome") ---------


def _read_zarr(path: Path) -> ImageFile:
    import dask.array as da
    import zarr

    node = zarr.open(str(path), mode="r")
    if isinstance(node, zarr.Group):
        node, info = _ome_zarr_level(path, node)
    else:
        info = _zarr_array_info(path, node)
    return ImageFile(da.from_zarr(node), info)


def _ome_attrs(group) -> dict:
    """A group's OME-Zarr attributes: 0.5 keeps them under ``"ome"``, 0.4 at the top."""
    attrs = dict(group.attrs)
    return attrs.get("ome", attrs)


def _ome_zarr_level(path: Path, group) -> tuple[Any, FileInfo]:
    """Level 0 of an OME-Zarr group's first multiscale image, and its description."""
    ome = _ome_attrs(group)
    if not ome.get("multiscales"):
        raise ImageFileError(
            f"{str(path)!r}: a Zarr group without OME-Zarr 'multiscales' metadata; name "
            f"an array inside it instead (such as {str(path / '0')!r})"
        )
    multiscale = ome["multiscales"][0]
    dataset = multiscale["datasets"][0]
    array = group[dataset["path"]]
    info = _ngff_info(ome, multiscale, dataset, array.ndim, group.metadata.zarr_format)
    return array, replace(info, format="ome-zarr", provenance=group.attrs.get(RECORD_KEY))


def _zarr_array_info(path: Path, array) -> FileInfo:
    """A Zarr array: a level of the OME-Zarr group above it, or a plain array with its
    dimension names (Zarr v3, or xarray's ``_ARRAY_DIMENSIONS``) and our pixel sizes."""
    attrs, zarr_format = dict(array.attrs), array.metadata.zarr_format
    info = _ngff_level_of(path, array.ndim)
    if info is None:
        names = (array.metadata.dimension_names if zarr_format == 3
                 else attrs.get("_ARRAY_DIMENSIONS"))  # fmt: skip
        named = bool(names) and len(names) == array.ndim and all(names)
        axes = "".join(_letter_of({"name": n}) for n in names) if named else None
        info = FileInfo(axes=axes, channel_axis=_channel_of(axes),
                        extra={"dims": list(names)} if named else {},
                        **_listed_scale(attrs, array.ndim))  # fmt: skip
    extra = {**info.extra, "zarr_format": zarr_format}
    return replace(info, format="zarr", provenance=attrs.get(RECORD_KEY), extra=extra)


def _ngff_level_of(path: Path, ndim: int) -> FileInfo | None:
    """The description of an array that is a level of the OME-Zarr group above it
    (``image.ome.zarr/1``), or None."""
    import zarr

    try:
        group = zarr.open_group(str(path.parent), mode="r")
    except Exception:  # no group above: a plain array
        return None
    ome = _ome_attrs(group)
    for multiscale in ome.get("multiscales") or []:
        for dataset in multiscale.get("datasets", []):
            if dataset.get("path") == path.name:
                return _ngff_info(ome, multiscale, dataset, ndim, group.metadata.zarr_format)
    return None


def _ngff_info(ome: dict, multiscale: dict, dataset: dict, ndim: int, zarr_format) -> FileInfo:
    """Axes, units, scale and translation (a dataset's, then its multiscale's), channel
    names (``omero``) of one level of an OME-Zarr image."""
    axes = [a if isinstance(a, dict) else {"name": a} for a in multiscale.get("axes", [])]
    if len(axes) != ndim:  # before 0.3 the axes were always (t, c, z, y, x)
        axes = [{"name": name} for name in ("q" * ndim + "tczyx")[-ndim:]]
    scale, shift = _ngff_transforms(dataset, ndim)
    outer, outer_shift = _ngff_transforms(multiscale, ndim)
    if shift is not None or outer_shift is not None:  # the outer transforms apply after
        inner, stretch = shift or [0.0] * ndim, outer or [1.0] * ndim
        shift = [t * s + u for t, s, u in zip(inner, stretch, outer_shift or [0.0] * ndim)]
    if scale is not None or outer is not None:
        scale = [a * b for a, b in zip(scale or [1.0] * ndim, outer or [1.0] * ndim)]
    letters = "".join(_letter_of(a) for a in axes)
    units = tuple(_unit_name(a.get("unit")) for a in axes)
    omero = ome.get("omero") or {}
    names = tuple(str(c.get("label", "")) for c in omero.get("channels", []))
    channel = _channel_of(letters)
    return FileInfo(
        axes=letters,
        scale=tuple(scale) if scale is not None else None,
        units=units if any(units) else None,
        translation=tuple(shift) if shift is not None else None,
        channel_axis=channel,
        channel_names=names if channel is not None and any(names) else None,
        extra={
            "ngff_version": str(ome.get("version") or multiscale.get("version") or "0.4"),
            "ngff_axes": axes, "omero": omero, "name": multiscale.get("name"),
            "zarr_format": zarr_format,
        },
    )  # fmt: skip


def _ngff_transforms(node: dict, ndim: int) -> tuple[list[float] | None, list[float] | None]:
    """The ``scale`` and ``translation`` of a node's coordinateTransformations (a scale
    stored in a file of its own is not read)."""
    scale = shift = None
    for transform in node.get("coordinateTransformations") or []:
        values = transform.get(transform.get("type"))
        if isinstance(values, list) and len(values) == ndim:
            if transform["type"] == "scale":
                scale = [float(v) for v in values]
            elif transform["type"] == "translation":
                shift = [float(v) for v in values]
    return scale, shift


def _letter_of(axis: dict) -> str:
    """An NGFF axis (or a dimension name) as an axis letter."""
    kind, name = axis.get("type"), str(axis.get("name", "")).lower()
    if kind == "channel" or name in ("c", "channel"):
        return "C"
    if kind == "time" or name in ("t", "time"):
        return "T"
    return name.upper() if name in ("x", "y", "z") else "Q"


_READERS = {"npy": _read_npy, "tif": _read_tiff, "zarr": _read_zarr}


@contextlib.contextmanager
def atomic_target(path: Path, overwrite: bool) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it into place only on success."""
    if path.exists() and not overwrite:
        raise ImageFileError(f"{str(path)!r} exists; pass --overwrite to replace it")
    if not path.parent.exists():
        raise ImageFileError(f"{str(path.parent)!r}: the output folder does not exist")
    temp = path.with_name(f".{path.name}.varblur-partial-{os.getpid()}")
    _remove(temp)
    try:
        yield temp
        with committing(path):  # a Ctrl-C stops the run before the move, never during it
            if path.exists():
                _remove(path)
            os.replace(temp, path)
    finally:
        _remove(temp)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def provenance_record(
    command: str,
    parameters: Mapping[str, Any],
    *,
    source: str | os.PathLike | None = None,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of how a file was made, for :func:`write_image` to store in it.

    Parameters
    ----------
    command : str
        What made it, e.g. ``"varblur blur"``.
    parameters : mapping
        Its parameters, made JSON-ready: tuples become lists, paths and non-finite
        floats strings; callables are left out.
    source : path, optional
        The input file.
    previous : mapping, optional
        The input's own record (:attr:`FileInfo.provenance`): a blur of a blur keeps
        its history.

    Returns
    -------
    dict
        ``software``, ``version`` (``napari_varblur.__version__``), ``command``,
        ``created`` (UTC, ISO 8601), ``parameters`` and, when given, ``input`` and
        ``previous``.
    """
    from .._version import __version__

    record: dict[str, Any] = {
        "software": "napari-varblur",
        "version": __version__,
        "command": command,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "parameters": {str(k): _plain(v) for k, v in parameters.items() if not callable(v)},
    }
    if source is not None:
        record["input"] = str(source)
    if previous:
        record["previous"] = _plain(previous)
    return record


def _plain(value: Any) -> Any:
    """``value`` as JSON: lists for tuples and arrays, strings for what JSON lacks."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | np.ndarray):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def output_format(path: str | os.PathLike, like: FileInfo | None = None) -> str:
    """The format :func:`write_image` writes to ``path``: by its suffix, and of the same
    kind as the input ``like`` describes.

    ``.ome.tif``, ``.ome.tiff`` and ``.ome.zarr`` names always get OME; a ``.tif`` of an
    ImageJ or OME-TIFF input is of its kind, a ``.zarr`` of an OME-Zarr input OME-Zarr.

    Returns
    -------
    str
        ``"tiff"``, ``"imagej"``, ``"ome-tiff"``, ``"zarr"``, ``"ome-zarr"`` or ``"npy"``.
    """
    path = Path(path)
    kind, name = file_format(path), path.name.lower()
    source = like.format if like is not None else ""
    if kind == "tif":
        if name.endswith((".ome.tif", ".ome.tiff")) or source == "ome-tiff":
            return "ome-tiff"
        return "imagej" if source == "imagej" else "tiff"
    if kind == "zarr":
        return "ome-zarr" if name.endswith(".ome.zarr") or source == "ome-zarr" else "zarr"
    return kind


def write_image(
    result,
    path: str | os.PathLike,
    *,
    overwrite: bool,
    scheduler=None,
    like: FileInfo | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> str:
    """Compute the dask array ``result`` into ``path``, in :func:`output_format`'s format.

    ``like`` (the input's :class:`FileInfo`, for a result of the same shape; see
    :meth:`FileInfo.select` for fewer axes) carries its axes, pixel sizes, units,
    channel names and RGB(A) colour over, and its format's own details (ImageJ ranges,
    NGFF axes, ...) within that format. ``provenance`` (:func:`provenance_record`) is
    kept where the format keeps notes: a TIFF's JSON description, ImageJ ``Info``, an
    OME MapAnnotation, Zarr attributes (``.npy`` has nowhere).

    Zarr and .npy targets are filled one slab (a chunk along the first axis) at a time;
    a TIFF is written page by page as each slab is computed.  Memory holds one slab and
    its halo: the whole result only when the first axis is one chunk, or for a 2-D TIFF
    (one page).  An OME-Zarr pyramid is made from the written level 0, not the blur.

    Returns
    -------
    str
        The format written (see :func:`output_format`).

    Raises
    ------
    ImageFileError
        Before anything is computed, when the format cannot hold ``result`` (an ImageJ
        TIFF of float64, an OME-TIFF of more than 5 axes), or the target exists and
        ``overwrite`` is false.
    """
    path = Path(path)
    like = _fitted(like, result.ndim)
    kind = output_format(path, like)
    _check_writable(kind, result, like, path)
    record = _plain(provenance) if provenance is not None else None
    with atomic_target(path, overwrite) as temp:
        if kind in _TIFF_OPTIONS:
            _write_tiff(result, temp, scheduler, _tiff_options(kind, result, like, record))
        else:
            _WRITERS[kind](result, temp, scheduler, like, record)
    return kind


def _fitted(like: FileInfo | None, ndim: int) -> FileInfo:
    """``like``, or no more of it than its format and record when it describes an array
    of another rank."""
    if like is None:
        return FileInfo()
    per_axis = (like.axes, like.scale, like.units, like.translation)
    if all(v is None or len(v) == ndim for v in per_axis) and (like.channel_axis or 0) < ndim:
        return like
    kept = {k: v for k, v in like.extra.items() if k in _FILE_EXTRAS}
    return FileInfo(format=like.format, provenance=like.provenance, extra=kept)


def _check_writable(kind: str, result, like: FileInfo, path: Path) -> None:
    """Refuse, before any work, a result the format cannot hold."""
    if kind == "imagej":
        rgb = _samples_options(result, like)["photometric"] == "rgb"
        allowed = ("uint8",) if rgb else ("uint8", "uint16", "int16", "float32")
        if result.dtype.name not in allowed:
            what = f"{result.dtype}{' RGB' if rgb else ''}"
            raise ImageFileError(
                f"{str(path)!r}: an ImageJ TIFF cannot hold {what} (only "
                f"{', '.join(allowed)}); use --dtype same or --precision float32, or name "
                "the output .ome.tif"
            )
    if kind == "ome-tiff" and _ome_axes(result, like) is None:
        raise ImageFileError(f"{str(path)!r}: an OME-TIFF holds 2 to 5 axes (TCZYX) "
                             f"besides RGB samples, not {result.ndim}")  # fmt: skip


def _write_npy(result, temp: Path, scheduler, like: FileInfo, record) -> None:
    target = np.lib.format.open_memmap(temp, mode="w+", dtype=result.dtype, shape=result.shape)
    _store(result, target, scheduler)
    target.flush()
    del target


# --- TIFF ----------------------------------------------------------------------------


def _write_tiff(result, temp: Path, scheduler, options: dict[str, Any]) -> None:
    """Write ``result`` page by page (grey pages: its last two axes; RGB(A): three),
    one slab at a time.

    TIFF pages must go in order, so each slab (one chunk of the first axis) is computed
    whole, cut into pages and written before the next is computed.  A grey image is
    ``minisblack``, so a trailing axis of length 3 or 4 stays an axis of the volume.
    """
    import tifffile

    page_ndim = 3 if options.get("photometric") == "rgb" else 2
    if result.ndim <= page_ndim or result.size == 0:  # one page (or none): nothing to stream
        tifffile.imwrite(temp, _compute(result, scheduler), **options)
        return
    page = result.shape[-page_ndim:]
    pages = (p for slab in _slabs(result, scheduler) for p in slab.reshape(-1, *page))
    tifffile.imwrite(temp, pages, shape=result.shape, dtype=result.dtype, **options)


def _tiff_options(kind: str, result, like: FileInfo, record) -> dict[str, Any]:
    """tifffile's keywords for a TIFF of ``kind`` like ``like``."""
    samples = _samples_options(result, like)
    return {**samples, **_TIFF_OPTIONS[kind](result, like, record, samples)}


def _samples_options(result, like: FileInfo) -> dict[str, Any]:
    """Photometric RGB for RGB(A) samples (last axis, or third from last: planar), with
    the input's kind of alpha; grey otherwise (no photometric for 1-D: tifffile refuses)."""
    axes = like.axes or ""
    if like.rgb and axes.endswith("S") and result.shape[-1] >= 3:
        options = {"photometric": "rgb", "planarconfig": "contig"}
        samples = result.shape[-1]
    elif like.rgb and axes[-3:-2] == "S" and result.shape[-3] >= 3:
        options = {"photometric": "rgb", "planarconfig": "separate"}
        samples = result.shape[-3]
    else:
        return {"photometric": "minisblack" if result.ndim >= 2 else None}
    extrasamples = like.extra.get("extrasamples")
    if extrasamples is not None and len(extrasamples) == samples - 3:
        options["extrasamples"] = list(extrasamples)
    return options


def _written_axes(like: FileInfo, samples: dict) -> str | None:
    """``like``'s axes, with a samples axis that is not written as RGB made unknown."""
    if not like.axes:
        return None
    return like.axes if samples["photometric"] == "rgb" else like.axes.replace("S", "Q")


def _sizes(like: FileInfo, axes: str | None) -> dict[str, tuple[float, str | None]]:
    """Pixel size and unit by axis letter, for the axes whose size is known: a unit, or
    a size other than 1 (1.0 stands in for a size the input did not give)."""
    if not axes or like.scale is None:
        return {}
    units = like.units or (None,) * len(axes)
    return {
        letter: (size, unit)
        for letter, size, unit in zip(axes, like.scale, units)
        if unit is not None or size != 1.0
    }


def _plain_tiff_options(result, like: FileInfo, record, samples) -> dict[str, Any]:
    """tifffile's JSON description: axes, and our pixel sizes and record."""
    meta: dict[str, Any] = {}
    axes = _written_axes(like, samples)
    if axes:
        meta["axes"] = axes
    meta.update(_own_keys(like, record))
    return {"metadata": meta}


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


def _imagej_options(result, like: FileInfo, record, samples) -> dict[str, Any]:
    """ImageJ hyperstack: axes, resolution, spacing, frame interval, unit, the input's
    display settings and ``Info``, our record as the last ``Info`` line."""
    meta = dict(like.extra.get("imagej", {}))
    options: dict[str, Any] = {"imagej": True, "metadata": meta}
    axes = _written_axes(like, samples)
    if axes and _in_order_of(axes, "TZCYXS"):
        meta["axes"] = axes
    sizes = _sizes(like, axes)
    if "X" in sizes and "Y" in sizes:
        options["resolution"] = (1 / sizes["X"][0], 1 / sizes["Y"][0])
    if "Z" in sizes:
        meta["spacing"] = sizes["Z"][0]
    if "T" in sizes:
        meta["finterval"] = sizes["T"][0]
    unit = next((u for letter, (_, u) in sizes.items() if letter in "XYZ" and u), None)
    unit = like.extra.get("imagej_unit") or {"micrometer": "micron"}.get(unit, unit)
    if unit:
        meta["unit"] = _UNIT_SYMBOLS.get(unit, unit)
    info = [like.extra.get("imagej_info") or ""]
    if record is not None:
        info.append(f"{RECORD_KEY} = {json.dumps(record)}")
    if any(info):
        meta["Info"] = "\n".join(line for line in info if line)
    return options


def _in_order_of(axes: str, order: str) -> bool:
    """``axes`` are distinct letters of ``order``, in its order."""
    return len(set(axes)) == len(axes) and all(a in order for a in axes) and (
        [order.index(a) for a in axes] == sorted(order.index(a) for a in axes)
    )  # fmt: skip


def _ome_axes(result, like: FileInfo) -> str | None:
    """OME-TIFF axes: ``like``'s when OME can hold them (distinct letters of TCZYX,
    ending with YX, then RGB samples), else a guess; None for fewer than 2 or more than
    5 axes besides RGB samples."""
    samples = _samples_options(result, like)
    axes = _written_axes(like, samples)
    rgb = samples["photometric"] == "rgb"
    if axes and len(set(axes)) == len(axes) and set(axes) <= set("TCZYXS"):
        if axes.removesuffix("S").endswith("YX"):
            return axes
    if not 2 <= result.ndim - rgb <= 5:
        return None
    return _guess_axes(result.ndim - rgb) + ("S" if rgb else "")


def _guess_axes(ndim: int) -> str:
    """Axis letters for an array that has none: ``YX`` last, then Z, T, C before them
    (a channel axis only when there is no other place: it would not be blurred)."""
    return {1: "X", 2: "YX", 3: "ZYX", 4: "TZYX"}.get(ndim) or ("Q" * ndim + "TCZYX")[-ndim:]


def _ome_options(result, like: FileInfo, record, samples) -> dict[str, Any]:
    """OME-XML: axes, physical sizes and units, channel names, our record as a
    MapAnnotation."""
    axes = _ome_axes(result, like)
    meta: dict[str, Any] = {"axes": axes}
    for letter, (size, unit) in _sizes(like, axes).items():
        key = {"T": "TimeIncrement"}.get(letter, f"PhysicalSize{letter}")
        if letter in "XYZT":
            meta[key] = size
            if unit in _UNIT_SYMBOLS:
                meta[key + "Unit"] = _UNIT_SYMBOLS[unit]
    channel = like.channel_axis
    if like.channel_names and channel is not None and axes[channel] == "C":
        meta["Channel"] = {"Name": list(like.channel_names)}
    if record is not None:
        meta["MapAnnotation"] = {"Namespace": _RECORD_NAMESPACE, RECORD_KEY: json.dumps(record)}
    return {"ome": True, "metadata": meta}


_TIFF_OPTIONS = {"tiff": _plain_tiff_options, "imagej": _imagej_options, "ome-tiff": _ome_options}


# --- Zarr ----------------------------------------------------------------------------

#: NGFF axes for axis letters.
_NGFF_AXES = {
    "T": {"name": "t", "type": "time"},
    "C": {"name": "c", "type": "channel"},
    "S": {"name": "c", "type": "channel"},
    "Z": {"name": "z", "type": "space"},
    "Y": {"name": "y", "type": "space"},
    "X": {"name": "x", "type": "space"},
}


def _write_zarr(result, temp: Path, scheduler, like: FileInfo, record) -> None:
    """A Zarr array (of the input's Zarr format): dimension names, and our pixel sizes
    (``scale``, ``units``) and record as attributes."""
    import zarr

    zarr_format = like.extra.get("zarr_format", 3)
    attrs: dict[str, Any] = _own_keys(like, record)
    names, layout = _dimension_names(like, result.ndim), {}
    if names and zarr_format == 3:
        layout["dimension_names"] = names
    elif names:
        attrs["_ARRAY_DIMENSIONS"] = names  # xarray's names for a Zarr v2 array
    target = zarr.create_array(
        str(temp), shape=result.shape, chunks=result.chunksize, dtype=result.dtype,
        zarr_format=zarr_format, attributes=attrs, **layout,
    )  # fmt: skip
    _store(result, target, scheduler)


def _dimension_names(like: FileInfo, ndim: int) -> list[str] | None:
    """The input's dimension names, else names of its axis letters (all known, distinct)."""
    dims = like.extra.get("dims")
    if dims and len(dims) == ndim:
        return list(dims)
    names = [_NGFF_AXES.get(letter, {}).get("name") for letter in like.axes or ""]
    return names if names and all(names) and len(set(names)) == len(names) else None


def _write_ome_zarr(result, temp: Path, scheduler, like: FileInfo, record) -> None:
    """An OME-Zarr multiscale image: the result at level 0, then 2x block means of its
    last two spatial axes while the smaller is at least :data:`PYRAMID_MIN_SIDE`.  Its
    axes go in NGFF's order (time, channel, space): an RGB TIFF's samples come first."""
    import dask.array as da
    import zarr

    version = like.extra.get("ngff_version") if like.format == "ome-zarr" else None
    version = version if version in ("0.4", "0.5") else NGFF_VERSION
    zarr_format = 2 if version == "0.4" else 3
    axes = _ngff_axes(like, result.ndim)
    order = _ngff_order(axes)
    if order != list(range(result.ndim)):  # e.g. RGB's samples last, ImageJ's Z before C
        result, axes = result.transpose(order), [axes[i] for i in order]
        like = replace(like.select(order), extra=like.extra, provenance=like.provenance)
    layout = ({"chunk_key_encoding": {"name": "v2", "separator": "/"}} if zarr_format == 2
              else {"dimension_names": [a["name"] for a in axes]})  # fmt: skip
    group = zarr.open_group(str(temp), mode="w", zarr_format=zarr_format)
    scale = list(like.scale or [1.0] * result.ndim)
    shift = list(like.translation) if like.translation is not None else None
    datasets, level, chunks = [], result, result.chunksize
    while True:
        path = str(len(datasets))
        target = group.create_array(path, shape=level.shape, dtype=level.dtype, **layout,
                                    chunks=tuple(map(min, chunks, level.shape)))  # fmt: skip
        # Levels past 0 are read from the files written here: no cluster needed.
        _store(level, target, scheduler if not datasets else None)
        datasets.append(_ngff_dataset(path, scale, shift))
        halved = _halved(da.from_zarr(target), axes)
        if halved is None:
            break
        level, halved_axes = halved
        shift = shift or [0.0] * result.ndim
        for axis in halved_axes:  # a block's centre: half an old pixel in
            shift[axis] += 0.5 * scale[axis]
            scale[axis] *= 2.0
    group.attrs.update(_ngff_attrs(version, axes, datasets, like, result.shape, record))


def _ngff_axes(like: FileInfo, ndim: int) -> list[dict[str, Any]]:
    """The input's NGFF axes, else axes of its letters (TCZYX's last ones when unknown)
    with its units."""
    given = like.extra.get("ngff_axes")
    if given and len(given) == ndim:
        return [dict(axis) for axis in given]
    letters = like.axes or _guess_axes(ndim)
    axes, units = [], like.units or (None,) * ndim
    for index, (letter, unit) in enumerate(zip(letters, units)):
        axis = dict(_NGFF_AXES.get(letter, {"name": f"dim_{index}"}))
        if any(a["name"] == axis["name"] for a in axes):
            axis["name"] += str(index)
        if unit and axis.get("type") in ("space", "time"):
            axis["unit"] = unit
        axes.append(axis)
    return axes


#: NGFF's axis order: time, then channel (and custom axes), then space.
_NGFF_RANK = {"time": 0, "channel": 1, "space": 3}


def _ngff_order(axes: list[dict[str, Any]]) -> list[int]:
    """The permutation that puts ``axes`` in NGFF's order, keeping the order within each
    kind (the spatial axes stay as they were: z, y, x)."""
    return sorted(range(len(axes)), key=lambda i: _NGFF_RANK.get(axes[i].get("type"), 2))


def _ngff_dataset(path: str, scale: list[float], shift: list[float] | None) -> dict:
    transforms: list[dict[str, Any]] = [{"type": "scale", "scale": list(scale)}]
    if shift is not None:
        transforms.append({"type": "translation", "translation": list(shift)})
    return {"path": path, "coordinateTransformations": transforms}


def _halved(level, axes: list[dict]) -> tuple[Any, list[int]] | None:
    """``level`` as 2x2 block means over its last two spatial axes (lazy, its dtype),
    or None once the smaller of them is under :data:`PYRAMID_MIN_SIDE`."""
    import dask.array as da

    space = [i for i, axis in enumerate(axes) if axis.get("type") == "space"][-2:]
    if len(space) < 2 or min(level.shape[i] for i in space) < PYRAMID_MIN_SIDE:
        return None
    mean = da.coarsen(np.mean, level, {i: 2 for i in space}, trim_excess=True)
    if level.dtype.kind in "iub":
        mean = mean.round()
    return mean.astype(level.dtype), space


def _ngff_attrs(version: str, axes, datasets, like: FileInfo, shape, record) -> dict:
    """The group's attributes: ``multiscales`` and ``omero`` (under ``ome`` from 0.5 on),
    and our record."""
    multiscale: dict[str, Any] = {"axes": axes, "datasets": datasets}
    if like.extra.get("name"):
        multiscale["name"] = like.extra["name"]
    if len(datasets) > 1:
        multiscale["type"] = "mean"
        multiscale["metadata"] = {"method": "2x2 block mean (napari-varblur)"}
    ome: dict[str, Any] = {"multiscales": [multiscale]}
    omero = _omero(like, shape)
    if omero:
        ome["omero"] = omero
    if version == "0.4":
        multiscale["version"] = "0.4"
        attrs = ome
    else:
        attrs = {"ome": {"version": version, **ome}}
    if record is not None:
        attrs[RECORD_KEY] = record
    return attrs


def _omero(like: FileInfo, shape) -> dict | None:
    """The input's ``omero`` block (channel colours, windows, labels) when it fits the
    channels, else one of the channel names."""
    channel = like.channel_axis
    if channel is None:
        return None
    omero = like.extra.get("omero") or {}
    if len(omero.get("channels", [])) == shape[channel]:
        return omero
    if like.channel_names and len(like.channel_names) == shape[channel]:
        return {"channels": [{"label": name, "active": True} for name in like.channel_names]}
    return None


_WRITERS = {"npy": _write_npy, "zarr": _write_zarr, "ome-zarr": _write_ome_zarr}


def _compute(result, scheduler) -> np.ndarray:
    """``result`` as a NumPy array, computed here or on the cluster."""
    if scheduler is None:
        return np.asarray(result.compute())
    return np.asarray(scheduler.compute(result).result())


def _slabs(result, scheduler, ahead: int = 2) -> Iterator[np.ndarray]:
    """Yield ``result`` computed one chunk of its first axis at a time, in order."""
    regions = _slab_regions(result)
    if scheduler is None:
        slabs = (result[region].compute() for region in regions)
    else:
        futures = (scheduler.compute(result[region]) for region in regions)
        slabs = _in_order(futures, ahead)
    for done, slab in enumerate(slabs, start=1):
        # Report before yielding: the writer may never ask for more after the last page.
        end = "\n" if done == len(regions) else ""
        print(f"\rvarblur: {done}/{len(regions)} slabs", end=end, file=sys.stderr, flush=True)
        yield np.asarray(slab)


def _in_order(futures: Iterator, ahead: int) -> Iterator[np.ndarray]:
    """Results of ``futures`` in order, keeping ``ahead`` more in flight on the cluster
    so its workers stay busy while a slab is written, without the whole result piling
    up there."""
    import collections

    window: collections.deque = collections.deque()
    for future in futures:
        window.append(future)
        if len(window) > ahead:
            yield window.popleft().result()
    while window:
        yield window.popleft().result()


def _slab_regions(result) -> list[slice]:
    """One slice of the first axis per chunk along it."""
    bounds = np.cumsum((0, *result.chunks[0]))
    return [slice(int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds)]


def _store(result, target, scheduler) -> None:
    """Compute ``result`` into ``target`` (a Zarr array, memmap or array) here.

    Locally it goes one slab of chunks (along the first axis) at a time, so memory holds
    a slab and its halo, never the whole graph's inputs.  On a cluster the blocks are
    computed there and written here: an array sent to the workers would be a copy.
    """
    import dask.array as da

    if scheduler is not None:
        from dask.array.core import slices_from_chunks
        from distributed import as_completed, progress

        blocks = list(result.to_delayed().ravel())
        futures = scheduler.compute(blocks)
        where = dict(zip((f.key for f in futures), slices_from_chunks(result.chunks)))
        progress(futures)
        for future in as_completed(futures):
            target[where[future.key]] = future.result()
        return
    if result.ndim == 0 or result.size == 0:
        target[...] = result.compute()
        return
    regions = _slab_regions(result)
    for done, region in enumerate(regions, start=1):
        da.store(result[region], target, regions=(region,), lock=True)
        print(f"\rvarblur: {done}/{len(regions)} slabs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
