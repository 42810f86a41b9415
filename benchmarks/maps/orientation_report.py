"""The orientation sweep's markdown report (``orientation.py``): the machine, the
ratios by map, the findings computed from them, and the peers' table."""

from __future__ import annotations

import common
from common import md_table
from orientation_cases import STACK_RATIO, TOLERANCE

AIM, BOUND = 4.0, 8.0  # tolerance / one global blur: target and must

PEER_TEXT = (
    "The built-in sample at the peer size, normalised to [0, 1]; every error is against our "
    'exact gather (`mode="nearest"`: both peers clamp at the border) in those units; '
    "'interior' leaves out a 48-pixel border (3 x sigma max).  Sigma convention for both: "
    "sigma = 16 x map value / 16 (ImageMagick `compose:args=16x16`, red = green = map / 16 in "
    "a 16-bit PNG; GEGL `radius=16 linear-mask=true`, mask = map / 16, sRGB-encoded float "
    "TIFFs in, output decoded to linear): the constant-map rows check it against our global "
    "blur at sigma 16.  s / process is the wall time of the whole command; compute s is that "
    "less an I/O-only command on the same files (ImageMagick `-compose over`, GEGL "
    "`gegl:add`).  Ours are timed in this process (no file I/O): tolerance as the median of "
    "3 after a warm-up, the exact gather once."
)


def route_text(info: dict) -> str:
    """A route in words: ``levels: 12x1 levels, tiles 64x2048``."""
    kind = info.get("kind", "?")
    if "levels" not in info:
        return kind
    levels = info["levels"]
    count = str(levels[0]) if info.get("diagonal") else "x".join(map(str, levels))
    tiles = "x".join(map(str, info.get("tiles", [])))
    extra = ", quantised (exact)" if info.get("exact") else ""
    shared = " (shared)" if info.get("diagonal") else ""
    return f"{kind}: {count} levels{shared}, tiles {tiles}{extra}"


def _mark(ratio: float) -> str:
    return "" if ratio <= AIM else (" (> 4x)" if ratio <= BOUND else " (**> 8x**)")


def header(data: dict) -> list[str]:
    """Title, machine, settings and the columns' meaning."""
    info, args = data["machine"], data["settings"]
    label = f"  Code: {info['label']}." if info.get("label") else ""
    return [
        f"# Sigma-map orientation sweep ({str(info['date'])[:10]})",
        "",
        f"Machine: {common.describe_machine(info)}.{label}",
        f"Command: `{info.get('command', '?')}`.",
        f"Load average (1, 5, 15 min) at the start: {info.get('load', info.get('load_start'))}"
        f", at the end: {info.get('load_end', '-')} (2 cores shared with other work).",
        "",
        f'Numba backend, float32, `mode="{args["mode"]}"`, truncate 3.  Every ratio of a row '
        f"comes from one set of interleaved rounds: one warm-up round, then the median of "
        f"{args['repeats']} rounds (the order rotates; a call under 0.1 s, e.g. the global "
        "blur, runs 5 times per round and the round keeps their median).  The machine is "
        "shared and noisy: read the ratios, not the seconds.",
        "",
        "- **tol / global**: `tolerance=1e-3` over ONE global blur at the map's largest "
        f"sigma (target <= {AIM:g}x, must <= {BOUND:g}x).",
        "- **tol / exact**: over the exact per-pixel gather (the backend's gather, never the "
        "level walk); `once` marks an exact gather timed by a single call (slower than "
        f"{args['once_above']:g} s).",
        "- **error**: max |tolerance - exact| / the image's value range (must be <= 1e-3).",
        f"- **stack / global**: the plain stack, global blurs from the smallest to the largest "
        f"sigma at ratio {STACK_RATIO} (N blurs, no mixing), over one global blur.",
        "- **route**: what the planner chose for the tolerance call.",
        "",
    ]


def rows_table(rows: list[dict]) -> list[str]:
    """One line per map: the ratios, the error, the route and the seconds."""
    head = ["case", "map", "sigma", "tol / global", "tol / exact", "error / range",
            "stack / global (N)", "exact / global", "route (tol 1e-3)", "global s", "tol s",
            "exact s"]  # fmt: skip
    table = []
    for r in rows:
        m = r["median_s"]
        err = f"{r['error']:.1e}" + (" (**> 1e-3**)" if r["error"] > TOLERANCE else "")
        table.append([
            r["case"], r["map"], f"{r['sigma_min']:g}-{r['sigma_max']:g}",
            f"{r['tol_over_global']:.1f}x{_mark(r['tol_over_global'])}",
            f"{r['tol_over_exact']:.3f}", err,
            f"{r['stack_over_global']:.1f}x ({r['stack_levels']})",
            f"{r['exact_over_global']:.0f}x", route_text(r["route_tolerance"]),
            f"{m['global']:.4f}", f"{m['tolerance']:.3f}",
            f"{m['exact']:.2f}{' once' if r['exact_timed_once'] else ''}",
        ])  # fmt: skip
    return md_table(head, table)


def peers_lines(data: dict) -> list[str]:
    """The peers' section, when the run timed them."""
    peers = data.get("peers")
    if not peers:
        return []
    lines = ["", "## Peers (2-D)", "", data["peer_text"], ""]
    if peers["rows"]:
        table = []
        for p in peers["rows"]:
            proc = "-" if p.get("process_s") is None else f"{p['process_s']:.2f}"
            runs = f" (median of {p['runs']})" if p.get("runs", 1) > 1 else ""
            table.append([p["map"], f"{p['size']}²", p["impl"], proc + runs,
                          f"{p['compute_s']:.3f}", f"{p['error']:.1e}",
                          f"{p['error_interior']:.1e}", f"{p['rms']:.1e}"])  # fmt: skip
        lines += md_table(["map", "size", "implementation", "s / process", "compute s",
                           "error / range", "interior", "RMS"], table)  # fmt: skip
    return lines + [f"- {note}" for note in peers["notes"]]


def markdown(data: dict) -> str:
    """The whole report."""
    rows = data["rows"]
    lines = header(data) + rows_table(rows)
    lines += ["", "Maps:", ""] + [f"- {r['case']} {r['map']}: {r['description']}." for r in rows]
    exact_routes = "; ".join(f"{r['case']} {r['map']}: {route_text(r['route_exact'])}"
                             for r in rows)  # fmt: skip
    lines += ["", f"Route of the same call with `tolerance=None`: {exact_routes}."]
    lines += ["", f"Images: {data.get('images', '-')}"]
    lines += ["", "## Findings (computed from the rows)", ""] + [f"- {f}" for f in findings(rows)]
    return "\n".join(lines + peers_lines(data)) + "\n"


def route_findings(r: dict) -> list[str]:
    """Routes that look wrong for one row."""
    out = []
    name, kind = f"{r['case']} {r['map']}", r["route_tolerance"].get("kind")
    if kind == "levels" and r["tol_over_exact"] > 1.0:
        out.append(f"{name}: the planner chose the level walk ({route_text(r['route_tolerance'])})"
                   f" but it took {r['tol_over_exact']:.2f}x the exact gather's time.")  # fmt: skip
    if kind == "gather":
        out.append(f"{name}: the planner chose the exact gather for tolerance 1e-3 (error 0): "
                   "its estimate did not favour the level walk.")  # fmt: skip
    if r["route_exact"].get("kind") == "levels":
        count = r["route_exact"].get("levels", ["?"])[0]
        out.append(f"{name}: the map has few distinct values ({count}), so even "
                   "tolerance=None walks quantised levels (exact); the exact column is still "
                   "the gather.")  # fmt: skip
    return out


def findings(rows: list[dict]) -> list[str]:
    """What a reader should not miss: bounds broken, and routes that look wrong."""

    def names(keep) -> str:
        return ", ".join(f"{r['case']} {r['map']} {r['tol_over_global']:.1f}x"
                         for r in rows if keep(r["tol_over_global"])) or "none"  # fmt: skip

    out = [
        f"tolerance 1e-3 over one global blur above the {BOUND:g}x bound: "
        f"{names(lambda x: x > BOUND)}; between {AIM:g}x and {BOUND:g}x: "
        f"{names(lambda x: AIM < x <= BOUND)}; within {AIM:g}x: {names(lambda x: x <= AIM)}."
    ]
    bad = [f"{r['case']} {r['map']} {r['error']:.1e}" for r in rows if r["error"] > TOLERANCE]
    out.append(f"error above 1e-3 of the range: {', '.join(bad) or 'none'} (largest "
               f"{max((r['error'] for r in rows), default=0):.1e}).")  # fmt: skip
    for r in rows:
        out += route_findings(r)
    cheaper = [f"{r['case']} {r['map']} ({r['stack_over_global']:.1f}x)"
               for r in rows if r["stack_over_global"] < r["tol_over_global"]]  # fmt: skip
    if cheaper:
        out.append(f"the plain stack (ratio {STACK_RATIO}) costs less than the tolerance mode "
                   f"on: {', '.join(cheaper)}.")  # fmt: skip
    return out
