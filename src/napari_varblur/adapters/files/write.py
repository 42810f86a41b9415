"""Writing a result in the input's kind of file: the format by the output's name, a
temporary name moved into place only on success, and the record of how it was made."""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..interrupts import committing
from .info import _FILE_EXTRAS, FileInfo, ImageFileError, file_format
from .streaming import _store
from .tiff import _TIFF_OPTIONS, _ome_axes, _samples_options, _tiff_options, _write_tiff
from .zarr_arrays import _write_ome_zarr, _write_zarr


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
    from ..._version import __version__

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


_WRITERS = {"npy": _write_npy, "zarr": _write_zarr, "ome-zarr": _write_ome_zarr}
