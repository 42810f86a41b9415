#!/usr/bin/env bash
# GPU check of napari_varblur's JAX backend on an NVIDIA GPU (sized for an H200).
#
# Needs this repository installed with JAX's CUDA wheels and scipy, e.g.
#   python -m pip install -e ".[cuda]" scipy
# Usage (from anywhere; PYTHON picks the interpreter, default `python`):
#   bash benchmarks/gpu/gpu_check.sh
# Steps:
#   1. print `nvidia-smi -L` and jax.devices() (fails if JAX sees no GPU; ALLOW_CPU=1
#      lets the script run on a CPU-only machine, with GPU_SIZES=small, to try it out);
#   2. agreement of backend="jax" (and of the device-resident JAX API) with
#      backend="reference" on 256x256, sigma map and global sigma, float32 and float64;
#      exits non-zero beyond 1e-5 / 1e-12 * max(1, max|image|);
#   3. the tolerance mode (sigma levels) on the device: napari_varblur.jax with
#      tolerance 1e-3 on a 512x512 ramp map (sigma 0.5 -> 8), jitted, device-resident:
#      its error against the exact reference (exits non-zero beyond the bound) and its
#      time against the exact JAX map blur and a global blur at sigma 8;
#   4. fit_sigma_map on the device: `benchmarks/fit/fit.py --case 2d` and `--case 3d`
#      (the issue's 112x136 scene and a 24x40x48 volume): errors against the true map,
#      first fit (with compiling) and second fit times, one JSON line each;
#   5. `benchmarks/peers/bench.py --gpu`: G2/V2 at 4096x4096, G3/V3 at 512x512x256, JAX
#      only, numpy in/out and device-resident (block_until_ready) timings with GB/s;
#      writes benchmarks/results/<date>_<machine>_bench_gpu.json.
# Everything it prints also goes to benchmarks/results/<date>_<machine>_gpu_check.log
# (results/quick/ with GPU_SIZES=small). The whole script stops itself after
# TIME_LIMIT_S seconds (default 290, under 5 min).
set -euo pipefail

cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python}
GPU_SIZES=${GPU_SIZES:-full}
TIME_LIMIT_S=${TIME_LIMIT_S:-290}
START=$SECONDS

QUICK=""
if [[ "$GPU_SIZES" == small ]]; then QUICK="--quick"; fi
LOG=$("$PYTHON" benchmarks/common.py path gpu_check log $QUICK)
mkdir -p "$(dirname "$LOG")"
exec > >(tee "$LOG") 2>&1
echo "log: $LOG"

echo "== 1. devices"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L
else
    echo "nvidia-smi: not found"
fi
"$PYTHON" - <<'EOF'
import os
import sys

import jax

import napari_varblur

print("jax", jax.__version__, "devices:", jax.devices())
print("napari_varblur", napari_varblur.__version__, napari_varblur.available_backends())
if not any(d.platform == "gpu" for d in jax.devices()):
    message = "JAX sees no GPU; install the CUDA wheels: pip install -e '.[cuda]'"
    if os.environ.get("ALLOW_CPU") != "1":
        sys.exit(message)
    print(f"warning: {message} (continuing because ALLOW_CPU=1)")
EOF

echo "== 2. agreement with the float64 reference (256x256)"
timeout 120 "$PYTHON" - <<'EOF'
import sys

import jax
import numpy as np

import napari_varblur.jax as vjax
from napari_varblur import gaussian_blur

TOLERANCE = {"float32": 1e-5, "float64": 1e-12}
rng = np.random.default_rng(0)
image = rng.random((256, 256))
sigma_map = rng.uniform(1.0, 4.0, image.shape)
problems = {"sigma map, crop": (sigma_map, "crop"), "sigma 4, reflect": (4.0, "reflect")}
failures = 0
for label, (sigma, mode) in problems.items():
    ref = gaussian_blur(image, sigma, mode=mode, backend="reference", precision="float64")
    for precision, rel in TOLERANCE.items():
        x = image.astype(precision)
        s = sigma if np.isscalar(sigma) else sigma.astype(precision)
        tol = rel * max(1.0, float(np.abs(x).max()))
        out_numpy = gaussian_blur(x, s, mode=mode, backend="jax", precision=precision)
        with jax.enable_x64(precision == "float64"):
            device = vjax.gaussian_blur(jax.device_put(x), s, mode=mode)
            out_device = np.asarray(device.block_until_ready())
        for path, out in (("backend='jax'", out_numpy), ("napari_varblur.jax", out_device)):
            diff = float(np.abs(out.astype(np.float64) - ref).max())
            ok = diff <= tol and out.dtype == np.dtype(precision)
            failures += not ok
            print(
                f"{label:17s} {precision} {path:19s} max|diff| {diff:.2e} "
                f"tol {tol:.0e} dtype {out.dtype} {'ok' if ok else 'FAIL'}"
            )
if failures:
    sys.exit(f"{failures} result(s) beyond the contract's tolerance")
print("all agree with the reference")
EOF

echo "== 3. tolerance mode (sigma levels) on the device"
timeout 150 "$PYTHON" - <<'EOF'
import sys
import time

import jax
import numpy as np

import napari_varblur.jax as vjax
from napari_varblur import gaussian_blur

rng = np.random.default_rng(0)
image = rng.random((512, 512)).astype(np.float32)
sigma = np.broadcast_to(np.linspace(0.5, 8.0, 512, dtype=np.float32), image.shape).copy()
ref = gaussian_blur(image, sigma, backend="reference", precision="float64")
x, s = jax.device_put(image), jax.device_put(sigma)
runs = {
    "tolerance 1e-3": jax.jit(lambda a, b: vjax.gaussian_blur(a, b, tolerance=1e-3, max_radius=24)),
    "exact map": jax.jit(lambda a, b: vjax.gaussian_blur(a, b, max_radius=24)),
    "global sigma 8": jax.jit(lambda a, b: vjax.gaussian_blur(a, 8.0)),
}
failures = 0
for label, fn in runs.items():
    start = time.perf_counter()
    out = fn(x, s).block_until_ready()
    first = time.perf_counter() - start
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fn(x, s).block_until_ready()
        times.append(time.perf_counter() - start)
    line = f"{label:15s} first {first:.3f} s, then {min(times) * 1e3:.2f} ms"
    if label != "global sigma 8":
        err = float(np.abs(np.asarray(out, np.float64) - ref).max() / np.ptp(image))
        bound = 1e-3 if label.startswith("tolerance") else 1e-5
        failures += err > bound + 1e-5
        line += f", max error / range {err:.1e} (bound {bound:g})"
    print(line)
if failures:
    sys.exit("the tolerance mode broke its bound on the device")
EOF

echo "== 4. fit_sigma_map on the device"
for case in 2d 3d; do
    timeout 100 "$PYTHON" benchmarks/fit/fit.py --case "$case"
done

echo "== 5. benchmark (JAX only, GPU sizes: $GPU_SIZES)"
remaining=$((TIME_LIMIT_S - (SECONDS - START)))
if ((remaining < 30)); then
    echo "not enough time left for the benchmark (${remaining} s)" >&2
    exit 1
fi
timeout "$remaining" "$PYTHON" benchmarks/peers/bench.py --gpu --gpu-sizes "$GPU_SIZES"
echo "== done in $((SECONDS - START)) s"
