"""TIFF files: plain (tifffile's JSON description), RGB(A), ImageJ hyperstacks and
OME-TIFF, read and written with their pixel sizes, channels and our record."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path
from typing import Any

from .info import (
    _RECORD_NAMESPACE,
    _UNIT_SYMBOLS,
    RECORD_KEY,
    FileInfo,
    ImageFile,
    _channel_of,
    _guess_axes,
    _listed_scale,
    _own_keys,
    _unit_name,
)
from .streaming import _compute, _slabs

# --- TIFF: plain (tifffile's JSON description), ImageJ, OME ----------------------------

#: ImageJ metadata carried to an ImageJ output as it was read.
_IMAGEJ_KEPT = ("Ranges", "LUTs", "Labels", "mode", "min", "max", "fps", "loop", "Properties")


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
