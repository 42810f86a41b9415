"""``napari_varblur.adapters.files`` in process: what the batch command writes and holds."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
da = pytest.importorskip("dask.array")

from napari_varblur.adapters.files import (  # noqa: E402
    FileInfo,
    channel_axis_of,
    output_format,
    provenance_record,
    read_image,
    write_image,
)


def test_tiff_output_holds_one_slab_not_the_volume(tmp_path):
    # 32 planes of 256 KiB (8 MiB): NumPy reports its buffers to tracemalloc, so the peak
    # shows whether the whole result was ever held at once.
    result = da.ones((32, 128, 256), chunks=(1, 128, 256)) * da.arange(32, chunks=1)[:, None, None]
    write_image(result[:2], tmp_path / "warm.tif", overwrite=False)  # imports are not data
    tracemalloc.start()
    try:
        write_image(result, tmp_path / "out.tif", overwrite=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < result.nbytes / 4, f"peak {peak / 2**20:.1f} MiB"
    with tifffile.TiffFile(tmp_path / "out.tif") as tif:
        assert len(tif.pages) == 32
        np.testing.assert_array_equal(tif.asarray(), result.compute())


# tifffile warns that an empty array makes a nonconformant TIFF: the (0, 4, 4) case.
@pytest.mark.filterwarnings("ignore:.*zero-size array:UserWarning")
@pytest.mark.parametrize("shape", [(7,), (5, 6), (0, 4, 4), (3, 5, 6), (2, 3, 4, 5)])
def test_tiff_output_of_any_rank_reads_back(tmp_path, shape):
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    write_image(da.from_array(data, chunks=2), tmp_path / "out.tif", overwrite=False)
    out = tifffile.imread(tmp_path / "out.tif")
    assert out.shape == shape
    np.testing.assert_array_equal(out, data)


@pytest.mark.parametrize(
    ("like", "page"),
    [
        (FileInfo(format="imagej", axes="ZYX", scale=(2.0, 0.5, 0.5)), (128, 256)),
        (FileInfo(format="ome-tiff", axes="ZYX", scale=(2.0, 0.5, 0.5)), (128, 256)),
        (FileInfo(format="tiff", axes="ZYXS", channel_axis=3, rgb=True), (128, 256, 3)),
    ],
    ids=["imagej", "ome", "rgb"],
)
def test_imagej_ome_and_rgb_outputs_stream_too(tmp_path, like, page):
    planes = da.arange(32, chunks=1, dtype=np.float32).reshape((32,) + (1,) * len(page))
    result = da.ones((32, *page), chunks=(1, *page), dtype=np.float32) * planes
    write_image(result[:2], tmp_path / "warm.tif", overwrite=False, like=like.select([0, 1, 2]))
    tracemalloc.start()
    try:
        assert write_image(result, tmp_path / "out.tif", overwrite=False, like=like) == (
            "ome-tiff" if like.format == "ome-tiff" else like.format
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < result.nbytes / 4, f"peak {peak / 2**20:.1f} MiB"
    data, info = read_image(tmp_path / "out.tif")
    assert (info.format, info.axes, info.rgb) == (like.format, like.axes, like.rgb)
    np.testing.assert_array_equal(np.asarray(data), result.compute())


def fails_in_slab(shape, bad: int):
    """A lazy array whose slab ``bad`` (of the first axis) raises when computed."""

    def block(x, block_info=None):
        if block_info[None]["chunk-location"][0] == bad:
            raise RuntimeError("slab failed")
        return x

    zeros = da.zeros(shape, chunks=(1, *shape[1:]), dtype=np.float32)
    return zeros.map_blocks(block, dtype=np.float32)


@pytest.mark.parametrize("name", ["out.ome.zarr", "out.zarr", "out.ome.tif", "out.tif"])
def test_a_failed_write_leaves_the_old_output_and_no_partial_file(tmp_path, name):
    like = FileInfo(format="imagej" if name == "out.tif" else "", axes="ZYX")
    write_image(da.ones((2, 4, 4), dtype=np.float32), tmp_path / name, overwrite=False, like=like)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(RuntimeError, match="slab failed"):
        write_image(fails_in_slab((3, 4, 4), 1), tmp_path / name, overwrite=True, like=like)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert read_image(tmp_path / name).data.shape == (2, 4, 4)


def test_read_image_describes_the_file(tmp_path):
    data = np.zeros((4, 6, 3), np.uint8)
    tifffile.imwrite(tmp_path / "rgb.tif", data, photometric="rgb")
    image, info = read_image(tmp_path / "rgb.tif")
    assert image.shape == data.shape and isinstance(info, FileInfo)
    assert (info.format, info.axes, info.channel_axis, info.rgb) == ("tiff", "YXS", 2, True)
    assert channel_axis_of(tmp_path / "rgb.tif") == 2
    np.save(tmp_path / "in.npy", data)
    assert read_image(tmp_path / "in.npy").info == FileInfo(format="npy")
    assert channel_axis_of(tmp_path / "missing.tif") is None


def test_select_keeps_the_chosen_axes():
    info = FileInfo(
        format="ome-zarr", axes="CZYX", scale=(1.0, 2.0, 0.5, 0.25), units=(None, "um", "um", "um"),
        channel_axis=0, channel_names=("a", "b"), provenance={"x": 1},
        extra={"zarr_format": 2, "ngff_version": "0.4", "omero": {}},
    )  # fmt: skip
    picked = info.select([3, 2])
    assert (picked.axes, picked.scale, picked.units) == ("XY", (0.25, 0.5), ("um", "um"))
    assert picked.channel_axis is None and picked.channel_names is None
    assert picked.provenance is None and picked.extra == {"zarr_format": 2, "ngff_version": "0.4"}
    assert info.select([0, -1]).channel_axis == 0


def test_provenance_record_is_json():
    import napari_varblur

    parameters = {"sigma": (1.0, 2.0), "cval": float("nan"), "map": Path("m.tif"), "f": print}
    record = provenance_record("varblur blur", parameters, source=Path("m.tif"),
                               previous={"version": "0"})  # fmt: skip
    assert json.loads(json.dumps(record, allow_nan=False)) == record
    assert record["version"] == napari_varblur.__version__
    assert record["parameters"] == {"sigma": [1.0, 2.0], "cval": "nan", "map": "m.tif"}
    assert record["input"] == "m.tif" and record["previous"] == {"version": "0"}


@pytest.mark.parametrize(
    ("name", "source", "kind"),
    [
        ("o.tif", "", "tiff"), ("o.tif", "imagej", "imagej"), ("o.tiff", "ome-tiff", "ome-tiff"),
        ("o.ome.tif", "imagej", "ome-tiff"), ("o.zarr", "zarr", "zarr"),
        ("o.zarr", "ome-zarr", "ome-zarr"), ("o.ome.zarr", "npy", "ome-zarr"),
        ("o.npy", "ome-zarr", "npy"), ("x.ome.zarr/0", "", "zarr"),
    ],
)  # fmt: skip
def test_output_format_by_name_and_input(name, source, kind):
    assert output_format(Path(name), FileInfo(format=source)) == kind
