"""The frozen options objects that carry a call's settings from an adapter to the engine.

Their fields and defaults come from the declarations in :mod:`.params`, so a setting is
named, defaulted and described once: :class:`BlurOptions` for a blur (what
``gaussian_blur`` takes besides the image, the sigma and the mask), :class:`FitOptions`
for ``fit_sigma_map``.  An adapter builds one from what it took (keywords, a command
line, a form) and hands it on; the values are checked where they are normalised
(:func:`napari_varblur.core.spec.normalize_options`), so every adapter raises the same
errors.  A new capability makes its own with :func:`options_class`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from .params import (
    BLUR_OPTIONS,
    DEBLUR_OPTIONS,
    DEBLUR_PARAMS,
    FIT_OPTIONS,
    FIT_PARAMS,
    PARAMS,
    Param,
)


class Options:
    """What every options class offers (the fields come from :func:`options_class`)."""

    #: The declarations of the fields (set by :func:`options_class`).
    declared: Mapping[str, Param] = {}

    @classmethod
    def pick(cls, values: Mapping[str, Any]):
        """An options object from the entries of ``values`` that are its fields (a
        function's ``locals()``, a parsed command line): the others are ignored, and a
        field missing there takes its default."""
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{name: values[name] for name in names if name in values})

    def kwargs(self) -> dict[str, Any]:
        """The fields as keyword arguments (a shallow copy: arrays are not copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def replace(self, **changes: Any):
        return dataclasses.replace(self, **changes)

    def changed(self) -> dict[str, Any]:
        """The fields that differ from their declared defaults."""
        return {k: v for k, v in self.kwargs().items() if v != self.declared[k].default}

    def python(self, names: Sequence[str] | None = None) -> str:
        """The fields (``names``, default all) as Python keywords: ``mode='crop', ...``."""
        values = self.kwargs()
        return ", ".join(f"{k}={values[k]!r}" for k in (names or values))


def options_class(name: str, params: Mapping[str, Param], names: Sequence[str], doc: str):
    """A frozen dataclass with one field per declared parameter in ``names`` (its
    declared default), subclassing :class:`Options`."""
    fields = [(n, Any, dataclasses.field(default=params[n].default)) for n in names]
    namespace = {"__doc__": doc, "__module__": __name__}
    cls = dataclasses.make_dataclass(name, fields, bases=(Options,), frozen=True,
                                     namespace=namespace)  # fmt: skip
    cls.declared = {n: params[n] for n in names}
    return cls


BlurOptions = options_class(
    "BlurOptions",
    PARAMS,
    BLUR_OPTIONS,
    "A blur's settings as given (not yet checked): mode, cval, truncate, radius, axes, "
    "backend, precision, tolerance, nan_policy and channel_axis, with "
    ":data:`~napari_varblur.core.params.DEFAULT`'s defaults.",
)
FitOptions = options_class(
    "FitOptions",
    FIT_PARAMS,
    FIT_OPTIONS,
    "``fit_sigma_map``'s settings as given (not yet checked), with its declared defaults.",
)
DeblurOptions = options_class(
    "DeblurOptions",
    DEBLUR_PARAMS,
    DEBLUR_OPTIONS,
    "``deblur``'s settings as given (not yet checked): the blur's and its own, with "
    "their declared defaults.",
)
