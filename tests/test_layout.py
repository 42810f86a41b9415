"""Tiled copies between an image's layout and a working layout
(backends/numba/layout.py): every order of three axes, casts, broadcast maps, and the
views that NumPy would copy instead, checked against NumPy's own copy."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from napari_varblur.backends.numba.layout import contiguous, copy_into

SHAPE = (16, 48, 80)  # above the size below which NumPy copies


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint16])
def test_contiguous_is_numpys_copy_in_every_order(rng, order, dtype):
    base = (rng.random(SHAPE) * 60000).astype(dtype)
    kept = base.copy()
    view = base.transpose(order)
    out = contiguous(view, np.float32)
    assert out.flags.c_contiguous and out.flags.writeable and out.dtype == np.float32
    # A C-contiguous float32 input is the kernel's array as it is (read, never written).
    assert np.may_share_memory(out, base) == (order == (0, 1, 2) and dtype == np.float32)
    np.testing.assert_array_equal(out, np.ascontiguousarray(view, np.float32))
    np.testing.assert_array_equal(base, kept)


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_copy_into_a_transposed_view_fills_it_in_order(rng, order):
    src = rng.random(SHAPE).transpose(order).copy()
    dst = np.full(SHAPE, np.nan)
    copy_into(dst.transpose(order), src)
    np.testing.assert_array_equal(dst, np.ascontiguousarray(src.transpose(np.argsort(order))))


def test_broadcast_maps_small_arrays_and_many_axes(rng):
    column = rng.random((300, 1))
    view = np.broadcast_to(column, (300, 400)).T  # a stride of 0 along one axis
    np.testing.assert_array_equal(contiguous(view, np.float64), np.ascontiguousarray(view))
    small = rng.random((7, 9)).T
    np.testing.assert_array_equal(contiguous(small, np.float64), small)
    five = rng.random((2, 3, 16, 24, 40))
    out = np.empty(five.shape)
    copy_into(out.transpose(0, 1, 4, 3, 2), five.transpose(0, 1, 4, 3, 2).copy())
    np.testing.assert_array_equal(out, five)
    np.testing.assert_array_equal(contiguous(five.transpose(4, 3, 2, 1, 0), np.float64),
                                  np.ascontiguousarray(five.transpose(4, 3, 2, 1, 0)))  # fmt: skip


@pytest.mark.parametrize("order", [(2, 1, 0), (1, 2, 0), (0, 2, 1)])
def test_a_sliced_source_is_copied_whole(rng, order):
    """A source whose memory has gaps (a slice of a larger array: step 1 along its
    fastest axis, gaps between its rows) is read through a copy of its own, not as a
    block from its first value."""
    big = rng.random(tuple(2 * n + 5 for n in SHAPE)).astype(np.float32)
    view = big[3 : 3 + 2 * SHAPE[0] : 2, 1 : 1 + SHAPE[1], 2 : 2 + SHAPE[2]]
    kept = big.copy()
    dst = np.empty(view.transpose(order).shape, np.float32)
    copy_into(dst, view.transpose(order))
    np.testing.assert_array_equal(dst, view.transpose(order))
    np.testing.assert_array_equal(big, kept)
