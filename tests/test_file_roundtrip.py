"""``varblur blur`` writes what it read: RGB(A), ImageJ, OME-TIFF, OME-Zarr, Zarr and .npy.

Inputs are written the way other tools write them (tifffile's ImageJ and OME writers,
hand-written NGFF JSON); outputs are read back with tifffile and zarr, not our reader.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from conftest import assert_close

tifffile = pytest.importorskip("tifffile")
zarr = pytest.importorskip("zarr")

import napari_varblur  # noqa: E402
from napari_varblur import gaussian_blur  # noqa: E402
from napari_varblur.app import cli  # noqa: E402


def blur(*args) -> None:
    """Run ``varblur blur`` in this process; it must succeed."""
    status = cli.main(["blur", *map(str, args)])
    assert status == 0


def expected(data, sigma, **options):
    return gaussian_blur(data, sigma, backend="reference", precision="float64", **options)


def check_record(record: dict, **parameters) -> None:
    """The provenance record: our version and the parameters that made the file."""
    assert record["software"] == "napari-varblur"
    assert record["version"] == napari_varblur.__version__
    assert record["command"] == "varblur blur"
    for name, value in parameters.items():
        assert record["parameters"][name] == value, name


# --- RGB(A) TIFF ---------------------------------------------------------------------


@pytest.mark.parametrize("samples", [3, 4], ids=["rgb", "rgba"])
def test_rgb_tiff_comes_back_rgb(tmp_path, rng, samples):
    data = (rng.random((48, 64, samples)) * 255).astype(np.uint8)
    alpha = {"extrasamples": ["assocalpha"]} if samples == 4 else {}
    tifffile.imwrite(tmp_path / "in.tif", data, photometric="rgb", **alpha)
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1.5", "--mode", "reflect")
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        series, page = tif.series[0], tif.pages[0]
        assert (series.axes, series.shape) == ("YXS", data.shape)
        assert len(tif.pages) == 1 and page.photometric == tifffile.PHOTOMETRIC.RGB
        if samples == 4:  # the input's kind of alpha, not tifffile's default
            assert page.extrasamples == (tifffile.EXTRASAMPLE.ASSOCALPHA,)
        out = series.asarray()
        record = tif.shaped_metadata[0]["napari_varblur"]
    # The colour axis is not blurred: each channel on its own.
    assert_close(out, expected(data, 1.5, mode="reflect", channel_axis=-1), "float32", data)
    check_record(record, sigma=[1.5], mode="reflect", channel_axis=2, axes=[0, 1])


def test_rgb_stack_with_same_dtype_streams_rgb_pages(tmp_path, rng):
    data = (rng.random((3, 20, 24, 3)) * 255).astype(np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", data, photometric="rgb")
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1", "--dtype", "same")
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert tif.series[0].axes == "QYXS" and len(tif.pages) == 3
        assert tif.pages[0].photometric == tifffile.PHOTOMETRIC.RGB
        out = tif.asarray()
    want = np.clip(np.round(expected(data, 1.0, channel_axis=-1)), 0, 255).astype(np.uint8)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out, want)


# --- ImageJ hyperstacks --------------------------------------------------------------


def imagej_file(path, data, axes, **metadata):
    tifffile.imwrite(
        path, data, imagej=True, resolution=(5.0, 5.0),
        metadata={"axes": axes, "spacing": 0.5, "unit": "um", **metadata},
    )  # fmt: skip


def test_imagej_zyx_keeps_axes_spacing_unit_and_resolution(tmp_path, rng):
    data = rng.random((6, 24, 32)).astype(np.float32)
    imagej_file(tmp_path / "in.tif", data, "ZYX", Info="acquired on scope 3")
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1", "--world-units")
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert tif.is_imagej and tif.series[0].axes == "ZYX"
        meta = tif.imagej_metadata
        assert (meta["spacing"], meta["unit"]) == (0.5, "um")
        assert tif.pages[0].tags["XResolution"].value == (5, 1)
        assert tif.pages[0].tags["YResolution"].value == (5, 1)
        out = tif.asarray()
    # 1 µm is 2 planes (0.5 µm apart) and 5 pixels (0.2 µm wide).
    assert_close(out, expected(data, (2.0, 5.0, 5.0)), "float32", data)
    info_lines = meta["Info"].splitlines()
    assert info_lines[0] == "acquired on scope 3"  # the input's own Info is kept
    record = json.loads(info_lines[-1].removeprefix("napari_varblur = "))
    check_record(record, sigma=[1.0], world_units=True, axes=[0, 1, 2], channel_axis=None)
    # Our own output has the pixel sizes for the next run.
    blur(tmp_path / "out.tif", tmp_path / "again.tif", "--sigma", "1", "--world-units")


def test_plain_tiff_resolution_in_centimetres_gives_world_units(tmp_path, rng):
    """A plain TIFF from another tool (tifffile, scikit-image, Bio-Formats) stores its
    pixel size as pixels per centimetre: read as µm for --world-units.  A print DPI
    (inch) is not a pixel size: --world-units then refuses the file."""
    data = rng.random((24, 32)).astype(np.float32)
    tifffile.imwrite(tmp_path / "in.tif", data, resolution=(1e4 / 0.25, 1e4 / 0.5),
                     resolutionunit="CENTIMETER")  # fmt: skip  # X 0.25 µm, Y 0.5 µm
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1", "--world-units")
    # 1 µm is 2 pixels along Y (0.5 µm) and 4 along X (0.25 µm).
    assert_close(tifffile.imread(tmp_path / "out.tif"), expected(data, (2.0, 4.0)), "float32",
                 data)  # fmt: skip
    tifffile.imwrite(tmp_path / "photo.tif", data, resolution=(72, 72), resolutionunit="INCH")
    args = ["blur", tmp_path / "photo.tif", tmp_path / "p.tif", "--sigma", "1", "--world-units"]
    assert cli.main([str(a) for a in args]) == 2


def test_imagej_tcyx_keeps_its_channels_apart(tmp_path, rng):
    data = (rng.random((2, 3, 20, 24)) * 4000).astype(np.uint16)
    ranges = (0.0, 4000.0, 10.0, 3000.0, 0.0, 1000.0)
    imagej_file(tmp_path / "in.tif", data, "TCYX", Ranges=ranges, mode="composite")
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1", "--axes", "2", "3")
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert tif.is_imagej and tif.series[0].axes == "TCYX"
        meta = tif.imagej_metadata
        assert (meta["channels"], meta["frames"], meta["mode"]) == (3, 2, "composite")
        assert meta["Ranges"] == ranges and meta["unit"] == "um"
        assert tif.pages[0].tags["XResolution"].value == (5, 1)
        out = tif.asarray()
    assert_close(out, expected(data, 1.0, axes=(2, 3)), "float32", data)


def test_imagej_channel_axis_is_not_blurred_by_default(tmp_path, rng):
    data = rng.random((3, 20, 24)).astype(np.float32)
    imagej_file(tmp_path / "in.tif", data, "CYX")
    blur(tmp_path / "in.tif", tmp_path / "out.tif", "--sigma", "1")
    assert_close(tifffile.imread(tmp_path / "out.tif"), expected(data, 1.0, channel_axis=0),
                 "float32", data)  # fmt: skip


def test_imagej_output_refuses_float64_before_writing(tmp_path, rng, capsys):
    imagej_file(tmp_path / "in.tif", rng.random((2, 8, 8)).astype(np.float32), "ZYX")
    args = ["blur", str(tmp_path / "in.tif"), str(tmp_path / "out.tif"), "--sigma", "1"]
    assert cli.main([*args, "--precision", "float64"]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "an ImageJ TIFF cannot hold float64" in err
    assert "out.tif" in err and not (tmp_path / "out.tif").exists()


# --- OME-TIFF ------------------------------------------------------------------------

OME = "{http://www.openmicroscopy.org/Schemas/OME/2016-06}"


def ome_pixels(path):
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome
        root = ET.fromstring(tif.ome_metadata)
        axes, data = tif.series[0].axes, tif.asarray()
    pixels = root.find(f"{OME}Image/{OME}Pixels")
    names = [c.get("Name") for c in pixels.findall(f"{OME}Channel")]
    notes = {m.get("K"): m.text for m in root.iter(f"{OME}M")}
    return axes, data, pixels.attrib, names, notes


def test_ome_tiff_keeps_sizes_and_channel_names(tmp_path, rng):
    data = rng.random((2, 5, 16, 20)).astype(np.float32)
    sizes = {"PhysicalSizeX": 0.5, "PhysicalSizeY": 0.25, "PhysicalSizeZ": 2.0}
    units = {f"PhysicalSize{a}Unit": "µm" for a in "XYZ"}
    channels = {"Channel": {"Name": ["DAPI", "GFP"]}}
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True,
                     metadata={"axes": "CZYX", **sizes, **units, **channels})  # fmt: skip
    blur(tmp_path / "in.ome.tif", tmp_path / "out.ome.tif", "--sigma", "1", "--world-units")
    axes, out, attrs, names, notes = ome_pixels(tmp_path / "out.ome.tif")
    assert axes == "CZYX" and names == ["DAPI", "GFP"]
    for key, value in sizes.items():
        assert float(attrs[key]) == value and attrs[key + "Unit"] == "µm"
    # Channels apart; 1 µm is 0.5 planes, 4 rows and 2 columns.
    assert_close(out, expected(data, (0.5, 4.0, 2.0), channel_axis=0), "float32", data)
    check_record(json.loads(notes["napari_varblur"]), world_units=True, channel_axis=0)
    # Our output blurred again in world units, named plain .tif: still OME.
    blur(tmp_path / "out.ome.tif", tmp_path / "again.tif", "--sigma", "1", "--world-units")
    assert ome_pixels(tmp_path / "again.tif")[3] == ["DAPI", "GFP"]


def test_npy_to_ome_tiff_by_name(tmp_path, rng):
    data = rng.random((3, 12, 14)).astype(np.float32)
    np.save(tmp_path / "in.npy", data)
    blur(tmp_path / "in.npy", tmp_path / "out.ome.tif", "--sigma", "1")
    axes, out, _, _, notes = ome_pixels(tmp_path / "out.ome.tif")
    assert axes == "ZYX" and out.shape == data.shape
    assert_close(out, expected(data, 1.0), "float32", data)
    check_record(json.loads(notes["napari_varblur"]), sigma=[1.0])


# --- OME-Zarr ------------------------------------------------------------------------

NGFF_AXES = [
    {"name": "c", "type": "channel"},
    {"name": "z", "type": "space", "unit": "micrometer"},
    {"name": "y", "type": "space", "unit": "micrometer"},
    {"name": "x", "type": "space", "unit": "micrometer"},
]


def ome_zarr(path, data, version: str):
    """An OME-Zarr image written by hand, as the NGFF spec lays it out."""
    zarr_format = 2 if version == "0.4" else 3
    group = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    layout = {"dimension_names": [a["name"] for a in NGFF_AXES]} if zarr_format == 3 else {
        "chunk_key_encoding": {"name": "v2", "separator": "/"}
    }  # fmt: skip
    group.create_array("0", data=data, chunks=(1, 5, 12, 16), **layout)
    group.create_array("1", data=data[:, :, ::2, ::2], chunks=(1, 5, 6, 8), **layout)
    dataset = {"type": "scale", "scale": [1.0, 2.0, 0.5, 0.25]}
    multiscale = {
        "axes": NGFF_AXES,
        "datasets": [
            {"path": "0", "coordinateTransformations": [
                dataset, {"type": "translation", "translation": [0.0, 0.0, 5.0, 7.0]}]},
            {"path": "1", "coordinateTransformations": [
                {"type": "scale", "scale": [1.0, 2.0, 1.0, 0.5]}]},
        ],
        # A multiscales-level scale multiplies every dataset's.
        "coordinateTransformations": [{"type": "scale", "scale": [1.0, 1.0, 2.0, 2.0]}],
    }  # fmt: skip
    omero = {"channels": [{"label": "DAPI", "color": "0000FF"}, {"label": "GFP"}]}
    if version == "0.4":
        group.attrs.update({"multiscales": [{"version": "0.4", **multiscale}], "omero": omero})
    else:
        group.attrs.update({"ome": {"version": "0.5", "multiscales": [multiscale], "omero": omero}})


def ngff_of(path):
    """(version, multiscale, omero, napari_varblur record, zarr format) of a group."""
    group = zarr.open_group(str(path), mode="r")
    attrs = dict(group.attrs)
    ome = attrs.get("ome", attrs)
    multiscale = ome["multiscales"][0]
    version = ome.get("version", multiscale.get("version"))
    return version, multiscale, ome.get("omero"), attrs["napari_varblur"], group


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_ome_zarr_round_trip(tmp_path, rng, version):
    data = rng.random((2, 5, 24, 32)).astype(np.float32)
    ome_zarr(tmp_path / "in.ome.zarr", data, version)
    blur(tmp_path / "in.ome.zarr", tmp_path / "out.zarr", "--sigma", "2", "--world-units")
    found, multiscale, omero, record, group = ngff_of(tmp_path / "out.zarr")
    assert found == version and group.metadata.zarr_format == (2 if version == "0.4" else 3)
    assert multiscale["axes"] == NGFF_AXES
    level0 = multiscale["datasets"][0]
    assert level0["coordinateTransformations"] == [
        {"type": "scale", "scale": [1.0, 2.0, 1.0, 0.5]},
        {"type": "translation", "translation": [0.0, 0.0, 10.0, 14.0]},
    ]
    assert [c["label"] for c in omero["channels"]] == ["DAPI", "GFP"]
    assert omero["channels"][0]["color"] == "0000FF"
    check_record(record, sigma=[2.0], world_units=True, channel_axis=0)
    out = np.asarray(group[level0["path"]])
    # Channels apart; 2 µm: 1 plane, 2 rows, 4 columns.
    assert_close(out, expected(data, (1.0, 2.0, 4.0), channel_axis=0), "float32", data)
    blur(tmp_path / "out.zarr", tmp_path / "again.ome.zarr", "--sigma", "1", "--world-units")
    assert ngff_of(tmp_path / "again.ome.zarr")[0] == version


def test_ome_zarr_level_path_reads_the_group_scale(tmp_path, rng):
    data = rng.random((2, 5, 24, 32)).astype(np.float32)
    ome_zarr(tmp_path / "in.ome.zarr", data, "0.5")
    blur(tmp_path / "in.ome.zarr" / "1", tmp_path / "out.npy", "--sigma", "2", "--world-units")
    level1 = data[:, :, ::2, ::2]
    assert_close(np.load(tmp_path / "out.npy"), expected(level1, (1.0, 1.0, 2.0), channel_axis=0),
                 "float32", level1)  # fmt: skip


def test_ome_zarr_output_by_name_has_a_block_mean_pyramid(tmp_path, rng):
    data = rng.random((256, 300)).astype(np.float32)
    np.save(tmp_path / "in.npy", data)
    blur(tmp_path / "in.npy", tmp_path / "out.ome.zarr", "--sigma", "1")
    _, multiscale, _, record, group = ngff_of(tmp_path / "out.ome.zarr")
    assert [a["name"] for a in multiscale["axes"]] == ["y", "x"]
    paths = [d["path"] for d in multiscale["datasets"]]
    assert len(paths) == 2  # 128 is under 256: the last level
    level0, level1 = (np.asarray(group[p]) for p in paths)
    assert level1.shape == (128, 150) and level1.dtype == np.float32
    np.testing.assert_allclose(level1, level0.reshape(128, 2, 150, 2).mean(axis=(1, 3)), rtol=1e-6)
    assert multiscale["datasets"][1]["coordinateTransformations"] == [
        {"type": "scale", "scale": [2.0, 2.0]},
        {"type": "translation", "translation": [0.5, 0.5]},  # the centre of a 2x2 block
    ]
    assert_close(level0, expected(data, 1.0), "float32", data)
    check_record(record, sigma=[1.0])


def test_an_rgb_tiff_to_ome_zarr_puts_the_channels_first(tmp_path, rng):
    """NGFF orders axes time, channel, space: an RGB TIFF's samples (last) go first,
    and the file reads back with that channel axis (not blurred again)."""
    data = (rng.random((40, 48, 3)) * 255).astype(np.uint8)
    tifffile.imwrite(tmp_path / "in.tif", data, photometric="rgb")
    blur(tmp_path / "in.tif", tmp_path / "out.ome.zarr", "--sigma", "1.5")
    _, multiscale, _, record, group = ngff_of(tmp_path / "out.ome.zarr")
    assert multiscale["axes"] == [{"name": "c", "type": "channel"},
                                  {"name": "y", "type": "space"},
                                  {"name": "x", "type": "space"}]  # fmt: skip
    out = np.asarray(group[multiscale["datasets"][0]["path"]])
    blurred = expected(data, 1.5, channel_axis=-1)
    assert_close(out, np.moveaxis(blurred, -1, 0), "float32", data)
    check_record(record, sigma=[1.5], channel_axis=2)
    from napari_varblur.adapters.files import read_image

    back = read_image(tmp_path / "out.ome.zarr")
    assert (back.info.axes, back.info.channel_axis, back.data.shape) == ("CYX", 0, (3, 40, 48))


def test_ome_zarr_group_without_multiscales_is_a_one_line_error(tmp_path, rng, capsys):
    zarr.open_group(str(tmp_path / "in.zarr"), mode="w").create_array("0", data=np.ones((4, 4)))
    assert (
        cli.main(["blur", str(tmp_path / "in.zarr"), str(tmp_path / "o.npy"), "--sigma", "1"]) != 0
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "in.zarr" in err and "a Zarr group without OME-Zarr 'multiscales'" in err


# --- plain Zarr and .npy -------------------------------------------------------------


def test_plain_zarr_keeps_dimension_names_and_pixel_sizes(tmp_path, rng):
    data = rng.random((4, 20, 24)).astype(np.float32)
    stored = zarr.create_array(
        str(tmp_path / "in.zarr"), shape=data.shape, chunks=(1, 20, 24), dtype=data.dtype,
        dimension_names=["z", "y", "x"],
        attributes={"scale": [2.0, 0.5, 0.5], "units": ["micrometer"] * 3},
    )  # fmt: skip
    stored[:] = data
    blur(tmp_path / "in.zarr", tmp_path / "out.zarr", "--sigma", "1", "--world-units")
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert out.metadata.dimension_names == ("z", "y", "x")
    assert out.attrs["scale"] == [2.0, 0.5, 0.5] and out.attrs["units"] == ["micrometer"] * 3
    check_record(out.attrs["napari_varblur"], world_units=True)
    assert_close(np.asarray(out), expected(data, (0.5, 2.0, 2.0)), "float32", data)
    blur(tmp_path / "out.zarr", tmp_path / "again.zarr", "--sigma", "1", "--world-units")


def test_zarr_v2_array_stays_v2(tmp_path, rng):
    data = rng.random((3, 10, 12)).astype(np.float32)
    zarr.create_array(str(tmp_path / "in.zarr"), data=data, zarr_format=2)
    blur(tmp_path / "in.zarr", tmp_path / "out.zarr", "--sigma", "1")
    out = zarr.open_array(str(tmp_path / "out.zarr"), mode="r")
    assert out.metadata.zarr_format == 2
    check_record(out.attrs["napari_varblur"], sigma=[1.0])
    assert_close(np.asarray(out), expected(data, 1.0), "float32", data)


def test_npy_round_trip(tmp_path, rng):
    data = (rng.random((3, 10, 12)) * 200).astype(np.uint8)
    np.save(tmp_path / "in.npy", data)
    blur(tmp_path / "in.npy", tmp_path / "out.npy", "--sigma", "1", "--dtype", "same")
    out = np.load(tmp_path / "out.npy")
    assert out.dtype == np.uint8 and out.shape == data.shape
    np.testing.assert_array_equal(out, np.clip(np.round(expected(data, 1.0)), 0, 255))
