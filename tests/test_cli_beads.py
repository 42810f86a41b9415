"""``varblur beads``: a sigma map and a table of beads from a bead image file (issue 29)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from napari_varblur import __version__
from napari_varblur.adapters.files import read_image
from napari_varblur.app import cli
from napari_varblur.core.bead_params import BEAD_PARAMS
from napari_varblur.measure import sigma_map_from_beads
from napari_varblur.measure.synthetic import bead_image
from test_cli import _status

tifffile = pytest.importorskip("tifffile")

#: The ImageJ pixel size of the bead image, y and x, in micrometres.
PIXEL = (0.2, 0.1)


@pytest.fixture(scope="module")
def beads():
    """A small bead image with 10 candidates (a doublet: two; one at the edge), some left
    out (how many is the library's business: the counts below come from it)."""
    image, _ = bead_image((96, 96), 8, doublets=1, edge=1, seed=0)
    return image


def write_imagej(path, image) -> None:
    tifffile.imwrite(path, image, imagej=True, resolution=(1 / PIXEL[1], 1 / PIXEL[0]),
                     metadata={"unit": "um"})  # fmt: skip


def varblur_beads(folder, monkeypatch, *args) -> int:
    monkeypatch.chdir(folder)
    return _status(["beads", *map(str, args)])


def test_beads_writes_the_map_with_the_pixel_sizes_and_the_table(tmp_path, monkeypatch, capsys,
                                                                  beads):  # fmt: skip
    write_imagej(tmp_path / "beads.tif", beads)
    status = varblur_beads(tmp_path, monkeypatch, "beads.tif", "--map", "map.tif",
                           "--uncertainty", "error.tif", "--table", "beads.csv")  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    expected = sigma_map_from_beads(beads, spacing=PIXEL)  # the file's pixel sizes, y then x
    kept = expected.summary["kept"]
    assert expected.beads.rows == 10 and 3 <= kept < 10  # one row per candidate, some out
    lines = out.splitlines()
    assert lines[0] == f"varblur beads: {expected}" and "left out)" in lines[0]
    assert lines[1] == ("varblur beads: FWHM in micrometer (INPUT's pixel sizes 0.2, 0.1; "
                        "--spacing overrides them)")  # fmt: skip
    assert f"varblur beads: wrote beads.csv: 10 candidate beads, {kept} kept" in lines
    assert any(line.startswith("varblur beads: wrote map.tif (96, 96, 2) float32: sigma map")
               for line in lines)  # fmt: skip
    assert "Traceback" not in err
    for name, values in (("map.tif", expected.sigma_map), ("error.tif", expected.uncertainty)):
        data, info = read_image(tmp_path / name)
        assert data.shape == (96, 96, 2) and data.dtype == np.float32
        np.testing.assert_allclose(np.asarray(data), values, rtol=1e-6)
        assert info.scale[:2] == pytest.approx(PIXEL)
        assert info.units[:2] == ("micrometer", "micrometer")
        record = info.provenance
        assert record["command"] == "varblur beads" and record["version"] == __version__
        assert record["input"] == "beads.tif"
        assert record["parameters"]["spacing"] == pytest.approx(list(PIXEL))
        assert record["parameters"]["per_axis"] is True
        assert record["parameters"]["kept"] == kept
    with open(tmp_path / "beads.csv", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == list(expected.beads)
    assert rows[0][:4] == ["y", "y_se", "x", "x_se"] and rows[0][-1] == "status"
    assert {"sigma_y", "sigma_x", "fwhm_y", "fwhm_x", "chi2"} <= set(rows[0])
    assert len(rows) == 1 + 10
    assert [row[-1] for row in rows[1:]] == list(expected.beads["status"])
    assert {"ok", "edge"} <= {row[-1] for row in rows[1:]}
    fwhm_y = np.array([float(row[rows[0].index("fwhm_y")]) for row in rows[1:]])
    np.testing.assert_allclose(fwhm_y, expected.beads["fwhm_y"], rtol=1e-5)


def test_isotropic_map_has_no_trailing_axis_and_stays_imagej(tmp_path, monkeypatch, capsys,
                                                            beads):  # fmt: skip
    write_imagej(tmp_path / "beads.tif", beads)
    status = varblur_beads(tmp_path, monkeypatch, "beads.tif", "--map", "map.tif", "--isotropic")
    out, err = capsys.readouterr()
    assert status == 0, out + err
    expected = sigma_map_from_beads(beads, spacing=PIXEL, per_axis=False)
    assert out.splitlines()[0] == f"varblur beads: {expected}"
    data, info = read_image(tmp_path / "map.tif")
    assert data.shape == (96, 96)
    np.testing.assert_allclose(np.asarray(data), expected.sigma_map, rtol=1e-6)
    assert info.format == "imagej" and info.scale == pytest.approx(PIXEL)
    assert info.provenance["parameters"]["per_axis"] is False
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beads.tif", "map.tif"]


def test_spacing_overrides_the_files_pixel_sizes(tmp_path, monkeypatch, capsys, beads):
    write_imagej(tmp_path / "beads.tif", beads)
    (tmp_path / "map.npy").write_bytes(b"old")
    status = varblur_beads(tmp_path, monkeypatch, "beads.tif", "--table", "beads.csv",
                           "--map", "map.tif", "--spacing", "0.5", "--overwrite")  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    expected = sigma_map_from_beads(beads, spacing=0.5)
    assert out.splitlines()[:2] == [f"varblur beads: {expected}",
                                    "varblur beads: FWHM in the unit of --spacing"]  # fmt: skip
    assert read_image(tmp_path / "map.tif").info.scale[:2] == pytest.approx((0.5, 0.5))


def test_a_file_without_pixel_sizes_gives_fwhm_in_pixels(tmp_path, monkeypatch, capsys, beads):
    np.save(tmp_path / "beads.npy", beads)
    status = varblur_beads(tmp_path, monkeypatch, "beads.npy", "--table", "beads.csv")
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert out.splitlines()[0] == f"varblur beads: {sigma_map_from_beads(beads)}"
    assert out.splitlines()[1] == ("varblur beads: FWHM in pixels (INPUT has no pixel sizes; "
                                   "give them with --spacing)")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beads.csv", "beads.npy"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ([], "nothing to write: give --map FILE, --table FILE.csv or both"),
        (["--uncertainty", "u.npy"], "--uncertainty: needs --map FILE"),
        (["--table", "t.csv", "--threshold", "wide"], "--threshold: invalid float value: 'wide'"),
        (["--table", "t.csv", "--threshold", "0"], "threshold: must be a finite number > 0"),
        (["--table", "t.csv", "--degree", "1.5"], "--degree: invalid int value: '1.5'"),
        (["--table", "t.csv", "--degree", "-1"], "degree: must be an integer >= 0"),
        (["--table", "t.csv", "--spacing", "1", "2", "3"], "spacing: expected 1 or 2 values"),
        (["--table", "t.csv", "--axes", "2"], "axes: [2] is out of range"),
        (["--table", "t.csv", "--isotropic", "yes"], "unrecognized arguments: yes"),
        (["--table", "t.tif"], "--table: 't.tif' is written as CSV; name it .csv"),
        (["--table", "no/t.csv"], "--table: the folder 'no' does not exist"),
        (["--table", "old.csv"], "--table: 'old.csv' exists; pass --overwrite"),
        (["--map", "m.png"], "'m.png': unsupported format"),
        (["--map", "m.ome.tif"], "--map: an OME file has no place for the map's trailing axis"),
        (["--map", "beads.npy"], "--map is the same file as an input"),
        (["--map", "old.npy"], "--map: 'old.npy' exists; pass --overwrite"),
        (["--map", "m.npy", "--uncertainty", "m.npy"], "--uncertainty is the same file as --map"),
    ],
)
def test_bad_arguments_are_one_line_exit_2_and_write_nothing(tmp_path, monkeypatch, capsys,
                                                             beads, args, named):  # fmt: skip
    np.save(tmp_path / "beads.npy", beads)
    for old in ("old.npy", "old.csv"):
        (tmp_path / old).write_bytes(b"kept")
    assert varblur_beads(tmp_path, monkeypatch, "beads.npy", *args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("varblur beads: error: ") and named in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["beads.npy", "old.csv", "old.npy"]
    assert (tmp_path / "old.npy").read_bytes() == b"kept"


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("noise", "image: no beads found: the brightest spot"),
        ("two beads", "image: 2 usable beads of 2 candidates"),
        ("absent", "INPUT: 'absent.npy' does not exist"),
    ],
)
def test_an_image_without_enough_beads_is_refused(tmp_path, monkeypatch, capsys, kind, named):
    if kind == "noise":
        image = np.random.default_rng(0).poisson(100, (64, 64)).astype(np.uint16)
        np.save(tmp_path / "in.npy", image)
    elif kind == "two beads":
        np.save(tmp_path / "in.npy", bead_image((64, 64), 2, seed=0)[0])
    source = "absent.npy" if kind == "absent" else "in.npy"
    assert varblur_beads(tmp_path, monkeypatch, source, "--map", "m.npy", "--table", "b.csv") == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("varblur beads: error: "), err
    assert named in err, err
    assert not (tmp_path / "m.npy").exists() and not (tmp_path / "b.csv").exists()


def test_beads_help_shows_the_declared_options(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["beads", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for name in ("spacing", "threshold", "min_separation", "saturation", "degree", "axes",
                 "truncate"):  # fmt: skip
        param = BEAD_PARAMS[name]
        assert f"{param.flag} " in text and " ".join(param.help.split()) in text
    assert f"(default: {BEAD_PARAMS['threshold'].default})" in text
    for piece in ("--map FILE", "--table FILE.csv", "--uncertainty FILE", "--overwrite"):
        assert piece in text
    isotropic = text[text.index("--isotropic one sigma") :]
    assert "(default" not in isotropic.split("--overwrite")[0]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "'varblur beads' measures a sigma map" in " ".join(capsys.readouterr().out.split())


def test_an_ome_tiff_map_goes_to_plain_zarr_and_blurs_with_varblur_blur(tmp_path, monkeypatch,
                                                                        capsys, beads):  # fmt: skip
    from napari_varblur import gaussian_blur

    tifffile.imwrite(tmp_path / "beads.ome.tif", beads, ome=True, metadata={
        "axes": "YX", "PhysicalSizeY": PIXEL[0], "PhysicalSizeX": PIXEL[1]})  # fmt: skip
    status = varblur_beads(tmp_path, monkeypatch, "beads.ome.tif", "--map", "map.zarr")
    out, err = capsys.readouterr()
    assert status == 0, out + err
    sigma_map, info = read_image(tmp_path / "map.zarr")
    assert info.format == "zarr" and info.scale[:2] == pytest.approx(PIXEL)  # not OME-Zarr
    expected = sigma_map_from_beads(beads, spacing=PIXEL).sigma_map
    np.testing.assert_allclose(np.asarray(sigma_map), expected, rtol=1e-6)
    args = ["blur", "beads.ome.tif", "blurred.npy", "--sigma", "1", "--sigma-map", "map.zarr"]
    assert _status(args) == 0, capsys.readouterr().err
    blurred = np.load(tmp_path / "blurred.npy")
    np.testing.assert_allclose(blurred, gaussian_blur(beads.astype(np.float32), expected),
                               rtol=1e-4, atol=1e-2)  # fmt: skip


def test_outputs_are_refused_before_the_measurement(tmp_path, monkeypatch, capsys):
    """An output that cannot be written is named before the beads are looked for (a
    large stack takes minutes), not after."""
    np.save(tmp_path / "noise.npy", np.full((64, 64), 100, np.uint16))
    (tmp_path / "old.npy").write_bytes(b"kept")
    assert varblur_beads(tmp_path, monkeypatch, "noise.npy", "--map", "old.npy") == 2
    assert "--map: 'old.npy' exists" in capsys.readouterr().err
