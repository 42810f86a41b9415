"""The background warm-up (issue 20): once per process, in child processes (or on a
daemon thread), no Qt, the kernels of the first click ready when it finishes, and a
quick first click on JAX meanwhile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace

import numpy as np
import pytest

from napari_varblur import gaussian_blur
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import compiling, planner, warmup

pytest.importorskip("numba")


@pytest.fixture
def fresh(monkeypatch):
    """The warm-up as in a new process (not started, not switched off), ``warm_up``
    replaced by a recorder of the threads that ran it, and no child process able to
    start (so the thread does it all)."""
    monkeypatch.delenv(warmup.ENV, raising=False)
    monkeypatch.setattr(compiling, "jobs", {})
    ran, release = [], threading.Event()

    def record(kinds=compiling.KINDS):
        ran.append(threading.current_thread())
        release.wait(10)

    monkeypatch.setattr(warmup, "warm_up", record)
    monkeypatch.setattr(compiling, "spawn", lambda kind: None)
    yield ran, release
    release.set()


def test_without_a_child_it_starts_once_on_a_daemon_thread(fresh):
    ran, release = fresh
    assert warmup.start_warm_up()
    thread = compiling.jobs["global"]
    assert compiling.jobs == {"global": thread, "map": thread} and thread.daemon
    assert warmup.start_warm_up() and compiling.jobs["map"] is thread  # nothing new
    assert compiling.busy() and compiling.busy("map")
    release.set()
    compiling.wait_for(timeout=10)
    assert ran == [thread] and thread is not threading.current_thread()
    assert not compiling.busy()


def test_a_kind_started_by_a_first_call_is_not_started_again(fresh, monkeypatch):
    """A first ``auto`` call started the global kernels' child: the widgets start the
    map's only, and nothing is warmed twice."""
    ran, _ = fresh
    children = []
    monkeypatch.setattr(compiling, "spawn", lambda kind: children.append(kind) or sleeper())
    try:
        assert compiling.start("global") and children == ["global"]
        assert compiling.start("global") and children == ["global"]  # once per process
        assert warmup.start_warm_up() and children == ["global", "map", "levels"]
        assert warmup.start_warm_up() and children == ["global", "map", "levels"] and ran == []
    finally:
        for job in compiling.jobs.values():
            job.kill()
            job.wait()
    assert not compiling.start("global")  # it ended: nothing compiles it any more


@pytest.mark.parametrize("value", ["1", "yes"])
def test_the_environment_variable_skips_it(fresh, monkeypatch, value):
    ran, _ = fresh
    monkeypatch.setenv(warmup.ENV, value)
    assert not warmup.start_warm_up() and not compiling.start("global")
    assert compiling.jobs == {} and ran == [] and not compiling.busy()


def test_results_are_the_same_after_it(rng):
    image = rng.random((40, 50), dtype=np.float32)
    sigma = rng.uniform(0.5, 3, image.shape).astype(np.float32)
    before = [gaussian_blur(image, s, backend="numba") for s in (2.0, sigma)]
    warmup.warm_up()
    after = [gaussian_blur(image, s, backend="numba") for s in (2.0, sigma)]
    for b, a in zip(before, after):
        np.testing.assert_array_equal(a, b)


#: In a fresh process: the warm-up, then the first click's calls (a float32 global blur
#: and a float32 map, 256², crop mode); which kernels they add, and what got imported.
FIRST_CLICK = """
import json, sys
import numba
import numpy as np
from napari_varblur import backends, gaussian_blur
from napari_varblur.engine import compiling, warmup
from napari_varblur.backends import numba as nb

KERNELS = {name: v for m in (nb.band_runs, nb.bands, nb.common, nb.gathers, nb.tiles,
           nb.masked_passes, nb.passes, nb.weights) for name, v in vars(m).items()
           if isinstance(v, numba.core.dispatcher.Dispatcher)}

def signatures():
    return sum(len(v.overloads) for v in KERNELS.values())

assert warmup.start_warm_up()
compiling.wait_for("global", timeout=600)
compiling.wait_for("map", timeout=600)
compiling.jobs["levels"].kill()  # not the first click's (and 25 s more)
warmed, compiled = signatures(), backends.compiles("numba")
rng = np.random.default_rng(0)
image = rng.random((256, 256), np.float32)
gaussian_blur(image, 2.0, backend="numba")
gaussian_blur(image, rng.uniform(0.5, 3, image.shape).astype(np.float32), backend="numba")
print(json.dumps({"warmed": warmed, "new": signatures() - warmed,
                  "loaded": sorted(name for name, v in KERNELS.items() if v.overloads),
                  "compiled": backends.compiles("numba") - compiled,
                  "qt": sorted(m for m in sys.modules
                               if m.split(".")[0] in ("qtpy", "PyQt5", "PyQt6", "PySide2",
                                                      "PySide6", "napari", "magicgui"))}))
"""


def test_after_it_the_first_click_compiles_nothing(tmp_path):
    """From an empty Numba cache: two child processes compile the global blur's and
    the map's kernels into the cache (a third, the level bands', is stopped), and the
    first click's calls in this process compile nothing: they load them (new
    signatures, no compile)."""
    env = {k: v for k, v in os.environ.items() if k != warmup.ENV}
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", FIRST_CLICK], env=env, check=True,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["warmed"] == 0 and result["new"] > 0  # loaded, not compiled
    assert result["compiled"] == 0, result
    assert result["qt"] == []
    # Only what the calls need: an unmasked map compiles without the masked sums.
    assert not {"_tile_sum_valid", "_valid_row", "_fused_masked_kernel"} & set(result["loaded"])


@pytest.mark.parametrize("name", ["Gaussian blur", "Compare backends"])
def test_the_blur_widgets_start_it(make_napari_viewer, monkeypatch, name):
    pytest.importorskip("napari")
    from conftest import dock

    starts = []
    monkeypatch.setattr(warmup, "start_warm_up", lambda: starts.append(1))
    dock(make_napari_viewer(), name)
    assert starts == [1]


def test_a_map_blur_waits_for_the_child_and_a_global_one_does_not(monkeypatch):
    """A map blur from napari waits for the child compiling the map kernels (then it
    loads them); a global blur does not wait.  The child here is a real process that
    sleeps until it is killed."""
    pytest.importorskip("napari")
    from napari.layers import Image

    from napari_varblur import blur_layer

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    monkeypatch.setattr(compiling, "jobs", {"map": child})
    try:
        layer = Image(np.ones((8, 8), np.float32))
        blur_layer(layer, 1.0, backend="numba")
        assert child.poll() is None  # the global blur did not wait for it
        threading.Timer(1.0, child.kill).start()
        blur_layer(layer, 1.0, np.ones((8, 8), np.float32), backend="numba")
        assert child.poll() is not None  # the map blur waited until it ended
    finally:
        child.kill()
        child.wait()


def test_the_status_says_while_the_warm_up_compiles(make_napari_viewer, qtbot, monkeypatch):
    """While the warm-up of the click's own kind compiles, and not for another kind's."""
    pytest.importorskip("napari")
    from conftest import dock

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    other = sleeper()
    monkeypatch.setattr(compiling, "jobs", {"levels": other})
    try:
        viewer = make_napari_viewer()
        widget = dock(viewer, "Gaussian blur")
        widget.image.value = viewer.add_image(np.ones((8, 8), np.float32))
        widget.backend.value = "numba"
        widget.run_button.native.click()
        assert widget.status.value == "running..."  # the level bands: not this click's
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
        compiling.jobs["global"] = child
        widget.run_button.native.click()
        assert widget.status.value.startswith("running (kernels still compiling")
        child.kill()  # the click waits for it
        child.wait()
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
        widget.run_button.native.click()
        assert widget.status.value == "running..."
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
    finally:
        for job in (child, other):
            job.kill()
            job.wait()


def sleeper() -> subprocess.Popen:
    """A real process that runs until it is killed: a warm-up still compiling."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def first_click(make_napari_viewer):
    """A viewer with the blur widget docked and a 40x50 image: its first click, started.
    Returns the viewer, the widget and the image layer."""
    from conftest import dock

    viewer = make_napari_viewer()
    widget = dock(viewer, "Gaussian blur")
    layer = viewer.add_image(np.random.default_rng(0).random((40, 50), np.float32))
    widget.image.value = layer
    widget.run_button.native.click()
    return viewer, widget, layer


def test_a_first_click_while_numba_compiles_runs_on_jax(make_napari_viewer, qtbot, monkeypatch):
    """``auto`` runs a small click on JAX while the warm-up of its kind compiles, and
    says so; a big one (more window taps than the limit) waits for Numba's kernels."""
    pytest.importorskip("napari")
    pytest.importorskip("jax")
    from napari_varblur import backends

    if backends.resolve("auto") != "numba":
        pytest.skip("auto runs JAX here (a GPU): nothing waits for Numba")
    child = sleeper()
    monkeypatch.setattr(compiling, "jobs", {"global": child})
    try:
        viewer, widget, layer = first_click(make_napari_viewer)
        assert widget.status.value.startswith("running on JAX while Numba compiles")
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
        assert " on jax " in widget.status.value and "still compiling" in widget.status.value
        result = viewer.layers[-1]
        np.testing.assert_array_equal(result.data, gaussian_blur(layer.data, 2.0, backend="jax"))

        monkeypatch.setattr(planner, "INTERIM_TAPS", 40 * 50 * 26 - 1)  # one tap too many
        threading.Timer(1.0, child.kill).start()
        widget.run_button.native.click()
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
        assert child.poll() is not None  # it waited for the warm-up
        assert " on numba " in widget.status.value and "still" not in widget.status.value
    finally:
        child.kill()
        child.wait()


def test_a_frozen_app_warms_up_on_a_thread(monkeypatch):
    """In a frozen app ``sys.executable`` is the app: no child (it would start another
    napari); the thread compiles instead."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert compiling.spawn("map") is None


def test_without_jax_a_first_click_runs_on_the_reference(make_napari_viewer, qtbot, monkeypatch):
    """Where JAX is missing, a small click while Numba's kernels are in no cache runs on
    the NumPy reference (the planner's first-call rule), and the status says so."""
    pytest.importorskip("napari")
    import dataclasses

    from napari_varblur import backends
    from napari_varblur.backends import numba as numba_backend

    if backends.resolve("auto") != "numba":
        pytest.skip("auto runs JAX here (a GPU)")
    load = backends.load

    def no_jax(name):
        if name == "jax":
            raise backends.BackendUnavailableError("jax: not installed (this test)")
        return load(name)

    monkeypatch.setattr(backends, "load", no_jax)
    monkeypatch.delenv(warmup.ENV, raising=False)
    record = dataclasses.replace(numba_backend.BACKEND, cold=lambda kind, dtype: True)
    monkeypatch.setattr(numba_backend, "BACKEND", record)
    child = sleeper()
    monkeypatch.setattr(compiling, "jobs", {"global": child, "map": child})
    try:
        viewer, widget, layer = first_click(make_napari_viewer)
        assert widget.status.value.startswith("running on NumPy (reference) while Numba")
        qtbot.waitUntil(lambda: widget._worker is None, timeout=60_000)
        assert " on reference " in widget.status.value
        expected = gaussian_blur(layer.data, 2.0, backend="reference")
        np.testing.assert_array_equal(viewer.layers[-1].data, expected)
    finally:
        child.kill()
        child.wait()


def ramp(n: int = 128) -> np.ndarray:
    """A float32 sigma ramp from 1 to 12 along x, ``n`` x ``n``: at tolerance 1e-3 it
    runs on the level bands."""
    return np.broadcast_to(np.linspace(1, 12, n, dtype=np.float32), (n, n)).copy()


def test_a_tolerance_map_waits_for_the_level_bands_child_and_an_exact_one_does_not(
    monkeypatch, rng
):  # fmt: skip
    """Issue 30: the level bands compile in a child of their own; a tolerance map on
    them waits for it (then loads them), an exact map and a global blur do not."""
    image, sigma = rng.random((128, 128), dtype=np.float32), ramp()
    spec = BlurSpec.from_args(image, sigma, backend="numba", tolerance=1e-3)
    assert planner.warm_kind(spec, planner.route(spec)) == "levels"
    assert planner.warm_kind(replace(spec, tolerance=None)) == "map"
    child = sleeper()
    monkeypatch.setattr(compiling, "jobs", {"levels": child})
    try:
        gaussian_blur(image, sigma, backend="numba")
        gaussian_blur(image, 2.0, backend="numba")
        assert child.poll() is None  # neither waited
        threading.Timer(1.0, child.kill).start()
        gaussian_blur(image, sigma, backend="numba", tolerance=1e-3)
        assert child.poll() is not None  # the tolerance map waited until it ended
    finally:
        child.kill()
        child.wait()


def test_a_tolerance_click_runs_on_jax_while_the_level_bands_compile(monkeypatch, rng):
    pytest.importorskip("jax")
    from napari_varblur import backends

    if backends.resolve("auto") != "numba":
        pytest.skip("auto runs JAX here (a GPU): nothing waits for Numba")
    image, sigma = rng.random((128, 128), dtype=np.float32), ramp()
    tolerance = BlurSpec.from_args(image, sigma, tolerance=1e-3)
    child = sleeper()
    monkeypatch.setattr(compiling, "jobs", {"levels": child})
    try:
        assert planner.route(tolerance, interim=True).name == "jax"
        assert planner.route(replace(tolerance, tolerance=None), interim=True).name == "numba"
        assert planner.route(tolerance).name == "numba"  # not a click: it waits
    finally:
        child.kill()
        child.wait()
    assert planner.route(tolerance, interim=True).name == "numba"


#: In a fresh process (Numba's cache as it is): the level bands' warm-up, then tolerance
#: maps on the bands, 2-D and 3-D, in two modes; the band kernels' signatures they add.
LEVELS = """
import json
import numba
import numpy as np
from napari_varblur import gaussian_blur
from napari_varblur.backends import numba as nb
from napari_varblur.core.spec import BlurSpec
from napari_varblur.engine import planner, warmup

KERNELS = [v for m in (nb.band_runs, nb.bands) for v in vars(m).values()
           if isinstance(v, numba.core.dispatcher.Dispatcher)]
count = lambda: sum(len(v.overloads) for v in KERNELS)
warmup.warm_up(("levels",))
warmed = count()
z, y, x = np.indices((32, 64, 64))
radial = (0.5 + np.sqrt((z - 16) ** 2 + (y - 32) ** 2 + (x - 32) ** 2) / 8).astype(np.float32)
planar = np.broadcast_to(np.linspace(1, 12, 128, dtype=np.float32), (128, 128)).copy()
bands = []
for sigma in (planar, radial):
    image = np.random.default_rng(0).random(sigma.shape, dtype=np.float32)
    for mode in ("crop", "nearest"):
        spec = BlurSpec.from_args(image, sigma, mode=mode, backend="numba", tolerance=1e-3)
        bands.append(planner.warm_kind(spec, planner.route(spec)) == "levels")
        gaussian_blur(image, sigma, mode=mode, backend="numba", tolerance=1e-3)
print(json.dumps({"warmed": warmed, "new": count() - warmed, "bands": bands}))
"""


def test_the_level_bands_warm_up_loads_what_a_tolerance_map_runs():
    """After ``warm_up(("levels",))`` (a small 3-D map), 2-D and 3-D tolerance maps on
    the bands need no band kernel signature the warm-up did not load or compile."""
    done = subprocess.run([sys.executable, "-c", LEVELS], check=True, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["bands"] == [True] * 4
    assert result["warmed"] > 0 and result["new"] == 0, result
