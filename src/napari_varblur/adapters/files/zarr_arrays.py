"""Zarr arrays and OME-Zarr images (NGFF 0.4: Zarr v2; 0.5: Zarr v3, under "ome"),
read and written with their axes, scale, translation, channels and our record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from .info import (
    NGFF_VERSION,
    PYRAMID_MIN_SIDE,
    RECORD_KEY,
    FileInfo,
    ImageFile,
    ImageFileError,
    _channel_of,
    _guess_axes,
    _listed_scale,
    _own_keys,
    _unit_name,
)
from .streaming import _store

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
