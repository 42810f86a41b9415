"""The targets and the markdown report of ``beads/measure.py``, from its JSON alone
(``measure.py --report`` rewrites a stored result's report)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import common
import numpy as np
from common import md_table

#: "Speed: a 2048² image with 200 beads in seconds; 64x512x512 with 100 beads well
#: under a minute", read as at most 10 s and 30 s (warm).
SPEED_GOALS = {"2d": 10.0, "3d": 30.0}


def stat(values) -> dict:
    values = [float(v) for v in values]
    return {"median": float(np.median(values)), "min": min(values), "max": max(values)}


def pct(values, digits: int = 2, signed: bool = False) -> str:
    """Median and range over seeds, as percentages."""
    s = stat(values)
    f = f"{'+' if signed else ''}.{digits}f"
    if s["min"] == s["max"]:
        return f"{100 * s['median']:{f}}%"
    return f"{100 * s['median']:{f}}% ({100 * s['min']:{f}} to {100 * s['max']:{f}})"


def plain(values, digits: int = 2, unit: str = "") -> str:
    s = stat(values)
    if s["min"] == s["max"]:
        return f"{s['median']:.{digits}f}{unit}"
    return f"{s['median']:.{digits}f}{unit} ({s['min']:.{digits}f} to {s['max']:.{digits}f})"


def names_of(case: dict) -> tuple[str, ...]:
    return ("y", "x") if len(case["shape"]) == 2 else ("z", "y", "x")


# --------------------------------------------------------------------------- targets


def target(case, text, per_axis: dict, goal: str, ok: Callable[[float], bool], fmt) -> dict:
    """One target over axes (``per_axis``: axis -> per-seed values; one key ``""`` for a
    figure without axes): met when each axis's median meets it; ``all_seeds`` when
    every seed does."""
    measured = "; ".join(f"{a} {fmt(v)}".strip() for a, v in per_axis.items())
    return {
        "case": case,
        "target": text,
        "measured": measured,
        "goal": goal,
        "met": all(ok(stat(v)["median"]) for v in per_axis.values()),
        "all_seeds": all(ok(x) for v in per_axis.values() for x in v),
    }


def case_targets(case: dict) -> list[dict]:
    runs, name, axes = case["runs"], case["case"], names_of(case)

    def axis(get):
        return {a: [get(r, a) for r in runs] for a in axes}

    def whole(get):
        return {"": [get(r) for r in runs]}

    def defect_axis(r, a):
        return r["defect_image"]["map_ratio"][a]

    return [
        target(name, "recall", whole(lambda r: r["detection"]["recall"]), ">= 99%",
               lambda x: x >= 0.99, pct),
        target(name, "false detections", whole(lambda r: r["detection"]["false"]), "<= 1%",
               lambda x: x <= 0.01, pct),
        target(name, "sigma median |error|", axis(lambda r, a: r["per_bead"][a]["median_abs"]),
               "<= 3%", lambda x: x <= 0.03, pct),
        target(name, "sigma bias (median error)",
               axis(lambda r, a: r["per_bead"][a]["bias_median"]), "within ±1%",
               lambda x: abs(x) <= 0.01, lambda v: pct(v, signed=True)),
        target(name, "sigma bias (mean error)", axis(lambda r, a: r["per_bead"][a]["bias_mean"]),
               "within ±1%", lambda x: abs(x) <= 0.01, lambda v: pct(v, signed=True)),
        target(name, "map RMS error in the hull", axis(lambda r, a: r["map"][a]["rms_hull"]),
               "<= 3%", lambda x: x <= 0.03, pct),
        target(name, "map RMS error in the corners",
               axis(lambda r, a: r["map"][a]["rms_corners"]), "<= 6%", lambda x: x <= 0.06, pct),
        target(name, "defects left out with the right reason",
               whole(lambda r: r["defect_image"]["defects"]["all"]["right"]), ">= 95%",
               lambda x: x >= 0.95, pct),
        target(name, "map RMS with defects / without", axis(defect_axis), "<= 1.2x",
               lambda x: x <= 1.2, lambda v: plain(v, unit="x")),
    ]  # fmt: skip


def targets(results: dict) -> list[dict]:
    found = [t for case in results["accuracy"] for t in case_targets(case)]
    loop = results.get("loop")
    for peak in dict.fromkeys(r["peak"] for r in (loop or {}).get("runs", [])):
        runs = [r for r in loop["runs"] if r["peak"] == peak]
        for when in ("last", "best"):
            diff = [r[when]["beads"] - r[when]["true"] for r in runs]
            found.append(target("loop", f"P={peak:g}: PSNR bead map - true map ({when} iterate)",
                                {"": diff}, ">= -0.3 dB", lambda x: x >= -0.3,
                                lambda v: plain(v, digits=3, unit=" dB")))  # fmt: skip
    for name, row in (results.get("speed") or {}).items():
        shape = "x".join(map(str, row["shape"]))
        goal = SPEED_GOALS[name]
        found.append(target("speed", f"{shape}, {row['beads']} beads, warm", {"": row["times"]},
                            f"<= {goal:g} s", lambda x, g=goal: x <= g,
                            lambda v: plain(v, unit=" s")))  # fmt: skip
    return found


# --------------------------------------------------------------------------- tables


def targets_table(found: list[dict]) -> list[str]:
    rows = [[t["case"], t["target"], t["measured"], t["goal"],
             "met" if t["met"] else "**missed**", "yes" if t["all_seeds"] else "no"]
            for t in found]  # fmt: skip
    head = ["case", "target", "median (range over seeds)", "goal", "median", "every seed"]
    return md_table(head, rows, "llrlll")


def summed(dicts) -> str:
    total = Counter()
    for d in dicts:
        total.update(d)
    return ", ".join(f"{k} {v}" for k, v in sorted(total.items())) or "-"


def detection_table(cases: list[dict], where: str = "clean") -> list[str]:
    rows = []
    for case in cases:
        runs = [r["detection"] if where == "clean" else r["defect_image"]["detection"]
                for r in case["runs"]]  # fmt: skip
        rows.append([case["case"], "x".join(map(str, case["shape"])), case["beads"],
                     len(runs), pct([d["recall"] for d in runs]), pct([d["false"] for d in runs]),
                     sum(d["false_unmatched"] for d in runs),
                     sum(d["false_on_defect"] for d in runs), sum(d["duplicates"] for d in runs),
                     summed(d["lost"] for d in runs),
                     summed(d["unmatched_rows"] for d in runs)])  # fmt: skip
    head = ["case", "shape", "isolated", "seeds", "recall", "false detections",
            "ok on nothing", "ok on a defect", "ok twice", "isolated beads lost (all seeds)",
            "unmatched rows by status (all seeds)"]  # fmt: skip
    return md_table(head, rows, "llrrrrrrrll")


def per_bead_table(cases: list[dict]) -> list[str]:
    rows = []
    for case in cases:
        for a in names_of(case):
            got = [r["per_bead"][a] for r in case["runs"]]

            def col(key, got=got):
                return [g[key] for g in got]

            ratio = [g["median_abs"] / g["crb_median_abs"] for g in got]
            rows.append([case["case"], a, int(np.median(col("beads"))), pct(col("median_abs")),
                         pct(col("crb_median_abs")), plain(ratio, unit="x"),
                         pct(col("bias_median"), signed=True), pct(col("bias_mean"), signed=True),
                         pct(col("rms")), pct(col("crb_rms")), plain(col("z_sd")),
                         pct(col("beyond_3se"), 1), plain(col("se_over_crb"))])  # fmt: skip
    head = ["case", "axis", "kept", "median abs error", "CRB median abs", "measured / CRB",
            "bias (median)", "bias (mean)", "RMS error", "CRB RMS", "SD of error / SE",
            "beyond 3 SE", "SE / CRB SD"]  # fmt: skip
    return md_table(head, rows, "llrrrrrrrrrrr")


def map_table(cases: list[dict]) -> list[str]:
    rows = []
    for case in cases:
        degrees = summed(Counter([str(d)]) for r in case["runs"]
                         for d in r["summary"]["clean"]["degree"].values())  # fmt: skip
        for i, a in enumerate(names_of(case)):
            got = [r["map"][a] for r in case["runs"]]

            def col(key, got=got):
                return [g[key] for g in got]

            spanned = pct(col("rms_corners_spanned")) if len(case["shape"]) == 3 else ""
            rows.append([case["case"] if i == 0 else "", a, pct(col("rms_hull")),
                         pct(col("rms_corners")), spanned, pct(col("max_hull")),
                         plain(col("z_sd")),
                         f"{np.median(col('naive_sigma')):.3f}", pct(col("naive_rms_hull")),
                         pct(col("naive_rms_corners")),
                         pct([r["map"]["hull_share"] for r in case["runs"]], 0) if i == 0 else "",
                         degrees if i == 0 else ""])  # fmt: skip
    head = ["case", "axis", "RMS in hull", "RMS in corners", "corners of the beads' planes",
            "max in hull",
            "SD of error / uncertainty", "global sigma", "global: RMS in hull",
            "global: RMS in corners", "hull share of image", "field degrees (count)"]  # fmt: skip
    return md_table(head, rows, "llrrrrrrrrrl")


def defect_tables(cases: list[dict]) -> list[str]:
    import measure_scoring as scoring

    rows, maps = [], []
    for case in cases:
        runs = [r["defect_image"] for r in case["runs"]]
        for kind in (*scoring.REASON, "all"):
            got = [r["defects"][kind] for r in runs]
            confusion = summed(Counter({k: v for k, v in g.get("confusion", {}).items() if v})
                               for g in got)  # fmt: skip
            rows.append([case["case"], kind, sum(g["planted"] for g in got),
                         pct([g["kept_out"] for g in got], 1), pct([g["right"] for g in got], 1),
                         confusion if kind != "all" else ""])  # fmt: skip
        for a in names_of(case):
            without = [r["map_shared"]["clean"][a]["rms_hull"] for r in runs]
            with_ = [r["map_shared"]["defects"][a]["rms_hull"] for r in runs]
            maps.append([case["case"], a, pct(without), pct(with_),
                         plain([r["map_ratio"][a] for r in runs], unit="x")])  # fmt: skip
    head = ["case", "planted", "count (all seeds)", "left out", "with the right reason",
            "their rows say (all seeds)"]  # fmt: skip
    return [*md_table(head, rows, "llrrrl"), "",
            "The map's RMS error over the pixels inside both fits' hulls:", "",
            *md_table(["case", "axis", "without defects", "with defects", "with / without"],
                      maps, "llrrr")]  # fmt: skip


def loop_table(loop: dict) -> list[str]:
    rows = []
    for r in loop["runs"]:
        last, best, at = r["last"], r["best"], r["best_at"]
        rows.append([f"{r['peak']:g}", r["seed"], f"{r['observed']:.2f}", f"{last['true']:.2f}",
                     f"{last['beads']:.2f}", f"{last['naive']:.2f}",
                     f"{last['beads'] - last['true']:+.3f}", f"{last['naive'] - last['true']:+.3f}",
                     f"{best['true']:.2f} @{at['true']}", f"{best['beads']:.2f} @{at['beads']}",
                     f"{best['naive']:.2f} @{at['naive']}", f"{100 * r['map_rms_all']:.2f}%",
                     r["kept"]])  # fmt: skip
    head = ["P", "seed", "observed dB", "true map dB", "bead map dB", "global sigma dB",
            "beads - true", "global - true", "true best", "beads best", "global best",
            "bead map RMS (whole image)", "beads kept"]  # fmt: skip
    return md_table(head, rows, "rrrrrrrrrrrrr")


def speed_table(speed: dict) -> list[str]:
    rows = [["x".join(map(str, r["shape"])), r["beads"], f"{r['fresh']['import']:.2f}",
             f"{r['fresh']['first']:.2f}", f"{r['median_s']:.2f}",
             ", ".join(f"{t:.2f}" for t in r["times"])] for r in speed.values()]  # fmt: skip
    head = ["image", "beads", "fresh process: import s", "first call s", "warm median s",
            "warm runs s"]  # fmt: skip
    return md_table(head, rows, "lrrrrl")


def fit_times(cases: list[dict]) -> list[str]:
    rows = [[c["case"], plain([r["seconds"]["clean"] for r in c["runs"]], unit=" s"),
             plain([r["seconds"]["defects"] for r in c["runs"]], unit=" s")]
            for c in cases]  # fmt: skip
    return md_table(["case", "clean image", "with defects"], rows, "lrr")


# --------------------------------------------------------------------------- report

NOTES = """\
Images from `bead_image` (1,000 photons per bead, 10 photons per pixel, Poisson, gain
1, offset 100, saturation 4095); each row's figure is the median over the seeds and, in
brackets, their range. A row of the bead table belongs to a planted bead within 1.5 of
that bead's sigmas (a doublet: either member or their midpoint). The defect image holds
the same isolated beads and the same noise plus 10% doublet pairs, 5% saturated and 5%
edge beads. CRB: the Poisson Cramér-Rao bound at each kept bead's true parameters
(background, amplitude, centre and sigma per axis; pixels within 5 sigmas), its median
|error| 0.6745 x its SD; measured / CRB near 1 means the fit is at the photon limit.
A planted defect "not found" has no row within 1.5 of its sigmas: it is not kept either,
but it does not count as flagged with the right reason. The machine has 2 cores shared
with other jobs: times are noisy (medians)."""


def report(data: dict) -> str:
    """The markdown report of a result."""
    cases = data["accuracy"]
    lines = ["# Bead measurement (`sigma_map_from_beads`)", "",
             common.describe_machine(data["machine"]), "",
             f"Run time {data['seconds']:.0f} s.", "", NOTES, "", "## Targets (issue 29)", "",
             *targets_table(data["targets"]), ""]  # fmt: skip
    if cases:
        lines += ["## 1. Detection (images without defects)", "", *detection_table(cases), "",
                  "With the defects:", "", *detection_table(cases, "defects"), "",
                  "## 2. Per bead (isolated beads kept ok)", "", *per_bead_table(cases), "",
                  "## 3. The map", "", *map_table(cases), "",
                  "## 4. Defects", "", *defect_tables(cases), "",
                  "Seconds per fit:", "", *fit_times(cases), ""]  # fmt: skip
    if data.get("loop"):
        cfg = data["loop"]["config"]
        lines += ["## 5. Closed loop", "",
                  f"`fluorescence_sample({cfg['shape'][0]})` at P photons peak, "
                  f"blurred with the true field (scatter), Poisson; `deblur` (scatter, "
                  f"{cfg['iterations']} iterations) with each map; map from a "
                  f"{cfg['beads']}-bead image of the same field. PSNR at the last iterate, "
                  f"and the best iterate.", "", *loop_table(data["loop"]), ""]  # fmt: skip
    if data.get("speed"):
        lines += ["## 6. Speed", "", *speed_table(data["speed"]), ""]
    return "\n".join(lines)
