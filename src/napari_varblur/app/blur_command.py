"""``varblur blur``: blur an image file chunk by chunk and write what it read.

Its options for the library's parameters come from the declarations
(:mod:`napari_varblur.core.params`); the others (``--dtype``, ``--scheduler``,
``--overwrite``, ``--invert-mask``) belong to the command alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import engine
from ..adapters.numpy_api import gaussian_blur
from ..adapters.request import sigma_argument
from ..core.options import BlurOptions
from ..core.params import PARAMS
from ..core.spec import normalize_channel_axis
from .arguments import (
    Help,
    add_declared,
    add_invert_mask,
    channel_argument,
    mask_argument,
    read_named,
)

#: The library's parameters ``varblur blur`` takes, in the order ``--help`` lists them.
DECLARED = ("sigma", "sigma_map", "mask", "nan_policy", "mode", "cval", "truncate", "axes",
            "channel_axis", "backend", "precision", "tolerance", "world_units",
            "model")  # fmt: skip
#: What the command line adds to a parameter's help.
NOTES = {
    "mask": "; a file in any INPUT format",
    "axes": " (default: all)",
    "channel_axis": "; 'none' for no such axis (default: the file's: RGB(A) samples, or "
    "the channel axis of ImageJ, OME-TIFF or OME-Zarr metadata; else none)",
    "world_units": " (pixel sizes of OME-TIFF, ImageJ, OME-Zarr or our own outputs)",
}
#: ``varblur blur``'s options that say where, not how: left out of the record.
_NOT_RECORDED = ("command", "input", "output", "overwrite", "scheduler")


def add_parser(sub, name: str = "blur", params=PARAMS, declared=DECLARED, **texts):
    """Add ``varblur blur`` (or a command with its file handling: ``name``, the
    declarations ``params`` and the options ``declared``) to the subcommands ``sub``;
    return its parser."""
    texts.setdefault("help", "blur an image file (TIFF, Zarr or .npy) chunk by chunk")
    texts.setdefault(
        "description",
        "Blur INPUT into OUTPUT (.tif/.tiff, .zarr or .npy, by suffix). Work is "
        "chunked with dask; OUTPUT is written under a temporary name and moved into place "
        "at the end, and is never replaced without --overwrite.",
    )
    p = sub.add_parser(name, formatter_class=Help, **texts)
    p.add_argument("input", help="input image: .tif/.tiff (RGB(A), ImageJ, OME-TIFF), .zarr "
                   "(an array, or an OME-Zarr group) or .npy")  # fmt: skip
    p.add_argument("output", help="output image: .tif/.tiff, .zarr or .npy, written in the "
                   "input's kind with its metadata (.ome.tif/.ome.zarr: OME)")  # fmt: skip
    add_declared(p, params, declared[:3], NOTES)
    add_invert_mask(p)
    add_declared(p, params, declared[3:], NOTES)
    p.add_argument("--dtype", choices=["float", "same"], default="float",
                   help="float: the precision's dtype; same: rounded and clipped to the "
                   "input's")  # fmt: skip
    p.add_argument("--scheduler", help="address of a dask.distributed scheduler to run on")
    p.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    return p


def _blur(image, sigma, mask, args, axes, channel):
    options = BlurOptions.pick(vars(args)).replace(axes=axes, channel_axis=channel)
    return gaussian_blur(image, sigma, mask=mask, **options.kwargs())


def run(args: argparse.Namespace, name: str = "blur", apply=_blur) -> int:
    """Blur the files (or ``apply`` another operation of the image, the sigma, the mask,
    the arguments, the blurred axes and the channel axis: ``varblur deblur``); raises
    on errors (the caller reports them in one line)."""
    from ..adapters.files import ImageFileError, read_image, write_image

    source, target = Path(args.input), Path(args.output)
    if target.resolve() == source.resolve():
        raise ImageFileError("OUTPUT is the same file as INPUT; write to a new file")
    image, info = read_image(source)
    compiled = engine.compiles(args.backend)
    given = tuple(args.axes) if args.axes else None
    channel, axes = normalize_channel_axis(channel_argument(args.channel_axis, source), given,
                                           image.ndim)  # fmt: skip
    shape = tuple(image.shape)
    result = apply(image, _sigma(args, shape, info.scale, axes), mask_argument(args, shape, axes),
                   args, axes, channel)  # fmt: skip
    if args.dtype == "same":
        result = _to_dtype(result, image.dtype)
    client = None
    if args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
    try:
        write_image(result, target, overwrite=args.overwrite, scheduler=client, like=info,
                    provenance=_record(args, info, channel, axes, name))  # fmt: skip
    finally:
        if client is not None:
            client.close()
    if engine.compiles(args.backend) > compiled:  # a scheduler's workers are not counted
        print(f"varblur {name}: compiled kernels (first run only; cached for the next runs)",
              file=sys.stderr)  # fmt: skip
    print(f"varblur {name}: wrote {args.output} {tuple(result.shape)} {result.dtype}")
    return 0


def _record(args, info, channel: int | None, axes: tuple[int, ...], name: str) -> dict[str, Any]:
    """How ``varblur blur`` made its output (stored in it): every option as given, with
    the axes and channel axis it blurred by, the input's pixel sizes under
    ``--world-units``, and the input's own record as ``previous``."""
    from ..adapters.files import provenance_record

    parameters = {k: v for k, v in vars(args).items() if k not in _NOT_RECORDED}
    parameters.update(axes=list(axes), channel_axis=channel)
    if args.world_units:
        parameters["pixel_size"] = [info.scale[a] for a in axes]
    return provenance_record(f"varblur {name}", parameters, source=args.input,
                             previous=info.provenance)  # fmt: skip


def _sigma(args, shape: tuple[int, ...], scale, axes: tuple[int, ...]):
    """``--sigma`` (one per blurred axis, in pixels), times ``--sigma-map`` if given.

    A map of the blurred axes' shape is in the order of ``--axes`` (``--axes 2 1`` takes
    a map of shape ``(n2, n1)``); the library's adapter helpers place it in the image.
    """
    from ..adapters.files import ImageFileError

    given = args.sigma[0] if len(args.sigma) == 1 else args.sigma
    pixel_size = None
    if args.world_units:
        if scale is None:
            raise ImageFileError(f"{args.input!r} has no physical pixel sizes for --world-units")
        pixel_size = [scale[a] for a in axes]
    values = read_named(args.sigma_map, "--sigma-map") if args.sigma_map else None
    return sigma_argument(given, shape, axes, pixel_size=pixel_size, map_values=values,
                          map_name="--sigma-map")  # fmt: skip


def _to_dtype(result, dtype: np.dtype):
    """Round and clip to an integer dtype's range; plain cast for floats.  NaN (a
    window with no valid tap, a NaN cval) has no integer value: an error while writing
    (the output is then never written), not a silent 0."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        checked = result.map_blocks(_refuse_nan, dtype=result.dtype)
        return checked.round().clip(info.min, info.max).astype(dtype)
    if dtype.kind == "b":
        return (result >= 0.5).astype(dtype)
    return result.astype(dtype)


def _refuse_nan(block: np.ndarray) -> np.ndarray:
    if np.isnan(block).any():
        raise ValueError(
            f"--dtype: the result has NaN ({int(np.isnan(block).sum())} in one chunk: "
            "pixels with no valid tap in their window, or a NaN cval), which an integer "
            "output cannot hold; use --dtype float"
        )
    return block
