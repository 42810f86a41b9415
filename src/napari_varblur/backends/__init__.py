"""The backend registry: each backend is a :class:`~.base.Backend` record.

Modules are imported on first use, so a missing optional package only matters when its
backend is asked for.  Which backend runs a call, and how, is the router's decision
(:mod:`napari_varblur.engine.router`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import sys

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
    if "jax" in sys.modules or _gpu_plugin_installed():
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


@functools.cache
def _gpu_plugin_installed() -> bool:
    """Whether JAX could see a GPU here, asked without importing JAX (about a second on
    two cores, for every first ``auto`` call): JAX finds GPUs through PJRT plugins
    (``jax-cuda12-plugin`` and the like), installed in the ``jax_plugins`` namespace or
    as its entry points; a jaxlib before 0.5 may have CUDA built in, so it is asked."""
    if importlib.util.find_spec("jax_plugins") is not None:
        return True
    if importlib.metadata.entry_points(group="jax_plugins"):
        return True
    try:
        major, minor = importlib.metadata.version("jaxlib").split(".")[:2]
        return (int(major), int(minor)) < (0, 5)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False


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
