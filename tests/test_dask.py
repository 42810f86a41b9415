"""Dask arrays: lazy, exact across chunks for every mode, and on a real LocalCluster."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ALL_MODES, FAST_BACKENDS, assert_close

da = pytest.importorskip("dask.array")

from napari_varblur import gaussian_blur  # noqa: E402
from napari_varblur.backends import jax_xla  # noqa: E402


@pytest.mark.parametrize("mode", ALL_MODES)
@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_global_sigma_matches_in_memory_for_odd_chunks(rng, mode, backend):
    image = rng.random((3, 37, 29)) * 10
    # Chunks thinner than the radius, uneven, and a chunked batch axis.
    lazy = da.from_array(image, chunks=((1, 2), (5, 3, 20, 9), (7, 22)))
    out = gaussian_blur(
        lazy, (2.5, 1.5), axes=(1, 2), mode=mode, cval=4.0, backend=backend, precision="float64"
    )
    assert isinstance(out, da.Array) and out.dtype == np.float64
    expected = gaussian_blur(
        image,
        (2.5, 1.5),
        axes=(1, 2),
        mode=mode,
        cval=4.0,
        backend="reference",
        precision="float64",
    )
    assert_close(out.compute(), expected, "float64", image)


@pytest.mark.parametrize("backend", FAST_BACKENDS)
def test_sigma_map_numpy_or_dask_and_per_axis_modes(rng, backend):
    image = rng.random((41, 33)) * 100
    sigma_map = rng.uniform(0, 3, image.shape)
    lazy = da.from_array(image, chunks=(10, 8))
    expected = gaussian_blur(
        image, sigma_map, mode=("crop", "wrap"), backend="reference", precision="float64"
    )
    for sigma in (sigma_map, da.from_array(sigma_map, chunks=(13, 11))):
        out = gaussian_blur(
            lazy, sigma, mode=("crop", "wrap"), backend=backend, precision="float32"
        )
        assert_close(out.compute(), expected, "float32", image)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_per_axis_map_3d(rng, mode):
    image = rng.random((9, 12, 14))
    sigma_map = np.stack(
        [
            rng.uniform(0, 1, image.shape),
            rng.uniform(0.5, 2, image.shape),
            np.full(image.shape, 1.1),
        ],
        axis=-1,
    )
    lazy = da.from_array(image, chunks=(4, 5, 6))
    out = gaussian_blur(lazy, sigma_map, mode=mode, backend="numba", precision="float64")
    expected = gaussian_blur(image, sigma_map, mode=mode, backend="reference", precision="float64")
    assert_close(out.compute(), expected, "float64", image)


def test_radius_longer_than_the_axis_becomes_one_chunk(rng):
    image = rng.random((6, 50))
    lazy = da.from_array(image, chunks=(2, 10))
    for mode in ("reflect", "wrap", "crop"):
        out = gaussian_blur(lazy, 30.0, mode=mode, backend="numba", precision="float64")
        expected = gaussian_blur(image, 30.0, mode=mode, backend="reference", precision="float64")
        assert_close(out.compute(), expected, "float64", image)


def test_lazy_until_computed_and_bad_map_errors_early(rng):
    calls = []

    def record(block):
        if block.size > 1:  # dask probes functions with tiny arrays to infer metadata
            calls.append(block.shape)
        return block

    image = da.from_array(rng.random((40, 40)), chunks=20).map_blocks(record)
    out = gaussian_blur(image, 1.0, backend="numba")
    assert calls == [] and out.shape == (40, 40)
    out.compute()
    assert len(calls) == 4
    bad = np.ones((40, 40))
    bad[3, 7] = -1
    with pytest.raises(
        ValueError,
        match=r"sigma: the sigma map is negative in 1 value \(first "
        r"at index \(3, 7\)\)",
    ):
        gaussian_blur(image, da.from_array(bad, chunks=10))


def test_jax_compiles_once_per_chunk_shape(rng):
    image = rng.random((64, 64)).astype(np.float32)
    sigma_map = rng.uniform(0.5, 2.5, image.shape).astype(np.float32)
    sigma_map[:16, :16] = 0.5  # this chunk alone has a small radius; it must not matter
    lazy = da.from_array(image, chunks=32)
    jax_xla._varying_jit.clear_cache()
    out = gaussian_blur(lazy, sigma_map, backend="jax").compute(scheduler="sync")
    # 4 chunks with halos: corner, edge and interior blocks differ in shape, not in pad.
    shapes = {(32 + a, 32 + b) for a in (0, 8) for b in (0, 8)}
    assert jax_xla._varying_jit._cache_size() <= len(shapes)
    expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
    assert_close(out, expected, "float32", image)


@settings(max_examples=15, deadline=None)
@given(
    shape=st.lists(st.integers(1, 23), min_size=1, max_size=3).map(tuple),
    chunk=st.integers(1, 9),
    sigma=st.floats(0, 4),
    mode=st.sampled_from(ALL_MODES),
    as_map=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_property_any_chunking_is_exact(shape, chunk, sigma, mode, as_map, seed):
    gen = np.random.default_rng(seed)
    image = gen.normal(size=shape)
    sig = gen.uniform(0, sigma, shape) if as_map else sigma
    lazy = da.from_array(image, chunks=chunk)
    out = gaussian_blur(lazy, sig, mode=mode, cval=1.0, backend="numba", precision="float64")
    expected = gaussian_blur(
        image, sig, mode=mode, cval=1.0, backend="reference", precision="float64"
    )
    assert_close(out.compute(), expected, "float64", image)


def test_distributed_local_cluster(rng):
    distributed = pytest.importorskip("distributed")
    image = rng.random((96, 80)).astype(np.float32)
    sigma_map = rng.uniform(0.5, 3, image.shape).astype(np.float32)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        lazy = da.from_array(image, chunks=(32, 40))
        out = client.compute(gaussian_blur(lazy, sigma_map, backend="numba")).result()
        mask = da.from_array(rng.random(image.shape) > 0.2, chunks=(48, 20))
        masked = gaussian_blur(lazy, sigma_map, mask=mask, backend="numba")
        masked = client.compute(masked).result()
        workers = client.run(lambda: __import__("os").getpid())
    assert len(set(workers.values())) == 2
    expected = gaussian_blur(image, sigma_map, backend="reference", precision="float64")
    assert_close(out, expected, "float32", image)
    expected = gaussian_blur(image, sigma_map, mask=mask.compute(), backend="reference")
    assert_close(masked, expected, "float32", image)
