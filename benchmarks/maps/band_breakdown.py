"""Where a tolerance map's time goes: planning, and each slot of the level bands.

For the orientation sweep's maps (``orientation_cases.py``: 2-D 2048², 3-D
64x128x128; Numba, float32, ``mode="nearest"``, ``tolerance=1e-3``), in one process,
interleaved rounds (median of ``--repeats``):

- ``call``: the public call, ``gaussian_blur(..., tolerance=1e-3)``;
- ``plan``: the router's planning alone (a new spec each time: the levels, the cost
  model's survey and tilings, the band plan's runs);
- ``blur``: the band plan's blur alone, and each slot's passes alone (the other
  slots' runs emptied), with per slot its runs, pixels and taps per image pixel
  (slot 1: the first pass of a 3-D map, slot 2 the middle, slot 3 the last one,
  which mixes into the output);
- ``global``: one global blur at the map's largest sigma, for scale.

Then, per radius bucket of the 3-D sweep (every mode but crop, three axes sharing
their levels), the mixing error of ONE interval over the planner's limit with its
two levels at the bucket's ends (as planned) and at 15% and 85% of it (pixels
beyond them extrapolating): where the second is under 1 a bucket would need two
levels instead of three.  These figures read the package's internals
(``internals.band_parts``, ``internals.bucket_errors``).

    python benchmarks/maps/band_breakdown.py        # about 3 minutes on 2 cores

Writes ``benchmarks/results/<date>_<machine>_band_breakdown.json`` and ``.md``.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, internals

import common
import internals
import numpy as np
from orientation_cases import TOLERANCE, image_2d, image_3d, maps_2d, maps_3d

from napari_varblur import gaussian_blur

SHAPE_2D, SHAPE_3D = (2048, 2048), (64, 128, 128)
#: Where the two levels of an interval sit inside a bucket (the Chebyshev nodes of a
#: line: (1 - cos(pi / 4)) / 2).
INNER = 0.15


def cases():
    """(name, image, map, largest sigma) of every map."""
    image2, image3 = image_2d(SHAPE_2D[0]), image_3d(SHAPE_3D).astype(np.float32)
    for name, (_, sigma) in maps_2d(SHAPE_2D).items():
        yield f"2-D {SHAPE_2D[0]}² {name}", image2, sigma, 16.0
    for name, (_, sigma) in maps_3d(SHAPE_3D).items():
        yield "3-D {}x{}x{} {}".format(*SHAPE_3D, name), image3, sigma, 8.0


def row(name, image, sigma, top, repeats) -> dict:
    """One map's times (ms, medians) and counts."""
    parts = internals.band_parts(image, sigma, "nearest", TOLERANCE)

    def call(s, tolerance):
        return gaussian_blur(image, s, mode="nearest", backend="numba", tolerance=tolerance)

    calls = {"call": lambda: call(sigma, TOLERANCE), "global": lambda: call(top, None)}
    if parts is not None:
        calls |= {"plan": parts["plan"], "blur": parts["blur"]}
        calls |= {k: v["call"] for k, v in parts["slots"].items()}
    times = common.interleaved(calls, repeats, short=0.1)
    ms = {k: 1e3 * statistics.median(v) for k, v in times.items()}
    out = dict(map=name, ms=ms)
    if parts is not None:
        out |= dict(levels=parts["levels"], axes=parts["axes"], taps=parts["taps"],
                    slots={k: {q: v[q] for q in ("runs", "pixels", "taps")}
                           for k, v in parts["slots"].items()})  # fmt: skip
    common.log(f"{name}: " + ", ".join(f"{k} {v:.1f}" for k, v in ms.items()))
    return out


def buckets() -> list[dict]:
    """The one-interval errors of the 3-D sweep's buckets (radius 8 to 24)."""
    errors = internals.bucket_errors
    return [
        dict(radius=r, ends=errors(r, 3), inner=errors(r, 3, inner=INNER)) for r in range(8, 25)
    ]


def markdown(data: dict) -> str:
    """The report."""
    lines = [f"# Where a tolerance map's time goes ({data['machine']['date'][:10]})", "",
             common.describe_machine(data["machine"]), "",
             "Milliseconds, medians of interleaved rounds; slots: the band blur with only "
             "that slot's runs (pixels and taps per image pixel).", ""]  # fmt: skip
    head = ["map", "call", "plan", "plan / call", "blur", "slots (ms; runs, px, taps)",
            "global", "call / global", "levels"]  # fmt: skip
    body = []
    for r in data["rows"]:
        ms = r["ms"]
        slots = "; ".join(
            f"{k[-1]}: {ms[k]:.1f} ({v['runs']}, {v['pixels']:.1f}, {v['taps']:.0f})"
            for k, v in r.get("slots", {}).items()
        )
        plan = ms.get("plan")
        body.append([r["map"], f"{ms['call']:.1f}", "-" if plan is None else f"{plan:.1f}",
                     "-" if plan is None else f"{plan / ms['call']:.0%}",
                     f"{ms.get('blur', float('nan')):.1f}", slots, f"{ms['global']:.1f}",
                     f"{ms['call'] / ms['global']:.1f}x", r.get("levels", "-")])  # fmt: skip
    lines += common.md_table(head, body, "lrrrrlrrr") + [""]
    lines += [f"One interval per radius bucket (3-D, shared levels): its error over the "
              f"planner's limit, levels at the bucket's ends and at {INNER:.0%} / "
              f"{1 - INNER:.0%} of it.", ""]  # fmt: skip
    lines += common.md_table(
        ["radius", "ends", "inside"],
        [[b["radius"], f"{b['ends']:.2f}", f"{b['inner']:.2f}"] for b in data["buckets"]],
        "rrr",
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = common.parser(__doc__, "band_breakdown").parse_args()
    info = common.machine()
    rows = [row(*case, repeats=5) for case in cases()]
    data = dict(rows=rows, buckets=buckets())
    common.write_result("band_breakdown", data, info, out=args.out,
                        markdown=markdown(dict(machine=info, **data)))  # fmt: skip


if __name__ == "__main__":
    main()
