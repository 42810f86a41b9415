"""A/B benchmark: the speed of two source trees of napari_varblur, in one run.

Made to show that a refactor costs no speed beyond the machine's noise.  Both trees are
timed through the public API only (``napari_varblur.gaussian_blur`` and
``napari_varblur.jax.gaussian_blur``), which stays the same across the refactor, on 15
cases: global sigmas in 2-D and 3-D, exact and ``tolerance`` sigma maps, a quantised
map, a mask, ``nan_policy="omit"``, dask, the JAX backend, the JAX-native API and a
per-axis map.

Get the base tree as a git worktree of the commit to compare with, then run::

    git worktree add --detach /tmp/base <commit>        # once; its src is the base
    python benchmarks/ab.py --base /tmp/base/src --head src
    python benchmarks/ab.py --base-rev main --head src
    python benchmarks/ab.py --base src --head src --quick --rounds 1 --repeats 2

``--base-rev REV`` does ``git -C <repo> worktree add --detach /tmp/ab-base-REV REV``
when that folder is missing (and refuses a folder left at another commit: remove it with
``git worktree remove /tmp/ab-base-REV``).  Remove worktrees when done.

Method.  Every measurement is a fresh subprocess (``ab.py --worker``) with the tree
first on ``PYTHONPATH``; the worker checks that ``napari_varblur.__file__`` lies in that
tree and stops the run otherwise.  Numba caches its kernels in ``__pycache__`` next to
each tree's sources (``NUMBA_CACHE_DIR`` is unset for the workers), so the trees never
share compiled code.  A worker builds its case's data once, calls the blur once to warm
up (compiling or loading kernels, untimed), then times ``--repeats`` calls and reports
their median.  The runs alternate: for each round, for each case, the base worker then
the head worker, so a drift of a shared machine's load hits both.  Per case the table
gives the median over rounds of the worker medians for base and head, the ratio
head / base and each side's spread (min-max of its worker medians, and that width
relative to the median) to judge the noise by.  A note lists cases whose outputs differ
between the trees (float64 sum and NaN count of the warm-up result).

Prints a markdown table with the machine, date and the trees' commits, and writes it
with the JSON to ``benchmarks/results/<date>_<machine>_ab.json`` and ``.md`` (or
``--out``; ``--quick``: ``results/quick/``).  ``--quick`` shrinks every case to run in
seconds (and skips the 4096x4096 global blur).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common  # next to this file; it imports no napari_varblur
import numpy as np

SCRIPT = Path(__file__).resolve()
HERE = SCRIPT.parent
RESULT = "AB-RESULT "  # prefix of the worker's result line on stdout
WRONG_TREE = 3  # worker exit status: the package came from elsewhere (stops the run)

Shape = tuple[int, ...]
Call = Callable[[], Any]


# --- cases (built and timed in the worker) ------------------------------------------


def numba_blur() -> Callable[..., Any]:
    """``gaussian_blur`` on the Numba backend in float32."""
    from napari_varblur import gaussian_blur

    return lambda image, sigma, **kw: gaussian_blur(
        image, sigma, backend="numba", precision="float32", **kw
    )


def random_image(rng: np.random.Generator, shape: Shape, nan_share: float = 0.0) -> np.ndarray:
    """Uniform [0, 1) float32 image; a share of its pixels NaN when ``nan_share``."""
    image = rng.random(shape, dtype=np.float32)
    if nan_share:
        image[rng.random(shape) < nan_share] = np.nan
    return image


def grids(shape: Shape) -> list[np.ndarray]:
    """Each axis's index as a fraction in [0, 1], broadcastable to ``shape``."""
    return [
        g / max(n - 1, 1) for g, n in zip(np.ogrid[tuple(map(slice, shape))], shape, strict=True)
    ]


def uniform_map(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Sigma uniform random in [1, 4]."""
    return rng.uniform(1.0, 4.0, shape).astype(np.float32)


def tilted_ramp(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Sigma 1 -> 16: ``1 + 15 * (0.7 * x + 0.3 * y)`` (x, y as fractions of the side)."""
    y, x = grids(shape)
    return (1.0 + 15.0 * (0.7 * x + 0.3 * y)).astype(np.float32)


def diagonal_ramp(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Sigma 0.5 -> 8 along the diagonal, varying along every axis equally."""
    mean = sum(grids(shape)) / len(shape)
    return np.broadcast_to(0.5 + 7.5 * mean, shape).astype(np.float32)


def x_ramp(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Sigma 1 -> 8 along the last axis (a smooth ramp)."""
    x = grids(shape)[-1]
    return np.broadcast_to(1.0 + 7.0 * x, shape).astype(np.float32)


def bands(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Eight bands along the last axis with sigma 1, 2, ..., 8 (a quantised map)."""
    band = np.minimum(np.arange(shape[-1]) * 8 // shape[-1], 7)
    return np.broadcast_to(1.0 + band, shape).astype(np.float32)


def per_axis_map(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """One sigma per pixel and axis, uniform random in [1, 4]: shape ``shape + (ndim,)``."""
    return uniform_map(rng, (*shape, len(shape)))


def global_case(sigma: float, mode: str, mask_share: float = 0.0) -> Callable[[Shape], Call]:
    """A global sigma, with ``mask_share`` of the pixels invalid in a mask when given."""

    def make(shape: Shape) -> Call:
        blur, rng = numba_blur(), np.random.default_rng(0)
        image = random_image(rng, shape)
        kw = dict(mode=mode)
        if mask_share:
            kw["mask"] = rng.random(shape) >= mask_share
        return lambda: blur(image, sigma, **kw)

    return make


def map_case(sigma_map: Callable, tolerance: float | None = None, nan_share: float = 0.0):
    """A sigma map in crop mode, exact or at ``tolerance``; ``nan_policy="omit"`` with
    ``nan_share`` of the pixels NaN when given."""

    def make(shape: Shape) -> Call:
        blur, rng = numba_blur(), np.random.default_rng(0)
        image = random_image(rng, shape, nan_share)
        sigma = sigma_map(rng, shape)
        kw = dict(mode="crop", tolerance=tolerance)
        if nan_share:
            kw["nan_policy"] = "omit"
        return lambda: blur(image, sigma, **kw)

    return make


def dask_case(shape: Shape) -> Call:
    """A dask image in 4x4 chunks, global sigma 4, nearest, computed with threads."""
    import dask.array as da

    blur = numba_blur()
    image = da.from_array(
        random_image(np.random.default_rng(0), shape), chunks=tuple(n // 4 for n in shape)
    )
    return lambda: blur(image, 4.0, mode="nearest").compute(scheduler="threads")


def jax_backend_case(shape: Shape) -> Call:
    """``gaussian_blur(..., backend="jax")``: global sigma 4, reflect."""
    from napari_varblur import gaussian_blur

    image = random_image(np.random.default_rng(0), shape)
    return lambda: gaussian_blur(image, 4.0, mode="reflect", backend="jax", precision="float32")


def jax_native_case(sigma_map: Callable, tolerance: float | None = None):
    """``napari_varblur.jax.gaussian_blur`` on a jnp float32 image with a concrete NumPy
    sigma map, crop, exact or at ``tolerance``."""

    def make(shape: Shape) -> Call:
        import jax.numpy as jnp

        from napari_varblur.jax import gaussian_blur

        check_tree(sys.modules["napari_varblur.jax"])
        rng = np.random.default_rng(0)
        image = jnp.asarray(random_image(rng, shape))
        sigma = sigma_map(rng, shape)
        return lambda: gaussian_blur(
            image, sigma, mode="crop", tolerance=tolerance
        ).block_until_ready()

    return make


@dataclass(frozen=True)
class Case:
    """One timed problem: ``make(shape)`` builds the data and returns the timed call."""

    key: str
    title: str
    make: Callable[[Shape], Call]
    full: Shape
    quick: Shape | None  # None: skipped with --quick

    def shape(self, quick: bool) -> Shape | None:
        """The image shape at full or quick size (None: skipped)."""
        return self.quick if quick else self.full

    def label(self, quick: bool) -> str:
        """Number, title and size, for the table."""
        return f"{self.key}. {self.title} {'x'.join(map(str, self.shape(quick)))}"


Q1, Q2, Q3, Q3S = (128, 128), (256, 256), (32, 64, 64), (16, 32, 32)  # quick sizes
CASES = [
    Case("1", "global s4 reflect", global_case(4.0, "reflect"), (2048, 2048), Q2),
    Case("2", "global s4 nearest", global_case(4.0, "nearest"), (2048, 2048), Q2),
    Case("3", "global s4 reflect", global_case(4.0, "reflect"), (4096, 4096), None),
    Case("4", "global 3-D s2 reflect", global_case(2.0, "reflect"), (128, 256, 256), Q3),
    Case("5", "map U[1,4] exact crop", map_case(uniform_map), (2048, 2048), Q2),
    Case("6", "map ramp 1-16 tol 1e-3", map_case(tilted_ramp, 1e-3), (2048, 2048), Q2),
    Case("7", "map 3-D ramp 0.5-8 tol 1e-3", map_case(diagonal_ramp, 1e-3), (64, 128, 128), Q3S),
    Case("8", "map 8 bands 1-8 exact", map_case(bands), (2048, 2048), Q2),
    Case("9", "masked 1% global s4 reflect", global_case(4.0, "reflect", 0.01), (2048, 2048), Q2),
    Case("10", "omit 1% NaN map U[1,4]", map_case(uniform_map, nan_share=0.01), (1024,) * 2, Q1),
    Case("11", "dask 4x4 chunks s4 nearest", dask_case, (4096, 4096), (512, 512)),
    Case("12", "backend jax s4 reflect", jax_backend_case, (2048, 2048), Q2),
    Case("13", "jax-native map U[1,4] exact", jax_native_case(uniform_map), (512, 512), Q1),
    Case("14", "jax-native ramp 1-8 tol 1e-3", jax_native_case(x_ramp, 1e-3), (512, 512), Q1),
    Case("15", "per-axis map U[1,4] exact", map_case(per_axis_map), (1024, 1024), Q1),
]


# --- worker ----------------------------------------------------------------------------


def check_tree(module: Any) -> None:
    """Exit with ``WRONG_TREE`` unless ``module`` was imported from ``AB_TREE``."""
    tree = Path(os.environ["AB_TREE"]).resolve()
    where = Path(module.__file__).resolve()
    if not where.is_relative_to(tree):
        print(
            f"ab.py worker: {module.__name__} imported from {where}, not from the tree "
            f"{tree} (PYTHONPATH={os.environ.get('PYTHONPATH')})",
            file=sys.stderr,
        )
        sys.exit(WRONG_TREE)


def fingerprint(out: Any) -> dict:
    """The float64 sum of the finite values, and the NaN count, of a blur's output."""
    values = np.asarray(out, dtype=np.float64)
    return dict(
        sum=float(np.nansum(values)), nan=int(np.isnan(values).sum()), shape=list(values.shape)
    )


def measure(call: Call, repeats: int) -> dict:
    """One untimed warm-up call, then ``repeats`` timed calls."""
    t0 = time.perf_counter()
    out = call()
    warmup = time.perf_counter() - t0
    check = fingerprint(out)
    del out
    gc.collect()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return dict(median=statistics.median(times), times=times, warmup_s=warmup, output=check)


def worker(key: str, repeats: int, quick: bool) -> int:
    """Run one case in this process (``AB_TREE`` first on ``PYTHONPATH``); print the
    result as one JSON line after ``RESULT``."""
    sys.path[:] = [p for p in sys.path if p and Path(p).resolve() != HERE]  # no shadowing
    import napari_varblur

    check_tree(napari_varblur)
    case = next(c for c in CASES if c.key == key)
    try:
        t0 = time.perf_counter()
        call = case.make(case.shape(quick))
        result = dict(build_s=time.perf_counter() - t0, **measure(call, repeats))
    except Exception as error:  # reported to the parent, which goes on with other cases
        traceback.print_exc()
        result = dict(error=f"{type(error).__name__}: {error}")
    result["package"] = str(Path(napari_varblur.__file__).resolve().parent)
    print(RESULT + json.dumps(result), flush=True)
    return 1 if "error" in result else 0


# --- parent: running workers -----------------------------------------------------------


def run_worker(tree: Path, case: Case, args: argparse.Namespace) -> dict:
    """Time ``case`` in a fresh subprocess importing napari_varblur from ``tree``."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    env["AB_TREE"] = str(tree)
    cmd = [sys.executable, str(SCRIPT), "--worker", case.key, "--repeats", str(args.repeats)]
    cmd += ["--quick"] * args.quick
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(error=f"timed out after {args.timeout} s")
    if proc.returncode == WRONG_TREE:
        sys.exit(f"ab.py: wrong package imported for {tree}:\n{proc.stderr}")
    lines = [s for s in proc.stdout.splitlines() if s.startswith(RESULT)]
    if not lines:
        return dict(error=f"worker exit {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    result = json.loads(lines[-1][len(RESULT) :])
    if "error" in result:
        result["stderr"] = proc.stderr.strip()[-4000:]
    return result


def progress(start: float, where: str, res: dict) -> None:
    """One line on stderr per worker: elapsed time, which run, its median or error."""
    what = res.get("error") or f"{res['median']:.4g} s (warm-up {res['warmup_s']:.3g} s)"
    print(f"[{time.perf_counter() - start:7.1f} s] {where}: {what}", file=sys.stderr, flush=True)


def run_all(trees: dict[str, Path], cases: list[Case], args: argparse.Namespace) -> dict:
    """Rounds of base, head per case (ABAB); every worker's result per case and side."""
    results = {c.key: {side: [] for side in trees} for c in cases}
    start = time.perf_counter()
    for r in range(args.rounds):
        for case in cases:
            for side, tree in trees.items():
                res = run_worker(tree, case, args)
                results[case.key][side].append(res)
                progress(start, f"round {r + 1}/{args.rounds} {case.label(args.quick)} {side}", res)
    return results


# --- parent: trees, machine, summary and report ----------------------------------------


def git(cwd: Path, *argv: str) -> str:
    """``git -C cwd argv...``'s stripped stdout (``CalledProcessError`` on failure)."""
    proc = subprocess.run(
        ["git", "-C", str(cwd), *argv], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def base_worktree(rev: str) -> Path:
    """The ``src`` of ``/tmp/ab-base-REV``, a detached worktree at ``rev`` (added when
    missing; a folder at another commit is an error)."""
    repo = Path(git(HERE, "rev-parse", "--show-toplevel"))
    commit = git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    path = Path("/tmp") / f"ab-base-{re.sub(r'[^A-Za-z0-9._-]', '_', rev)}"
    if not path.exists():
        git(repo, "worktree", "add", "--detach", str(path), rev)
    elif git(path, "rev-parse", "HEAD") != commit:
        sys.exit(
            f"ab.py: {path} is not at {rev} ({commit[:10]}); remove it with "
            f"`git worktree remove {path}` and run again"
        )
    return path / "src"


def tree_info(tree: Path) -> dict:
    """The tree's path and, for a git checkout, its commit, subject and whether it is
    edited."""
    return dict(path=str(tree), **common.git_info(tree))


def machine() -> dict:
    """CPU model, cores, load, date and the versions of the main dependencies (the
    parent imports no napari_varblur: the trees are the workers')."""
    return common.machine(package=False, threads=False)


def side_summary(results: list[dict]) -> dict | None:
    """Median and spread (min, max) of one side's worker medians; None on any error."""
    if any("error" in r for r in results):
        return None
    medians = [r["median"] for r in results]
    return dict(
        median=statistics.median(medians),
        spread=[min(medians), max(medians)],
        worker_medians=medians,
    )


def same_output(base: list[dict], head: list[dict]) -> bool | None:
    """Whether the two trees' outputs agree (NaN count, shape, sum to 1e-6 relative)."""
    if any("error" in r for r in base + head):
        return None
    a, b = base[0]["output"], head[0]["output"]
    close = math.isclose(a["sum"], b["sum"], rel_tol=1e-6, abs_tol=1e-9)
    return close and a["nan"] == b["nan"] and a["shape"] == b["shape"]


def summarize(cases: list[Case], results: dict, quick: bool) -> list[dict]:
    """One row per case: each side's summary, head / base, whether outputs agree."""
    rows = []
    for case in cases:
        res = results[case.key]
        base, head = side_summary(res["base"]), side_summary(res["head"])
        ratio = head["median"] / base["median"] if base and head else None
        errors = [r["error"] for side in res.values() for r in side if "error" in r]
        rows.append(
            dict(
                case=case.key,
                label=case.label(quick),
                base=base,
                head=head,
                ratio=ratio,
                same_output=same_output(res["base"], res["head"]),
                errors=errors,
                workers=res,
            )
        )
    return rows


def seconds(side: dict | None) -> str:
    """A side's median seconds, or ``error``."""
    return "error" if side is None else f"{side['median']:.4g}"


def spread(side: dict | None) -> str:
    """``min-max (width / median %)`` of a side's worker medians."""
    if side is None:
        return "error"
    lo, hi = side["spread"]
    return f"{lo:.4g}-{hi:.4g} ({100 * (hi - lo) / side['median']:.0f}%)"


def table(rows: list[dict]) -> list[str]:
    """The markdown table, one line per case."""
    head = ["case", "base s", "head s", "head/base", "base spread", "head spread"]
    cells = [
        [row["label"], seconds(row["base"]), seconds(row["head"]),
         f"{row['ratio']:.3f}" if row["ratio"] else "-", spread(row["base"]),
         spread(row["head"])]
        for row in rows
    ]  # fmt: skip
    return common.md_table(head, cells, "lrrrrr")


def notes(rows: list[dict]) -> list[str]:
    """Geometric-mean ratio, differing outputs and errors, below the table."""
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    lines = []
    if ratios:
        geo = math.exp(statistics.fmean(map(math.log, ratios)))
        lines.append(f"Geometric mean head/base over {len(ratios)} cases: {geo:.3f}.")
    differ = [r["case"] for r in rows if r["same_output"] is False]
    if differ:
        lines.append(
            f"Outputs differ between the trees (sum or NaN count): cases {', '.join(differ)}."
        )
    for row in rows:
        lines += [f"Case {row['case']} error: {e.splitlines()[0]}" for e in row["errors"]]
    return lines


def describe(tree: dict) -> str:
    """A tree's path, and its commit and subject when it is a git checkout."""
    text = f"`{tree['path']}`"
    if "commit" in tree:
        text += f" at {tree['commit'][:10]} ({tree['subject']})"
    return text + (" + uncommitted changes" if tree.get("dirty") else "")


def preamble(report: dict) -> list[str]:
    """Title, machine, the two trees and the settings, above the table."""
    m, s = report["machine"], report["settings"]
    quick = ", quick sizes" if s["quick"] else ""
    return [
        f"# A/B: head vs base ({m['date']})",
        "",
        f"{common.describe_machine(m)}.",
        "",
        *(f"- {side}: {describe(tree)}" for side, tree in report["trees"].items()),
        "",
        f"{s['rounds']} rounds x {s['repeats']} repeats{quick}; seconds are medians over "
        f"rounds of each worker's median; total {report['elapsed_s']:.0f} s.",
        "",
    ]


def markdown(report: dict) -> str:
    """The whole report as markdown: preamble, table, notes."""
    rows = report["rows"]
    return "\n".join(preamble(report) + table(rows) + [""] + notes(rows))


# --- command line ----------------------------------------------------------------------


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options (``--worker CASE``: run one case in this process)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, help="the base tree: a src folder with napari_varblur")
    p.add_argument("--base-rev", help="or a git revision: worktree /tmp/ab-base-REV, its src")
    p.add_argument("--head", type=Path, default=HERE.parent / "src", help="the head tree")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per worker")
    p.add_argument("--rounds", type=int, default=3, help="workers per case and tree")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    p.add_argument("--cases", help="comma-separated case numbers (default: all)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per worker")
    p.add_argument("--out", type=Path, help="JSON path (default: results/); .md next to it")
    p.add_argument("--worker", metavar="CASE", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.worker and (args.base is None) == (args.base_rev is None):
        p.error("give exactly one of --base and --base-rev")
    return args


def chosen_cases(args: argparse.Namespace) -> list[Case]:
    """The cases asked for (all by default), less those that --quick skips."""
    keys = args.cases.split(",") if args.cases else [c.key for c in CASES]
    unknown = set(keys) - {c.key for c in CASES}
    if unknown:
        sys.exit(f"ab.py: unknown cases {sorted(unknown)}; cases are 1-{len(CASES)}")
    return [c for c in CASES if c.key in keys and c.shape(args.quick) is not None]


def check_trees(trees: dict[str, Path]) -> None:
    """Stop unless each tree holds a ``napari_varblur`` package."""
    for side, tree in trees.items():
        if not (tree / "napari_varblur" / "__init__.py").is_file():
            sys.exit(f"ab.py: --{side} {tree} holds no napari_varblur package")


def main(argv: list[str] | None = None) -> int:
    """Run the A/B comparison (or, with ``--worker``, one case); 1 if a case failed."""
    args = parse(argv)
    if args.worker:
        return worker(args.worker, args.repeats, args.quick)
    base = base_worktree(args.base_rev) if args.base_rev else args.base
    trees = dict(base=base.resolve(), head=args.head.resolve())
    check_trees(trees)
    cases, info, start = chosen_cases(args), machine(), time.perf_counter()
    results = run_all(trees, cases, args)
    report = dict(
        machine=info,
        trees={k: tree_info(v) for k, v in trees.items()},
        settings=dict(rounds=args.rounds, repeats=args.repeats, quick=args.quick),
        rows=summarize(cases, results, args.quick),
        elapsed_s=time.perf_counter() - start,
    )
    text = markdown(report)
    print(text)
    payload = {k: v for k, v in report.items() if k != "machine"}
    common.write_result("ab", payload, info, out=args.out, markdown=text + "\n", quick=args.quick)
    return 1 if any(row["errors"] for row in report["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
