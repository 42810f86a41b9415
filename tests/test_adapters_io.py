"""``napari_varblur.adapters.io`` in process: what the batch command writes, and what it holds."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

tifffile = pytest.importorskip("tifffile")
da = pytest.importorskip("dask.array")

from napari_varblur.adapters.io import write_image  # noqa: E402


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
