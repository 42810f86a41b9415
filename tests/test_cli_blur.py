"""``varblur blur`` as a subprocess on real TIFF, Zarr and .npy files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import assert_close

tifffile = pytest.importorskip("tifffile")
zarr = pytest.importorskip("zarr")

from napari_varblur import gaussian_blur  # noqa: E402


def varblur(*args, check_ok=True, timeout=300):
    out = subprocess.run(
        [sys.executable, "-m", "napari_varblur", "blur", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check_ok:
        assert out.returncode == 0, out.stdout + out.stderr
    return out


@pytest.fixture
def image(rng):
    return (rng.random((3, 40, 50)) * 1000).astype(np.float32)


def test_npy_to_npy_global_sigma(tmp_path, image):
    np.save(tmp_path / "in.npy", image)
    varblur(
        tmp_path / "in.npy",
        tmp_path / "out.npy",
        "--sigma",
        "2",
        "--mode",
        "reflect",
        "--axes",
        "1",
        "2",
        "--backend",
        "numba",
    )
    out = np.load(tmp_path / "out.npy")
    expected = gaussian_blur(
        image, 2.0, mode="reflect", axes=(1, 2), backend="reference", precision="float64"
    )
    assert out.dtype == np.float32
    assert_close(out, expected, "float32", image)


def test_tif_with_sigma_map_and_same_dtype(tmp_path, rng):
    data = (rng.random((30, 40)) * 60000).astype(np.uint16)
    sigma_map = rng.uniform(0.5, 3, data.shape).astype(np.float32)
    tifffile.imwrite(tmp_path / "in.tif", data)
    tifffile.imwrite(tmp_path / "map.tif", sigma_map)
    varblur(
        tmp_path / "in.tif",
        tmp_path / "out.tif",
        "--sigma",
        "1.5",
        "--sigma-map",
        tmp_path / "map.tif",
        "--dtype",
        "same",
        "--precision",
        "float64",
    )
    out = tifffile.imread(tmp_path / "out.tif")
    expected = gaussian_blur(data, sigma_map * 1.5, backend="reference", precision="float64")
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, np.clip(np.round(expected), 0, 65535).astype(np.uint16))


def test_a_per_axis_map_of_the_blurred_axes_blurs_each_axis_with_its_own(tmp_path, rng):
    """A map with one sigma per pixel and blurred axis (a trailing axis of 2), given for
    the blurred axes of a stack, in the order of --axes."""
    data = rng.random((3, 30, 40)).astype(np.float32)
    per_axis = rng.uniform(0.5, 3, (40, 30, 2)).astype(np.float32)  # (X, Y, sigma X/Y)
    np.save(tmp_path / "in.npy", data)
    np.save(tmp_path / "map.npy", per_axis)
    varblur(tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "2", "--sigma-map",
            tmp_path / "map.npy", "--axes", "2", "1", "--backend", "numba")  # fmt: skip
    expected = gaussian_blur(data, 2 * per_axis.transpose(1, 0, 2)[None], axes=(2, 1),
                             backend="reference", precision="float64")  # fmt: skip
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, atol=2e-6)
    per_axis_wrong = np.ones((30, 40, 3), np.float32)  # three values for two axes
    np.save(tmp_path / "map.npy", per_axis_wrong)
    out = varblur(tmp_path / "in.npy", tmp_path / "out2.npy", "--sigma", "1", "--sigma-map",
                  tmp_path / "map.npy", "--axes", "1", "2", check_ok=False)  # fmt: skip
    assert out.returncode == 2
    assert "nor either with a trailing axis of 2 (one sigma per axis)" in out.stderr


def test_zarr_to_zarr_chunked(tmp_path, image):
    stored = zarr.open_array(
        str(tmp_path / "in.zarr"),
        mode="w",
        shape=image.shape,
        chunks=(1, 16, 16),
        dtype=image.dtype,
    )
    stored[:] = image
    varblur(
        tmp_path / "in.zarr",
        tmp_path / "out.zarr",
        "--sigma",
        "1",
        "3",
        "--axes",
        "1",
        "2",
        "--mode",
        "wrap",
    )
    out = np.asarray(zarr.open_array(str(tmp_path / "out.zarr"), mode="r"))
    expected = gaussian_blur(
        image, (1.0, 3.0), axes=(1, 2), mode="wrap", backend="reference", precision="float64"
    )
    assert_close(out, expected, "float32", image)


def test_ome_tiff_world_units(tmp_path, rng):
    data = rng.random((24, 32)).astype(np.float32)
    tifffile.imwrite(
        tmp_path / "in.ome.tif",
        data,
        ome=True,
        metadata={"axes": "YX", "PhysicalSizeY": 0.25, "PhysicalSizeX": 0.5},
    )
    varblur(tmp_path / "in.ome.tif", tmp_path / "out.npy", "--sigma", "1", "--world-units")
    expected = gaussian_blur(data, (4.0, 2.0), backend="reference", precision="float64")
    assert_close(np.load(tmp_path / "out.npy"), expected, "float32", data)


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["missing.tif", "out.npy", "--sigma", "1"], "'{d}/missing.tif' does not exist"),
        ("in.npy", ["in.npy", "out.png", "--sigma", "1"], "unsupported format"),
        ("bad.tif", ["bad.tif", "out.npy", "--sigma", "1"], "could not read it as tif"),
        ("in.npy", ["in.npy", "out.npy", "--sigma", "-1"], "sigma: must be a finite number"),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--sigma-map", "small.npy"],
            "--sigma-map: shape (7, 7) fits neither the image's shape (3, 40, 50)",
        ),
        ("in.npy", ["in.npy", "out.npy", "--sigma", "1", "--mode", "bogus"], "mode: unknown"),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--axes", "3"],
            "axes: axis 3 is out of range for a 3-D image",
        ),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--axes", "1", "-4"],
            "axes: axis -4 is out of range for a 3-D image",
        ),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "2", "3", "--axes", "1", "2"],
            "sigma: got 3 values for 2 blurred axes",
        ),
        ("in.npy", ["in.npy", "in.npy", "--sigma", "1"], "OUTPUT is the same file as INPUT"),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--tolerance", "0.5"],
            "tolerance: must be None (exact) or a number in (0, 0.1], got 0.5",
        ),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--tolerance", "fast"],
            "tolerance: expected a number in (0, 0.1], got 'fast'",
        ),
        (
            "in.npy",
            ["in.npy", "out.npy", "--sigma", "1", "--world-units"],
            "has no physical pixel sizes",
        ),
    ],
)
def test_errors_are_one_line_and_nonzero(tmp_path, image, setup, args, message):
    np.save(tmp_path / "in.npy", image)
    np.save(tmp_path / "small.npy", np.ones((7, 7)))
    (tmp_path / "bad.tif").write_bytes(b"not a tiff at all")
    os.chdir(tmp_path)
    out = varblur(*args, check_ok=False)
    assert out.returncode == 2  # a bad argument or a refused input
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("varblur blur: error: ")
    assert (
        message.format(d=tmp_path) in lines[0]
        or message.format(d=".") in lines[0]
        or message.replace("'{d}/", "'") in lines[0]
    )
    assert not (tmp_path / "out.npy").exists()


def test_existing_output_needs_overwrite(tmp_path, image):
    np.save(tmp_path / "in.npy", image)
    (tmp_path / "out.npy").write_bytes(b"precious")
    out = varblur(tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", check_ok=False)
    assert out.returncode == 2 and "exists; pass --overwrite" in out.stderr
    assert (tmp_path / "out.npy").read_bytes() == b"precious"
    varblur(tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", "--overwrite")
    assert np.load(tmp_path / "out.npy").shape == image.shape
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy", "out.npy"]


def test_interrupt_leaves_no_partial_output(tmp_path, rng):
    big = rng.random((64, 256, 256)).astype(np.float32)
    np.save(tmp_path / "in.npy", big)
    # A shell's background job ignores SIGINT, and an ignored signal stays ignored in
    # children (the run then finishes: exit 0), while a user's Ctrl-C reaches a
    # foreground run.  A handled signal is reset to the default in the child.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "napari_varblur",
            "blur",
            str(tmp_path / "in.npy"),
            str(tmp_path / "out.npy"),
            # Seconds of work after the partial file appears (the test is interrupted
            # then, so this costs nothing): a busy machine that noticed the file late
            # once signalled a run that was already finishing (exit 0).
            "--sigma",
            "30",
            "--backend",
            "reference",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    signal.signal(signal.SIGINT, previous)
    deadline = time.time() + 120
    while time.time() < deadline and not any(
        p.name.startswith(".out.npy.varblur-partial") for p in tmp_path.iterdir()
    ):
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted; no output was written" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy"]


def test_scheduler_address_runs_on_a_cluster(tmp_path, image):
    distributed = pytest.importorskip("distributed")
    np.save(tmp_path / "in.npy", image)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as cluster:
        varblur(
            tmp_path / "in.npy",
            tmp_path / "out.npy",
            "--sigma",
            "1.5",
            "--scheduler",
            cluster.scheduler_address,
            "--axes",
            "1",
            "2",
        )
    expected = gaussian_blur(image, 1.5, axes=(1, 2), backend="reference", precision="float64")
    assert_close(np.load(tmp_path / "out.npy"), expected, "float32", image)


@pytest.mark.parametrize(
    ("sigma", "factors"), [(["1.5"], (1.5, 1.5)), (["1", "2"], (1.0, 2.0))], ids=["one", "per-axis"]
)
def test_sigma_map_of_the_blurred_axes_follows_their_order(tmp_path, rng, sigma, factors):
    # --axes 2 1 takes a map of shape (n2, n1): it must be transposed, not reshaped.
    image = rng.random((4, 9, 13))
    sigma_map = rng.uniform(0.5, 2.0, (13, 9))
    np.save(tmp_path / "in.npy", image)
    np.save(tmp_path / "map.npy", sigma_map)
    varblur(
        tmp_path / "in.npy",
        tmp_path / "out.npy",
        "--sigma",
        *sigma,
        "--sigma-map",
        tmp_path / "map.npy",
        "--axes",
        "2",
        "1",
        "--mode",
        "reflect",
        "--backend",
        "reference",
        "--precision",
        "float64",
    )
    per_axis = np.stack([sigma_map.T * f for f in factors], axis=-1)[None]
    expected = gaussian_blur(
        image, per_axis, axes=(2, 1), mode="reflect", backend="reference", precision="float64"
    )
    assert_close(np.load(tmp_path / "out.npy"), expected, "float64", image)


def test_multi_page_tiff_output_equals_the_in_memory_blur(tmp_path, rng):
    # Pages are written as the slabs are computed (one chunk of the first axis at a time).
    data = rng.random((2, 3, 20, 24)).astype(np.float32)
    tifffile.imwrite(tmp_path / "in.tif", data, photometric="minisblack")
    varblur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1.5", "--mode", "nearest")
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert len(tif.pages) == 6
        out = tif.asarray()
    expected = gaussian_blur(data, 1.5, mode="nearest", backend="reference", precision="float64")
    assert out.shape == data.shape
    assert_close(out, expected, "float32", data)


def test_tolerance_blurs_a_sigma_map_within_its_bound(tmp_path, rng):
    data = rng.random((256, 512)).astype(np.float32)
    ramp = np.broadcast_to(np.linspace(1.0, 16.0, 512), data.shape) + rng.random(data.shape) * 1e-6
    np.save(tmp_path / "in.npy", data)
    np.save(tmp_path / "map.npy", ramp.astype(np.float32))
    args = [tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", "--sigma-map"]
    varblur(*args, tmp_path / "map.npy", "--tolerance", "1e-3", "--backend", "numba")
    out = np.load(tmp_path / "out.npy")
    # The exact contract (Numba's gather: within 1e-12 of the reference, and fast).
    expected = gaussian_blur(data, ramp.astype(np.float32), backend="numba", precision="float64")
    assert np.abs(out - expected).max() <= 1e-3 * np.ptp(data) + 1e-5
    assert np.abs(out - expected).max() > 1e-6  # the levels ran (not the exact gather)


def masked_files(tmp_path, rng):
    """A small stack with NaNs, and a label image of its blurred axes (0 = background)."""
    image = (rng.random((2, 20, 24)) * 100).astype(np.float32)
    image[0, 5, 6] = image[1, 12, 3] = np.nan
    labels = rng.integers(0, 4, (20, 24)).astype(np.uint8)  # non-zero marks a pixel
    np.save(tmp_path / "in.npy", image)
    tifffile.imwrite(tmp_path / "mask.tif", labels)
    return image, labels


def test_mask_and_nan_policy_equal_the_library_call(tmp_path, rng):
    image, labels = masked_files(tmp_path, rng)
    args = [tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1.5", "--axes", "1", "2"]
    varblur(*args, "--mask", tmp_path / "mask.tif", "--nan-policy", "omit", "--mode", "reflect")
    expected = gaussian_blur(
        image, 1.5, axes=(1, 2), mode="reflect", mask=(labels != 0)[None], nan_policy="omit"
    )
    out = np.load(tmp_path / "out.npy")
    assert np.isfinite(out).all()  # the NaNs were left out and filled
    assert_close(out, expected, "float32", np.nan_to_num(image))


@pytest.mark.parametrize(
    ("extra", "valid", "policy"),
    [([], True, "propagate"), (["--invert-mask"], False, "omit")],
    ids=["valid-propagate", "invalid-omit"],
)
def test_mask_file_of_the_image_shape_in_process(tmp_path, rng, capsys, extra, valid, policy):
    from napari_varblur.app import cli

    image, labels = masked_files(tmp_path, rng)
    full = np.broadcast_to(labels, image.shape)
    np.save(tmp_path / "mask.npy", full)
    args = ["blur", str(tmp_path / "in.npy"), str(tmp_path / "out.npy"), "--sigma", "1", "2"]
    args += ["--axes", "1", "2", "--mask", str(tmp_path / "mask.npy"), "--nan-policy", policy]
    assert cli.main(args + extra) == 0, capsys.readouterr().err
    mask = (full != 0) if valid else (full == 0)
    expected = gaussian_blur(image, (1.0, 2.0), axes=(1, 2), mask=mask, nan_policy=policy)
    assert_close(np.load(tmp_path / "out.npy"), expected, "float32", np.nan_to_num(image))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mask", "missing.npy"], "--mask: 'missing.npy' does not exist"),
        (["--mask", "bad.tif"], "--mask: 'bad.tif': could not read it as tif"),
        (
            ["--mask", "small.npy"],
            "--mask: shape (7, 7) fits neither the image's shape (2, 20, 24)",
        ),
        (["--mask", "nan.npy", "--axes", "1", "2"], "--mask: holds NaN"),
        (["--invert-mask"], "--invert-mask: needs --mask FILE"),
        (
            ["--nan-policy", "raise"],
            "image: nan_policy='raise' and the image has non-finite (NaN or inf) values",
        ),
        (
            ["--mask", "mask.tif", "--nan-policy", "raise", "--axes", "1", "2"],
            "image: nan_policy='raise' and the image has non-finite",
        ),
    ],
)
def test_mask_errors_name_the_option(tmp_path, rng, capsys, args, message):
    from napari_varblur.app import cli

    masked_files(tmp_path, rng)
    np.save(tmp_path / "small.npy", np.ones((7, 7), np.uint8))
    np.save(tmp_path / "nan.npy", np.full((20, 24), np.nan))
    (tmp_path / "bad.tif").write_bytes(b"not a tiff at all")
    os.chdir(tmp_path)
    assert cli.main(["blur", "in.npy", "out.npy", "--sigma", "1", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("varblur blur: error: ")
    assert message in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "bad.tif", "in.npy", "mask.tif", "nan.npy", "small.npy"
    ]  # fmt: skip


def test_nan_policy_raise_exits_nonzero_with_the_library_message(tmp_path, rng):
    image, _ = masked_files(tmp_path, rng)
    out = varblur(
        tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", "--nan-policy", "raise",
        check_ok=False,
    )  # fmt: skip
    with pytest.raises(ValueError) as info:
        gaussian_blur(image, 1.0, nan_policy="raise")
    assert out.returncode == 2
    assert out.stderr.strip() == f"varblur blur: error: {info.value}"
    assert not (tmp_path / "out.npy").exists()
    bad = varblur(tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", "--nan-policy",
                  "skip", check_ok=False)  # fmt: skip
    assert bad.returncode == 2 and "--nan-policy: invalid choice: 'skip'" in bad.stderr


def test_blur_help_lists_the_mask_options(capsys):
    from napari_varblur.app import cli

    with pytest.raises(SystemExit):
        cli.main(["blur", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--mask FILE" in text and "non-zero marks a valid pixel" in text
    assert "--invert-mask" in text and "--nan-policy {propagate,omit,raise}" in text


def test_integer_output_refuses_nan_instead_of_writing_zeros(tmp_path, capsys):
    """A window with no valid tap is NaN, which --dtype same (uint16) cannot hold: an
    error, no output file (was silently 0)."""
    from napari_varblur.app import cli

    np.save(tmp_path / "in.npy", np.arange(100, 500, dtype=np.uint16).reshape(20, 20))
    mask = np.ones((20, 20), np.uint8)
    mask[5:15, 5:15] = 0
    np.save(tmp_path / "mask.npy", mask)
    os.chdir(tmp_path)
    args = ["blur", "in.npy", "out.npy", "--sigma", "1", "--mask", "mask.npy"]
    assert cli.main([*args, "--dtype", "same"]) == 2
    err = capsys.readouterr().err
    assert "--dtype: the result has NaN" in err and "use --dtype float" in err
    assert not (tmp_path / "out.npy").exists()
    assert cli.main(args) == 0  # float output keeps the NaN
    assert np.isnan(np.load(tmp_path / "out.npy")).sum() == 4 * 4  # radius 3 in a 10x10 hole
