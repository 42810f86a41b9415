"""The benchmark's report (used by ``bench.py``).

The :class:`Row` record (one line of the table and of the JSON ``rows`` list), the
machine description, the markdown table, the performance targets and their verdicts,
the markdown report on stdout and the JSON file.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent

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
    """CPU, library versions, JAX devices, thread counts and the source revision."""
    import jax
    import numba
    import scipy

    import napari_varblur

    model = platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import cv2

        cv2_version = f"{cv2.__version__} ({cv2.getNumThreads()} threads)"
    except ImportError:
        cv2_version = "not installed"
    try:
        root = HERE.parent
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        revision = f"{rev}{' + uncommitted changes in src/' if dirty else ''}"
    except OSError:
        revision = "unknown"
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": model or "unknown",
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "numba": f"{numba.__version__} ({numba.get_num_threads()} threads)",
        "jax": jax.__version__,
        "jax_devices": [str(d) for d in jax.devices()],
        "cv2": cv2_version,
        "napari_varblur": f"{napari_varblur.__version__} at {revision}",
    }


def _num(x: float | None, digits: int = 3) -> str:
    """Compact number for the table: 3 significant digits, no exponent above 1000."""
    if x is None:
        return ""
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def table(rows: list[Row], gpu: bool) -> str:
    """The markdown table of ``rows``."""
    head = [
        "case", "impl", "prec", "median s", "min s", "max s", "first s", "JAX compile s",
        "Mpx/s", "speed-up (peer/impl)", "max abs diff", "note",
    ]  # fmt: skip
    if gpu:
        head.insert(9, f"GB/s (% of {H200_GB_S / 1000:g} TB/s)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratios = ", ".join(f"{k} {v:.2g}x" for k, v in r.ratios.items())
        diff = ""
        if r.max_abs_diff is not None:
            diff = f"{r.max_abs_diff:.2e}"
            if r.tolerance is not None and r.max_abs_diff > r.tolerance:
                diff += f" (> tol {r.tolerance:.0e})"
        note = "; ".join(
            x
            for x in (
                r.note,
                f"diff on {r.diff_on}" if r.diff_on not in ("", "full image") else "",
                f"peak +{r.peak_mem_x_image:.1f}x image" if r.peak_mem_x_image is not None else "",
            )
            if x
        )
        cells = [
            r.case, r.implementation, r.precision, _num(r.median_s), _num(r.min_s),
            _num(r.max_s), _num(r.first_s), _num(r.jax_compile_s), _num(r.mpx_s), ratios,
            diff, note,
        ]  # fmt: skip
        if gpu:
            gb = "" if r.gb_s is None else f"{_num(r.gb_s)} ({100 * r.gb_s / H200_GB_S:.2g}%)"
            cells.insert(9, gb)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


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


def print_report(args, info, profile, case_text, rows, memory, targets) -> None:
    """The markdown report on stdout: machine, table, notes, peak memory, targets."""
    print(f"# napari_varblur benchmark ({profile} sizes, {args.repeats} timed runs per row)")
    print()
    print(f"- date: {info['date']}")
    print(
        f"- CPU: {info['cpu_model']}, {info['cpu_count']} cores "
        f"({info['cpu_affinity']} usable); {info['platform']}"
    )
    print(
        f"- python {info['python']}, numpy {info['numpy']}, scipy {info['scipy']}, "
        f"numba {info['numba']}, jax {info['jax']}, cv2 {info['cv2']}"
    )
    print(f"- jax devices: {', '.join(info['jax_devices'])}")
    print(f"- napari_varblur {info['napari_varblur']}")
    print()
    print("Cases: " + "; ".join(f"{n}: {text}" for n, text in case_text.items()))
    print()
    print(table(rows, args.gpu))
    print()
    print("Speed-up `peer/impl = N x`: impl's median time is N times shorter than peer's.")
    print("max abs diff: against the float64 reference (scipy for a global sigma, the")
    print("`reference` backend for a map); '(> tol)' marks a difference beyond the contract.")
    print("JAX compile s = first s - median s (about 0 when an earlier row compiled the same")
    print("shapes, e.g. V2s after V2).")
    if args.gpu:
        print("GB/s assumes each pass reads and writes the image once (2 x image bytes per")
        print("pass; one pass per axis for a global sigma, one pass for a map, map reads not")
        print(f"counted), against the H200's {H200_GB_S / 1000:g} TB/s HBM peak.")
    if memory:
        print()
        print("Peak memory of one numba call (fresh process, peak RSS above the warmed-up")
        print("baseline, in units of the image's bytes; the output array counts as 1):")
        for m in memory:
            print(
                f"- {m['case']} {m['precision']}: +{m['extra_x_image']:.2f}x image "
                f"({m['image_mib']:.0f} MiB image, baseline {m['baseline_mib']:.0f} MiB, "
                f"peak {m['peak_mib']:.0f} MiB, from {m['source']})"
            )
    print()
    print("Targets" + (" (quick sizes: indicative only)" if args.quick else "") + ":")
    print("\n".join(target_lines(targets)) or "- none apply to the cases run")


def write_json(args, info, profile, case_text, rows, memory, complete: bool) -> None:
    """Write the results so far (also after each case, so a killed run leaves data)."""
    payload = {
        "complete": complete,
        "machine": info,
        "date": info["date"],
        "profile": profile,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cases": case_text,
        "rows": [vars(r) for r in rows],
        "memory": memory,
        "targets": evaluate_targets(rows),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
