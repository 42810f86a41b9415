"""deblur(): agreement with scikit-image, likelihood behaviour, cost, memory, volume, dask.

Runs, in one process on this machine (a memory case each in a fresh subprocess):

1. **scikit-image agreement** (an independent oracle): a dark-field scene (random
   objects on a zero background, margins wider than two kernel radii), a constant sigma,
   ``mode="constant", cval=0``, float64, 30 iterations, against
   ``skimage.restoration.richardson_lucy(observed, psf, num_iter=30, clip=False,
   filter_epsilon=1e-12)`` with the sampled normalised Gaussian of radius
   ``ceil(3 sigma)``: max |diff| / max, 2-D and 3-D, Numba and JAX (goal <= 1e-8).
2. **Maximum likelihood**: plain RL, float64, a sigma map, Poisson data, crop and
   reflect: the Poisson negative log-likelihood ``sum(Ax - y log Ax)`` over 50
   iterations (from the callback's estimate) never increases, and ``sum(A^T 1 * x)``
   equals ``sum(y)`` after every iteration (goal 1e-6 relative).
3. **Cost per iteration** in forward blurs with the same map, backend and keywords:
   ``(t(deblur, 20 iterations) - t(deblur, 10 iterations)) / 10 / t(gaussian_blur)``,
   the calls interleaved round by round (``common.interleaved``), each round's ratio
   kept, their median reported.  Goals: RL <= 2.5, RL-TV (0.002) <= 3.  The blur's
   transpose (the other model) is timed alongside: the scatter/gather ratio.  For
   context, the naive alternative: a global sigma at the map's largest sigma.
4. **Memory**: the peak extra memory of a deblur of a 1024x1024 float32 image in a fresh
   subprocess (peak RSS after resetting the high-water mark, and tracemalloc's peak),
   in units of the image's size (goal <= 6), with and without acceleration.
5. **Volume**: a 64x512x512 float32 volume, a map varying along every axis, 50
   iterations, ``tolerance=1e-3``, Numba: the wall time; where the projection from the
   first iterations passes ``--volume-budget`` seconds it stops after 5 and
   extrapolates (and says so).
6. **dask**: a 1024x1024 dask array in 256x256 chunks, 30 iterations, against the
   untiled NumPy result: max |diff| / max.

    python benchmarks/deblur/cost.py            # about 20 minutes on 2 shared cores
    python benchmarks/deblur/cost.py --quick    # small sizes, a smoke test

Writes ``benchmarks/results/<date>_<machine>_deblur_cost.json`` and ``.md``
(``--quick``: ``results/quick/``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
from common import interleaved, log, md_table, num

from napari_varblur import deblur, gaussian_blur

NAME = "deblur_cost"
TV_WEIGHT = 0.002


# --------------------------------------------------------------------------- data


def scene(rng, shape, margin: int, count: int) -> np.ndarray:
    """Random boxes and points of random brightness on a zero background, nothing within
    ``margin`` pixels of the border (a dark field)."""
    truth = np.zeros(shape)
    inner = [n - 2 * margin for n in shape]
    for _ in range(count):
        corner = [margin + int(rng.integers(0, max(m - 4, 1))) for m in inner]
        size = [int(rng.integers(1, 5)) for _ in shape]
        box = tuple(slice(c, min(c + s, n - margin)) for c, s, n in zip(corner, size, shape))
        truth[box] += rng.uniform(20, 200)
    return truth


def ramp(shape, low: float, high: float) -> np.ndarray:
    """A float32 map rising from ``low`` to ``high`` along the last axis."""
    x = np.linspace(0.0, 1.0, shape[-1])
    return np.ascontiguousarray(np.broadcast_to(low + (high - low) * x, shape), np.float32)


def radial(shape, low: float, high: float) -> np.ndarray:
    """A float32 map rising from ``low`` at the centre to ``high`` in the corners."""
    grids = np.meshgrid(*[np.linspace(-1, 1, n) for n in shape], indexing="ij")
    r = np.sqrt(sum(g * g for g in grids) / len(shape))
    return (low + (high - low) * r).astype(np.float32)


def observed(rng, shape, sigma, scale: float = 1.0, **kw) -> np.ndarray:
    """Poisson counts of the blur of a random scene (a few thousand objects)."""
    truth = scene(rng, shape, 2, max(int(np.prod(shape)) // 400, 20)) * scale
    blurred = gaussian_blur(truth, sigma, precision="float64", **kw)
    return rng.poisson(np.maximum(blurred, 0)).astype(np.float64)


# --------------------------------------------------------------------------- 1. oracle


def psf(sigma: float, ndim: int) -> np.ndarray:
    """The sampled normalised Gaussian of radius ceil(3 sigma): an outer product."""
    from napari_varblur.core.taps import gaussian_taps

    taps = gaussian_taps(sigma, math.ceil(3 * sigma))
    kernel = taps
    for _ in range(ndim - 1):
        kernel = np.multiply.outer(kernel, taps)
    return kernel / kernel.sum()


def agreement(quick: bool) -> list[dict]:
    """Our RL against scikit-image's on a dark field, constant mode with a zero fill."""
    from skimage.restoration import richardson_lucy

    rng = np.random.default_rng(1)
    cases = [
        ((96, 96) if quick else (192, 192), 2.0),
        ((32, 48, 48) if quick else (40, 64, 64), 1.5),
    ]
    rows = []
    for shape, sigma in cases:
        r = math.ceil(3 * sigma)
        truth = scene(rng, shape, 2 * r + 2, 40 if quick else 120)
        kw = dict(mode="constant", cval=0.0, truncate=3.0, precision="float64")
        y = rng.poisson(gaussian_blur(truth, sigma, backend="numba", **kw)).astype(np.float64)
        theirs = richardson_lucy(y, psf(sigma, len(shape)), num_iter=30, clip=False,
                                 filter_epsilon=1e-12)  # fmt: skip
        for backend in ("numba", "jax"):
            ours = deblur(y, sigma, iterations=30, backend=backend, **kw)
            err = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
            rows.append(dict(shape=list(shape), sigma=sigma, backend=backend, rel_max_diff=err,
                             goal="<= 1e-8", ok=bool(err <= 1e-8)))  # fmt: skip
            log(f"1) {shape} sigma {sigma} {backend}: max|diff|/max {err:.2e}")
    return rows


# --------------------------------------------------------------------------- 2. likelihood


def likelihood(quick: bool) -> list[dict]:
    """Poisson NLL along plain RL's iterations, and the flux after each one."""
    from scipy.special import xlogy

    rng = np.random.default_rng(2)
    n, iterations = (64 if quick else 128), 50
    sigma = ramp((n, n), 1.0, 3.0).astype(np.float64)
    rows = []
    for mode in ("crop", "reflect"):
        y = observed(rng, (n, n), sigma, scale=0.5, mode=mode)
        for backend in ("numba", "jax"):
            kw = dict(mode=mode, precision="float64", backend=backend)
            norm = gaussian_blur(np.ones((n, n)), sigma, model="scatter", **kw)
            nll, flux = [], []

            def record(x, kw=kw, y=y, norm=norm, nll=nll, flux=flux):
                ax = gaussian_blur(np.asarray(x, np.float64), sigma, **kw)
                nll.append(float(np.sum(ax - xlogy(y, ax))))
                flux.append(abs(float(np.sum(norm * x)) / float(y.sum()) - 1))

            record(np.full((n, n), y.sum() / y.size))  # the flat start
            deblur(y, sigma, iterations=iterations, callback=lambda k, x: record(x), **kw)
            steps = np.diff(nll)
            rise = float(steps.max())
            rows.append(dict(mode=mode, backend=backend, shape=[n, n], iterations=iterations,
                             nll_start=nll[0], nll_end=nll[-1], max_increase=rise,
                             max_increase_rel=rise / abs(nll[-1]), increases=int(np.sum(steps > 0)),
                             max_flux_rel_err=max(flux[1:]),
                             ok=bool(rise <= 0 and max(flux[1:]) <= 1e-6)))  # fmt: skip
            log(f"2) {mode} {backend}: NLL {nll[0]:.6g} -> {nll[-1]:.6g}, max step {rise:.3g}, "
                f"flux err {max(flux[1:]):.2e}")  # fmt: skip
    return rows


# --------------------------------------------------------------------------- 3. cost


def cost_case(image, sigma, label, rounds, *, unit_sigma=None, **kw) -> dict:
    """Per-iteration cost of a deblur in forward blurs with the same keywords (``unit``
    blurs ``unit_sigma`` instead, for the naive global sigma); the other model's blur
    timed alongside."""
    blur_kw = {k: v for k, v in kw.items() if k not in ("method", "regularization")}
    other = "scatter" if kw.get("model", "gather") == "gather" else "gather"
    calls = {
        "blur": partial(gaussian_blur, image, sigma, **blur_kw),
        "other": partial(gaussian_blur, image, sigma, **{**blur_kw, "model": other}),
        "d10": partial(deblur, image, sigma, iterations=10, **kw),
        "d20": partial(deblur, image, sigma, iterations=20, **kw),
    }
    if unit_sigma is not None:
        calls["unit"] = partial(gaussian_blur, image, unit_sigma, **blur_kw)
    t = interleaved(calls, rounds, short=0.5)
    per_iter = [(b - a) / 10 for a, b in zip(t["d10"], t["d20"])]
    unit = t.get("unit", t["blur"])
    ratios = [p / u for p, u in zip(per_iter, unit)]
    med = {k: statistics.median(v) for k, v in t.items()}
    row = dict(case=label, shape=list(image.shape), **{k: str(v) for k, v in kw.items()},
               blur_s=med["blur"], other_s=med["other"], other_model=other,
               d10_s=med["d10"], d20_s=med["d20"], per_iter_s=statistics.median(per_iter),
               per_iter_blurs=statistics.median(ratios), round_ratios=ratios,
               other_over_blur=statistics.median([o / b for o, b in zip(t["other"], t["blur"])]),
               per_iter_over_both=statistics.median(
                   [p / (b + o) for p, b, o in zip(per_iter, t["blur"], t["other"])]),
               setup_s=statistics.median([2 * a - b for a, b in zip(t["d10"], t["d20"])]),
               )  # fmt: skip
    if unit_sigma is not None:
        row["unit_s"] = med["unit"]
        row["blur_over_unit"] = med["blur"] / med["unit"]
    log(f"3) {label}: {row['per_iter_blurs']:.2f} blurs/iteration "
        f"({min(ratios):.2f}-{max(ratios):.2f}), {other}/{kw.get('model', 'gather')} "
        f"{row['other_over_blur']:.2f}, blur {med['blur'] * 1e3:.1f} ms")  # fmt: skip
    return row


def cost_rows(quick: bool, rounds: int = 3) -> list[dict]:
    """The cost cases: Numba 1024² (ramp and radial map, exact and 1e-3, RL and RL-TV),
    a scatter model, JAX, and the naive global sigma."""
    rng = np.random.default_rng(3)
    n, m = (256, 128) if quick else (1024, 512)
    rounds = 1 if quick else rounds
    rows = []
    maps = {"ramp 1->4 along x": ramp((n, n), 1, 4), "radial 1->4": radial((n, n), 1, 4)}
    image = observed(rng, (n, n), 2.0, mode="crop").astype(np.float32)
    base = dict(backend="numba", precision="float32", mode="crop")
    for label, sigma in maps.items():
        for tol in (None, 1e-3):
            for method in ("richardson_lucy", "rl_tv"):
                extra = dict(regularization=TV_WEIGHT) if method == "rl_tv" else {}
                kw = dict(base, tolerance=tol, method=method, **extra)
                name = f"numba {n}² {label}, tol {tol}, {method}"
                rows.append(cost_case(image, sigma, name, rounds, **kw))
    sigma = maps["ramp 1->4 along x"]
    rows.append(cost_case(image, sigma, f"numba {n}² ramp 1->4, exact, RL, model=scatter",
                          rounds, **base, model="scatter"))  # fmt: skip
    rows.append(cost_case(image, 4.0, f"naive: numba {n}² global sigma 4 (the ramp's max), RL",
                          rounds, unit_sigma=sigma, **base))  # fmt: skip
    small = np.ascontiguousarray(image[:m, :m])
    jsig = ramp((m, m), 1, 4)
    for tol, method in ((None, "richardson_lucy"), (1e-3, "richardson_lucy"), (None, "rl_tv")):
        extra = dict(regularization=TV_WEIGHT) if method == "rl_tv" else {}
        kw = dict(base, backend="jax", tolerance=tol, method=method, **extra)
        rows.append(cost_case(small, jsig, f"jax {m}² ramp 1->4, tol {tol}, {method}", rounds,
                              **kw))  # fmt: skip
    for row in rows:
        goal = 3.0 if row.get("method") == "rl_tv" else 2.5
        row["goal"] = f"<= {goal}"
        row["ok"] = bool(row["per_iter_blurs"] <= goal)
    return rows


# --------------------------------------------------------------------------- 4. memory


def memory_child(spec: str) -> None:
    """In a fresh process: the peak extra memory of one deblur (printed as JSON)."""
    import gc
    import tracemalloc

    opts = json.loads(spec)
    n = opts.pop("n")
    kw = dict(backend="numba", precision="float32", mode="crop", **opts)
    small = ramp((64, 64), 1, 4)
    deblur(np.ones((64, 64), np.float32), small, iterations=3, **kw)  # compile
    image = observed(np.random.default_rng(4), (n, n), 2.0, mode="crop").astype(np.float32)
    sigma = ramp((n, n), 1, 4)
    gc.collect()
    rss0 = _status("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset the high-water mark
    tracemalloc.start()
    deblur(image, sigma, iterations=5, **kw)
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    peak = _status("VmHWM") - rss0
    print(json.dumps(dict(rss_extra=peak / image.nbytes, traced=traced / image.nbytes)))


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def memory_rows(quick: bool) -> list[dict]:
    """Each memory case in a fresh subprocess (malloc returns big blocks to the system at
    once, so the RSS peak sees every array)."""
    n = 256 if quick else 1024
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    rows = []
    for tol in (None, 1e-3):
        for accel in (False, True):
            for method in ("richardson_lucy",):
                opts = dict(n=n, tolerance=tol, acceleration=accel, method=method)
                cmd = [sys.executable, __file__, "--memory-child", json.dumps(opts)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                got = json.loads(done.stdout.strip().splitlines()[-1])
                row = dict(shape=[n, n], **{k: v for k, v in opts.items() if k != "n"}, **got,
                           goal="<= 6", ok=bool(max(got.values()) <= 6))  # fmt: skip
                rows.append(row)
                log(f"4) tol {tol} accel {accel} {method}: RSS peak {got['rss_extra']:.2f} "
                    f"images, traced {got['traced']:.2f}")  # fmt: skip
    return rows


# --------------------------------------------------------------------------- 5. volume


def volume_map(shape) -> np.ndarray:
    """An isotropic float32 map varying along every axis: 1 at the first corner, 1.5 more
    across y and x together, 1 more along z (1 -> 3.5)."""
    z, y, x = (np.linspace(0, 1, n) for n in shape)
    sigma = 1 + z[:, None, None] + 0.75 * (y[None, :, None] + x[None, None, :])
    return sigma.astype(np.float32)


def volume(quick: bool, budget: float) -> dict:
    """50 iterations on a volume; where the projection passes ``budget`` seconds, 5
    iterations and a projection."""
    shape = (16, 128, 128) if quick else (64, 512, 512)
    rng = np.random.default_rng(5)
    sigma = volume_map(shape)
    kw = dict(backend="numba", precision="float32", mode="crop", tolerance=1e-3)
    image = rng.poisson(gaussian_blur(scene(rng, shape, 2, 4000).astype(np.float32), sigma,
                                      **kw)).astype(np.float32)  # fmt: skip
    deblur(image[:8, :32, :32], sigma[:8, :32, :32], iterations=2, **kw)  # compile
    stamps = [time.perf_counter()]

    def tick(k, x):
        stamps.append(time.perf_counter())
        per = (stamps[-1] - stamps[1]) / max(k - 1, 1)
        return k >= 5 and (stamps[1] - stamps[0]) + 49 * per > budget

    deblur(image, sigma, iterations=50, callback=tick, **kw)
    done = len(stamps) - 1
    per = (stamps[-1] - stamps[1]) / max(done - 1, 1)
    first = stamps[1] - stamps[0]
    total = stamps[-1] - stamps[0] if done == 50 else first + 49 * per
    row = dict(shape=list(shape), map="isotropic 1 -> 3.5 along z, y and x", iterations_run=done,
               extrapolated=done < 50, first_iteration_s=first, per_iteration_s=per,
               total_50_s=total, goal="minutes, not hours", ok=bool(total < 3600))  # fmt: skip
    log(
        f"5) volume {shape}: {done} iterations run, 50 in {total:.0f} s"
        + (" (extrapolated)" if done < 50 else "")
    )
    return row


# --------------------------------------------------------------------------- 6. dask


def tiled(quick: bool) -> dict:
    """The dask path against the untiled NumPy deblur."""
    import dask.array as da

    n, chunk = (256, 64) if quick else (1024, 256)
    rng = np.random.default_rng(6)
    sigma = ramp((n, n), 1, 4)
    image = observed(rng, (n, n), sigma, mode="crop").astype(np.float32)
    kw = dict(iterations=30, backend="numba", precision="float32", mode="crop")
    t_np, whole = common.timed(lambda: deblur(image, sigma, **kw))
    lazy = deblur(da.from_array(image, chunks=chunk), sigma, **kw)
    t_dask, tiles = common.timed(lambda: np.asarray(lazy.compute()))
    err = float(np.max(np.abs(tiles - whole)) / np.max(np.abs(whole)))
    log(f"6) dask {n}² in {chunk}² chunks: max|diff|/max {err:.2e}")
    return dict(shape=[n, n], chunks=[chunk, chunk], map="ramp 1->4 along x", rel_max_diff=err,
                numpy_s=t_np, dask_s=t_dask)  # fmt: skip


# --------------------------------------------------------------------------- report


OK = {True: "yes", False: "MISSED"}


def md_agreement(rows) -> list[str]:
    lines = ["## 1. scikit-image agreement (dark field, constant, float64, 30 iterations)", ""]
    return lines + md_table(["shape", "sigma", "backend", "max abs diff / max", "goal", "met"],
                            [[r["shape"], r["sigma"], r["backend"], f"{r['rel_max_diff']:.1e}",
                              r["goal"], OK[r["ok"]]] for r in rows])  # fmt: skip


def md_likelihood(rows) -> list[str]:
    lines = ["## 2. Poisson likelihood and flux (float64, ramp map 1->3, 50 iterations)", ""]
    return lines + md_table(["mode", "backend", "NLL start", "NLL end", "max step (> 0: a rise)",
                             "rises", "max flux rel err", "met"],
                            [[r["mode"], r["backend"], f"{r['nll_start']:.8g}",
                              f"{r['nll_end']:.8g}", f"{r['max_increase']:.3g}", r["increases"],
                              f"{r['max_flux_rel_err']:.1e}", OK[r["ok"]]]
                             for r in rows])  # fmt: skip


def md_cost(rows) -> list[str]:
    lines = ["## 3. Cost per iteration, in forward blurs with the same arguments", "",
             "Per iteration = (t(20 iterations) - t(10)) / 10; a blur is `gaussian_blur` with",
             "the same keywords; rounds interleaved, the median of the rounds' ratios (range).",
             "`other / blur`: the transpose model's blur over the model's blur.", ""]  # fmt: skip
    lines += md_table(["case", "blur ms", "per iteration ms", "blurs / iteration", "range",
                       "other / blur", "per it / (blur + other)", "setup s", "goal", "met"],
                      [[r["case"], f"{r['blur_s'] * 1e3:.1f}", f"{r['per_iter_s'] * 1e3:.1f}",
                        f"{r['per_iter_blurs']:.2f}",
                        f"{min(r['round_ratios']):.2f}-{max(r['round_ratios']):.2f}",
                        f"{r['other_over_blur']:.2f}", f"{r['per_iter_over_both']:.2f}",
                        num(r["setup_s"]), r["goal"], OK[r["ok"]]] for r in rows],
                      "lrrrrrrrll")  # fmt: skip
    for r in (r for r in rows if "unit_s" in r):
        lines += ["", f"Naive alternative: {r['case']}: one global blur "
                  f"{r['blur_s'] * 1e3:.1f} ms = {r['blur_over_unit']:.2f} map blurs; its "
                  f"iteration = {r['per_iter_blurs']:.2f} map blurs (the ratio above is in "
                  "map blurs)."]  # fmt: skip
    return lines


def md_memory(rows) -> list[str]:
    lines = ["## 4. Peak extra memory of a deblur (5 iterations, fresh subprocess)", "",
             "In images (the input's size): peak RSS over RSS before the call, and",
             "tracemalloc's peak (NumPy's allocations; Numba's own are not traced).",
             ""]  # fmt: skip
    return lines + md_table(["shape", "tolerance", "acceleration", "method", "RSS peak",
                             "traced", "goal", "met"],
                            [[r["shape"], r["tolerance"], r["acceleration"], r["method"],
                              f"{r['rss_extra']:.2f}", f"{r['traced']:.2f}", r["goal"],
                              OK[r["ok"]]] for r in rows])  # fmt: skip


def md_volume(v) -> list[str]:
    return ["## 5. Volume", "",
            f"{'x'.join(map(str, v['shape']))} float32, {v['map']}, tolerance 1e-3, Numba, "
            f"crop: 50 iterations {v['total_50_s']:.0f} s ({v['total_50_s'] / 60:.1f} min"
            + (f"; extrapolated from {v['iterations_run']} iterations" if v["extrapolated"]
               else "") + f"); first iteration {v['first_iteration_s']:.1f} s, then "
            f"{v['per_iteration_s']:.1f} s each."]  # fmt: skip


def md_dask(d) -> list[str]:
    return ["## 6. dask tiles", "",
            f"{d['shape']} in {d['chunks']} chunks, {d['map']}, 30 iterations, float32: "
            f"max abs diff / max of the untiled result {d['rel_max_diff']:.2e} (NumPy "
            f"{d['numpy_s']:.1f} s, dask {d['dask_s']:.1f} s)."]  # fmt: skip


SECTION_MD = dict(agreement=md_agreement, likelihood=md_likelihood, cost=md_cost,
                  memory=md_memory, volume=md_volume, dask=md_dask)  # fmt: skip


def markdown(res: dict, info: dict) -> str:
    """The report: the machine, then each section run."""
    lines = ["# deblur(): agreement, likelihood, cost, memory", "",
             common.describe_machine(info), "",
             f"Whole run {info['elapsed_s']:.0f} s; load average (1 min) {info['load'][0]:.1f} "
             f"at the start, {info['load_end'][0]:.1f} at the end (other jobs share the cores).",
             ""]  # fmt: skip
    for name, rows in res.items():
        lines += SECTION_MD[name](rows) + [""]
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run every section; write the result."""
    parser = common.parser(__doc__, NAME, quick="small sizes (a smoke test)")
    parser.add_argument("--memory-child", help=argparse_hidden())
    parser.add_argument("--volume-budget", type=float, default=900.0,
                        help="seconds above which the volume stops at 5 iterations")  # fmt: skip
    parser.add_argument("--only", help="comma-separated sections to run (1-6)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of a cost case")
    args = parser.parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child)
        return 0
    start = time.perf_counter()
    info = common.machine()
    only = set((args.only or "1,2,3,4,5,6").split(","))
    sections = {"1": ("agreement", agreement), "2": ("likelihood", likelihood),
                "3": ("cost", partial(cost_rows, rounds=args.rounds)), "4": ("memory", memory_rows),
                "5": ("volume", partial(volume, budget=args.volume_budget)),
                "6": ("dask", tiled)}  # fmt: skip
    res = {}
    for key, (name, fn) in sections.items():
        if key in only:
            res[name] = fn(args.quick)
    info.update(quick=args.quick, rounds=args.rounds, sections=sorted(only),
                elapsed_s=time.perf_counter() - start,
                load_end=[round(x, 2) for x in os.getloadavg()])  # fmt: skip
    text = markdown(res, info)
    common.write_result(NAME, res, info, out=args.out, markdown=text, quick=args.quick)
    print(text)
    return 0


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    raise SystemExit(main())
