"""The backend registry: each backend is a :class:`~.base.Backend` record.

Modules are imported on first use, so a missing optional package only matters when its
backend is asked for.  Which backend runs a call, and how, is the router's decision
(:mod:`napari_varblur.engine.router`).
"""

from __future__ import annotations

import importlib

from .base import Backend

#: backend name -> (module, the package it needs, the pip requirement that installs it)
_MODULES = {
    "reference": ("napari_varblur.backends.reference", "numpy", "numpy"),
    "numba": ("napari_varblur.backends.numba", "numba", "numba"),
    "jax": ("napari_varblur.backends.jax_xla", "jax", "jax"),
}

__all__ = ["Backend", "BackendUnavailableError", "available_backends", "load", "resolve"]


class BackendUnavailableError(ImportError):
    """A requested backend's package is not installed."""


def load(name: str) -> Backend:
    """The backend record of ``name``, with an install hint when its package is missing."""
    module, package, requirement = _MODULES[name]
    try:
        importlib.import_module(package)
    except ImportError as err:
        raise BackendUnavailableError(
            f"backend: {name!r} needs the {package!r} package, which is not installed; "
            f"install it with: pip install {requirement}"
        ) from err
    return importlib.import_module(module).BACKEND


def compiles(name: str) -> int:
    """Kernels the backend compiled so far in this process (0 for ``reference``): a
    caller compares counts around a call to say that it compiled (first run only)."""
    return load(resolve(name)).compiles()


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
