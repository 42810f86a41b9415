"""Reading and writing image files for the batch command: TIFF, Zarr and .npy.

Inputs are opened lazily as dask arrays (nothing is loaded until blocks are needed);
outputs are written to a temporary name beside the target and moved into place at the
end, so an interrupted run never leaves a half-written file under the output's name.
"""

from __future__ import annotations

import contextlib
import itertools
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


def channel_axis_of(path: str | os.PathLike) -> int | None:
    """The samples (colour) axis of an RGB(A) TIFF, or ``None`` (other formats too)."""
    path = Path(path)
    if file_format(path) != "tif" or not path.exists():
        return None
    import tifffile

    try:
        with tifffile.TiffFile(path) as tif:
            axes = tif.series[0].axes
    except Exception:  # read_image reports unreadable files
        return None
    return axes.index("S") if "S" in axes else None


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
    """Compute the dask array ``result`` into ``path`` (format from the suffix).

    Zarr and .npy targets are filled one slab (a chunk along the first axis) at a time;
    a TIFF is written page by page as each slab is computed.  Memory holds one slab and
    its halo: the whole result only when the first axis is one chunk, or for a 2-D TIFF
    (one page).
    """
    path = Path(path)
    kind = file_format(path)
    with atomic_target(path, overwrite) as temp:
        if kind == "tif":
            _write_tiff(result, temp, scheduler)
            return
        if kind == "zarr":
            import zarr

            target = zarr.open_array(
                str(temp), mode="w", shape=result.shape, chunks=result.chunksize,
                dtype=result.dtype,
            )  # fmt: skip
        else:
            target = np.lib.format.open_memmap(
                temp, mode="w+", dtype=result.dtype, shape=result.shape
            )
        _store(result, target, scheduler)
        if kind == "npy":
            target.flush()
            del target


def _write_tiff(result, temp: Path, scheduler) -> None:
    """Write ``result`` as grey pages (its last two axes), one slab at a time.

    TIFF pages must go in order, so each slab (one chunk of the first axis) is computed
    whole, cut into pages and written before the next is computed.  ``minisblack`` keeps
    a trailing axis of length 3 or 4 an axis of the volume, not RGB samples.
    """
    import tifffile

    if result.ndim < 3 or result.size == 0:  # one page (or none): nothing to stream
        grey = "minisblack" if result.ndim >= 2 else None  # tifffile refuses it for 1-D
        tifffile.imwrite(temp, _compute(result, scheduler), photometric=grey)
        return
    page = result.shape[-2:]
    pages = (p for slab in _slabs(result, scheduler) for p in slab.reshape(-1, *page))
    tifffile.imwrite(temp, pages, shape=result.shape, dtype=result.dtype, photometric="minisblack")


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
