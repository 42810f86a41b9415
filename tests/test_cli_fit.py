"""``varblur fit``: a sigma map from a sharp and a blurred image file (issue 21)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

from napari_varblur.app import cli
from napari_varblur.core.params import FIT_PARAMS
from napari_varblur.sample import focus_pair_sample
from test_cli import _status

tifffile = pytest.importorskip("tifffile")

#: ImageJ pixel size of the pair, in micrometres.
PIXEL = 0.5


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The focus pair as ImageJ TIFFs with a pixel size, and the true map."""
    folder = tmp_path_factory.mktemp("pair")
    sharp, blurred, truth = focus_pair_sample()
    for name, image in (("sharp", sharp), ("blurred", blurred)):
        tifffile.imwrite(folder / f"{name}.tif", image.astype(np.float32), imagej=True,
                         resolution=(1 / PIXEL, 1 / PIXEL), metadata={"unit": "um"})  # fmt: skip
    return folder, truth


@pytest.fixture(scope="module")
def jax_cache(tmp_path_factory):
    """One persistent JAX compilation cache for this file's fits: the second reuses the
    first's programs (the compile is most of a small fit's time)."""
    return str(tmp_path_factory.mktemp("jax-cache"))


def varblur_fit(folder, *args, cache: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache)
    return subprocess.run(
        [sys.executable, "-m", "napari_varblur", "fit", *map(str, args)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_fit_writes_the_map_with_the_pixel_sizes(pair, jax_cache):
    from napari_varblur.adapters.files import read_image

    folder, truth = pair
    args = ["--max-sigma", "4", "--max-steps", "30", "--residual", "residual.npy"]
    out = varblur_fit(folder, "sharp.tif", "blurred.tif", "map.tif", *args, cache=jax_cache)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("varblur fit: 30 steps in ") and "not converged" in lines[0]
    assert "observable at " in lines[1] and "median standard error there" in lines[1]
    assert "wrote map.tif (112, 136) float32: sigma map, NaN where not observable" in out.stdout
    assert "wrote residual.npy (112, 136) float32: residual" in out.stdout
    warnings = [line for line in out.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "varblur fit: warning: stopped after 30 steps before converging; the map is "
        "written, but check it or raise --max-steps"
    ]
    assert "Traceback" not in out.stderr
    fitted = tifffile.imread(folder / "map.tif")
    assert fitted.shape == truth.shape and fitted.dtype == np.float32
    seen = np.isfinite(fitted)
    assert seen.mean() > 0.8
    assert np.median(np.abs(fitted[seen] - truth[seen]) / truth[seen]) < 0.1
    info = read_image(folder / "map.tif").info
    assert info.scale == pytest.approx((PIXEL, PIXEL))
    assert info.provenance["command"] == "varblur fit"
    assert info.provenance["parameters"]["max_sigma"] == 4
    residual = np.load(folder / "residual.npy")
    blurred = tifffile.imread(folder / "blurred.tif")
    assert residual.shape == truth.shape
    assert np.nanstd(residual) < 0.1 * np.std(blurred)


def test_fit_model_map_is_finite_and_goes_to_npy(pair, jax_cache):
    folder, truth = pair
    out = varblur_fit(folder, "sharp.tif", "blurred.tif", "model.npy", "--max-sigma", "4",
                      "--max-steps", "30", "--model-map", cache=jax_cache)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    model = np.load(folder / "model.npy")
    assert model.shape == truth.shape and np.isfinite(model).all()
    assert np.median(np.abs(model - truth) / truth) < 0.1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([], "the following arguments are required: --max-sigma"),
        (["--max-sigma", "wide"], "--max-sigma: invalid float value: 'wide'"),
        (["--max-sigma", "0"], "max_sigma: must be a finite number > 0"),
        (["--max-sigma", "4", "--intensity", "gain"], "--intensity: invalid choice: 'gain'"),
        (["--max-sigma", "4", "--nan-policy", "propagate"], "--nan-policy: invalid choice"),
        (["--max-sigma", "4", "--mode", "edge"], "mode: unknown edge mode 'edge'"),
        (["--max-sigma", "4", "--axes", "2"], "axes: axis 2 is out of range for a 2-D image"),
        (["--max-sigma", "4", "--channel-axis", "c"], "--channel-axis: expected an int"),
        (["--max-sigma", "4", "--spacing", "0.5"], "spacing: must be"),
        (["--max-sigma", "4", "--smoothness", "-1"], "smoothness: must be"),
        (["--max-sigma", "4", "--max-steps", "0"], "max_steps: must be an integer >= 1"),
        (["--max-sigma", "4", "--mask", "absent.npy"], "--mask: 'absent.npy' does not exist"),
        (["--max-sigma", "4", "--invert-mask"], "--invert-mask: needs --mask FILE"),
        (["--max-sigma", "4", "--residual", "out.npy"], "--residual is the same file as OUTPUT"),
        (["--max-sigma", "4", "--residual", "r.png"], "'r.png': unsupported format"),
        (["--max-sigma", "4", "--per-axis", "yes"], "unrecognized arguments: yes"),
    ],
)
def test_bad_fit_arguments_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, named):
    np.save(tmp_path / "sharp.npy", np.ones((24, 20), np.float32))
    np.save(tmp_path / "blurred.npy", np.ones((24, 20), np.float32))
    monkeypatch.chdir(tmp_path)
    assert _status(["fit", "sharp.npy", "blurred.npy", "out.npy", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("varblur fit: error: ") and named in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blurred.npy", "sharp.npy"]


@pytest.mark.parametrize(
    ("files", "named"),
    [
        (("sharp.npy", "small.npy", "out.npy"), "blurred: shape (6, 5) differs from sharp's"),
        (("absent.tif", "blurred.npy", "out.npy"), "SHARP: 'absent.tif' does not exist"),
        (("sharp.npy", "blurred.npy", "blurred.npy"), "OUTPUT is the same file as an input"),
        (("sharp.npy", "blurred.npy", "old.npy"), "OUTPUT: 'old.npy' exists; pass --overwrite"),
        (("sharp.npy", "blurred.npy", "map.jpg"), "'map.jpg': unsupported format"),
        (("sharp.npy", "blurred.npy", "no/map.npy"), "OUTPUT: the folder 'no' does not exist"),
    ],
)
def test_bad_fit_files_are_refused_before_the_fit(tmp_path, capsys, monkeypatch, files, named):
    for name, shape in (("sharp", (24, 20)), ("blurred", (24, 20)), ("small", (6, 5))):
        np.save(tmp_path / f"{name}.npy", np.ones(shape, np.float32))
    (tmp_path / "old.npy").write_bytes(b"kept")
    monkeypatch.chdir(tmp_path)
    assert _status(["fit", *files, "--max-sigma", "2"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("varblur fit: error: ") and named in err
    assert (tmp_path / "old.npy").read_bytes() == b"kept"


def test_fit_help_shows_the_library_defaults(capsys):
    from napari_varblur import fit_sigma_map

    defaults = {name: p.default for name, p in inspect.signature(fit_sigma_map).parameters.items()}
    declared = {name: p.default for name, p in FIT_PARAMS.items() if not p.required}
    assert {name: defaults[name] for name in declared} == declared
    with pytest.raises(SystemExit):
        cli.main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for piece in ("--max-sigma S", "(default: 16.0)", "(default: 150)", "--model-map",
                  "--residual FILE", "--intensity {affine,none}", "(default: affine)"):  # fmt: skip
        assert piece in text
    assert defaults.get("intensity", "affine") == "affine"
