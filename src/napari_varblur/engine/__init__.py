"""The engine: the planner decides how a blur runs (:mod:`.planner`), the router runs it
(:mod:`.router`), the JAX-native API runs it on JAX data (:mod:`.native`).

The layers above (adapters, fit, gui, app) ask the backends what they are through these
functions, never a backend's own modules.
"""

from __future__ import annotations

from ..backends import BackendUnavailableError, available_backends, compiles, load, resolve

__all__ = ["BackendUnavailableError", "available_backends", "compiles", "device_name", "resolve"]


def device_name(name: str) -> str:
    """The device backend ``name`` (``"auto"`` resolved) runs on: ``"cpu (2 threads)"``,
    ``"gpu:NVIDIA H200"``."""
    return load(resolve(name)).device_name()
