"""The side-by-side benchmark's report (used by ``bench.py``).

The :class:`Row` record (one line of the table and of the JSON ``rows`` list), the
machine description, the markdown table, the performance targets and their verdicts,
the markdown report and the result file (``common.write_result``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common
from common import num

#: H200 HBM3e peak bandwidth, for the GPU mode's "% of peak" column.
H200_GB_S = 4800.0


@dataclass
class Row:
    """One line of the table and of the JSON ``rows`` list."""

    case: str
    implementation: str
    precision: str
    shape: list[int]
    median_s: float | None = None
    min_s: float | None = None
    max_s: float | None = None
    first_s: float | None = None
    times_s: list[float] = field(default_factory=list)
    jax_compile_s: float | None = None
    mpx_s: float | None = None
    gb_s: float | None = None
    ratios: dict[str, float] = field(default_factory=dict)
    max_abs_diff: float | None = None
    tolerance: float | None = None
    diff_on: str = ""
    peak_mem_x_image: float | None = None
    note: str = ""


def machine_info() -> dict[str, Any]:
    """The machine (``common.machine``), JAX's devices and OpenCV's threads."""
    import jax

    try:
        import cv2

        cv2_threads = cv2.getNumThreads()
    except ImportError:
        cv2_threads = None
    return common.machine(jax_devices=[str(d) for d in jax.devices()], cv2_threads=cv2_threads)


def table(rows: list[Row], gpu: bool) -> str:
    """The markdown table of ``rows``."""
    head = [
        "case", "impl", "prec", "median s", "min s", "max s", "first s", "JAX compile s",
        "Mpx/s", "speed-up (peer/impl)", "max abs diff", "note",
    ]  # fmt: skip
    if gpu:
        head.insert(9, f"GB/s (% of {H200_GB_S / 1000:g} TB/s)")
    lines = []
    for r in rows:
        cells = [
            r.case, r.implementation, r.precision, num(r.median_s), num(r.min_s),
            num(r.max_s), num(r.first_s), num(r.jax_compile_s), num(r.mpx_s),
            ", ".join(f"{k} {v:.2g}x" for k, v in r.ratios.items()), diff_text(r), note_text(r),
        ]  # fmt: skip
        if gpu:
            gb = "" if r.gb_s is None else f"{num(r.gb_s)} ({100 * r.gb_s / H200_GB_S:.2g}%)"
            cells.insert(9, gb)
        lines.append(cells)
    return "\n".join(common.md_table(head, lines))


def diff_text(r: Row) -> str:
    """The difference to the reference, marked when beyond the contract."""
    if r.max_abs_diff is None:
        return ""
    diff = f"{r.max_abs_diff:.2e}"
    if r.tolerance is not None and r.max_abs_diff > r.tolerance:
        diff += f" (> tol {r.tolerance:.0e})"
    return diff


def note_text(r: Row) -> str:
    """The row's note, where its difference was taken, and its peak memory."""
    parts = (
        r.note,
        f"diff on {r.diff_on}" if r.diff_on not in ("", "full image") else "",
        f"peak +{r.peak_mem_x_image:.1f}x image" if r.peak_mem_x_image is not None else "",
    )
    return "; ".join(x for x in parts if x)


#: Speed targets (float32): (case, implementation, peer, least peer/implementation ratio).
SPEED_TARGETS = [
    ("G2", "numba", "scipy", 5.0),
    ("G2", "numba", "cv2", 0.5),  # numba within 2x of cv2
    ("G2", "jax", "scipy", 1.5),
    ("V2", "numba", "naive-numba", 15.0),
    ("V2", "jax", "naive-numba", 3.0),
    ("V2", "jax", "naive-jax", 10.0),
    ("V2s", "numba", "naive-numba", 15.0),
    ("V2s", "jax", "naive-numba", 3.0),
    ("V2s", "jax", "naive-jax", 10.0),
    ("V3", "numba", "naive-numba", 15.0),
]

#: Time targets in seconds: JAX compile (first call - median) per case, warm latency.
MAX_JAX_COMPILE_S = 3.0
MAX_WARM_LATENCY_S = 3.0


def evaluate_targets(rows: list[Row]) -> list[dict[str, Any]]:
    """The targets that apply to the rows that ran, with measured values and verdicts.

    A speed target whose case ran in float32 but whose row was skipped (e.g. by
    ``--budget``) is listed with ``measured: None`` and ``pass: None``.
    """
    targets = []

    def add(label: str, value: float | None, threshold: float, unit: str, at_most: bool):
        ok = None if value is None else (value <= threshold if at_most else value >= threshold)
        targets.append(
            {
                "target": label,
                "measured": value,
                "threshold": threshold,
                "unit": unit,
                "comparison": "<=" if at_most else ">=",
                "pass": ok,
            }
        )

    by_key = {(r.case, r.implementation, r.precision): r for r in rows}
    for case, impl, peer, threshold in SPEED_TARGETS:
        row = by_key.get((case, impl, "float32"))
        if row is None or (case, peer, "float32") not in by_key:
            continue  # the case (or this comparison) did not run
        label = f"{case} float32: {impl} vs {peer} ({peer}/{impl})"
        add(label, row.ratios.get(f"{peer}/{impl}"), threshold, "x", at_most=False)
    for r in rows:
        if r.implementation in ("jax", "jax-device") and r.case != "L":
            label = f"{r.case} {r.precision}: {r.implementation} compile (first - median)"
            add(label, r.jax_compile_s, MAX_JAX_COMPILE_S, "s", at_most=True)
    for r in rows:
        if r.case == "L" and "warm" in r.implementation:
            add(f"L: {r.implementation} wall", r.median_s, MAX_WARM_LATENCY_S, "s", at_most=True)
    return targets


def target_lines(targets: list[dict[str, Any]]) -> list[str]:
    """One markdown bullet per target: measured value, threshold, PASS/MISS."""
    lines = []
    for t in targets:
        if t["measured"] is None:
            lines.append(f"- {t['target']}: not measured (target {t['comparison']} "
                         f"{t['threshold']:g} {t['unit']})")  # fmt: skip
            continue
        verdict = "PASS" if t["pass"] else "MISS"
        lines.append(
            f"- {t['target']}: {t['measured']:.3g} {t['unit']} "
            f"(target {t['comparison']} {t['threshold']:g} {t['unit']}) {verdict}"
        )
    return lines


def report_text(args, info, profile, case_text, rows, memory, targets) -> str:
    """The markdown report: machine, table, notes, peak memory, targets."""
    lines = [
        f"# napari_varblur benchmark ({profile} sizes, {args.repeats} timed runs per row)",
        "",
        f"- {common.describe_machine(info)}",
        f"- jax devices: {', '.join(info['jax_devices'])}; OpenCV threads {info['cv2_threads']}",
        "",
        "Cases: " + "; ".join(f"{n}: {text}" for n, text in case_text.items()),
        "",
        table(rows, args.gpu),
        "",
        "Speed-up `peer/impl = N x`: impl's median time is N times shorter than peer's.",
        "max abs diff: against the float64 reference (scipy for a global sigma, the",
        "`reference` backend for a map); '(> tol)' marks a difference beyond the contract.",
        "JAX compile s = first s - median s (about 0 when an earlier row compiled the same",
        "shapes, e.g. V2s after V2).",
    ]
    if args.gpu:
        lines += [
            "GB/s assumes each pass reads and writes the image once (2 x image bytes per",
            "pass; one pass per axis for a global sigma, one pass for a map, map reads not",
            f"counted), against the H200's {H200_GB_S / 1000:g} TB/s HBM peak.",
        ]
    if memory:
        lines += [
            "",
            "Peak memory of one numba call (fresh process, peak RSS above the warmed-up",
            "baseline, in units of the image's bytes; the output array counts as 1):",
        ]
        lines += [
            f"- {m['case']} {m['precision']}: +{m['extra_x_image']:.2f}x image "
            f"({m['image_mib']:.0f} MiB image, baseline {m['baseline_mib']:.0f} MiB, "
            f"peak {m['peak_mib']:.0f} MiB, from {m['source']})"
            for m in memory
        ]
    quick = " (quick sizes: indicative only)" if args.quick else ""
    lines += ["", f"Targets{quick}:", *(target_lines(targets) or ["- none apply"])]
    return "\n".join(lines) + "\n"


def write_json(args, info, profile, case_text, rows, memory, complete: bool) -> None:
    """Write the results so far (also after each case, so a killed run leaves data),
    with the markdown report next to them once the run is complete."""
    targets = evaluate_targets(rows)
    payload = {
        "complete": complete,
        "date": info["date"],
        "profile": profile,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cases": case_text,
        "rows": [vars(r) for r in rows],
        "memory": memory,
        "targets": targets,
    }
    text = report_text(args, info, profile, case_text, rows, memory, targets) if complete else None
    common.write_result("bench", payload, info, out=args.out, markdown=text, quiet=not complete)
