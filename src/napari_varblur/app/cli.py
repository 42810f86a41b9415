"""Command line: ``varblur demo``, ``varblur blur``, ``varblur fit``, ``varblur deblur``
and ``varblur beads`` (also ``python -m napari_varblur``).

Exit status: 0 done; 1 the run failed (a file system error, a missing optional package);
2 a bad argument or an input the command refuses (one line on stderr that names it);
130 interrupted (Ctrl-C): an existing output is never replaced by an interrupted run.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from .._version import __version__
from ..adapters.interrupts import caught_interrupts, committed, raise_if_interrupted
from . import beads_command, blur_command, deblur_command, fit_command
from .arguments import Help
from .demo import demo

__all__ = ["demo", "main", "run_command"]


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
        "image, 'varblur deblur' undoes a blur, 'varblur beads' measures a sigma map from "
        "a bead image (also: python -m napari_varblur).",
    )
    parser.add_argument("--version", action="version", version=f"varblur {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser(
        "demo",
        help="blur the built-in sample on every backend and compare",
        formatter_class=Help,
    )
    p_demo.add_argument("--size", type=int, default=256, help="sample size in pixels")
    p_demo.add_argument(
        "--view", action="store_true", help="then open napari with the sample and the widget"
    )
    commands = {"blur": blur_command.add_parser(sub), "fit": fit_command.add_parser(sub),
                "deblur": deblur_command.add_parser(sub),
                "beads": beads_command.add_parser(sub)}  # fmt: skip
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's parser: "varblur blur: error: ..."
        commands.get(args.command, parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    runs = {"blur": blur_command.run, "fit": fit_command.run, "deblur": deblur_command.run,
            "beads": beads_command.run}  # fmt: skip
    if args.command in runs:
        return run_command(args.command, runs[args.command], args)
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
                from .viewer import open_demo_viewer
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


def run_command(name: str, work: Callable[[argparse.Namespace], int], args) -> int:
    """``work(args)``, with its errors as one line on stderr and an exit status: 2 for a
    bad argument or a refused input (the library's ``ValueError``s, an ``ImageFileError``
    of :mod:`napari_varblur.adapters.files`), 1 for a failure (``OSError``, a missing
    package), 130 for Ctrl-C.  Other exceptions are bugs: they keep their traceback."""
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
