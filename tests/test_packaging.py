"""The manifest ships inside the wheel and npe2 finds it (editable and wheel installs)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("npe2")
ROOT = Path(__file__).resolve().parents[1]
NPE2 = [sys.executable, "-m", "npe2"]


def test_manifest_has_one_copy_in_git():
    tracked = subprocess.run(
        ["git", "ls-files", "-s", "*napari.yaml"], cwd=ROOT, capture_output=True, text=True
    ).stdout.splitlines()
    if not tracked:
        pytest.skip("not a git checkout")
    modes = {line.split()[-1]: line.split()[0] for line in tracked}
    assert modes["napari.yaml"] == "100644"
    # The package's copy is a symlink to the top-level file, not a second copy.
    assert modes["src/napari_varblur/napari.yaml"] == "120000"


def test_editable_install_is_discovered_and_validates():
    listing = subprocess.run([*NPE2, "list"], capture_output=True, text=True, check=True).stdout
    assert "napari-varblur" in listing
    out = subprocess.run(
        [*NPE2, "validate", "napari-varblur", "--imports"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "valid" in out.stdout, out.stdout + out.stderr


def test_wheel_ships_the_manifest_and_is_discovered(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "-o",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        manifest = zf.read("napari_varblur/napari.yaml").decode()
        entry_points = zf.read("napari_varblur-0.1.0.dist-info/entry_points.txt").decode()
    assert manifest == (ROOT / "napari.yaml").read_text()
    assert "napari-varblur = napari_varblur:napari.yaml" in entry_points
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    # With the wheel first on the path, npe2 must read the manifest from the wheel's files.
    code = (
        "import napari_varblur, npe2\n"
        "pm = npe2.PluginManager.instance(); pm.discover()\n"
        "mf = pm.get_manifest('napari-varblur')\n"
        "print(napari_varblur.__file__); print(sorted(w.display_name for w in "
        "mf.contributions.widgets))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[0].startswith(str(target))
    assert (
        "['Compare backends', 'Deblur', 'Estimate sigma map', 'Gaussian blur', 'Make sigma map', "
        "'Measure blur from beads']" in out
    )


def test_plain_install_runs_varblur_blur_on_a_tiff(tmp_path):
    """Issue 11: after `pip install .` alone (no extras) the batch command reads and
    writes TIFF (dask, tifffile and zarr are base dependencies).  A fresh venv, from
    pip's wheel cache where the test install filled it."""
    import numpy as np

    tifffile = pytest.importorskip("tifffile")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-compile", str(ROOT)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert pip.returncode == 0, pip.stderr[-2000:]
    image = np.zeros((20, 24, 3), np.uint8)
    image[..., 0] = 200
    tifffile.imwrite(tmp_path / "in.tif", image, photometric="rgb")
    out = subprocess.run(
        [str(venv / "bin" / "varblur"), "blur", str(tmp_path / "in.tif"),
         str(tmp_path / "out.tif"), "--sigma", "1.5", "--dtype", "same"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = tifffile.imread(tmp_path / "out.tif")
    assert result.shape == image.shape and result.dtype == np.uint8
    assert result[..., 1:].max() == 0 and (result[..., 0] == 200).all()  # channels apart
