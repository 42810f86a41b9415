"""A cold first ``auto`` call (issue 30): while Numba's kernels for it are neither compiled
nor cached, a small float32 call runs on the NumPy reference and a child process
compiles them; everything else runs as before.  ``auto`` asks JAX for a GPU only where
JAX could see one."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from napari_varblur import backends, gaussian_blur
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import compiling, planner, warmup

numba_backend = pytest.importorskip("napari_varblur.backends.numba")

RNG = np.random.default_rng(3)
IMAGE = RNG.random((64, 80), dtype=np.float32)
SIGMA = RNG.uniform(0.5, 3, IMAGE.shape).astype(np.float32)


def sleeper() -> subprocess.Popen:
    """A real process that runs until it is killed: a warm-up still compiling."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


@pytest.fixture
def cold(monkeypatch):
    """Numba as in a fresh install (every kind cold), warm-ups allowed, and each kind's
    child a sleeping process; yields the kinds started."""
    if backends.resolve("auto") != "numba":
        pytest.skip("auto runs JAX here (a GPU)")
    monkeypatch.delenv(warmup.ENV, raising=False)
    monkeypatch.setattr(compiling, "jobs", {})
    started = []
    monkeypatch.setattr(compiling, "spawn", lambda kind: started.append(kind) or sleeper())
    record = dataclasses.replace(numba_backend.BACKEND, cold=lambda kind, dtype: True)
    monkeypatch.setattr(numba_backend, "BACKEND", record)
    yield started
    for job in compiling.jobs.values():
        job.kill()
        job.wait()


def name(image=IMAGE, sigma=2.0, **kwargs) -> str:
    return planner.route(BlurSpec.from_args(image, sigma, **kwargs)).name


@pytest.mark.parametrize("sigma", [2.0, SIGMA], ids=["global", "map"])
def test_a_small_cold_call_runs_on_the_reference_while_a_child_compiles(cold, sigma):
    out = gaussian_blur(IMAGE, sigma)
    assert cold == ["global" if np.ndim(sigma) == 0 else "map"] and compiling.busy()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, gaussian_blur(IMAGE, sigma, backend="reference"))
    gaussian_blur(IMAGE, sigma)
    assert len(cold) == 1  # one child per kind and process
    for job in compiling.jobs.values():  # (a Numba call would wait for the child)
        job.kill()
        job.wait()
    numba_out = gaussian_blur(IMAGE, sigma, backend="numba")
    # The float32 tolerance of the contract's table (1e-5 of the range).
    np.testing.assert_allclose(out, numba_out, rtol=0, atol=1e-5 * np.ptp(IMAGE))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"backend": "numba"},  # asked for by name
        {"precision": "float64"},  # the warm-ups compile float32
        {"mask": IMAGE > 0.1},  # masked kernels are not warmed
        {"nan_policy": "omit"},
        {"model": "scatter"},
    ],
    ids=["numba", "float64", "mask", "omit", "scatter"],
)
def test_other_calls_compile_as_before(cold, kwargs):
    assert name(**kwargs) == "numba" and cold == []


def test_a_big_call_compiles_rather_than_run_the_reference_for_long(cold, monkeypatch):
    taps = planner.taps(BlurSpec.from_args(IMAGE, 2.0))
    monkeypatch.setitem(planner.REFERENCE_RATE, "global", taps / planner.FIRST_CALL_S)
    assert name() == "reference"
    monkeypatch.setattr(compiling, "jobs", {})
    monkeypatch.setitem(planner.REFERENCE_RATE, "global", taps * 0.99 / planner.FIRST_CALL_S)
    assert name() == "numba"


def test_without_a_child_or_with_warm_ups_off_it_compiles(cold, monkeypatch):
    monkeypatch.setenv(warmup.ENV, "1")
    assert name() == "numba" and cold == []
    monkeypatch.delenv(warmup.ENV)
    monkeypatch.setattr(compiling, "spawn", lambda kind: None)
    assert name() == "numba"


def test_kernels_compiled_in_this_process_are_not_cold(cold, monkeypatch):
    monkeypatch.setattr(numba_backend, "BACKEND", dataclasses.replace(
        numba_backend.BACKEND, cold=numba_backend.cold))  # fmt: skip
    gaussian_blur(IMAGE, 2.0, backend="numba")
    assert not numba_backend.cold("global", np.dtype(np.float32))
    assert name() == "numba" and cold == []


def test_a_dask_image_is_not_interim(cold):
    da = pytest.importorskip("dask.array")
    out = gaussian_blur(da.from_array(IMAGE, chunks=(32, 40)), 2.0)
    assert out.dtype == np.float32 and cold == []


#: In a fresh process: whether each kind is cold in this Numba cache, and whether JAX
#: got imported by an ``auto`` call (the reference runs it: warm-ups are off).
PROBE = """
import json, sys
import numpy as np
from napari_varblur import gaussian_blur
from napari_varblur.backends import numba as nb
cold = {k: nb.cold(k, np.dtype(np.float32)) for k in ("global", "gather", "levels")}
gaussian_blur(np.ones((4, 4)), 1.0, backend="reference")
from napari_varblur import backends
backends.resolve("auto")
print(json.dumps({"cold": cold, "jax": "jax" in sys.modules}))
"""


def probe(cache: str | None) -> dict:
    env = {**os.environ, warmup.ENV: "1"}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = cache
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, check=True,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    return json.loads(done.stdout.splitlines()[-1])


def test_a_fresh_cache_is_cold_and_this_ones_is_not(tmp_path):
    """Numba's disk cache, read from another process: empty, every kind is cold; the
    cache this process just filled (compiling or loading the global kernel) is warm."""
    gaussian_blur(IMAGE, 2.0, backend="numba")
    assert probe(str(tmp_path))["cold"] == {"global": True, "gather": True, "levels": True}
    assert probe(os.environ.get("NUMBA_CACHE_DIR"))["cold"]["global"] is False


def test_auto_does_not_import_jax_without_a_gpu_plugin():
    if backends._gpu_plugin_installed():
        pytest.skip("a JAX GPU plugin is installed here")
    assert probe(None)["jax"] is False


def test_a_gpu_plugin_makes_auto_ask_jax(tmp_path, monkeypatch):
    (tmp_path / "jax_plugins" / "fake_cuda").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    backends._gpu_plugin_installed.cache_clear()
    try:
        assert backends._gpu_plugin_installed()
    finally:
        backends._gpu_plugin_installed.cache_clear()
