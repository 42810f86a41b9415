"""Seed-naive baselines: the user's original style of spatially varying Gaussian blur.

These are deliberately straightforward ports, kept as the "before" in the benchmark:

- :func:`naive_numba_2d` / :func:`naive_numba_3d`: ``@numba.njit(parallel=True)`` with a
  ``prange`` over rows; every pixel computes its radius ``r = ceil(3 * sigma)`` (in
  float64), walks its cropped ``(2r + 1)^d`` window, evaluates ``exp`` for *every* tap and
  divides the weighted sum by the weight sum (crop mode: renormalised over in-bounds taps).
- :func:`naive_jax_2d`: ``jax.jit`` + ``jax.vmap`` over all pixels (in chunks of
  :data:`CHUNK` via ``lax.map(..., batch_size=...)`` to bound memory); each pixel takes a
  static ``(2R + 1)^2`` window (``R`` the largest radius) from a zero-padded image with
  ``jax.lax.dynamic_slice`` and masks taps beyond its own radius or outside the image.

All three compute napari_varblur's ``mode="crop"`` with ``truncate=3``; the benchmark
reports their difference to the float64 reference to show it.
"""

from __future__ import annotations

from functools import partial

import numba
import numpy as np

#: Pixels per vmapped chunk in :func:`naive_jax_2d` (bounds memory to ~100 MB).
CHUNK = 1 << 15


@numba.njit(parallel=True)
def _naive_2d_kernel(image, sigma, out):  # pragma: no cover - jitted
    h, w = image.shape
    for y in numba.prange(h):
        for x in range(w):
            s = np.float64(sigma[y, x])
            if s <= 0.0:  # sigma 0 leaves the pixel untouched
                out[y, x] = image[y, x]
                continue
            r = int(np.ceil(3.0 * s))
            acc = 0.0
            norm = 0.0
            for yy in range(max(y - r, 0), min(y + r, h - 1) + 1):
                dy = yy - y
                for xx in range(max(x - r, 0), min(x + r, w - 1) + 1):
                    dx = xx - x
                    wgt = np.exp(-(dy * dy + dx * dx) / (2.0 * s * s))  # one exp per tap
                    acc += wgt * image[yy, xx]
                    norm += wgt
            out[y, x] = acc / norm


@numba.njit(parallel=True)
def _naive_3d_kernel(image, sigma, out):  # pragma: no cover - jitted
    nz, h, w = image.shape
    for z in numba.prange(nz):
        for y in range(h):
            for x in range(w):
                s = np.float64(sigma[z, y, x])
                if s <= 0.0:
                    out[z, y, x] = image[z, y, x]
                    continue
                r = int(np.ceil(3.0 * s))
                acc = 0.0
                norm = 0.0
                for zz in range(max(z - r, 0), min(z + r, nz - 1) + 1):
                    dz = zz - z
                    for yy in range(max(y - r, 0), min(y + r, h - 1) + 1):
                        dy = yy - y
                        for xx in range(max(x - r, 0), min(x + r, w - 1) + 1):
                            dx = xx - x
                            wgt = np.exp(-(dz * dz + dy * dy + dx * dx) / (2.0 * s * s))
                            acc += wgt * image[zz, yy, xx]
                            norm += wgt
                out[z, y, x] = acc / norm


def naive_numba_2d(image: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Seed-naive Numba blur of a 2-D image with a per-pixel sigma map (crop mode).

    Parameters
    ----------
    image
        2-D float array; the result has its dtype.
    sigma
        Sigma map, same shape as ``image``; each value >= 0.

    Returns
    -------
    numpy.ndarray
        The blurred image. Sums are accumulated in float64, as plain Python floats do.
    """
    image = np.ascontiguousarray(image)
    out = np.empty_like(image)
    _naive_2d_kernel(image, np.ascontiguousarray(sigma), out)
    return out


def naive_numba_3d(image: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Seed-naive Numba blur of a 3-D volume with a per-voxel sigma map (crop mode).

    Parameters
    ----------
    image
        3-D float array; the result has its dtype.
    sigma
        Sigma map, same shape as ``image``; each value >= 0.

    Returns
    -------
    numpy.ndarray
        The blurred volume (float64 accumulation, ``prange`` over the first axis).
    """
    image = np.ascontiguousarray(image)
    out = np.empty_like(image)
    _naive_3d_kernel(image, np.ascontiguousarray(sigma), out)
    return out


def _naive_jax_fn():
    """Build (once) the jitted seed-naive JAX function; JAX is imported lazily."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    @partial(jax.jit, static_argnames=("big_r",))
    def blur(image, sigma, radius, big_r):
        h, w = image.shape
        padded = jnp.pad(image, big_r)  # zeros outside; the mask drops them anyway
        d = jnp.arange(-big_r, big_r + 1)
        dy, dx = d[:, None], d[None, :]
        d2 = (dy * dy + dx * dx).astype(image.dtype)

        def one_pixel(y, x):
            window = lax.dynamic_slice(padded, (y, x), (2 * big_r + 1, 2 * big_r + 1))
            s = sigma[y, x]
            r = radius[y, x]
            s_safe = jnp.where(s > 0, s, 1)
            weight = jnp.exp(-d2 / (2 * s_safe * s_safe))
            inside = (jnp.abs(dy) <= r) & (jnp.abs(dx) <= r)
            inside &= (y + dy >= 0) & (y + dy < h) & (x + dx >= 0) & (x + dx < w)
            weight = jnp.where(inside, weight, 0)
            return jnp.sum(weight * window) / jnp.sum(weight)

        # vmap over pixels, in chunks: a plain vmap over all pixels materialises every
        # window at once (~3.6 kB per pixel, 15 GB for 2048^2), so lax.map vmaps
        # CHUNK pixels at a time.
        ys, xs = jnp.divmod(jnp.arange(h * w), w)
        out = lax.map(lambda yx: one_pixel(*yx), (ys, xs), batch_size=min(CHUNK, h * w))
        return out.reshape(h, w)

    return blur


_JAX_FN = None


def naive_jax_2d(image: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Seed-naive JAX blur of a 2-D image with a per-pixel sigma map (crop mode).

    Parameters
    ----------
    image
        2-D float32 or float64 array. float64 runs under ``jax.enable_x64(True)``.
    sigma
        Sigma map, same shape as ``image``; each value >= 0.

    Returns
    -------
    numpy.ndarray
        The blurred image, dtype of ``image``.

    Notes
    -----
    The per-pixel radius ``ceil(3 * sigma)`` is computed in float64 on the host (as the
    contract asks); the static window size ``2R + 1`` uses its maximum ``R``, so a new
    ``R`` recompiles.
    """
    import jax
    import jax.numpy as jnp

    global _JAX_FN
    if _JAX_FN is None:
        _JAX_FN = _naive_jax_fn()
    radius = np.ceil(3.0 * np.asarray(sigma, dtype=np.float64))
    big_r = int(radius.max())
    with jax.enable_x64(image.dtype == np.float64):
        out = _JAX_FN(
            jnp.asarray(image),
            jnp.asarray(sigma, dtype=image.dtype),
            jnp.asarray(radius, dtype=jnp.int32),
            big_r=big_r,
        )
        return np.asarray(out)
