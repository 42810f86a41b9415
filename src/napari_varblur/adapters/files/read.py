"""Opening an image file lazily, with its :class:`~.info.FileInfo`: the entry point
over the formats' readers."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .info import FileInfo, ImageFile, ImageFileError, file_format
from .tiff import _read_tiff
from .zarr_arrays import _read_zarr


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


def _read_npy(path: Path) -> ImageFile:
    import dask.array as da

    data = np.load(path, mmap_mode="r")
    return ImageFile(da.from_array(data, chunks="auto"), FileInfo(format="npy"))


_READERS = {"npy": _read_npy, "tif": _read_tiff, "zarr": _read_zarr}
