"""``varblur fit``: estimate a sigma map from a sharp and a blurred image file.

Reads the pair (any ``varblur blur`` input format), runs
:func:`napari_varblur.fit_sigma_map` and writes the map (and optionally the residual)
with the blurred image's metadata.  JAX and optax are imported only when the command
runs, so ``varblur blur`` never pays for them.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..core.options import FitOptions
from ..core.params import FIT_PARAMS, PARAMS
from ..core.spec import normalize_channel_axis
from .arguments import (
    Help,
    add_declared,
    add_invert_mask,
    channel_argument,
    check_target,
    map_of_axes,
    mask_argument,
)

__all__ = ["add_parser", "run"]

#: ``fit_sigma_map``'s parameters ``varblur fit`` takes, in the order ``--help`` lists
#: them (``--channel-axis`` and ``--invert-mask`` go after ``--axes``).
DECLARED = ("max_sigma", "spacing", "smoothness", "mode", "truncate", "axes")
MORE = ("mask",)
LAST = ("nan_policy", "per_axis", "intensity", "max_steps", "tol", "max_error")
#: What the command line adds to a parameter's help.
NOTES = {
    "axes": " (default: all but --channel-axis)",
    "channel_axis": "; it shares the map; 'none' for none (default: the samples axis of "
    "an RGB(A) TIFF, else none)",
    "mode": " (as in varblur blur)",
}


def add_parser(sub) -> argparse.ArgumentParser:
    """Add ``varblur fit`` to the ``varblur`` subcommands ``sub``; return its parser."""
    p = sub.add_parser(
        "fit",
        help="estimate a sigma map from a sharp and a blurred image",
        description="Fit the sigma map that blurs SHARP into BLURRED (fit_sigma_map: a "
        "smooth B-spline map, least squares by L-BFGS) and write it to OUTPUT (.tif/.tiff, "
        ".zarr or .npy) with BLURRED's metadata (pixel sizes, units) and a record of the "
        "fit.  The map is NaN where the blur is not observable (no texture there) unless "
        "--model-map.  It has the fitted axes only, in the order of --axes (axes not "
        "fitted, such as channels, share one map): 'varblur blur --sigma-map' takes it "
        "with the same --axes.  A fit that stops at --max-steps is still written, with a "
        "warning; exit status 0.",
        formatter_class=Help,
    )
    p.add_argument("sharp", help="the sharper image: .tif/.tiff (OME-TIFF too), .zarr or .npy")
    p.add_argument("blurred", help="the blurrier image of the same scene, same shape")
    p.add_argument("output", help="the sigma map (pixels): .tif/.tiff, .zarr or .npy")
    add_declared(p, FIT_PARAMS, DECLARED, NOTES)
    add_declared(p, PARAMS, ["channel_axis"], NOTES)
    add_declared(p, FIT_PARAMS, MORE, NOTES)
    add_invert_mask(p)
    add_declared(p, FIT_PARAMS, LAST, NOTES)
    p.add_argument("--model-map", action="store_true",
                   help="write the finite map the model used everywhere (its smooth "
                   "continuation where not observable) instead of NaN there")  # fmt: skip
    residual = "also write BLURRED minus the fitted model (NaN at invalid pixels)"
    p.add_argument("--residual", metavar="FILE", help=residual)
    p.add_argument("--overwrite", action="store_true", help="replace existing output files")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``varblur fit``; raises on errors (the caller reports them in one line)."""
    from ..adapters.files import ImageFileError

    sharp_path, blurred_path, target = Path(args.sharp), Path(args.blurred), Path(args.output)
    if args.residual and Path(args.residual).resolve() == target.resolve():
        raise ImageFileError("--residual is the same file as OUTPUT; write to another file")
    outputs = {"OUTPUT": target, "--residual": Path(args.residual) if args.residual else None}
    for name, path in outputs.items():
        if path is not None:
            check_target(name, path, (sharp_path, blurred_path), args.overwrite)
    sharp, _ = _read(sharp_path, "SHARP")
    blurred, info = _read(blurred_path, "BLURRED")
    axes = _fit_axes(args, blurred_path, blurred.ndim)
    fit, caught = _fit(args, sharp, blurred, axes)
    _summarise(fit, caught, args)
    record = _fit_record(args, info, axes, fit)
    result = fit.model_map if args.model_map else fit.sigma_map
    what = "model map" if args.model_map else "sigma map, NaN where not observable"
    # A per-axis map's trailing axis has no description in the input's metadata.
    like = None if args.per_axis else info.select(axes)
    _write(map_of_axes(result, axes, args.per_axis), target, like, record, args, what)
    if args.residual:
        _write(fit.residual, Path(args.residual), info, record, args, "residual")
    return 0


def _read(path: Path, name: str) -> tuple[np.ndarray, Any]:
    """An input as a NumPy array (the fit holds it in memory) and its
    :class:`~.files.FileInfo`."""
    from ..adapters.files import ImageFileError, read_image

    try:
        data, meta = read_image(path)
    except ImageFileError as err:
        raise ImageFileError(f"{name}: {err}") from err
    return np.asarray(data), meta


def _fit_axes(args: argparse.Namespace, source: Path, ndim: int) -> tuple[int, ...]:
    given = tuple(args.axes) if args.axes else None
    return normalize_channel_axis(channel_argument(args.channel_axis, source), given, ndim)[1]


def _fit(args: argparse.Namespace, sharp: np.ndarray, blurred: np.ndarray, axes):
    """Run the fit; return it and the warnings it raised."""
    from ..fit import fit_sigma_map  # JAX and optax: only when a fit runs

    options = FitOptions.pick(vars(args)).replace(axes=axes)
    mask = mask_argument(args, tuple(blurred.shape), axes)  # in memory: the fit holds its
    mask = None if mask is None else np.asarray(mask)  # images
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = fit_sigma_map(sharp, blurred, max_sigma=args.max_sigma, mask=mask,
                            callback=_progress(args.max_steps), **options.kwargs())  # fmt: skip
    return fit, caught


def _progress(max_steps: int):
    """The fit's callback: stop at a Ctrl-C even one a callback dropped, and show the
    step on a terminal."""
    from ..adapters.interrupts import raise_if_interrupted

    shown = sys.stderr.isatty()

    def on_step(step: int, loss: float) -> bool:
        raise_if_interrupted()
        if shown:
            print(f"\rvarblur fit: step {step}/{max_steps}, loss {loss:.6g}", end="",
                  file=sys.stderr, flush=True)  # fmt: skip
        return False

    return on_step


def _summarise(fit, caught, args: argparse.Namespace) -> None:
    """The fit in a few lines on stdout; its warnings one line each on stderr."""
    if sys.stderr.isatty():
        print(file=sys.stderr)  # end the progress line
    state = "converged" if fit.converged else f"not converged (--max-steps {args.max_steps})"
    print(f"varblur fit: {fit.steps} steps in {fit.seconds:.1f} s, {state}")
    observable = np.asarray(fit.observable)
    stderr = np.asarray(fit.stderr)[observable]
    median = f"{float(np.median(stderr)):.3g} px" if stderr.size else "n/a"
    print(f"varblur fit: observable at {observable.mean():.1%} of the pixels; median "
          f"standard error there {median}; noise {fit.noise:.3g}")  # fmt: skip
    if getattr(fit, "gain", None) is not None:
        print(f"varblur fit: intensity gain {fit.gain:.4g}, offset {fit.offset:.4g}")
    for warning in caught:
        text = " ".join(str(warning.message).split()).removeprefix("fit_sigma_map: ")
        print(f"varblur fit: warning: {text}", file=sys.stderr)
    if not fit.converged:
        print(f"varblur fit: warning: stopped after {fit.steps} steps before converging; "
              "the map is written, but check it or raise --max-steps", file=sys.stderr)  # fmt: skip


#: ``varblur fit``'s options that say where, not how: left out of the record.
_NOT_RECORDED = ("command", "blurred", "output", "residual", "overwrite")


def _fit_record(args: argparse.Namespace, info, axes: tuple[int, ...], fit) -> dict[str, Any]:
    """How the map was made (stored in it): the options, the fitted axes, and the fit's
    outcome."""
    from ..adapters.files import provenance_record

    parameters = {k: v for k, v in vars(args).items() if k not in _NOT_RECORDED}
    parameters.update(axes=list(axes), steps=fit.steps, converged=fit.converged,
                      noise=fit.noise, observable=float(np.mean(fit.observable)))  # fmt: skip
    return provenance_record("varblur fit", parameters, source=args.blurred,
                             previous=info.provenance)  # fmt: skip


def _write(values: np.ndarray, path: Path, like, record, args, what: str) -> None:
    import dask.array as da

    from ..adapters.files import write_image

    array = da.from_array(np.ascontiguousarray(values, dtype=np.float32))
    write_image(array, path, overwrite=args.overwrite, like=like, provenance=record)
    print(f"varblur fit: wrote {path} {tuple(array.shape)} float32: {what}")
