"""The orientation sweep's tolerance / global ratio for two source trees, side by side.

``orientation.py`` times one tree; two of its runs made minutes apart on a shared
machine moved the global blur and the plain stack (the same code in both) by up to
40%, more than a change to the tolerance path does.  Here the trees alternate: every
round starts a fresh worker for the base tree, then one for the head tree (each with
its tree first on ``PYTHONPATH``; Numba caches its kernels next to each tree's
sources).  A worker takes the 2-D or the 3-D maps of ``orientation_cases.py``, warms
each call up, then times ``--pairs`` pairs of one global blur at the map's largest
sigma (median of 5 calls) and one ``tolerance=1e-3`` call, and reports each map's
median ratio.  The table gives, per map and tree, the median over rounds and the
rounds' range.

    git archive <commit> src | tar -x -C /tmp/base          # the base tree
    python benchmarks/maps/orientation_ab.py --base /tmp/base/src --head src
    python benchmarks/maps/orientation_ab.py --base src --head src --rounds 1 --pairs 1

Writes ``benchmarks/results/<date>_<machine>_orientation_ab.json`` and ``.md`` (or
``--out``): about 12 minutes with 5 rounds on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common, internals

import common

HERE = Path(__file__).resolve().parent


def worker(group: str, pairs: int) -> None:
    """Print ``{map: ratio}`` (JSON) for the ``group`` ("2d" or "3d") maps."""
    from orientation_cases import TOLERANCE, image_2d, image_3d, maps_2d, maps_3d

    from napari_varblur import gaussian_blur

    image, maps = (image_2d(2048), maps_2d((2048, 2048))) if group == "2d" else (
        image_3d((64, 128, 128)), maps_3d((64, 128, 128)))  # fmt: skip
    ratios = {}
    for name, (_, smap) in maps.items():
        one = partial(gaussian_blur, image, float(smap.max()), mode="nearest", backend="numba")
        tol = partial(gaussian_blur, image, smap, tolerance=TOLERANCE, mode="nearest",
                      backend="numba")  # fmt: skip
        one(), tol()
        found = []
        for _ in range(pairs):
            g = common.median_time(one, 5, warmup=0)
            found.append(common.median_time(tol, 1, warmup=0) / g)
        ratios[f"{group} {name}"] = statistics.median(found)
    print(json.dumps(ratios))


def run(tree: Path, group: str, pairs: int) -> dict[str, float]:
    """One worker on ``tree``: its ratios."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("NUMBA_CACHE_DIR", None)
    cmd = [sys.executable, __file__, "--worker", group, "--pairs", str(pairs)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(rows: list[dict], info: dict, args) -> str:
    """The markdown table."""
    table = [[r["map"], f"{r['base']:.1f}x", f"{min(r['base_rounds']):.1f}-"
              f"{max(r['base_rounds']):.1f}", f"{r['head']:.1f}x",
              f"{min(r['head_rounds']):.1f}-{max(r['head_rounds']):.1f}",
              f"{r['head'] / r['base']:.2f}"] for r in rows]  # fmt: skip
    head = ["map", "base", "base rounds", "head", "head rounds", "head / base"]
    return "\n".join([
        "# Orientation A/B: tolerance 1e-3 / one global blur, two trees",
        "", common.describe_machine(info), "",
        f"- base: `{args.base}` ({args.base_label or 'no label'})",
        f"- head: `{args.head}` ({args.head_label or 'no label'})",
        f"- {args.rounds} rounds, {args.pairs} pairs per worker; Numba float32, `nearest`.",
        "", *common.md_table(head, table, "lrrrrr"), "",
    ])  # fmt: skip


def main() -> None:
    p = common.parser(__doc__, "orientation_ab")
    p.add_argument("--base", type=Path)
    p.add_argument("--head", type=Path, default=HERE.parents[1] / "src")
    p.add_argument("--base-label", default="")
    p.add_argument("--head-label", default="")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--groups", default="2d,3d")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args.worker, args.pairs)
        return
    found: dict[str, dict[str, list[float]]] = {}
    start = time.perf_counter()
    for rnd in range(args.rounds):
        for group in args.groups.split(","):
            for side, tree in (("base", args.base), ("head", args.head)):
                for name, ratio in run(tree.resolve(), group, args.pairs).items():
                    found.setdefault(name, {"base": [], "head": []})[side].append(ratio)
        common.log(f"round {rnd + 1} of {args.rounds}: {time.perf_counter() - start:.0f} s")
    rows = [dict(map=name, base=statistics.median(v["base"]),
                 head=statistics.median(v["head"]), base_rounds=v["base"],
                 head_rounds=v["head"]) for name, v in found.items()]  # fmt: skip
    info = common.machine(package=False)
    text = report(rows, info, args)
    print(text)
    common.write_result("orientation_ab", {"rows": rows, "args": vars(args) | {
        "base": str(args.base), "head": str(args.head)}}, info, out=args.out,
        markdown=text)  # fmt: skip


if __name__ == "__main__":
    main()
