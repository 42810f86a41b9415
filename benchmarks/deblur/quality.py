"""Deblur quality: a sigma map against the best single sigma, RL-TV, and the frame's edge.

Measures ``napari_varblur.deblur`` (Numba, float64 arithmetic, ``model="gather"``) on
natural greyscale images bundled with scikit-image (offline):

1. Field-dependent blur.  ``camera``, ``astronaut`` (grey) and ``coins`` scaled to a
   peak of P photons (P = 1e4 and 1e3), blurred by ``gaussian_blur`` (``reflect``) with
   ``sigma_maps.radial``: 1 px at the centre rising (quadratically) to 4 px in the
   corners, then Poisson noise (fixed seeds).  PSNR (data range = the truth's peak P,
   whole image) at every iteration (``callback``) of

   a) ``deblur`` with the true map (``richardson_lucy``),
   b) the best single-sigma RL: ``deblur`` with a global sigma swept over 1.0..4.0 in
      0.25 steps, best over sigma and iterations,
   c) ``rl_tv`` with the true map, regularization 0.001, 0.002, 0.005, 0.01: its best,
      and whether its PSNR at the last iteration is within 0.1 dB of its best, against
      plain RL's (a) PSNR at that same iteration;

   every curve runs 200 iterations ("best" is over all of them; the best over the first
   100 is kept in the JSON too).  Targets: a - b >= 1 dB at P = 1e4 and >= 0.5 dB at
   1e3; rl_tv - plain RL >= 0.5 dB at 1e3 (read at the last iteration; the best-vs-best
   difference is reported too).

2. The frame's edge.  A 512x512 crop from the middle of scikit-image's ``retina``
   (1411x1411, grey, peak 1e4 photons): the LARGE image is blurred (``reflect``) and
   made noisy, then truth and observation are cropped, so the crop's border sees content
   from outside it.  Deblurred (30 iterations) with ``mode`` crop, reflect, mirror,
   nearest and ``constant`` (cval 0: zero padding), and by scikit-image's
   ``richardson_lucy(observed, psf, 30, clip=False)`` with the sampled normalised
   Gaussian PSF of radius ceil(3 sigma).  RMS error against the truth in the band within
   ceil(3 sigma) of the border and in the interior, for the observation and each deblur.
   Global sigma 3 (so scikit-image applies), then the radial map (1 px at the crop's
   centre to 4 px at its corners, 4 beyond) for our modes (band ceil(3 * 4) = 12 px).
   Target: band RMS after deblurring below the observation's for crop, reflect, mirror.

    python benchmarks/deblur/quality.py            # about 13 minutes on 2 shared cores
    python benchmarks/deblur/quality.py --quick    # small images, few iterations
    python benchmarks/deblur/quality.py --report results/X.json   # its report again

Writes ``benchmarks/results/<date>_<machine>_deblur_quality.json`` and ``.md``
(``--quick``: ``results/quick/``).  ``docs/make_deblur_figure.py`` draws one case.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
from common import md_table

from napari_varblur import deblur, gaussian_blur
from napari_varblur.sigma_maps import radial

PRECISION = "float64"
IMAGES = ("camera", "astronaut", "coins")
PEAKS = (1e4, 1e3)
SIGMAS = tuple(float(s) for s in np.arange(1.0, 4.001, 0.25))
REGULARIZATIONS = (0.001, 0.002, 0.005, 0.01)
ITERATIONS = 200
EDGE_MODES = ("crop", "reflect", "mirror", "nearest", "constant")
EDGE_SIGMA = 3.0
EDGE_PEAK = 1e4


def run(observed, sigma, iterations: int, **kwargs) -> np.ndarray:
    """``deblur`` as every call here runs it (Numba, float64)."""
    return deblur(observed, sigma, iterations=iterations, backend="numba",
                  precision=PRECISION, **kwargs)  # fmt: skip


# --------------------------------------------------------------------------- data


def natural(name: str) -> np.ndarray:
    """A bundled scikit-image picture as float64 grey in [0, 1] (its own scale)."""
    from skimage import color, data

    image = getattr(data, name)()
    if image.ndim == 3:
        image = color.rgb2gray(image[..., :3])
    image = np.asarray(image, dtype=np.float64)
    return image / image.max()


def field_map(shape, centre=None, corner=None, lo: float = 1.0, hi: float = 4.0):
    """``radial``: ``lo`` at ``centre`` (default the middle) rising to ``hi`` at
    distance ``corner`` (default the middle's distance to a corner) and beyond."""
    centre = tuple((n - 1) / 2 for n in shape) if centre is None else centre
    corner = math.hypot(*((n - 1) / 2 for n in shape)) if corner is None else corner
    return radial(shape, center=centre, sigma_center=lo, sigma_edge=hi, radius=corner)


def scene(name: str, peak: float, seed: int, shrink: int = 1):
    """Truth (peak ``peak`` photons), the radial sigma map, and the Poisson observation
    of the truth blurred (reflect) with it."""
    truth = natural(name)[::shrink, ::shrink] * peak
    sigma = field_map(truth.shape)
    blurred = gaussian_blur(truth, sigma, mode="reflect", precision="float64")
    observed = np.random.default_rng(seed).poisson(np.clip(blurred, 0, None))
    return truth, sigma, observed.astype(np.float64)


def psnr(estimate, truth, peak: float) -> float:
    """PSNR in dB, data range ``peak``, over the whole image."""
    mse = float(np.mean((np.asarray(estimate, np.float64) - truth) ** 2))
    return 10 * math.log10(peak**2 / mse)


# --------------------------------------------------------------------------- part 1


def psnr_curve(observed, sigma, truth, peak, iterations, **kwargs) -> list[float]:
    """PSNR after each of ``iterations`` iterations of ``deblur`` (its ``callback``)."""
    curve: list[float] = []
    run(observed, sigma, iterations, mode="reflect",
        callback=lambda k, est: curve.append(psnr(est, truth, peak)), **kwargs)  # fmt: skip
    return curve


def best_of(curve: list[float], within: int | None = None) -> dict:
    """The best PSNR of a curve (over its first ``within`` iterations) and where."""
    part = curve[:within] if within else curve
    k = int(np.argmax(part))
    return dict(psnr=round(part[k], 3), iteration=k + 1)


def single_sigma(observed, truth, peak, sigmas, iterations) -> dict:
    """The best single-sigma RL over ``sigmas`` and iterations, and each sigma's best."""
    per_sigma = {}
    for s in sigmas:
        per_sigma[s] = best_of(psnr_curve(observed, s, truth, peak, iterations))
    s_best = max(per_sigma, key=lambda s: per_sigma[s]["psnr"])
    return dict(best={**per_sigma[s_best], "sigma": s_best},
                per_sigma={str(s): v for s, v in per_sigma.items()})  # fmt: skip


def rl_tv_rows(observed, sigma, truth, peak, plain: list[float], regs, iterations):
    """Each regularization's best, last, and the gaps to plain RL."""
    rows = []
    for reg in regs:
        curve = psnr_curve(observed, sigma, truth, peak, iterations, method="rl_tv",
                           regularization=reg)  # fmt: skip
        best = best_of(curve)
        rows.append(dict(
            regularization=reg, best=best, last=round(curve[-1], 3),
            holds=best["psnr"] - curve[-1] <= 0.1,
            minus_plain_last=round(curve[-1] - plain[-1], 3),
            minus_plain_best=round(best["psnr"] - max(plain), 3),
        ))  # fmt: skip
    return rows


def quality_case(name: str, peak: float, seed: int, cfg: dict) -> dict:
    """Part 1 for one picture and one peak."""
    start = time.perf_counter()
    truth, sigma, observed = scene(name, peak, seed, cfg["shrink"])
    n = cfg["iterations"]
    plain = psnr_curve(observed, sigma, truth, peak, n)
    ours = best_of(plain)
    single = single_sigma(observed, truth, peak, cfg["sigmas"], n)
    tv = rl_tv_rows(observed, sigma, truth, peak, plain, cfg["regs"], n)
    best_tv = max(tv, key=lambda r: r["last"])
    row = dict(
        image=name, shape=list(truth.shape), peak=peak, seed=seed,
        observed_psnr=round(psnr(observed, truth, peak), 3),
        ours=ours, ours_within_100=best_of(plain, 100), plain_last=round(plain[-1], 3),
        single=single["best"], single_per_sigma=single["per_sigma"],
        ours_minus_single=round(ours["psnr"] - single["best"]["psnr"], 3),
        rl_tv=tv, rl_tv_best_last=best_tv,
        plain_curve=[round(x, 3) for x in plain], seconds=round(time.perf_counter() - start, 1),
    )  # fmt: skip
    common.log(f"{name} P={peak:g}: observed {row['observed_psnr']:.2f}, ours "
               f"{ours['psnr']:.2f} @{ours['iteration']}, single {single['best']['psnr']:.2f} "
               f"(sigma {single['best']['sigma']}), rl_tv@{n} {best_tv['last']:.2f} vs "
               f"plain {plain[-1]:.2f} ({row['seconds']} s)")  # fmt: skip
    return row


# --------------------------------------------------------------------------- part 2


def gaussian_psf(sigma: float) -> np.ndarray:
    """The sampled normalised 2-D Gaussian of radius ceil(3 sigma)."""
    r = math.ceil(3 * sigma)
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-0.5 * (x / sigma) ** 2)
    psf = np.outer(g, g)
    return psf / psf.sum()


def band_mask(shape, width: int) -> np.ndarray:
    """True within ``width`` pixels of the border."""
    band = np.ones(shape, dtype=bool)
    band[tuple(slice(width, n - width) for n in shape)] = False
    return band


def rms_pair(estimate, truth, band) -> tuple[float, float]:
    """RMS error in the band and in the interior."""
    err = (np.asarray(estimate, np.float64) - truth) ** 2
    return float(np.sqrt(err[band].mean())), float(np.sqrt(err[~band].mean()))


def cut_scene(cfg: dict, sigma_kind: str):
    """The large retina blurred and made noisy, then cropped: truth, observation and
    the crop's sigma (global, or the radial map cut from the large one)."""
    large = natural("retina")[:: cfg["shrink"], :: cfg["shrink"]] * EDGE_PEAK
    n = cfg["crop"]
    top = [(m - n) // 2 for m in large.shape]
    cut = tuple(slice(t, t + n) for t in top)
    if sigma_kind == "global":
        sigma = EDGE_SIGMA
    else:
        centre = [t + (n - 1) / 2 for t in top]
        sigma = field_map(large.shape, centre, math.hypot((n - 1) / 2, (n - 1) / 2))
    blurred = gaussian_blur(large, sigma, mode="reflect", precision="float64")
    observed = np.random.default_rng(7).poisson(np.clip(blurred, 0, None)).astype(np.float64)
    crop_sigma = sigma if sigma_kind == "global" else sigma[cut]
    return large[cut], observed[cut], crop_sigma


def edge_case(cfg: dict, sigma_kind: str) -> dict:
    """Part 2 with a global sigma (and scikit-image) or with the radial map."""
    from skimage.restoration import richardson_lucy

    truth, observed, sigma = cut_scene(cfg, sigma_kind)
    width = math.ceil(3 * float(np.max(sigma)))
    band = band_mask(truth.shape, width)
    n = cfg["edge_iterations"]
    estimates = {"observed": observed}
    for mode in EDGE_MODES:
        estimates[mode] = run(observed, sigma, n, mode=mode, cval=0.0)
    if sigma_kind == "global":
        psf = gaussian_psf(EDGE_SIGMA)
        estimates["skimage"] = richardson_lucy(observed, psf, num_iter=n, clip=False)
    rows = []
    obs_band = rms_pair(observed, truth, band)[0]
    for label, est in estimates.items():
        b, i = rms_pair(est, truth, band)
        rows.append(dict(method=label, band_rms=round(b, 2), interior_rms=round(i, 2),
                         band_over_observed=round(b / obs_band, 3)))  # fmt: skip
        common.log(f"edge {sigma_kind} {label}: band {b:.1f} interior {i:.1f} "
                   f"(band / observed {b / obs_band:.2f})")  # fmt: skip
    return dict(sigma=sigma_kind if sigma_kind != "global" else EDGE_SIGMA, band_width=width,
                crop=list(truth.shape), iterations=n, rows=rows)  # fmt: skip


# --------------------------------------------------------------------------- report


def targets(quality: list[dict], edges: list[dict]) -> list[dict]:
    """Every target with its figure and verdict."""
    out = []
    for r in quality:
        goal = 1.0 if r["peak"] >= 1e4 else 0.5
        out.append(dict(target=f"{r['image']} P={r['peak']:g}: ours - best single sigma",
                        figure=r["ours_minus_single"], goal=f">= {goal} dB",
                        met=r["ours_minus_single"] >= goal))  # fmt: skip
        if r["peak"] < 1e4:
            tv = r["rl_tv_best_last"]
            out.append(dict(
                target=f"{r['image']} P={r['peak']:g}: rl_tv (reg {tv['regularization']}) - "
                f"plain RL at the last iteration",
                figure=tv["minus_plain_last"], goal=">= 0.5 dB", met=tv["minus_plain_last"] >= 0.5,
            ))  # fmt: skip
            tv = max(r["rl_tv"], key=lambda t: t["minus_plain_best"])
            out.append(dict(
                target=f"{r['image']} P={r['peak']:g}: rl_tv (reg {tv['regularization']}) best - "
                f"plain RL best",
                figure=tv["minus_plain_best"], goal=">= 0.5 dB", met=tv["minus_plain_best"] >= 0.5,
            ))  # fmt: skip
    for e in edges:
        for r in e["rows"]:
            if r["method"] in ("crop", "reflect", "mirror"):
                out.append(dict(target=f"edge ({e['sigma']}) {r['method']}: band / observed",
                                figure=r["band_over_observed"], goal="< 1",
                                met=r["band_over_observed"] < 1))  # fmt: skip
    return out


def quality_tables(quality: list[dict]) -> list[str]:
    """Part 1's tables: the three methods, then RL-TV per regularization."""
    head = ["image", "P", "observed dB", "ours (map) dB @it", "best single sigma dB @it",
            "ours - single dB", "plain RL @last dB"]  # fmt: skip
    rows = [[r["image"], f"{r['peak']:g}", f"{r['observed_psnr']:.2f}",
             f"{r['ours']['psnr']:.2f} @{r['ours']['iteration']}",
             f"{r['single']['psnr']:.2f} @{r['single']['iteration']} "
             f"(sigma {r['single']['sigma']})",
             f"{r['ours_minus_single']:+.2f}", f"{r['plain_last']:.2f}"]
            for r in quality]  # fmt: skip
    lines = md_table(head, rows, "llrrrrr") + [""]
    head = ["image", "P", "reg", "rl_tv best dB @it", "rl_tv last dB", "best - last <= 0.1",
            "rl_tv - plain (last) dB", "rl_tv best - plain best dB"]  # fmt: skip
    rows = [[r["image"], f"{r['peak']:g}", t["regularization"],
             f"{t['best']['psnr']:.2f} @{t['best']['iteration']}", f"{t['last']:.2f}",
             "yes" if t["holds"] else "no", f"{t['minus_plain_last']:+.2f}",
             f"{t['minus_plain_best']:+.2f}"]
            for r in quality for t in r["rl_tv"]]  # fmt: skip
    return lines + md_table(head, rows, "llrrrlrr")


def edge_tables(edges: list[dict]) -> list[str]:
    """Part 2's tables, one per sigma."""
    lines = []
    for e in edges:
        lines += [
            f"Sigma {e['sigma']}, crop {e['crop'][0]}x{e['crop'][1]}, band "
            f"{e['band_width']} px, {e['iterations']} iterations (RMS in photons):",
            "",
        ]
        rows = [[r["method"], f"{r['band_rms']:.1f}", f"{r['interior_rms']:.1f}",
                 f"{r['band_over_observed']:.2f}"] for r in e["rows"]]  # fmt: skip
        lines += md_table(["", "band RMS", "interior RMS", "band / observed band"], rows, "lrrr")
        lines.append("")
    return lines


def report(quality, edges, goals, info, seconds) -> str:
    """The markdown report."""
    lines = ["# Deblur quality", "", common.describe_machine(info), "",
             f"Numba, {PRECISION}; run time {seconds:.0f} s.", "",
             "## Targets", ""]  # fmt: skip
    lines += md_table(["target", "figure", "goal", "met"],
                      [[g["target"], f"{g['figure']:+.3f}" if "dB" in g["goal"]
                        else f"{g['figure']:.3f}", g["goal"], "yes" if g["met"] else "**no**"]
                       for g in goals], "lrll")  # fmt: skip
    lines += ["", "## 1. Field-dependent blur (radial map 1 -> 4 px), PSNR", ""]
    lines += quality_tables(quality)
    lines += ["", "## 2. The frame's edge (retina, middle crop)", ""]
    lines += edge_tables(edges)
    return "\n".join(lines) + "\n"


def config(quick: bool) -> dict:
    """Sizes and sweeps: the full run, or a smoke test."""
    if quick:
        return dict(images=IMAGES[:1], shrink=4, iterations=20, sigmas=SIGMAS[::4],
                    regs=REGULARIZATIONS[1:2], crop=128, edge_iterations=10)  # fmt: skip
    return dict(images=IMAGES, shrink=1, iterations=ITERATIONS, sigmas=SIGMAS,
                regs=REGULARIZATIONS, crop=512, edge_iterations=30)  # fmt: skip


def rewrite(path: str) -> int:
    """Recompute the targets and the report of a stored result (nothing is run)."""
    import json

    stored = json.loads(Path(path).read_text())
    info, quality, edges = stored.pop("machine"), stored["quality"], stored["edges"]
    stored["targets"] = targets(quality, edges)
    text = report(quality, edges, stored["targets"], info, stored["seconds"])
    common.write_result("deblur_quality", stored, info, out=path, markdown=text)
    print(text)
    return 0


def main(argv=None) -> int:
    parser = common.parser(__doc__, "deblur_quality", quick="small images, few iterations")
    parser.add_argument("--report", metavar="JSON", help="rewrite a stored result's report")
    args = parser.parse_args(argv)
    if args.report:
        return rewrite(args.report)
    cfg = config(args.quick)
    info = common.machine(quick=args.quick, precision=PRECISION,
                          config={k: list(v) if isinstance(v, tuple) else v
                                  for k, v in cfg.items()})  # fmt: skip
    start = time.perf_counter()
    quality = [quality_case(name, peak, 100 * i + j, cfg)
               for i, name in enumerate(cfg["images"]) for j, peak in enumerate(PEAKS)]  # fmt: skip
    edges = [edge_case(cfg, "global"), edge_case(cfg, "radial map")]
    goals = targets(quality, edges)
    seconds = time.perf_counter() - start
    text = report(quality, edges, goals, info, seconds)
    common.write_result("deblur_quality",
                        dict(seconds=round(seconds, 1), targets=goals, quality=quality,
                             edges=edges), info, out=args.out, markdown=text,
                        quick=args.quick)  # fmt: skip
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
