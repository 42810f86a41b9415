"""Regenerate the tables of docs/performance.md and docs/gpu.md from benchmarks/results/.

    python benchmarks/tables.py           # rewrite the generated tables in place
    python benchmarks/tables.py --check   # exit 1 if a doc is not what the results give

A generated table sits between ``<!-- table:NAME -->`` and ``<!-- /table -->``; NAME is a
key of :data:`TABLES`, which names the benchmark whose latest result
(``results/<date>_<machine>_<benchmark>.json``, the newest date) the table shows,
with that file's date, machine and a link to it above the table.  Nothing is run: it
reads JSON only.  A benchmark with no result yet leaves an HTML comment (invisible on
GitHub) saying how to make one.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import common
from common import md_table, num

DOCS = tuple(common.ROOT / "docs" / f"{name}.md"
             for name in ("performance", "performance_history", "gpu"))  # fmt: skip
BLOCK = re.compile(r"(<!-- table:([a-z0-9-]+) -->\n)(.*?)(<!-- /table -->)", re.S)
PEERS = {"scipy": "scipy", "cv2": "OpenCV", "naive-numba": "seed-naive Numba",
         "naive-jax": "seed-naive JAX", "jax": "jax (NumPy in/out)"}  # fmt: skip


# --------------------------------------------------------------------------- helpers


def rows_of(data: Any) -> list[dict]:
    """A result's rows: the file is the list itself (older results) or holds ``rows``."""
    return data if isinstance(data, list) else data["rows"]


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage; ``-`` when missing."""
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def times(x: float | None) -> str:
    """A ratio as ``12.3x``; empty when missing."""
    return "" if x is None else f"{x:.3g}x"


def met(ok: bool | None) -> str:
    """A verdict."""
    return "not measured" if ok is None else ("met" if ok else "**missed**")


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds, 3 significant digits."""
    return "-" if seconds is None else f"{num(seconds * 1e3)} ms"


# --------------------------------------------------------------------------- bench


def bench_table(data: dict, cases: tuple[str, ...], peers: tuple[str, ...]) -> list[str]:
    """Per case and implementation: float32 and float64 seconds, and the peers' time
    over this one's in float32 (above 1: faster than the peer)."""
    index = {(r["case"], r["implementation"], r["precision"]): r for r in data["rows"]}
    table = []
    for case in (c for c in cases if c in data["cases"]):
        impls = dict.fromkeys(r["implementation"] for r in data["rows"] if r["case"] == case)
        for i, impl in enumerate(impls):
            f32, f64 = index.get((case, impl, "float32")), index.get((case, impl, "float64"))
            cells = [f"{case}: {data['cases'][case]}" if i == 0 else "", impl]
            cells += [bench_seconds(f32), bench_seconds(f64)]
            cells += [times((f32 or {}).get("ratios", {}).get(f"{p}/{impl}")) for p in peers]
            table.append(cells)
    head = ["case", "implementation", "float32 s", "float64 s"]
    head += [f"{PEERS[p]} / it" for p in peers]
    return md_table(head, table, "llrr" + "r" * len(peers))


def bench_seconds(row: dict | None) -> str:
    """A row's median seconds, or why it did not run."""
    if row is None:
        return ""
    if row.get("median_s") is None:
        return "-" if not row.get("note") else row["note"].split(";")[0]
    return num(row["median_s"])


def global_table(data: dict) -> list[str]:
    """G2 and G3 against scipy and OpenCV."""
    return bench_table(data, ("G2", "G3"), ("scipy", "cv2"))


def seed_naive_table(data: dict) -> list[str]:
    """V2, V2s and V3 against the seed-naive kernels."""
    return bench_table(data, ("V2", "V2s", "V3"), ("naive-numba", "naive-jax"))


def bench_targets_table(data: dict) -> list[str]:
    """The side-by-side run's targets and verdicts."""
    table = []
    for t in data["targets"]:
        measured = "-" if t["measured"] is None else f"{t['measured']:.3g} {t['unit']}"
        goal = f"{t['comparison']} {t['threshold']:g} {t['unit']}"
        table.append([t["target"], measured, goal, met(t["pass"])])
    return md_table(["target (float32 unless said)", "measured", "goal", ""], table, "lrrl")


def latency_table(data: dict) -> list[str]:
    """Case L: a fresh process importing the package and blurring 512² with a map."""
    table = [[r["implementation"], num(r["median_s"]),
              r["note"].removeprefix("wall of python -c; ")]
             for r in data["rows"] if r["case"] == "L"]  # fmt: skip
    return md_table(["backend (disk caches)", "wall s", "of which"], table, "lrl")


def gpu_bench_table(data: dict) -> list[str]:
    """Each case on the device: device-resident and through NumPy, GB/s, difference."""
    index = {(r["case"], r["implementation"], r["precision"]): r for r in data["rows"]}
    table = []
    for case, text in data["cases"].items():
        for precision in ("float32", "float64"):
            device, numpy_io = (index.get((case, i, precision)) for i in ("jax-device", "jax"))
            if device is None:
                continue
            diffs = [r["max_abs_diff"] for r in (device, numpy_io) if r and r["max_abs_diff"]]
            table.append([f"{case}: {text}", precision, ms(device["median_s"]),
                          ms((numpy_io or {}).get("median_s")), num(device.get("gb_s")),
                          f"{max(diffs, default=0):.1e}", num(device.get("first_s"))])  # fmt: skip
    head = ["case", "precision", "device-resident", "through NumPy", "GB/s (device)",
            "max abs diff", "first call s"]  # fmt: skip
    return md_table(head, table, "llrrrrr")


# --------------------------------------------------------------------------- maps


def sweep_table(data: dict) -> list[str]:
    """The exact gather and the tolerance mode against sigma max."""
    table = []
    for r in data["sweep"]:
        shape = "x".join(map(str, r["shape"]))
        kind = f"tilted {100 * r['tilt']:.0f}%" if r.get("tilt") else "ramp along x"
        table.append([f"{r['dims']}-D {shape}, {kind}", f"{r['sigma_min']:g} → {r['sigma_max']:g}",
                      num(r["exact_s"]), num(r["tol0.001_s"]), times(r["tol0.001_speedup"]),
                      f"{r['tol0.001_error']:.1e}", num(r["tol0.0001_s"]),
                      num(r["global_numba_s"])])  # fmt: skip
    head = ["map", "sigma", "exact gather s", "tolerance 1e-3 s", "exact / tolerance",
            "error / range", "tolerance 1e-4 s", "one global blur s"]  # fmt: skip
    return md_table(head, table, "llrrrrrr")


def sweep_targets_table(data: dict) -> list[str]:
    """The sigma-map targets (issue 9): speed-ups, quantised map, memory, OpenCV."""
    table = [[t["target"], f"{t['measured']:.3g}", t["goal"], met(t["ok"]), t["detail"]]
             for t in data["targets"]]  # fmt: skip
    return md_table(["target", "measured", "goal", "", "detail"], table, "lrrll")


def orientation_table(data: dict) -> list[str]:
    """Tolerance 1e-3 over one global blur at the map's largest sigma, map by map."""
    table = []
    for r in data["rows"]:
        ratio, m = r["tol_over_global"], r["median_s"]
        verdict = "met" if ratio <= 4 else ("target missed" if ratio <= 8 else "**must missed**")
        once = " (once)" if r.get("exact_timed_once") else ""
        stack = r["stack_over_global"]
        than = "below" if ratio <= stack else "**above**"
        table.append([r["case"], r["map"], f"{r['sigma_min']:g} → {r['sigma_max']:g}",
                      f"{ratio:.1f}x", verdict, f"{stack:.1f}x ({r['stack_levels']}), {than}",
                      num(m["tolerance"]), num(m["global"]), num(m["exact"]) + once,
                      f"{r['tol_over_exact']:.3f}", f"{r['error']:.1e}"])  # fmt: skip
    head = ["image", "map", "sigma", "tolerance / global", "≤ 4x (must ≤ 8x)",
            "plain stack / global (blurs), tolerance", "tolerance s", "global s", "exact s",
            "tolerance / exact", "error / range"]  # fmt: skip
    threads = data["machine"].get("numba_threads")
    lines = [f"Numba threads: {threads}.", ""] if threads else []
    return lines + md_table(head, table, "lllrllrrrrr")


# --------------------------------------------------------------------------- masked


def masked_table(data: dict) -> list[str]:
    """Masked (or NaN-aware) time over plain time, and astropy as a peer."""
    table = [[r["case"], f"{r['ratio']:.2f}x",
              f"{min(r['round_ratios']):.2f}-{max(r['round_ratios']):.2f}", r["goal"],
              met(r["ok"])] for r in data["rows"]]  # fmt: skip
    peer = data["peer"]
    head = ["case", "masked / plain", "range over rounds", "goal", ""]
    return [
        *md_table(head, table, "lrrrl"),
        "",
        f'Peer: astropy `convolve(nan_treatment="interpolate")`, {peer["case"]}: '
        f"{peer['speedup']:.1f}x our time (largest difference {peer['max_abs_diff']:.1e}).",
    ]


def global_vs_opencv_table(data: dict) -> list[str]:
    """Global float32 blur against OpenCV (when it was installed), and the masked one."""
    lines = []
    if data["opencv"]:
        opencv = [[r["case"], ms(r["ours_s"]), ms(r["opencv_s"]), f"{r['ratio']:.2f}x",
                   f"{r['max_diff']:.1e}"] for r in data["opencv"]]  # fmt: skip
        head = ["case", "ours", "OpenCV", "OpenCV / ours", "max diff"]
        lines += [*md_table(head, opencv, "lrrrr"), ""]
    masked = [[r["case"], ms(r["masked_s"]), ms(r["plain_s"]), f"{r['ratio']:.2f}x"]
              for r in data["masked"]]  # fmt: skip
    return [*lines, *md_table(["case", "masked", "plain", "masked / plain"], masked, "lrrr")]


def out_of_core_table(data: dict) -> list[str]:
    """``varblur blur`` on a Zarr volume: time and peak memory."""
    row = [f"{'x'.join(map(str, data['shape']))} float32, {data['gib']:.2f} GiB",
           f"{data['wall_s']:.1f}", f"{data['mb_s']:.0f}", f"{data['peak_gib']:.2f} GiB",
           f"{data['max_abs_diff']:.2g}"]  # fmt: skip
    head = ["volume", "wall s", "MB/s", "peak RSS", "max diff vs in-memory"]
    return md_table(head, [row], "lrrrr")


# --------------------------------------------------------------------------- startup


def spread(values: list[float]) -> str:
    """Median and range: ``7.72 (7.63-7.82)``."""
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def first_call_table(data: dict) -> list[str]:
    """Import + the first call in a fresh process: empty Numba cache, then filled."""
    table = []
    for r in data["results"]:
        cold = [x["cold"]["import"] + x["cold"]["first"] for x in r["runs"]]
        warm = [x["warm"]["import"] + x["warm"]["first"] for x in r["runs"]]
        table.append([r["backend"], r["case"], spread(cold), spread(warm)])
    runs = max((len(r["runs"]) for r in data["results"]), default=0)
    head = ["backend", "call", "cold: import + first call s", "warm s"]
    return [f"Median of {runs} runs (range), seconds.", "", *md_table(head, table, "llrr")]


def ran_on(status: str) -> str:
    """The backend a click ran on, from the widget's status line."""
    found = re.search(r" on (\w+)", status)
    return found.group(1) if found else "?"


def first_click_table(data: dict) -> list[str]:
    """The first click in napari: empty cache at each delay, then a warm cache."""
    table = []
    for state in ("cold", "warm"):
        for r in data["results"]:
            got = [run[state] for run in r["runs"] if state in run]
            if not got:
                continue
            table.append([r["case"], "empty" if state == "cold" else "warm",
                          f"{r['delay']:g}", f"{statistics.median(g['click'] for g in got):.2f}",
                          f"{statistics.median(g['longest_pause'] for g in got):.2f}",
                          ", ".join(dict.fromkeys(ran_on(g["status"]) for g in got))])  # fmt: skip
    head = ["click on", "Numba cache", "delay after docking s", "click to result s",
            "longest pause s", "ran on"]  # fmt: skip
    return md_table(head, table, "llrrrl")


def cold_start_table(data: dict) -> list[str]:
    """Ten varied map calls, the first calls and the first click, from an empty cache."""
    calls = data["varied_calls"]
    table = [["ten varied sigma-map calls", f"{calls['cold_s']:.1f}", f"{calls['warm_s']:.1f}"]]
    for case, got in (data.get("first_call") or {}).items():
        table.append([f"import + first {case}", f"{got['import'] + got['first']:.2f}", ""])
    for case, got in (data.get("first_click") or {}).items():
        table.append([f"first click in napari on {case}, at once", f"{got['click']:.2f}", ""])
    return md_table(["run", "empty cache s", "warm s"], table, "lrr")


# --------------------------------------------------------------------------- fit and A/B


def fit_table(data: dict) -> list[str]:
    """fit_sigma_map on synthetic focus pairs, and the per-tile grid search."""
    table = [[r["case"], "x".join(map(str, r["shape"])), pct(r["median"], 2), pct(r["rms"], 2),
              f"{r['z_rms']:.2f}", f"{r['first_fit_s']:.1f}", f"{r['second_fit_s']:.2f}"]
             for r in data["rows"]]  # fmt: skip
    peer = data["peer"]
    table.append([f"peer: {peer['method']}", "", pct(peer["median"]), pct(peer["rms"]), "",
                  f"{peer['seconds']:.1f}", ""])  # fmt: skip
    head = ["case", "shape", "median error", "RMS", "error / stderr", "first fit s", "again s"]
    return md_table(head, table, "llrrrrr")


def fit_realistic_table(data: Any) -> list[str]:
    """Fits of scipy-blurred pairs with Poisson noise, a gain and an offset."""
    table = []
    for r in rows_of(data):
        converged = ("yes" if r["converged"] else "no") + ("; warned" if r.get("warnings") else "")
        table.append([r["case"], r["intensity"], pct(r["observable"]),
                      pct(r["median_rel_error"]), pct(r["beyond_3_se"], 0),
                      f"{r['gain']:.2f}, {r['offset']:.1f}",
                      converged, f"{r['seconds']:.0f}"])  # fmt: skip
    head = ["case", "intensity", "observable", "median error", "beyond 3 SE", "gain, offset",
            "converged", "s"]  # fmt: skip
    return md_table(head, table, "llrrrrlr")


def ab_table(data: dict) -> list[str]:
    """Head over base, case by case, and their geometric mean."""
    rows = data["rows"]
    table = [[r["label"], num((r["base"] or {}).get("median")),
              num((r["head"] or {}).get("median")), f"{r['ratio']:.2f}" if r["ratio"] else "-"]
             for r in rows]  # fmt: skip
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    geo = math.exp(statistics.fmean(map(math.log, ratios))) if ratios else float("nan")
    trees = data["trees"]
    s = data["settings"]
    return [
        f"Base {trees['base'].get('commit', '?')[:7]}, head {trees['head'].get('commit', '?')[:7]}"
        f"; {s['rounds']} rounds x {s['repeats']} repeats; geometric mean head / base "
        f"**{geo:.2f}**.",
        "",
        *md_table(["case", "base s", "head s", "head / base"], table, "lrrr"),
    ]


def peak_memory_table(data: dict) -> list[str]:
    """The tolerance mode's peak memory beyond the input, in images (the result is one)."""
    table = [[r["case"], r["mode"], f"{r['image_mb']:.0f}", f"{r['rss_extra']:.2f}",
              f"{r['traced']:.2f}"] for r in data["results"]]  # fmt: skip
    head = ["map", "mode", "image MiB", "peak resident memory beyond the input (x image)",
            "tracemalloc peak (x image)"]  # fmt: skip
    return md_table(head, table, "llrrr")


def gpu_tolerance_table(data: Any) -> list[str]:
    """Tolerance 1e-3 on a GPU: the level loop, the exact gather, one global blur."""
    table = [[r["case"], f"{r['taps']:,}", ms(r["levels_s"]), ms(r["gather_s"]),
              ms(r["global_s"]), f"{r['levels_over_gather']:.0f}x"]
             for r in rows_of(data)]  # fmt: skip
    head = ["map", "window taps", "levels", "exact gather", "global at sigma max",
            "levels / gather"]  # fmt: skip
    return md_table(head, table, "lrrrrr")


#: Table name -> (benchmark whose latest result it shows, renderer, command to make one).
TABLES: dict[str, tuple[str, Callable[[Any], list[str]], str]] = {
    "global": ("bench", global_table, "peers/bench.py"),
    "seed-naive": ("bench", seed_naive_table, "peers/bench.py"),
    "bench-targets": ("bench", bench_targets_table, "peers/bench.py"),
    "latency": ("bench", latency_table, "peers/bench.py"),
    "global-vs-opencv": ("global_vs_opencv", global_vs_opencv_table, "global/global_vs_opencv.py"),
    "sweep": ("sweep", sweep_table, "maps/sweep.py"),
    "sweep-targets": ("sweep", sweep_targets_table, "maps/sweep.py"),
    "orientation": ("orientation", orientation_table, "maps/orientation.py"),
    "masked": ("masked", masked_table, "masked/masked.py"),
    "peak-memory": ("peak_memory", peak_memory_table, "maps/peak_memory.py"),
    "out-of-core": ("out_of_core", out_of_core_table, "out_of_core/out_of_core.py"),
    "cold-start": ("cold_start", cold_start_table, "startup/cold_start.py"),
    "first-call": ("first_call", first_call_table, "startup/first_call.py"),
    "first-click": ("first_click", first_click_table, "startup/first_click.py"),
    "fit": ("fit", fit_table, "fit/fit.py"),
    "fit-realistic": ("fit_realistic", fit_realistic_table, "fit/fit_realistic.py"),
    "ab": ("ab", ab_table, "ab.py"),
    "gpu-bench": ("bench_gpu", gpu_bench_table, "gpu/gpu_check.sh"),
    "gpu-tolerance": ("gpu_tolerance", gpu_tolerance_table, "gpu/gpu_tolerance.py"),
}


def render(name: str, doc: Path) -> str:
    """The text of one generated block: where its figures come from, then the table."""
    if name not in TABLES:
        raise SystemExit(f"{doc}: unknown table {name!r}; known: {', '.join(TABLES)}")
    benchmark, renderer, command = TABLES[name]
    path = common.latest_result(benchmark)
    if path is None:
        return f"<!-- no {benchmark} result yet: run benchmarks/{command} -->\n"
    date, machine = common.result_label(path)
    link = Path("..") / path.relative_to(common.ROOT)
    source = f"_{date}, {machine}: [`{path.name}`]({link.as_posix()})_"
    return "\n".join([source, "", *renderer(json.loads(path.read_text())), ""])


def regenerate(text: str, doc: Path) -> str:
    """``text`` with every generated block rendered afresh."""
    return BLOCK.sub(lambda m: m.group(1) + render(m.group(2), doc) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    """Rewrite the docs' tables, or with ``--check`` say which are out of date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a doc is out of date")
    parser.add_argument("docs", nargs="*", type=Path, default=list(DOCS), help="the docs")
    args = parser.parse_args(argv)
    stale = []
    for doc in args.docs:
        text = doc.read_text()
        fresh = regenerate(text, doc)
        if fresh == text:
            continue
        stale.append(doc)
        if not args.check:
            doc.write_text(fresh)
            print(f"rewrote the tables of {doc}")
    if args.check and stale:
        print("out of date (run python benchmarks/tables.py): " + ", ".join(map(str, stale)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
