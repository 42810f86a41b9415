"""Command line: ``varblur demo``, ``varblur blur`` and ``varblur fit`` (also ``python -m
napari_varblur``).

Exit status: 0 done; 1 the run failed (a file system error, a missing optional package);
2 a bad argument or an input the command refuses (one line on stderr that names it);
130 interrupted (Ctrl-C): an existing output is never replaced by an interrupted run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import backends
from .._version import __version__
from ..core.params import PARAMS, help_of
from ..core.rules import CONTRACT_TOLERANCE
from ..core.spec import (
    BACKENDS,
    NAN_POLICIES,
    PRECISIONS,
    normalize_channel_axis,
    normalize_tolerance,
)
from ..sample import fluorescence_sample
from .cli_fit import add_fit_parser, fit_command
from .interrupts import caught_interrupts, committed, raise_if_interrupted
from .numpy_api import gaussian_blur
from .request import marked_pixels, sigma_argument


def demo(size: int = 256, out=sys.stdout) -> int:
    """Blur the built-in sample on every available backend and check the contract.

    Returns 0 when every backend is within tolerance of ``reference``, else 1.
    """
    image, sigma_map = fluorescence_sample(size)
    scale = max(1.0, float(np.abs(image).max()))
    status = backends.available_backends()
    names = [n for n in ("numba", "jax") if not status[n].startswith("unavailable")]
    print(
        f"napari-varblur demo: {size}x{size} fluorescence sample, sigma map in "
        f"[{sigma_map.min():.2f}, {sigma_map.max():.2f}], mode='crop'",
        file=out,
    )
    for name, text in status.items():
        print(f"  {name}: {text}", file=out)
    print(file=out)
    print(
        "| backend | device | precision | first call s | time s | max abs diff | tolerance | ok |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|---|", file=out)
    failures = 0
    for precision in ("float32", "float64"):
        reference = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
        for name in ["reference", *names]:
            before, t0 = backends.compiles(name), time.perf_counter()
            result = gaussian_blur(image, sigma_map, backend=name, precision=precision)
            first = time.perf_counter() - t0
            compiled = " (compiled)" if backends.compiles(name) > before else ""
            t0 = time.perf_counter()
            result = gaussian_blur(image, sigma_map, backend=name, precision=precision)
            elapsed = time.perf_counter() - t0
            diff = float(np.abs(result.astype(np.float64) - reference).max())
            tolerance = CONTRACT_TOLERANCE[precision] * scale
            ok = diff <= tolerance and result.dtype == np.dtype(precision)
            failures += not ok
            device = backends.load(name).device_name()
            print(
                f"| {name} | {device} | {precision} | {first:.3f}{compiled} | {elapsed:.3f} | "
                f"{diff:.3g} | {tolerance:.3g} | {'yes' if ok else 'NO'} |",
                file=out,
            )
    print(
        "\ntolerance: the contract's bound on max abs diff from the float64 reference, "
        "1e-5 (float32) or 1e-12 (float64) times max(1, max|image|); (compiled): the first "
        "call compiled kernels (first run only: Numba caches them on disk; JAX per process "
        "unless JAX_COMPILATION_CACHE_DIR is set)",
        file=out,
    )
    print(file=out)
    print(
        "all backends meet the contract"
        if not failures
        else f"{failures} backend run(s) broke the contract",
        file=out,
    )
    return 1 if failures else 0


class _Help(argparse.HelpFormatter):
    """Help that shows each option's default, where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default is not None and action.default is not False
        if shown and action.default is not argparse.SUPPRESS and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr (``varblur blur: error: --backend: ...``),
    exit status 2: the usage block argparse prints first buried the message."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message.removeprefix('argument ')}\n")


def main(argv: list[str] | None = None) -> int:
    """Run ``varblur`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    0 done, 1 failed, 2 a bad argument (one line on stderr), 130 interrupted.  Ctrl-C is
    handled for the whole run (:mod:`.interrupts`), so it cannot be lost in a callback.
    Run as the program (``argv`` None), an interrupted run ends the process at once.
    """
    with caught_interrupts():
        try:
            status = _main(argv)
        except KeyboardInterrupt:  # while parsing or importing: no command ran yet
            print("varblur: interrupted", file=sys.stderr)
            status = 130
    if status == 130 and argv is None:
        _exit_now(status)
    return status


def _exit_now(status: int) -> None:
    """End the process without the interpreter's shutdown, once a run has cleaned up
    after a Ctrl-C: worker threads still in a Numba kernel held the exit up for as long
    as a chunk takes, and XLA programs still running crashed it (SIGSEGV)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _main(argv: list[str] | None) -> int:
    parser = _Parser(
        prog="varblur",
        description="Gaussian blur with a global sigma or a per-pixel sigma map: "
        "'varblur demo' checks every backend on the built-in sample, 'varblur blur' "
        "blurs image files, 'varblur fit' estimates a sigma map from a sharp and a blurred "
        "image (also: python -m napari_varblur).",
    )
    parser.add_argument("--version", action="version", version=f"varblur {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser(
        "demo",
        help="blur the built-in sample on every backend and compare",
        formatter_class=_Help,
    )
    p_demo.add_argument("--size", type=int, default=256, help="sample size in pixels")
    p_demo.add_argument(
        "--view", action="store_true", help="then open napari with the sample and the widget"
    )
    commands = {"blur": _add_blur_parser(sub), "fit": add_fit_parser(sub, _Help)}
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's parser: "varblur blur: error: ..."
        commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command == "blur":
        return blur_command(args)
    if args.command == "fit":
        return run_command("fit", fit_command, args)
    if args.command == "demo":
        if args.size < 8:
            parser.error("--size: must be at least 8")
        if args.view and not _has_display():
            print(
                "varblur demo --view: no display found (DISPLAY is not set); "
                "run without --view, or on a desktop or under Xvfb",
                file=sys.stderr,
            )
            return 2
        status = demo(args.size)
        if args.view:
            try:
                from ..gui.viewer import open_demo_viewer
            except ImportError as err:
                print(
                    f"varblur demo --view needs napari ({err}); install it with: "
                    "pip install 'napari-varblur[all]'",
                    file=sys.stderr,
                )
                return 2
            open_demo_viewer()
        return status
    return 2  # pragma: no cover - argparse enforces a command


def _has_display() -> bool:
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


#: ``varblur blur``'s options: flags, the parameter whose one-line help they show (or
#: their own help, for options of the command alone) and argparse's keywords.
BLUR_OPTIONS: tuple[tuple[tuple[str, ...], str, dict[str, Any]], ...] = (
    (("--sigma",), "sigma", dict(type=float, nargs="+", required=True)),
    (("--sigma-map",), "sigma_map", {}),
    (("--mask",), "mask", dict(metavar="FILE")),
    (
        ("--invert-mask",),
        "--mask marks the invalid pixels instead (non-zero = leave out)",
        dict(action="store_true"),
    ),
    (("--nan-policy",), "nan_policy", dict(choices=NAN_POLICIES, default="propagate")),
    (("--mode",), "mode", dict(default="crop")),
    (("--cval",), "cval", dict(type=float, default=0.0)),
    (("--truncate",), "truncate", dict(type=float, default=3.0)),
    (("--axes",), "axes", dict(type=int, nargs="+")),
    (("--channel-axis",), "channel_axis", {}),
    (("--backend",), "backend", dict(choices=BACKENDS, default="auto")),
    (("--precision",), "precision", dict(choices=PRECISIONS, default="float32")),
    (("--tolerance",), "tolerance", {}),
    (("--world-units",), "world_units", dict(action="store_true")),
    (
        ("--dtype",),
        "float: the precision's dtype; same: rounded and clipped to the input's",
        dict(choices=["float", "same"], default="float"),
    ),
    (("--scheduler",), "address of a dask.distributed scheduler to run on", {}),
    (("--overwrite",), "replace an existing OUTPUT", dict(action="store_true")),
)
#: What the command line adds to a parameter's help.
_CLI_NOTES = {
    "--mask": "; a file in any INPUT format",
    "--axes": " (default: all)",
    "--channel-axis": "; 'none' for no such axis (default: the file's: RGB(A) samples, or "
    "the channel axis of ImageJ, OME-TIFF or OME-Zarr metadata; else none)",
    "--world-units": " (pixel sizes of OME-TIFF, ImageJ, OME-Zarr or our own outputs)",
}


def _add_blur_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "blur",
        help="blur an image file (TIFF, Zarr or .npy) chunk by chunk",
        description="Blur INPUT into OUTPUT (.tif/.tiff, .zarr or .npy, by suffix). Work is "
        "chunked with dask; OUTPUT is written under a temporary name and moved into place "
        "at the end, and is never replaced without --overwrite.",
        formatter_class=_Help,
    )
    p.add_argument("input", help="input image: .tif/.tiff (RGB(A), ImageJ, OME-TIFF), .zarr "
                   "(an array, or an OME-Zarr group) or .npy")  # fmt: skip
    p.add_argument("output", help="output image: .tif/.tiff, .zarr or .npy, written in the "
                   "input's kind with its metadata (.ome.tif/.ome.zarr: OME)")  # fmt: skip
    for flags, text, keywords in BLUR_OPTIONS:
        described = help_of(text) if text in PARAMS else text
        p.add_argument(*flags, help=described + _CLI_NOTES.get(flags[0], ""), **keywords)
    return p


def blur_command(args: argparse.Namespace) -> int:
    """Run ``varblur blur``: errors are one line on stderr (see :func:`run_command`)."""
    return run_command("blur", _blur_files, args)


def run_command(name: str, work: Callable[[argparse.Namespace], int], args) -> int:
    """``work(args)``, with its errors as one line on stderr and an exit status: 2 for a
    bad argument or a refused input (the library's ``ValueError``s, an
    :class:`~.files.ImageFileError`), 1 for a failure (``OSError``, a missing package), 130
    for Ctrl-C.  Other exceptions are bugs: they keep their traceback."""
    prefix = f"varblur {name}"
    try:
        status = work(args)
        raise_if_interrupted()  # a Ctrl-C held off while an output was moved into place
        return status
    except KeyboardInterrupt:
        done = committed()
        said = f"wrote only {', '.join(done)}" if done else "no output was written"
        print(f"{prefix}: interrupted; {said}", file=sys.stderr)
        return 130
    except ModuleNotFoundError as err:  # an optional package (distributed, for --scheduler)
        extra = _EXTRAS.get((err.name or "").split(".")[0], "all")
        print(f"{prefix}: error: {err}; install it with: pip install "
              f"'napari-varblur[{extra}]'", file=sys.stderr)  # fmt: skip
        return 1
    except (ValueError, TypeError) as err:  # ArgumentError and ImageFileError among them
        print(f"{prefix}: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except (OSError, ImportError) as err:
        print(f"{prefix}: error: {_one_line(err)}", file=sys.stderr)
        return 1


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


#: Optional packages and the extra that installs each.
_EXTRAS = {"distributed": "dask", "napari": "napari", "cupy": "cuda"}


def _channel_argument(text: str | None, source) -> int | None:
    """``--channel-axis``: an int, 'none', or (not given) an RGB(A) TIFF's samples axis."""
    from .files import channel_axis_of

    if text is None:
        return channel_axis_of(source)
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"--channel-axis: expected an int or 'none', got {text!r}") from None


def _tolerance_argument(text: str | None) -> float | None:
    """``--tolerance``: checked by the same normaliser as ``gaussian_blur``."""
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--tolerance: expected a number in (0, 0.1], got {text!r}") from None
    return normalize_tolerance(value)


def _blur_files(args) -> int:
    from pathlib import Path

    from .files import ImageFileError, read_image, write_image

    source, target = Path(args.input), Path(args.output)
    if target.resolve() == source.resolve():
        raise ImageFileError("OUTPUT is the same file as INPUT; write to a new file")
    image, info = read_image(source)
    compiled = backends.compiles(args.backend)
    channel, axes = normalize_channel_axis(
        _channel_argument(args.channel_axis, source), tuple(args.axes) if args.axes else None,
        image.ndim,
    )  # fmt: skip
    result = gaussian_blur(
        image,
        _sigma_argument(args, tuple(image.shape), info.scale, axes),
        mode=args.mode,
        cval=args.cval,
        truncate=args.truncate,
        axes=axes,
        backend=args.backend,
        precision=args.precision,
        tolerance=_tolerance_argument(args.tolerance),
        mask=_mask_argument(args, tuple(image.shape), axes),
        nan_policy=args.nan_policy,
        channel_axis=channel,
    )
    if args.dtype == "same":
        result = _to_dtype(result, image.dtype)
    client = None
    if args.scheduler:
        from distributed import Client

        client = Client(args.scheduler)
    try:
        write_image(result, target, overwrite=args.overwrite, scheduler=client, like=info,
                    provenance=_blur_record(args, info, channel, axes))  # fmt: skip
    finally:
        if client is not None:
            client.close()
    if backends.compiles(args.backend) > compiled:  # a scheduler's workers are not counted
        print("varblur blur: compiled kernels (first run only; cached for the next runs)",
              file=sys.stderr)  # fmt: skip
    print(f"varblur blur: wrote {args.output} {tuple(result.shape)} {result.dtype}")
    return 0


#: ``varblur blur``'s options that say where, not how: left out of the record.
_NOT_RECORDED = ("command", "input", "output", "overwrite", "scheduler")


def _blur_record(args, info, channel: int | None, axes: tuple[int, ...]) -> dict[str, Any]:
    """How ``varblur blur`` made its output (stored in it): every option as given, with
    the axes and channel axis it blurred by, the input's pixel sizes under
    ``--world-units``, and the input's own record as ``previous``."""
    from .files import provenance_record

    parameters = {k: v for k, v in vars(args).items() if k not in _NOT_RECORDED}
    parameters.update(axes=list(axes), channel_axis=channel)
    if args.world_units:
        parameters["pixel_size"] = [info.scale[a] for a in axes]
    return provenance_record("varblur blur", parameters, source=args.input,
                             previous=info.provenance)  # fmt: skip


def _sigma_argument(args, shape: tuple[int, ...], scale, axes: tuple[int, ...]):
    """``--sigma`` (one per blurred axis, in pixels), times ``--sigma-map`` if given.

    A map of the blurred axes' shape is in the order of ``--axes`` (``--axes 2 1`` takes
    a map of shape ``(n2, n1)``); the library's adapter helpers place it in the image.
    """
    from .files import ImageFileError

    given = args.sigma[0] if len(args.sigma) == 1 else args.sigma
    pixel_size = None
    if args.world_units:
        if scale is None:
            raise ImageFileError(f"{args.input!r} has no physical pixel sizes for --world-units")
        pixel_size = [scale[a] for a in axes]
    values = _read_named(args.sigma_map, "--sigma-map") if args.sigma_map else None
    return sigma_argument(given, shape, axes, pixel_size=pixel_size, map_values=values,
                          map_name="--sigma-map")  # fmt: skip


def _mask_argument(args, shape: tuple[int, ...], axes: tuple[int, ...]):
    """``--mask`` as the library's mask (True = valid), or None: non-zero values are
    marked (valid, or invalid with ``--invert-mask``); of the input's shape or the
    blurred axes' (in ``--axes`` order), as for ``--sigma-map``.  Stays lazy."""
    if not args.mask:
        if args.invert_mask:
            raise ValueError("--invert-mask: needs --mask FILE")
        return None
    return marked_pixels(_read_named(args.mask, "--mask"), shape, axes, "--mask",
                         invalid=args.invert_mask)  # fmt: skip


def _read_named(path: str, option: str):
    """Read the file an option names; a problem with it names the option."""
    from .files import ImageFileError, read_image

    try:
        values, _ = read_image(path)
    except ImageFileError as err:
        raise ImageFileError(f"{option}: {err}") from err
    return values


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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
