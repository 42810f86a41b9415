"""Bead measurement: sigma_map_from_beads against the truth of synthetic bead images.

The targets of issue 29, on images from ``napari_varblur.measure.synthetic.bead_image``
(sub-pixel centres, the generator's field: 2-D 1.2 -> 3 px, 3-D lateral 1.2 -> 2 and
axial 2 -> 4 px; 1,000 photons per bead on 10 photons per pixel, Poisson noise, gain 1,
offset 100, a 12-bit camera in a uint16 file), several seeds per case, medians and
ranges over the seeds:

1. Detection.  Each table row is matched to the planted bead within 1.5 of that bead's
   sigmas (each axis its own; a doublet's pair from either member or their midpoint).
   Recall: isolated beads with an "ok" row over isolated beads; false detections: "ok"
   rows on no isolated bead over "ok" rows.
2. Per bead, per axis, over the isolated beads kept "ok": the median |relative error|
   of sigma, the bias (median and mean relative error), the standard errors'
   calibration (SD of error / SE, share beyond 3 SE), and the Poisson Cramér-Rao
   bound (parameters background, amplitude, centre and sigma per axis, at the bead's
   true values): the median |error| it implies (0.6745 x the bound's SD, median over
   beads) beside the measured one.
3. The map: RMS relative error inside the kept beads' hull (``~extrapolated``) and in
   the lateral corners (1/8 of each lateral axis, every plane), the uncertainty's
   calibration inside, and one global sigma per axis (the kept beads' median) as the
   naive map.
4. Defects: the same isolated beads and the same noise with 10% doublets, 5% saturated
   and 5% edge beads added (an independent Poisson draw of the defects added to the
   clean counts; the generator places the isolated beads first, so they are the same):
   the share of planted defects left out with the right reason, the confusion counts,
   and the map's error with and without them.
5. The closed loop: ``fluorescence_sample(512)`` scaled to 1,000 (and 10,000) photons
   peak, blurred with the true field (``model="scatter"``), Poisson noise; ``deblur``
   (scatter, 40 iterations) with the true map, the map measured from a 512² bead image
   of the same field (50 beads) and the naive global sigma; PSNR against the scene, at
   the last iterate and the best one.
6. Speed: 2048² with 200 beads, 64x512x512 with 100 beads: the first call in a fresh
   process, then the median of 3 after a warm-up.

    python benchmarks/beads/measure.py                  # about 6 minutes on 2 cores
    python benchmarks/beads/measure.py --quick          # small images, seconds
    python benchmarks/beads/measure.py --only 2d-1024,loop
    python benchmarks/beads/measure.py --report results/X.json   # its report again

Writes ``benchmarks/results/<date>_<machine>_beads.json`` and ``.md``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common
import measure_report as markdown
import measure_scoring as scoring

from napari_varblur import deblur, gaussian_blur
from napari_varblur.measure import sigma_map_from_beads
from napari_varblur.measure.synthetic import bead_image
from napari_varblur.sample import fluorescence_sample

PHOTONS, BACKGROUND = 1000.0, 10.0
#: Planted defects as shares of the isolated beads: doublet pairs, saturated, edge.
DEFECTS = (0.10, 0.05, 0.05)
#: Case -> (shape, isolated beads, seeds); ``--quick`` takes the small ones.
CASES = {
    "2d-2048": ((2048, 2048), 200, 5),
    "2d-1024": ((1024, 1024), 60, 5),
    "3d": ((64, 512, 512), 100, 3),
}
QUICK = {"2d-2048": ((512, 512), 60, 2), "2d-1024": ((384, 384), 30, 2),
         "3d": ((40, 160, 160), 25, 1)}  # fmt: skip
LOOP = {"shape": (512, 512), "beads": 50, "seeds": 5, "iterations": 40, "peaks": (1e3, 1e4)}
QUICK_LOOP = {"shape": (256, 256), "beads": 25, "seeds": 2, "iterations": 10, "peaks": (1e3,)}
SPEED = {"2d": ((2048, 2048), 200), "3d": ((64, 512, 512), 100)}
QUICK_SPEED = {"2d": ((512, 512), 40), "3d": ((40, 160, 160), 25)}
SECTIONS = (*CASES, "loop", "speed")


def fit(image, truth):
    return sigma_map_from_beads(image, saturation=truth.saturation)


def names_of(ndim: int) -> tuple[str, ...]:
    return ("y", "x") if ndim == 2 else ("z", "y", "x")


# --------------------------------------------------------------------------- 1-4


def scored(result, truth, entities, names) -> dict:
    """Detection, per-bead errors and the matching of one fit."""
    table = result.beads
    status = np.asarray(table["status"]).astype(str)
    entity, distance = scoring.match(scoring.centres_of(table, names), truth, entities)
    rows, truths = scoring.kept_isolated(status, entity, distance, entities)
    return {
        "status": status,
        "entity": entity,
        "detection": scoring.detection(status, entity, entities),
        "per_bead": scoring.per_bead(table, names, rows, truths, truth, BACKGROUND),
    }


def accuracy_seed(shape, beads: int, seed: int) -> dict:
    """Sections 1-4 for one seed: the clean and the defect image, fitted and scored."""
    counts = [round(share * beads) for share in DEFECTS]
    _, truth = bead_image(shape, beads, photons=PHOTONS, background=BACKGROUND,
                          doublets=counts[0], saturated=counts[1], edge=counts[2],
                          seed=seed)  # fmt: skip
    clean, dirty = scoring.paired_images(truth, BACKGROUND, seed)
    names, entities = names_of(len(shape)), scoring.planted(truth)
    clean_s, clean_fit = common.timed(lambda: fit(clean, truth))
    dirty_s, dirty_fit = common.timed(lambda: fit(dirty, truth))
    a = scored(clean_fit, truth, entities, names)
    b = scored(dirty_fit, truth, entities, names)
    both = ~clean_fit.extrapolated & ~dirty_fit.extrapolated
    maps = {
        "clean": scoring.map_errors(clean_fit, truth.sigma_map, names),
        "clean_shared": scoring.map_errors(clean_fit, truth.sigma_map, names, both),
        "defects_shared": scoring.map_errors(dirty_fit, truth.sigma_map, names, both),
    }
    ratio = {n: maps["defects_shared"][n]["rms_hull"] / maps["clean_shared"][n]["rms_hull"]
             for n in names}  # fmt: skip
    return {
        "seed": seed,
        "seconds": {"clean": clean_s, "defects": dirty_s},
        "summary": {"clean": clean_fit.summary, "defects": dirty_fit.summary},
        "detection": a["detection"],
        "per_bead": a["per_bead"],
        "map": maps["clean"],
        "defect_image": {
            "detection": b["detection"],
            "per_bead": b["per_bead"],
            "defects": scoring.defects(b["status"], b["entity"], entities),
            "map_shared": {"clean": maps["clean_shared"], "defects": maps["defects_shared"]},
            "map_ratio": ratio,
        },
    }


def accuracy(case: str, cases: dict) -> dict:
    shape, beads, seeds = cases[case]
    runs = []
    for seed in range(seeds):
        common.log(f"{case}: seed {seed + 1}/{seeds}")
        runs.append(accuracy_seed(shape, beads, seed))
    return {"case": case, "shape": list(shape), "beads": beads,
            "defects": [round(s * beads) for s in DEFECTS], "runs": runs}  # fmt: skip


# --------------------------------------------------------------------------- 5


def psnr(estimate, truth, peak: float) -> float:
    return float(10 * np.log10(peak**2 / np.mean((np.asarray(estimate, float) - truth) ** 2)))


def curve(observed, sigma, scene, peak, iterations) -> list[float]:
    """PSNR after each iteration of a scatter deblur."""
    got = []
    deblur(observed, sigma, model="scatter", iterations=iterations,
           callback=lambda i, x: got.append(psnr(x, scene, peak)))  # fmt: skip
    return got


def loop_seed(seed: int, cfg: dict) -> list[dict]:
    """One scene at each peak, deblurred with the true map, the bead map and one global
    sigma (the bead map measured once, from its own bead image)."""
    shape, its = tuple(cfg["shape"]), cfg["iterations"]
    beads, truth = bead_image(shape, cfg["beads"], photons=PHOTONS, background=BACKGROUND,
                              seed=100 + seed)  # fmt: skip
    measured = fit(beads, truth)
    naive = tuple(float(np.median(np.asarray(measured.beads[f"sigma_{n}"])[measured.beads.ok]))
                  for n in names_of(len(shape)))  # fmt: skip
    rel = (measured.sigma_map - truth.sigma_map) / truth.sigma_map
    sample = fluorescence_sample(shape[0], seed=seed)[0].astype(np.float64)
    rows = []
    for peak in cfg["peaks"]:
        scene = sample * (peak / sample.max())
        blurred = gaussian_blur(scene, truth.sigma_map, model="scatter", precision="float64")
        noise = np.random.default_rng([seed, 11, int(peak)])
        observed = noise.poisson(np.maximum(blurred, 0)).astype(float)
        curves = {
            "true": curve(observed, truth.sigma_map, scene, peak, its),
            "beads": curve(observed, measured.sigma_map, scene, peak, its),
            "naive": curve(observed, naive, scene, peak, its),
        }
        rows.append({
            "seed": seed, "peak": peak, "observed": psnr(observed, scene, peak),
            "last": {k: c[-1] for k, c in curves.items()},
            "best": {k: max(c) for k, c in curves.items()},
            "best_at": {k: int(np.argmax(c)) + 1 for k, c in curves.items()},
            "naive_sigma": list(naive), "map_rms_all": float(np.sqrt(np.mean(rel**2))),
            "kept": measured.summary["kept"], "curves": curves,
        })  # fmt: skip
    return rows


def closed_loop(cfg: dict) -> dict:
    runs = []
    for seed in range(cfg["seeds"]):
        common.log(f"loop: seed {seed + 1}/{cfg['seeds']}")
        runs += loop_seed(seed, cfg)
    return {"config": cfg, "runs": runs}


# --------------------------------------------------------------------------- 6

FRESH = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from napari_varblur.measure import sigma_map_from_beads
t1 = time.perf_counter()
image = np.load(sys.argv[1])
t2 = time.perf_counter()
sigma_map_from_beads(image, saturation=4095)
t3 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "first": t3 - t2}))
"""


def fresh_call(image: np.ndarray) -> dict:
    """Import and the first call in a new process (Numba's disk cache as it is)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "beads.npy"
        np.save(path, image)
        done = subprocess.run([sys.executable, "-c", FRESH, str(path)], capture_output=True,
                              text=True, check=True)  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def speed(cases: dict) -> dict:
    out = {}
    for name, (shape, beads) in cases.items():
        common.log(f"speed: {name}")
        image, truth = bead_image(shape, beads, photons=PHOTONS, background=BACKGROUND, seed=0)
        first = fresh_call(image)
        times = []
        fit(image, truth)  # warm-up
        for _ in range(3):
            times.append(common.timed(partial(fit, image, truth))[0])
        out[name] = {"shape": list(shape), "beads": beads, "fresh": first,
                     "median_s": float(np.median(times)), "times": times}  # fmt: skip
    return out


# --------------------------------------------------------------------------- main


def selected(only: str | None) -> list[str]:
    if not only:
        return list(SECTIONS)
    chosen = []
    for item in only.split(","):
        item = item.strip()
        expanded = [c for c in CASES if c.startswith("2d")] if item == "2d" else [item]
        for name in expanded:
            if name not in SECTIONS:
                raise SystemExit(f"--only: unknown section {name!r}; known: {', '.join(SECTIONS)}")
            chosen.append(name)
    return chosen


def run_all(sections: list[str], quick: bool) -> dict:
    cases = QUICK if quick else CASES
    out: dict = {"accuracy": [], "loop": None, "speed": None}
    for section in sections:
        if section in cases:
            out["accuracy"].append(accuracy(section, cases))
        elif section == "loop":
            out["loop"] = closed_loop(QUICK_LOOP if quick else LOOP)
        elif section == "speed":
            out["speed"] = speed(QUICK_SPEED if quick else SPEED)
    return out


def main(argv=None) -> int:
    parser = common.parser(__doc__, "beads", quick="small images, few seeds")
    parser.add_argument("--only", help=f"comma-separated sections: {', '.join(SECTIONS)}, 2d")
    parser.add_argument("--report", metavar="JSON", help="rewrite a stored result's report")
    args = parser.parse_args(argv)
    if args.report:
        path = Path(args.report)
        path.with_suffix(".md").write_text(markdown.report(json.loads(path.read_text())))
        return 0
    sections = selected(args.only)
    info = common.machine(quick=bool(args.quick), sections=sections)
    start = time.perf_counter()
    results = run_all(sections, bool(args.quick))
    results["seconds"] = round(time.perf_counter() - start, 1)
    results["targets"] = markdown.targets(results)
    payload = json.loads(json.dumps(results, default=_plain))
    text = markdown.report({"machine": info, **payload})
    common.write_result("beads", payload, info, out=args.out, markdown=text, quick=args.quick)
    print(text)
    return 0


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
