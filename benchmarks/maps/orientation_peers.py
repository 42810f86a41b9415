"""The orientation sweep's peers (``orientation.py --peer-size N``): command-line
variable blurs on the 2-D maps, against our exact result.

ImageMagick 6's ``-compose blur`` (``convert-im6.q16``, per-pixel elliptical Gaussian,
16-bit PNGs, sigma = 16 x map/16, one process per map; needs OpenCV to write the PNGs)
and GEGL's ``gegl:variable-blur`` (GIMP's variable blur; float TIFFs, sRGB-encoded in
and decoded out since GEGL blurs in linear light, sigma = radius x linear mask), each
skipped with a note when not installed.  A constant map (sigma 16 everywhere, at
256x256) against our global blur at sigma 16 checks the sigma convention.
"""

from __future__ import annotations

import math
import shutil
import statistics
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

import common
import internals
import numpy as np
from common import interleaved
from orientation_cases import TOLERANCE, exact_call, image_2d, maps_2d
from orientation_report import route_text

from napari_varblur import gaussian_blur

IM = "convert-im6.q16"


def srgb(x):
    """Linear light in [0, 1] to sRGB-encoded values."""
    x = np.asarray(x, np.float64)
    return np.where(x <= 0.0031308, 12.92 * x, 1.055 * np.power(np.maximum(x, 0), 1 / 2.4) - 0.055)


def linear(x):
    """sRGB-encoded values to linear light."""
    x = np.asarray(x, np.float64)
    return np.where(x <= 0.04045, x / 12.92, np.power((np.maximum(x, 0) + 0.055) / 1.055, 2.4))


def run_process(cmd: list[str]) -> float:
    """Wall seconds of a command (``RuntimeError`` when it fails)."""
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr[-400:]}")
    return elapsed


class Peer:
    """A command-line variable blur: files in, one process, a [0, 1] image out."""

    def __init__(self, tmp: Path, smax: float):
        self.tmp, self.smax = tmp, smax


class ImageMagick(Peer):
    name = "ImageMagick -compose blur"
    runs = 1

    def write(self, norm, smap):
        import cv2

        cv2.imwrite(str(self.tmp / "img.png"), np.round(norm * 65535).astype(np.uint16))
        q = np.round(np.clip(smap / self.smax, 0, 1) * 65535).astype(np.uint16)
        cv2.imwrite(str(self.tmp / "map.png"), np.dstack([np.zeros_like(q), q, q]))  # BGR

    def commands(self):
        i, m, o = (str(self.tmp / f) for f in ("img.png", "map.png", "out.png"))
        s = f"{self.smax:g}"
        blur = [IM, i, m, "-define", f"compose:args={s}x{s}", "-compose", "blur", "-composite", o]
        io = [IM, i, m, "-compose", "over", "-composite", str(self.tmp / "io.png")]
        return blur, io

    def read(self):
        import cv2

        out = cv2.imread(str(self.tmp / "out.png"), cv2.IMREAD_UNCHANGED).astype(np.float64)
        return (out[..., 0] if out.ndim == 3 else out) / 65535


class Gegl(Peer):
    name = "GEGL variable-blur"
    runs = 3

    def __init__(self, tmp, smax, hq=False):
        super().__init__(tmp, smax)
        self.hq = hq
        if hq:
            self.name = "GEGL variable-blur high-quality"

    def write(self, norm, smap):
        import tifffile

        tifffile.imwrite(self.tmp / "img.tif", srgb(norm).astype(np.float32))
        mask = srgb(np.clip(smap / self.smax, 0, 1))
        tifffile.imwrite(self.tmp / "map.tif", mask.astype(np.float32))

    def commands(self):
        i, m, o = (str(self.tmp / f) for f in ("img.tif", "map.tif", "out.tif"))
        hq = ["high-quality=true"] if self.hq else []
        blur = ["gegl", i, "-o", o, "--", "variable-blur", f"radius={self.smax:g}",
                "linear-mask=true", *hq, "aux=[", "load", f"path={m}", "]"]  # fmt: skip
        io = ["gegl", i, "-o", str(self.tmp / "io.tif"), "--", "gegl:add", "aux=[", "load",
              f"path={m}", "]"]  # fmt: skip
        return blur, io

    def read(self):
        import tifffile

        out = tifffile.imread(self.tmp / "out.tif").astype(np.float64)
        return linear(out[..., 0] if out.ndim == 3 else out)


def tool_versions() -> dict:
    """The peers' versions, where they are installed."""
    out = {}
    if shutil.which(IM):
        out["imagemagick"] = subprocess.run([IM, "-version"], capture_output=True,
                                            text=True).stdout.splitlines()[0]  # fmt: skip
    if shutil.which("gegl"):
        q = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "gegl"], capture_output=True,
                           text=True)  # fmt: skip
        out["gegl"] = q.stdout.strip() or "installed (version unknown)"
    return out


def run_peer(peer, norm, smap, reference, border: int) -> dict:
    """One peer on one map: its time per process, I/O time and errors."""
    peer.write(norm, smap)
    blur, io = peer.commands()
    total = [run_process(blur) for _ in range(peer.runs)]
    result = peer.read()
    base = [run_process(io) for _ in range(peer.runs)]
    diff = np.abs(result - reference)
    inner = diff[border:-border, border:-border] if border else diff
    row = dict(impl=peer.name, process_s=statistics.median(total), runs=peer.runs,
               io_s=statistics.median(base), error=float(diff.max()),
               error_interior=float(inner.max()), rms=float(np.sqrt((diff**2).mean())))  # fmt: skip
    row["compute_s"] = row["process_s"] - row["io_s"]
    return row


def installed_peers() -> tuple[list, list[str]]:
    """The peers found on this machine, and a note for each one that is not."""
    found, notes = [], []
    have_cv2 = common.installed("cv2")
    if shutil.which(IM) and have_cv2:
        found.append(ImageMagick)
    else:
        why = f"{IM} not found (apt-get install -y imagemagick)" if have_cv2 else "no cv2"
        notes.append(f"ImageMagick skipped: {why}")
    if shutil.which("gegl"):
        found += [Gegl, partial(Gegl, hq=True)]
    else:
        notes.append("GEGL skipped: gegl not found (apt-get install -y gegl)")
    return found, notes


def normalised(n: int):
    """The sample at ``n x n``, its minimum and range, and it scaled to [0, 1]."""
    image = image_2d(n)
    lo, span = float(image.min()), float(np.ptp(image))
    return image, lo, span, (image.astype(np.float64) - lo) / span


def constant_rows(found, tmp: Path, n: int, smax: float, border: int) -> list[dict]:
    """The sigma convention: a constant map (``smax`` everywhere) against our global blur."""
    cal = min(n, 256)
    image, lo, span, norm = normalised(cal)
    ours = gaussian_blur(image, smax, mode="nearest", backend="numba", precision="float64")
    reference = (ours - lo) / span
    rows = []
    for make in found:
        row = run_peer(make(tmp, smax), norm, np.full(image.shape, smax), reference, border)
        row.update(map="constant 16 (= global sigma 16)", size=cal)
        rows.append(row)
        print(f"peer {row['impl']} constant map {cal}^2: err {row['error']:.1e}", flush=True)
    return rows


def our_rows(image, smap, name, lo, span, border):
    """Ours on one map: tolerance 1e-3 (median of 3) and the exact gather (once); the
    exact result in [0, 1] units is the peers' reference."""
    n = image.shape[0]
    exact_fn, _ = exact_call(image, smap, "nearest")
    start = time.perf_counter()
    exact = exact_fn()
    exact_s = time.perf_counter() - start
    reference = (exact.astype(np.float64) - lo) / span
    tol = partial(gaussian_blur, image, smap, tolerance=TOLERANCE, mode="nearest",
                  backend="numba")  # fmt: skip
    tol_s = statistics.median(interleaved({"t": tol}, 3)["t"])
    diff = np.abs((tol().astype(np.float64) - lo) / span - reference)
    chosen = route_text(internals.route(image, smap, "nearest", TOLERANCE))
    rows = [
        dict(impl=f"ours, tolerance 1e-3 (in process; {chosen})", map=name, size=n,
             process_s=None, compute_s=tol_s, error=float(diff.max()),
             error_interior=float(diff[border:-border, border:-border].max()),
             rms=float(np.sqrt((diff**2).mean()))),
        dict(impl="ours, exact gather (in process, once)", map=name, size=n, process_s=None,
             compute_s=exact_s, error=0.0, error_interior=0.0, rms=0.0),
    ]  # fmt: skip
    return rows, reference


def peer_rows(args) -> dict:
    """The peers on the 2-D maps at ``--peer-size``, and a constant-map check of their
    sigma convention, each against our exact result in [0, 1] units."""
    found, notes = installed_peers()
    if not found:
        return dict(rows=[], notes=notes)
    n, smax = args.peer_size, 16.0
    border = math.ceil(3 * smax)
    with tempfile.TemporaryDirectory(prefix="varblur-peers-") as tmp:
        rows = constant_rows(found, Path(tmp), n, smax, border)
        image, lo, span, norm = normalised(n)
        for name, (_, smap) in maps_2d((n, n), 1.0, smax).items():
            if args.peer_maps and name not in args.peer_maps:
                continue
            ours, reference = our_rows(image, smap, name, lo, span, border)
            rows += ours
            for make in found:
                peer = make(Path(tmp), smax)
                try:
                    row = run_peer(peer, norm, smap, reference, border)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    notes.append(f"{peer.name} on {name} failed: {exc}")
                    continue
                row.update(map=name, size=n)
                rows.append(row)
                print(f"peer {row['impl']} {name} {n}^2: {row['process_s']:.2f} s/process "
                      f"(I/O {row['io_s']:.2f} s), err {row['error']:.1e} "
                      f"(interior {row['error_interior']:.1e})", flush=True)  # fmt: skip
    return dict(rows=rows, notes=notes)
