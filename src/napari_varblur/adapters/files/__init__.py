"""Reading and writing image files for the batch commands: TIFF, Zarr and .npy.

Inputs are opened lazily as dask arrays (nothing is loaded until blocks are needed),
with what the file says about them (:class:`FileInfo`: axes, pixel sizes, units,
channels, RGB(A)).  Outputs are written in the input's kind (RGB(A), ImageJ hyperstack,
OME-TIFF, OME-Zarr, Zarr) with that description and a record of how they were made,
to a temporary name beside the target that is moved into place at the end, so an
interrupted run never leaves a half-written file under the output's name.

The modules: :mod:`.info` (the description and shared names), :mod:`.read`,
:mod:`.write`, one per format family (:mod:`.tiff`, :mod:`.zarr_arrays`; ``.npy`` is
in the reader and the writer), and :mod:`.streaming` (computing a result slab by slab).
"""

from .info import (
    NGFF_VERSION,
    PYRAMID_MIN_SIDE,
    RECORD_KEY,
    SUFFIXES,
    FileInfo,
    ImageFile,
    ImageFileError,
    file_format,
)
from .read import channel_axis_of, read_image
from .write import atomic_target, output_format, provenance_record, write_image

__all__ = [
    "NGFF_VERSION",
    "PYRAMID_MIN_SIDE",
    "RECORD_KEY",
    "SUFFIXES",
    "FileInfo",
    "ImageFile",
    "ImageFileError",
    "atomic_target",
    "channel_axis_of",
    "file_format",
    "output_format",
    "provenance_record",
    "read_image",
    "write_image",
]
