"""The first click: import + the first call of each common kind, in a fresh process.

Six calls (float32 and float64 global blur 256², float32 sigma map 256², float64 map,
masked global blur, a tolerance map on a tilted ramp 512²), on the Numba backend, on
``auto`` (Numba here; a small float32 first call whose kernels are in no cache runs on
the NumPy reference while a child compiles them) and on JAX, each in a new process
with an empty ``NUMBA_CACHE_DIR`` (cold), then in another process with that cache
filled (warm).  Prints a markdown table and writes
``benchmarks/results/<date>_<machine>_first_call.json`` (or ``--out``; ``--quick``:
``results/quick/``).  Issue 20: the first Numba blur took 25-27 s.

    python benchmarks/startup/first_call.py              # about 5 minutes on 2 cores
    python benchmarks/startup/first_call.py --quick      # one Numba call, once: 20 s
    python benchmarks/startup/first_call.py --repeats 3 --backends numba
    python benchmarks/startup/first_call.py --src /tmp/old/src --out /tmp/old.json
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # benchmarks/: common

import common

#: name -> the first call (``np``, ``gaussian_blur``, ``rng`` and ``backend`` are set).
CASES = {
    "global f32 256²": "gaussian_blur(rng.random((256, 256), np.float32), 2.0, backend=backend)",
    "global f64 256²": (
        "gaussian_blur(rng.random((256, 256)), 2.0, backend=backend, precision='float64')"
    ),
    "map f32 256²": (
        "gaussian_blur(rng.random((256, 256), np.float32),"
        " rng.uniform(0.5, 3, (256, 256)).astype(np.float32), backend=backend)"
    ),
    "map f64 256²": (
        "gaussian_blur(rng.random((256, 256)), rng.uniform(0.5, 3, (256, 256)),"
        " backend=backend, precision='float64')"
    ),
    "masked global 256²": (
        "gaussian_blur(rng.random((256, 256), np.float32), 2.0, backend=backend,"
        " mask=rng.random((256, 256)) > 0.1)"
    ),
    "tolerance map 512²": (
        "y, x = np.mgrid[:512, :512]; t = x * 0.866 + y * 0.5;"
        " gaussian_blur(rng.random((512, 512), np.float32),"
        " (1 + 15 * t / t.max()).astype(np.float32), backend=backend, tolerance=1e-3)"
    ),
}
#: The first click after the widgets' background warm-up finished (Numba only): the
#: warm-up's time is left out, as it runs while the user sets up the call.
WARMED = "map f32 256² after warm-up"
CASES[WARMED] = CASES["map f32 256²"]
SETUP = {WARMED: "internals.warm_up()"}

#: Run in the child: import, the first call, the same call again; one JSON line.
#: ``internals`` (benchmarks/) counts the compilations and runs the warm-up.
CHILD = """
import json, sys, time
t0 = time.perf_counter()
import numpy as np
import napari_varblur
from napari_varblur import gaussian_blur
t1 = time.perf_counter()
sys.path.insert(1, {bench!r})
import internals
backend = {backend!r}
rng = np.random.default_rng(0)
{setup}
compiled = internals.compile_count(backend)
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
compiled = internals.compile_count(backend) - compiled
rng = np.random.default_rng(0)
{call}
t4 = time.perf_counter()
print("RESULT", json.dumps({{"import": t1 - t0, "first": t3 - t2, "again": t4 - t3,
                            "compiled": compiled, "module": napari_varblur.__file__}}))
try:  # a first ``auto`` call's warm-up child: let it fill the cache (not timed)
    from napari_varblur.engine import compiling
    compiling.wait_for(timeout=600)
except ImportError:
    pass
"""


def child(backend: str, case: str, cache: str, src: str | None) -> dict:
    """One fresh process: its import, first-call and second-call times (s)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "JAX_PLATFORMS": "cpu"}
    if src:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    code = CHILD.format(backend=backend, call=CASES[case], setup=SETUP.get(case, ""),
                        bench=str(common.BENCH))  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - start
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return {**json.loads(line[7:]), "process": wall}


def measure(backend: str, case: str, src: str | None) -> dict:
    """Cold (empty Numba cache) then warm (that cache filled), in fresh processes."""
    with tempfile.TemporaryDirectory() as cache:
        return {"cold": child(backend, case, cache, src), "warm": child(backend, case, cache, src)}


def table(results: list[dict]) -> str:
    """Markdown: the median import + first call per case, cold and warm, and the spread."""
    rows = []
    for r in results:
        cells = []
        for state in ("cold", "warm"):
            runs = [x[state]["import"] + x[state]["first"] for x in r["runs"]]
            cells.append(f"{statistics.median(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
        again = statistics.median(x["warm"]["again"] for x in r["runs"])
        rows.append([r["backend"], r["case"], *cells, f"{again:.3f}"])
    head = ["backend", "call", "cold: import + first call (s)", "warm", "second call (s)"]
    return "\n".join(common.md_table(head, rows))


def main(argv=None) -> int:
    """Every backend and case, cold then warm, ``--repeats`` times; write the result."""
    parser = common.parser(__doc__, "first_call", quick="the float32 global blur on Numba, once")
    parser.add_argument("--backends", nargs="+", default=["numba", "auto", "jax"])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--src", help="a source tree to import napari_varblur from")
    args = parser.parse_args(argv)
    if args.quick:
        args.backends, args.cases, args.repeats = ["numba"], ["global f32 256²"], 1
    info = common.machine(package=not args.src)
    results = []
    for backend in args.backends:
        for case in args.cases:
            if case in SETUP and backend != "numba":
                continue
            try:
                runs = [measure(backend, case, args.src) for _ in range(args.repeats)]
            except subprocess.CalledProcessError:  # (a tree without the warm-up)
                print(f"{backend:5} {case:20} failed", flush=True)
                continue
            results.append({"backend": backend, "case": case, "runs": runs})
            print(f"{backend:5} {case:20} cold {[round(r['cold']['first'], 2) for r in runs]}",
                  flush=True)  # fmt: skip
    text = table(results)
    print(text)
    common.write_result("first_call", {"src": args.src, "results": results}, info,
                               out=args.out, markdown=text + "\n", quick=args.quick)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
