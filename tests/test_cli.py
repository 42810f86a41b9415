"""The main job: ``varblur demo`` on the built-in sample."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from napari_varblur.adapters import cli
from napari_varblur.sample import fluorescence_sample


def test_sample_is_deterministic_and_shaped():
    image, sigma_map = fluorescence_sample(64)
    again, _ = fluorescence_sample(64)
    np.testing.assert_array_equal(image, again)
    assert image.shape == sigma_map.shape == (64, 64)
    assert sigma_map.min() == pytest.approx(0.5, abs=0.05) and sigma_map.max() <= 4.0
    assert image.max() > 200 > np.median(image)  # bright structures on a dim background


@pytest.mark.parametrize("command", [["-m", "napari_varblur"], None])
def test_demo_runs_every_backend_and_passes(command):
    if command is None:
        exe = shutil.which("varblur", path=os.path.dirname(sys.executable))
        assert exe, "the varblur console script is installed beside the interpreter"
        args = [exe, "demo", "--size", "48"]
    else:
        args = [sys.executable, *command, "demo", "--size", "48"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    backends = {row.split("|")[1].strip() for row in rows[1:]}
    assert {"reference", "numba", "jax"} <= backends
    assert all(row.rstrip().endswith("| yes |") for row in rows[1:])
    assert len(rows) == 1 + 2 * 3  # header + 3 backends x 2 precisions
    assert "all backends meet the contract" in out.stdout
    # A fresh process compiles its JAX programs: the first calls say so.
    assert all("(compiled)" in row.split("|")[4] for row in rows[1:] if "| jax |" in row)
    assert "(compiled): the first call compiled kernels" in out.stdout


def test_demo_exit_code_reports_a_broken_tolerance(monkeypatch):
    # A zero tolerance cannot be met by float32 arithmetic: the demo must say so.
    monkeypatch.setitem(cli.CONTRACT_TOLERANCE, "float32", 0.0)
    buffer = io.StringIO()
    assert cli.demo(32, out=buffer) == 1
    assert "| NO |" in buffer.getvalue() and "broke the contract" in buffer.getvalue()


def test_demo_rejects_a_tiny_size(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", "--size", "2"])
    assert info.value.code == 2
    assert "--size: must be at least 8" in capsys.readouterr().err


def test_python_dash_m_cli_runs_the_demo():
    # The module's __main__ block must run after every function it needs is defined.
    args = [sys.executable, "-m", "napari_varblur.adapters.cli", "demo", "--size", "16"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all backends meet the contract" in out.stdout


def test_version_help_defaults_and_missing_extras(capsys, monkeypatch, tmp_path):
    """Issue 11, CLI polish: --version, help in plain words with defaults and the mode
    choices, the device as "cpu", and a missing optional package named with its extra."""
    import napari_varblur
    from napari_varblur.adapters import cli
    from napari_varblur.backends import jax_xla

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"varblur {napari_varblur.__version__}"
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "``" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["blur", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for piece in ("(default: crop)", "(default: 3.0)", "(default: float32)", "mirror, nearest"):
        assert piece in text
    assert "(default: None)" not in text
    assert jax_xla.device_name() == "cpu" or not jax_xla.device_name().startswith("cpu")
    np.save(tmp_path / "in.npy", np.zeros((8, 8), np.float32))
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if it were not installed
    args = ["blur", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--sigma", "1"]
    assert cli.main([*args, "--scheduler", "tcp://127.0.0.1:1"]) == 1
    assert "pip install 'napari-varblur[dask]'" in capsys.readouterr().err


def test_first_run_says_it_compiled(tmp_path):
    """With an empty Numba cache `varblur blur` says it compiled kernels; the next run,
    reading the cache, does not."""
    np.save(tmp_path / "line.npy", np.arange(50, dtype=np.float32))
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))

    def run(name):
        command = [sys.executable, "-m", "napari_varblur", "blur", str(tmp_path / "line.npy"),
                   str(tmp_path / name), "--sigma", "2", "--backend", "numba"]  # fmt: skip
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    first, second = run("a.npy"), run("b.npy")
    assert first.returncode == 0 and second.returncode == 0
    assert "compiled kernels (first run only" in first.stderr
    assert "compiled" not in second.stderr
