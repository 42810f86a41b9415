"""Reading and writing image files for the batch command: TIFF, Zarr and .npy.

Inputs are opened lazily as dask arrays (nothing is loaded until blocks are needed);
outputs are written to a temporary name beside the target and moved into place at the
end, so an interrupted run never leaves a half-written file under the output's name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import numpy as np

SUFFIXES = (".tif", ".tiff", ".zarr", ".npy")


class ImageFileError(ValueError):
    """A file that cannot be read or written as asked; the message names it."""


def file_format(path: Path) -> str:
    name = path.name.lower()
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return "tif" if suffix in (".tif", ".tiff") else suffix[1:]
    raise ImageFileError(f"{str(path)!r}: unsupported format; use " + ", ".join(SUFFIXES))


def read_image(path: str | os.PathLike) -> tuple[object, tuple[float, ...] | None]:
    """Open ``path`` lazily; return the dask array and its pixel size per axis (or None).

    Pixel sizes come from OME-TIFF ``PhysicalSize{X,Y,Z}`` or ImageJ TIFF metadata.
    """
    import dask.array as da

    path = Path(path)
    kind = file_format(path)
    if not path.exists():
        raise ImageFileError(f"{str(path)!r} does not exist")
    try:
        if kind == "npy":
            data = np.load(path, mmap_mode="r")
            return da.from_array(data, chunks="auto"), None
        if kind == "zarr":
            return da.from_zarr(str(path)), None
        import tifffile

        with tifffile.TiffFile(path) as tif:
            series = tif.series[0]
            scale = _tiff_scale(tif, series.axes, series.shape)
        store = tifffile.imread(path, aszarr=True)
        return da.from_zarr(store), scale
    except ImageFileError:
        raise
    except Exception as err:  # the readers raise many types; name the file and the cause
        raise ImageFileError(f"{str(path)!r}: could not read it as {kind}: {err}") from err


def _tiff_scale(tif, axes: str, shape: tuple[int, ...]) -> tuple[float, ...] | None:
    sizes: dict[str, float] = {}
    if tif.is_ome and tif.ome_metadata:
        root = ET.fromstring(tif.ome_metadata)
        for element in root.iter():
            if element.tag.endswith("Pixels"):
                for letter in "XYZ":
                    value = element.get(f"PhysicalSize{letter}")
                    if value is not None:
                        sizes[letter] = float(value)
                break
    elif tif.is_imagej:
        meta = tif.imagej_metadata or {}
        page = tif.pages[0]
        for letter, tag in (("X", "XResolution"), ("Y", "YResolution")):
            if tag in page.tags:
                num, den = page.tags[tag].value
                if num:
                    sizes[letter] = den / num
        if "spacing" in meta:
            sizes["Z"] = float(meta["spacing"])
    if not sizes:
        return None
    return tuple(sizes.get(letter, 1.0) for letter in axes.upper()[: len(shape)])


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


def write_image(result, path: str | os.PathLike, *, overwrite: bool, scheduler=None) -> None:
    """Compute the dask array ``result`` into ``path`` (format from the suffix)."""
    path = Path(path)
    kind = file_format(path)
    with atomic_target(path, overwrite) as temp:
        if kind == "zarr":
            import zarr

            target = zarr.open_array(
                str(temp), mode="w", shape=result.shape, chunks=result.chunksize,
                dtype=result.dtype,
            )  # fmt: skip
        elif kind == "npy":
            target = np.lib.format.open_memmap(
                temp, mode="w+", dtype=result.dtype, shape=result.shape
            )
        else:
            target = np.empty(result.shape, dtype=result.dtype)
        _store(result, target, scheduler)
        if kind == "npy":
            target.flush()
            del target
        elif kind == "tif":
            import tifffile

            tifffile.imwrite(temp, target)


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
    bounds = np.cumsum((0, *result.chunks[0]))
    count = len(bounds) - 1
    for i in range(count):
        region = slice(int(bounds[i]), int(bounds[i + 1]))
        da.store(result[region], target, regions=(region,), lock=True)
        print(f"\rvarblur: {i + 1}/{count} slabs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
