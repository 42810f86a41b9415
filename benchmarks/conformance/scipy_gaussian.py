"""scipy's own Gaussian tests, answered by napari-varblur.

Runs ``scipy/ndimage/tests/test_filters.py -k gaussian`` with
``scipy.ndimage.gaussian_filter`` replaced by :func:`napari_varblur.gaussian_blur` on one
backend (calls with ``order != 0`` or an ``output`` array go to scipy: not ours), and
prints pytest's summary.  The failures expected are conventions only: scipy raises
``RuntimeError`` for length mismatches and ``TypeError`` for float axes, and accepts
float16.

    python benchmarks/conformance/scipy_gaussian.py --backend numba
    PYTHONPATH=/tmp/base/src python benchmarks/conformance/scipy_gaussian.py --backend jax
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pytest


class Patch:
    """A pytest plugin that swaps ``scipy.ndimage.gaussian_filter`` for ours."""

    def __init__(self, backend: str) -> None:
        self.backend = backend

    def pytest_runtest_setup(self, item) -> None:
        """Patched per test: scipy's module keys tables by its functions when collected."""
        self._patch()

    def pytest_runtest_teardown(self, item) -> None:
        import scipy.ndimage
        from scipy.ndimage import _filters

        scipy.ndimage.gaussian_filter = _filters.gaussian_filter = self.original

    def _patch(self) -> None:
        import scipy.ndimage
        from scipy.ndimage import _filters

        from napari_varblur import gaussian_blur

        original = self.original = scipy.ndimage.gaussian_filter

        def ours(input, sigma, order=0, output=None, mode="reflect", cval=0.0, truncate=4.0,
                 *, radius=None, axes=None):  # fmt: skip
            if np.any(np.asarray(order) != 0) or output is not None:
                return original(input, sigma, order, output, mode, cval, truncate,
                                radius=radius, axes=axes)  # fmt: skip
            image = np.asarray(input)
            precision = "float64" if image.dtype in (np.float64, np.int64) else "float32"
            out = gaussian_blur(image, sigma, mode=mode, cval=cval, truncate=truncate,
                                radius=radius, axes=axes, backend=self.backend,
                                precision=precision)  # fmt: skip
            return out.astype(image.dtype) if image.dtype.kind == "f" else out

        scipy.ndimage.gaussian_filter = ours
        _filters.gaussian_filter = ours


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="numba", choices=["numba", "jax", "reference"])
    args = parser.parse_args()
    import scipy

    tests = Path(scipy.__file__).parent / "ndimage" / "tests" / "test_filters.py"
    import napari_varblur

    print(f"napari_varblur from {Path(napari_varblur.__file__).parent}, backend {args.backend}")
    return pytest.main([str(tests), "-k", "gaussian", "-q", "-p", "no:cacheprovider",
                        "-p", "no:xdist", "-o", "addopts=", "--tb=line"],
                       plugins=[Patch(args.backend)])  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
