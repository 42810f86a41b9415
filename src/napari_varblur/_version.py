"""The installed version, in a module of its own so any part of the package can read it
without importing the package root (no import circle through ``__init__``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("napari-varblur")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
