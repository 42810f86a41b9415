"""``sigma_map_from_beads``'s parameters, declared once (library, command line and
napari take them from here), and :class:`BeadOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .checks import ArgumentError
from .options import options_class
from .params import FIT_PARAMS, PARAMS, Defaults, Param, docfiller

#: The napari form's degree choices: "auto" lets the data choose (``None``).
DEGREES: Mapping[str, int | None] = MappingProxyType(
    {"auto": None, **{str(d): d for d in range(5)}}
)


def _saturation_text(text: str) -> float | None:
    """The napari field's saturation: empty for the default (``None``), else a number."""
    text = str(text).strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ArgumentError(
            f"saturation: could not read {text!r} as a number (leave it empty for the "
            "integer dtype's maximum)"
        ) from None


_BEADS = (
    Param(
        "spacing",
        "The voxel size along each fitted axis (one number, or one per axis, e.g.\n"
        "``(0.3, 0.1, 0.1)`` µm for z, y, x): the FWHM columns and the summary are in\n"
        "this unit.  Sigmas stay in pixels along each axis (what the blur takes).\n"
        "``None``: 1 (FWHM in pixels).\n",
        "voxel size per fitted axis (e.g. 0.3 0.1 0.1): FWHM in this unit; sigma stays in pixels",
        default=None,
        cli={"type": float, "nargs": "+", "metavar": "D"},
    ),
    Param(
        "threshold",
        "Detection threshold, in standard deviations of the noise of the image smoothed\n"
        "at the beads' size (> 0): a local maximum above it is a candidate bead.\n",
        "detection threshold in noise standard deviations (> 0; lower finds fainter beads "
        "and more noise)",
        default=5.0,
        cli={"type": float},
        widget={
            "kind": "float",
            "label": "threshold (SD)",
            "value": 5.0,
            "min": 0.5,
            "max": 1000.0,
            "step": 0.5,
        },
    ),
    Param(
        "min_separation",
        "Two candidates closer than this many sigmas (each axis in its own sigma) are\n"
        "both left out as ``\"doublet\"``: each one's tails bias the other's width.\n",
        "candidates closer than this many sigmas to another are left out (doublet)",
        default=4.0,
        cli={"type": float},
        widget={
            "kind": "float",
            "label": "min separation (sigmas)",
            "value": 4.0,
            "min": 0.0,
            "max": 100.0,
            "step": 0.5,
            "advanced": True,
        },
    ),
    Param(
        "saturation",
        "A bead with a pixel at or above this value within two sigmas of its centre is\n"
        'left out as ``"saturated"``.  ``None``: the integer dtype\'s maximum (no\n'
        "limit for a float image).\n",
        "pixel value at which the camera saturates (default: the integer dtype's maximum)",
        default=None,
        cli={"type": float},
        widget={
            "kind": "text",
            "label": "saturation",
            "value": "",
            "parse": _saturation_text,
            "advanced": True,
        },
    ),
    Param(
        "degree",
        "The polynomial degree of the field model over the kept beads' sigmas (>= 0).\n"
        "``None``: chosen by the data (Akaike's criterion, corrected for small samples),\n"
        "up to 4 in 2-D and 3 in 3-D, and never more terms than the beads support.\n",
        "polynomial degree of the field model (default: chosen by the data)",
        default=None,
        cli={"type": int},
        widget={
            "kind": "choice",
            "label": "field degree",
            "choices": tuple(DEGREES),
            "value": "auto",
            "parse": DEGREES.get,
            "advanced": True,
        },
    ),
)

#: ``sigma_map_from_beads``'s parameters: its own and the variants of the blur's and
#: the fit's it shares.
_SHARED = (
    PARAMS["axes"].but(
        doc="The image's spatial axes, 2 or 3 of them (negative allowed); default all.\n"
        "One other axis may remain: a stack of bead images of the same optics (fields\n"
        "of view, repeats), whose beads are pooled into one map.\n",
        help="the image's spatial axes (2 or 3); one other axis is a stack of bead images, pooled",
    ),
    PARAMS["truncate"].but(
        doc="A bead whose window of radius ``ceil(truncate * sigma)`` (the blur's radius)\n"
        'is cut by the image\'s border is left out as ``"edge"``.\n',
    ),
    FIT_PARAMS["per_axis"].but(
        doc="One sigma per spatial axis (the map gets a trailing axis, the layout\n"
        "``gaussian_blur`` takes), or one sigma, in pixels, for all axes (an isotropic\n"
        "map; right for 2-D images with round beads only).\n",
        default=True,
        cli=None,  # the command line says --isotropic (varblur beads)
        widget={"kind": "check", "text": "one sigma per axis", "value": True},
    ),
)
BEAD_PARAMS: Mapping[str, Param] = MappingProxyType({p.name: p for p in (*_SHARED, *_BEADS)})

#: The settings of a bead measurement (:class:`BeadOptions`).
BEAD_OPTIONS = ("axes", "truncate", "per_axis", "spacing", "threshold", "min_separation",
                "saturation", "degree")  # fmt: skip

BEAD_DEFAULT = Defaults(BEAD_PARAMS)
fill_bead_doc = docfiller(BEAD_PARAMS)

BeadOptions = options_class(
    "BeadOptions",
    BEAD_PARAMS,
    BEAD_OPTIONS,
    "``sigma_map_from_beads``'s settings as given (not yet checked), with their declared defaults.",
)
