"""Who the side-by-side benchmark times (used by ``bench.py``).

The :class:`Impl` type and the implementations of a case: scipy, OpenCV
(:func:`cv2_impl`), the seed-naive baselines (``seed_naive.py``, which must be
importable, as ``bench.py`` arranges), napari_varblur's ``numba`` and ``jax`` backends,
and in GPU mode the device-resident JAX call (:func:`jax_device_impl`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from cases import Case


@dataclass
class Impl:
    """One implementation of a case.

    ``prepare`` (untimed) turns the NumPy image and sigma into the arguments of ``run``
    (timed); ``finish`` (untimed) turns ``run``'s result into a NumPy array. All three
    run inside ``context()`` (e.g. ``jax.enable_x64``).
    """

    name: str
    run: Callable[..., Any] | None
    prepare: Callable[..., tuple] = lambda image, sigma: (image, sigma)
    finish: Callable[[Any], np.ndarray] = np.asarray
    context: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext
    slow: bool = False  # a seed-naive baseline: subject to --budget
    passes: int = 1  # full read + write sweeps over the image (for GB/s)
    skip: str = ""  # why it does not run, when it does not
    note: str = ""

    def call(self, image, sigma) -> np.ndarray:
        """One untimed end-to-end call (for the sub-problem difference)."""
        with self.context():
            return self.finish(self.run(*self.prepare(image, sigma)))


def cv2_impl(case: Case) -> Impl:
    """``cv2.GaussianBlur`` with ``k = 2 ceil(3 sigma) + 1`` and the matching border."""
    try:
        import cv2
    except ImportError:
        return Impl("cv2", None, skip="not installed")
    border = {"reflect": cv2.BORDER_REFLECT, "mirror": cv2.BORDER_REFLECT_101}[case.mode]
    sigma = case.sigma_range[0]
    k = 2 * math.ceil(3 * sigma) + 1
    return Impl("cv2", lambda im, s: cv2.GaussianBlur(im, (k, k), s, borderType=border))


def jax_x64(precision: str) -> Callable[[], contextlib.AbstractContextManager]:
    """A context factory: JAX's x64 mode on for float64, off for float32."""

    def context():
        import jax  # imported on use: scipy/cv2-only runs need no JAX

        return jax.enable_x64(precision == "float64")

    return context


def jax_device_impl(case: Case, precision: str) -> Impl:
    """``napari_varblur.jax.gaussian_blur`` under ``jax.jit`` on device-resident arrays.

    Timed with ``block_until_ready``: compute only, no host<->device transfer and no host
    planning. A sigma map is passed as a traced array with a static ``max_radius``.
    """
    import jax

    from napari_varblur.jax import gaussian_blur as blur

    mode = case.mode
    if case.is_map:
        max_radius = math.ceil(3 * case.sigma_range[1])
        fn = jax.jit(lambda x, s: blur(x, s, mode=mode, max_radius=max_radius))
    else:
        sigma = case.sigma_range[0]
        fn = jax.jit(lambda x, s: blur(x, sigma, mode=mode))

    def prepare(image, sigma):
        s = jax.device_put(sigma) if case.is_map else None
        return jax.device_put(image), s

    return Impl(
        "jax-device",
        lambda x, s: fn(x, s).block_until_ready(),
        prepare=prepare,
        context=jax_x64(precision),
        passes=len(case.shape) if not case.is_map else 1,
        note="jit, device-resident, block_until_ready",
    )


def make_impls(case: Case, precision: str, args: argparse.Namespace) -> list[Impl]:
    """The implementations of ``case`` in ``precision``, peers first.

    Parameters
    ----------
    case, precision
        The problem and its precision.
    args
        Command-line options (``gpu``: JAX only; ``quick``: skip the seed-naive JAX
        above 512x512).

    Returns
    -------
    list of Impl
        scipy and cv2 (global 2-D), scipy (global 3-D) or the seed-naive baselines (maps),
        then the ``numba`` and ``jax`` backends; in GPU mode ``jax`` and ``jax-device``.
    """
    from napari_varblur import gaussian_blur

    def ours(backend: str) -> Impl:
        def run(image, sigma):
            return gaussian_blur(image, sigma, mode=case.mode, backend=backend, precision=precision)

        passes = 1 if case.is_map else len(case.shape)
        return Impl(backend, run, passes=passes)

    if args.gpu:
        numpy_io = ours("jax")
        numpy_io.note = "numpy in/out (includes transfers and host planning)"
        return [numpy_io, jax_device_impl(case, precision)]

    impls = []
    if not case.is_map:
        from scipy import ndimage

        sigma = case.sigma_range[0]
        radius = math.ceil(3 * sigma)
        impls.append(
            Impl(
                "scipy",
                lambda im, s: ndimage.gaussian_filter(im, s, mode=case.mode, radius=radius),
            )
        )
        if len(case.shape) == 2:
            impls.append(cv2_impl(case))
    else:
        from seed_naive import naive_jax_2d, naive_numba_2d, naive_numba_3d

        if len(case.shape) == 2:
            impls.append(Impl("naive-numba", naive_numba_2d, slow=True))
            naive_jax = Impl("naive-jax", naive_jax_2d, slow=True, note="vmap in chunks (lax.map)")
            if args.quick and case.pixels > 512 * 512:
                naive_jax.skip = "skipped in --quick (bigger than 512x512)"
            impls.append(naive_jax)
        else:
            impls.append(Impl("naive-numba", naive_numba_3d, slow=True, note="3-D"))
    impls += [ours("numba"), ours("jax")]
    return impls
