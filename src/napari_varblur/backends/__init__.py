"""Backends: each turns a valid :class:`~napari_varblur.core.spec.BlurSpec` into an array.

A backend module exposes ``blur(spec) -> numpy.ndarray`` (dtype ``spec.precision``),
``describe() -> str`` (version and device), ``device_name() -> str`` and
``compiles() -> int`` (kernels compiled so far in this process).  Modules are
imported on first use, so a missing optional package only matters when its backend is
asked for.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: backend name -> (module, the package it needs, the pip requirement that installs it)
_MODULES = {
    "reference": ("napari_varblur.backends.reference", "numpy", "numpy"),
    "numba": ("napari_varblur.backends.numba_cpu", "numba", "numba"),
    "jax": ("napari_varblur.backends.jax_xla", "jax", "jax"),
}


class BackendUnavailableError(ImportError):
    """A requested backend's package is not installed."""


def load(name: str) -> ModuleType:
    """Import a backend module, with an install hint when its package is missing."""
    module, package, requirement = _MODULES[name]
    try:
        importlib.import_module(package)
    except ImportError as err:
        raise BackendUnavailableError(
            f"backend: {name!r} needs the {package!r} package, which is not installed; "
            f"install it with: pip install {requirement}"
        ) from err
    return importlib.import_module(module)


def blur(spec, pad_floor: tuple[int, ...] | None = None):
    """Blur a valid NumPy spec with its backend.

    A sigma map goes to :mod:`napari_varblur.engine.walk` (global passes per sigma level)
    when its map is quantised, or a ``tolerance`` allows mixing levels, and that is
    less work than the exact per-pixel gather.  The ``reference`` backend always
    gathers: it is the oracle.  A masked spec is two such blurs with one plan
    (:mod:`napari_varblur.engine.masked`), so their ratio is a normalised convolution.
    """
    name = resolve(spec.backend)
    module = load(name)
    plan = None
    if spec.sigma_map is not None and name != "reference":
        from ..engine import walk as stacked

        plan = stacked.choose(spec)

    def run(plain):
        if plan is not None:
            return stacked.blur(plain, plan, module)
        return module.blur(plain, pad_floor)

    if spec.masked:
        from ..engine import masked

        # A level plan belongs to the full shape; the gather takes any batch shape.
        fused = getattr(module, "masked", None) if plan is None else None
        return masked.blur(spec, run, share_batch=plan is None, fused=fused)
    return run(spec)


def compiles(name: str) -> int:
    """Kernels the backend compiled so far in this process (0 for ``reference``): a
    caller compares counts around a call to say that it compiled (first run only)."""
    module = load(resolve(name))
    return module.compiles() if hasattr(module, "compiles") else 0


def resolve(name: str) -> str:
    """Turn ``"auto"`` into a concrete backend: JAX when it sees a GPU, else Numba."""
    if name != "auto":
        return name
    try:
        if load("jax").has_gpu():
            return "jax"
    except BackendUnavailableError:
        pass
    try:
        load("numba")
        return "numba"
    except BackendUnavailableError:
        return "reference"


def available_backends() -> dict[str, str]:
    """Map each backend name to a short status: its version and device, or why not."""
    status = {}
    for name in _MODULES:
        try:
            status[name] = load(name).describe()
        except BackendUnavailableError as err:
            status[name] = f"unavailable: {err}"
    status["auto"] = f"-> {resolve('auto')}"
    return status
