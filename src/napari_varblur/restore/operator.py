"""The blur as a SciPy ``LinearOperator``: ``matvec`` the blur, ``rmatvec`` its exact
transpose, so SciPy's solvers (``lsqr``, ``cg`` on the normal equations, ...) and
eigen-solvers work on a spatially varying blur."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..core.options import BlurOptions
from ..core.spec import BlurSpec
from ..engine import router
from ..engine.planner import route
from .problem import OTHER


def blur_operator(sigma, shape, **options):
    """The blur of an image of ``shape`` as a ``scipy.sparse.linalg.LinearOperator``.

    Parameters
    ----------
    sigma
        As for :func:`~napari_varblur.gaussian_blur` (a map must broadcast to ``shape``).
    shape
        The image's shape; the operator acts on flattened vectors of its size.
    **options
        :func:`~napari_varblur.gaussian_blur`'s keywords (``mode``, ``truncate``,
        ``model``, ``mask``, ``precision`` (default float64 here), ...).  ``cval`` is
        left out: the operator is the blur's linear part (constant mode's fill is 0).

    Returns
    -------
    scipy.sparse.linalg.LinearOperator
        ``matvec``: ``gaussian_blur(x, sigma, model=model, ...)``; ``rmatvec``: the other
        model, its exact transpose (the dot-product test holds to rounding).

    Examples
    --------
    >>> import numpy as np
    >>> from napari_varblur import blur_operator
    >>> A = blur_operator(np.linspace(0.5, 2, 16).reshape(4, 4), (4, 4))
    >>> x, y = np.random.default_rng(0).random((2, 16))
    >>> bool(abs(A.matvec(x) @ y - x @ A.rmatvec(y)) < 1e-12)
    True
    """
    from scipy.sparse.linalg import LinearOperator

    if "cval" in options:
        raise TypeError("blur_operator: cval is not used (the operator is the linear part)")
    mask = options.pop("mask", None)
    options.setdefault("precision", "float64")
    shape = tuple(int(n) for n in shape)
    spec = BlurSpec.build(np.zeros(shape), sigma, BlurOptions(**options), mask)
    if spec.lazy:
        raise TypeError("blur_operator: sigma and mask must be NumPy arrays, not dask")
    chosen = route(spec, paired=True)
    ahead, back = spec, replace(spec, model=OTHER[spec.model])

    def apply(one: BlurSpec, v: np.ndarray) -> np.ndarray:
        image = np.asarray(v, spec.precision).reshape(shape)
        return router.blur(replace(one, image=image), chosen=chosen).ravel()

    size = int(np.prod(shape))
    return LinearOperator((size, size), matvec=lambda v: apply(ahead, v),
                          rmatvec=lambda v: apply(back, v), dtype=spec.precision)  # fmt: skip
