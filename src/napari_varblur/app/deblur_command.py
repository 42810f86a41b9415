"""``varblur deblur``: deblur an image file tile by tile, with ``varblur blur``'s file
handling, provenance, exit codes and Ctrl-C behaviour (:mod:`.blur_command`); its
options come from ``deblur``'s declarations (:data:`~napari_varblur.core.params.DEBLUR_PARAMS`).
"""

from __future__ import annotations

import argparse

from ..core.options import DeblurOptions
from ..core.params import DEBLUR_PARAMS
from ..restore import deblur
from . import blur_command

#: The blur's options, then deblur's own.
DECLARED = (*blur_command.DECLARED, "iterations", "method", "regularization", "acceleration",
            "pixel_spacing", "stop")  # fmt: skip


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``varblur deblur`` to the subcommands ``sub``; return its parser."""
    return blur_command.add_parser(
        sub,
        "deblur",
        DEBLUR_PARAMS,
        DECLARED,
        help="deblur an image file (Richardson-Lucy or RL-TV with a sigma map), tile by tile",
        description="Deblur INPUT into OUTPUT (.tif/.tiff, .zarr or .npy, by suffix): "
        "Richardson-Lucy (or RL-TV) undoing the blur that --sigma/--sigma-map and the blur "
        "options describe. Tiles run with dask, each with a halo of four radii; OUTPUT is "
        "written under a temporary name and moved into place at the end, and is never "
        "replaced without --overwrite.",
    )


def _deblur(image, sigma, mask, args, axes, channel):
    options = DeblurOptions.pick(vars(args)).replace(axes=axes, channel_axis=channel)
    return deblur(image, sigma, mask=mask, **options.kwargs())


def run(args: argparse.Namespace) -> int:
    """Deblur the files; raises on errors (the caller reports them in one line)."""
    return blur_command.run(args, "deblur", _deblur)
