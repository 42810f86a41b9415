"""What ``varblur``'s commands share: options made from the declared parameters
(:mod:`napari_varblur.core.params`), and readers of the options that name files.

An option of a library parameter is declared there once (flag, help, argparse keywords,
default) and added here by name; the parsed values go back into the library's options
objects by name (:meth:`~napari_varblur.core.options.Options.pick`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..adapters.request import marked_pixels
from ..core.params import Param


def add_declared(
    parser: argparse.ArgumentParser,
    params: Mapping[str, Param],
    names: Iterable[str],
    notes: Mapping[str, str] | None = None,
) -> None:
    """Add the options of the declared parameters ``names`` (``--nan-policy`` for
    ``nan_policy``): their one-line help (plus ``notes[name]``), their argparse keywords
    and their default."""
    notes = notes or {}
    for name in names:
        param = params[name]
        keywords = dict(param.cli or {})
        if not param.required and "action" not in keywords:
            keywords.setdefault("default", param.default)
        parser.add_argument(param.flag, help=param.help + notes.get(name, ""), **keywords)


class Help(argparse.HelpFormatter):
    """Help that shows each option's default, where it has one (not a flag's: a
    ``store_false`` flag such as ``--isotropic`` is off by default, its value True)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        flag = action.nargs == 0  # store_true, store_false: on or off
        shown = not flag and action.default is not None and action.default is not False
        if shown and action.default is not argparse.SUPPRESS and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def channel_argument(text: str | None, source) -> int | None:
    """``--channel-axis``: an int, 'none', or (not given) the axis the file declares."""
    from ..adapters.files import channel_axis_of

    if text is None:
        return channel_axis_of(source)
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--channel-axis: expected an int or 'none', got {text!r}") from None


def mask_argument(args: argparse.Namespace, shape: tuple[int, ...], axes: tuple[int, ...]):
    """``--mask`` as the library's mask (True = valid), or None: non-zero values are
    marked (valid, or invalid with ``--invert-mask``); of the input's shape or the
    blurred axes' (in ``--axes`` order), as for ``--sigma-map``.  Stays lazy."""
    if not args.mask:
        if args.invert_mask:
            raise ValueError("--invert-mask: needs --mask FILE")
        return None
    marks = "invalid" if args.invert_mask else "valid"
    return marked_pixels(read_named(args.mask, "--mask"), shape, axes, "--mask", marks)


def read_named(path: str, option: str) -> Any:
    """Read the file an option names; a problem with it names the option."""
    from ..adapters.files import ImageFileError, read_image

    try:
        values, _ = read_image(path)
    except ImageFileError as err:
        raise ImageFileError(f"{option}: {err}") from err
    return values


def add_invert_mask(parser: argparse.ArgumentParser) -> None:
    """``--invert-mask``: the command line's way to say what ``--mask`` marks."""
    text = "--mask marks the invalid pixels instead (non-zero = leave out)"
    parser.add_argument("--invert-mask", action="store_true", help=text)


def check_target(name: str, path: Path, inputs: Iterable[Path], overwrite: bool) -> None:
    """Refuse an output before the work, not after it (a fit may take minutes): a format
    the writer lacks, an input's name, an existing file without ``--overwrite``, a missing
    folder.  The message starts with the option's ``name``."""
    from ..adapters.files import ImageFileError, file_format

    file_format(path)
    if any(path.resolve() == given.resolve() for given in inputs):
        raise ImageFileError(f"{name} is the same file as an input; write to a new file")
    if path.exists() and not overwrite:
        raise ImageFileError(f"{name}: {str(path)!r} exists; pass --overwrite to replace it")
    if not path.parent.exists():
        raise ImageFileError(f"{name}: the folder {str(path.parent)!r} does not exist")


def map_of_axes(values: np.ndarray, axes: tuple[int, ...], per_axis: bool) -> np.ndarray:
    """A map of the image's shape (plus a trailing axis of one sigma per axis with
    ``per_axis``) as a map of ``axes`` only, in their order (``varblur blur
    --sigma-map``'s): the other axes share one map, so their first index is it."""
    ndim = values.ndim - per_axis
    one = values[tuple(slice(None) if a in axes else 0 for a in range(ndim))]
    order = [sorted(axes).index(a) for a in axes]
    return one.transpose(order + [len(axes)] * per_axis)
