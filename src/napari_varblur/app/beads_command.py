"""``varblur beads``: measure a sigma map from an image of sub-resolution beads.

Reads the image (any ``varblur blur`` input format) with its pixel sizes, runs
:func:`napari_varblur.measure.sigma_map_from_beads` and writes the map (and its
uncertainty) with the input's metadata and a record of the measurement, and the table
of beads as CSV.  Every output is checked before the measurement and written under a
temporary name, moved into place at the end.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from ..core.bead_params import BEAD_PARAMS, BeadOptions
from .arguments import Help, add_declared, check_target, map_of_axes

__all__ = ["add_parser", "run"]

#: ``sigma_map_from_beads``'s parameters ``varblur beads`` takes, in ``--help``'s order
#: (``per_axis`` is ``--isotropic``, after them).
DECLARED = ("spacing", "threshold", "min_separation", "saturation", "degree", "axes",
            "truncate")  # fmt: skip
#: What the command line adds to a parameter's help.
NOTES = {
    "spacing": " (default: INPUT's pixel sizes, if its metadata has them; else 1)",
    "axes": " (default: all)",
}
#: The outputs, by option: the attribute of ``args`` that names each.
OUTPUTS = {"--map": "map", "--uncertainty": "uncertainty", "--table": "table"}
#: ``varblur beads``'s options that say where, not how: left out of the record.
_NOT_RECORDED = ("command", "input", *OUTPUTS.values(), "overwrite")
#: Names that :func:`~napari_varblur.adapters.files.write_image` writes as OME, whose
#: axes (space last) leave no place for a per-axis map's trailing axis of sigmas.
_OME = (".ome.tif", ".ome.tiff", ".ome.zarr")


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``varblur beads`` to the ``varblur`` subcommands ``sub``; return its parser."""
    p = sub.add_parser(
        "beads",
        help="measure a sigma map from an image of sub-resolution beads",
        description="Find the beads in INPUT, fit each with the blur's Gaussian and fit a "
        "smooth field over them (sigma_map_from_beads); write the sigma map (pixels; "
        "one sigma per spatial axis as a trailing axis unless --isotropic) to --map with "
        "INPUT's pixel sizes and a record of the measurement, and one row per candidate "
        "bead (its status 'ok' or why it was left out) to --table.  The map has the "
        "spatial axes only, in --axes order: 'varblur blur --sigma-map' and 'varblur "
        "deblur --sigma-map' take it as is (with the same --axes).  FWHMs are in the "
        "unit of --spacing.",
        formatter_class=Help,
    )
    p.add_argument("input", help="the bead image: .tif/.tiff (OME-TIFF, ImageJ too), .zarr "
                   "or .npy; 2-D or 3-D (z first), or a stack of them (see --axes)")  # fmt: skip
    p.add_argument("--map", metavar="FILE", help="write the sigma map (pixels, float32): "
                   ".tif/.tiff, .zarr or .npy")  # fmt: skip
    table = ("write the beads as CSV: one row per candidate (centre, sigmas, FWHM, "
             "amplitude, background, chi2, status)")  # fmt: skip
    p.add_argument("--table", metavar="FILE.csv", help=table)
    p.add_argument("--uncertainty", metavar="FILE", help="also write the map's standard "
                   "error per pixel (same layout as --map)")  # fmt: skip
    add_declared(p, BEAD_PARAMS, DECLARED, NOTES)
    p.add_argument("--isotropic", dest="per_axis", action="store_false",
                   help="one sigma for all axes: the map has no trailing axis (right for "
                   "round beads in 2-D only)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``varblur beads``; raises on errors (the caller reports them in one line)."""
    source = Path(args.input)
    targets = _targets(args, source)
    image, info = _read(source)
    spacing, origin = _spacing(args, info, image.ndim)
    fit = _measure(image, args, spacing)
    print(f"varblur beads: {fit}")
    print(f"varblur beads: FWHM in {origin}")
    if "--table" in targets:
        _write_table(fit.beads, targets["--table"], args.overwrite)
    record = _record(args, info, fit, spacing)
    like = _map_info(info, fit.axes, spacing, args.per_axis)
    outside = f"{np.mean(fit.extrapolated):.0%} extrapolated (outside the beads' hull)"
    for option, values, what in (
        ("--map", fit.sigma_map, f"sigma map in pixels, {outside}"),
        ("--uncertainty", fit.uncertainty, "standard error of the sigma map, pixels"),
    ):
        if option in targets:
            _write_map(map_of_axes(values, fit.axes, args.per_axis), targets[option], like,
                       record, args.overwrite, what)  # fmt: skip
    return 0


def _targets(args: argparse.Namespace, source: Path) -> dict[str, Path]:
    """The outputs asked for, by option, each refused before the measurement if it
    cannot be written."""
    from ..adapters.files import ImageFileError

    if args.uncertainty and not args.map:
        raise ImageFileError("--uncertainty: needs --map FILE (the map it describes)")
    if not (args.map or args.table):
        raise ImageFileError("nothing to write: give --map FILE, --table FILE.csv or both")
    targets = {o: Path(getattr(args, a)) for o, a in OUTPUTS.items() if getattr(args, a)}
    seen: dict[Path, str] = {}
    for option, path in targets.items():
        if path.resolve() in seen:
            raise ImageFileError(f"{option} is the same file as {seen[path.resolve()]}")
        seen[path.resolve()] = option
        if option == "--table":
            _check_table(path, source, args.overwrite)
            continue
        check_target(option, path, (source,), args.overwrite)
        if args.per_axis and path.name.lower().endswith(_OME):
            raise ImageFileError(
                f"{option}: an OME file has no place for the map's trailing axis (one sigma "
                "per spatial axis); name it .tif, .zarr or .npy, or pass --isotropic"
            )
    return targets


def _check_table(path: Path, source: Path, overwrite: bool) -> None:
    from ..adapters.files import ImageFileError

    if path.suffix.lower() != ".csv":
        raise ImageFileError(f"--table: {str(path)!r} is written as CSV; name it .csv")
    if path.resolve() == source.resolve():
        raise ImageFileError("--table is the same file as INPUT; write to a new file")
    if path.exists() and not overwrite:
        raise ImageFileError(f"--table: {str(path)!r} exists; pass --overwrite to replace it")
    if not path.parent.exists():
        raise ImageFileError(f"--table: the folder {str(path.parent)!r} does not exist")


def _read(path: Path) -> tuple[np.ndarray, Any]:
    """INPUT as a NumPy array (the measurement holds it in memory), and its
    :class:`~napari_varblur.adapters.files.FileInfo`."""
    from ..adapters.files import ImageFileError, read_image

    try:
        data, info = read_image(path)
    except ImageFileError as err:
        raise ImageFileError(f"INPUT: {err}") from err
    return np.asarray(data), info


def _spacing(args: argparse.Namespace, info, ndim: int) -> tuple[Any, str]:
    """The voxel size to measure with (``--spacing``, else the file's pixel sizes along
    the spatial axes, else None), and what unit the FWHMs are in, said for the user."""
    if args.spacing:
        return args.spacing, "the unit of --spacing"
    axes = _spatial_axes(args.axes, ndim)
    if info.scale is None or axes is None:
        return None, "pixels (INPUT has no pixel sizes; give them with --spacing)"
    sizes = tuple(info.scale[a] for a in axes)
    units = {info.units[a] for a in axes} if info.units else {None}
    unit = units.pop() if len(units) == 1 else None
    said = f"INPUT's pixel sizes {', '.join(f'{s:g}' for s in sizes)}; --spacing overrides them"
    return sizes, f"{unit} ({said})" if unit else f"the unit of INPUT's pixel sizes ({said})"


def _spatial_axes(given, ndim: int) -> tuple[int, ...] | None:
    """``--axes`` (default: all) as non-negative axes; None where they are out of range
    (the measurement then says what is wrong with them)."""
    axes = tuple(given) if given else tuple(range(ndim))
    if any(not -ndim <= a < ndim for a in axes):
        return None
    return tuple(a % ndim for a in axes)


def _measure(image: np.ndarray, args: argparse.Namespace, spacing):
    """Run the measurement, stopping at a Ctrl-C between batches of beads and showing
    its progress on a terminal."""
    from ..adapters.interrupts import raise_if_interrupted
    from ..measure import sigma_map_from_beads_steps

    options = BeadOptions.pick(vars(args)).replace(spacing=spacing)
    steps = sigma_map_from_beads_steps(image, **options.kwargs())
    shown = sys.stderr.isatty()
    while True:
        try:
            stage, done, total = next(steps)
        except StopIteration as finished:
            if shown:
                print(file=sys.stderr)  # end the progress line
            return finished.value
        raise_if_interrupted()
        if shown:
            print(f"\rvarblur beads: {stage}: {done}/{total}", end="", file=sys.stderr,
                  flush=True)  # fmt: skip


def _record(args: argparse.Namespace, info, fit, spacing) -> dict[str, Any]:
    """How the map was made (stored in it): the options, the spatial axes, the voxel
    size used, and what was kept."""
    from ..adapters.files import provenance_record

    parameters = {k: v for k, v in vars(args).items() if k not in _NOT_RECORDED}
    summary = fit.summary
    parameters.update(axes=list(fit.axes), spacing=spacing, kept=summary["kept"],
                      candidates=summary["candidates"], field_degree=summary["degree"])  # fmt: skip
    return provenance_record("varblur beads", parameters, source=args.input,
                             previous=info.provenance)  # fmt: skip


def _map_info(info, axes: tuple[int, ...], spacing, per_axis: bool):
    """The map's description: INPUT's along the spatial axes, with the voxel size used
    (``--spacing`` overrides the file's); a per-axis map's trailing axis of sigmas has
    none, so it goes to the plain kind of INPUT's format (ImageJ and OME have no place
    for it), with our own record of the pixel sizes."""
    like = info.select(axes)
    if spacing is not None:
        sizes = np.broadcast_to(np.asarray(spacing, dtype=float), (len(axes),))
        like = replace(like, scale=tuple(float(s) for s in sizes))
    if not per_axis:
        return like
    plain = {"imagej": "tiff", "ome-tiff": "tiff", "ome-zarr": "zarr"}
    return replace(
        like,
        format=plain.get(like.format, like.format),
        axes=like.axes + "Q" if like.axes else None,
        scale=like.scale + (1.0,) if like.scale else None,
        units=like.units + (None,) if like.units else None,
        translation=like.translation + (0.0,) if like.translation else None,
    )


def _write_map(values: np.ndarray, path: Path, like, record, overwrite: bool, what: str):
    import dask.array as da

    from ..adapters.files import write_image

    array = da.from_array(np.ascontiguousarray(values, dtype=np.float32))
    write_image(array, path, overwrite=overwrite, like=like, provenance=record)
    print(f"varblur beads: wrote {path} {tuple(array.shape)} float32: {what}")


def _write_table(table, path: Path, overwrite: bool) -> None:
    from ..adapters.files import atomic_target

    with atomic_target(path, overwrite) as temp:
        table.to_csv(temp)
    kept = int(np.count_nonzero(table.ok))
    print(f"varblur beads: wrote {path}: {table.rows} candidate beads, {kept} kept")
