"""Each blur parameter described once.

``doc`` is the description in the library's docstrings (NumPy style; :func:`fill_doc`
puts it where a docstring says ``%(name)s``); ``help`` is one line for the command
line's ``--help`` and napari's tooltips.  The JAX-native API, ``varblur blur`` and the
widgets take their text from here, as scipy.ndimage's functions share ``docfiller``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass

from .modes import MODE_ALIASES, MODE_NAMES


@dataclass(frozen=True)
class Param:
    """One parameter's text: ``doc`` (paragraphs, unindented) and ``help`` (one line)."""

    doc: str
    help: str


PARAMS: dict[str, Param] = {
    "image": Param(
        doc=("Real-valued array (bool, integer or float), ``ndim >= 1``.  Never modified.\n"),
        help="the image to blur; it is left unchanged",
    ),
    "sigma": Param(
        doc=(
            "Standard deviation in pixels, each value >= 0: a number (every blurred axis),\n"
            "a sequence with one number per blurred axis, or a NumPy *sigma map*: an array\n"
            "with the image's ndim that broadcasts to ``image.shape`` (one isotropic sigma\n"
            "per pixel), or of shape ``image.shape + (len(axes),)`` (one per pixel and axis).\n"
        ),
        help="blur width in pixels: one value or one per blurred axis (multiplies the sigma map)",
    ),
    "mode": Param(
        doc=(
            '``"crop"`` (default): the window is cut at the border and the kernel\n'
            'renormalised over the in-bounds taps.  Or one of scipy.ndimage\'s ``"reflect"``,\n'
            '``"mirror"``, ``"nearest"``, ``"wrap"``, ``"constant"`` (and the aliases\n'
            '``"grid-mirror"``, ``"grid-wrap"``, ``"grid-constant"``); or one mode per\n'
            "blurred axis.\n"
        ),
        help="edge mode: crop (window cut at the border, kernel renormalised: no darkened "
        "border), or scipy's " + ", ".join(MODE_NAMES[1:] + tuple(MODE_ALIASES)),
    ),
    "cval": Param(
        doc=('Value outside the image in ``"constant"`` mode.\n'),
        help="the value assumed outside the image in constant mode (ignored otherwise)",
    ),
    "truncate": Param(
        doc=("The radius at a pixel is ``ceil(truncate * sigma)``, computed in float64.\n"),
        help="how far the blur reaches, in sigmas: radius = ceil(truncate * sigma)",
    ),
    "radius": Param(
        doc=(
            "Explicit radius (one int or one per blurred axis); overrides ``truncate``.\n"
            "Global sigma only.\n"
        ),
        help="explicit radius in pixels (one, or one per blurred axis); overrides truncate",
    ),
    "axes": Param(
        doc=("Axes to blur (negative allowed); default all.  The others are batch axes.\n"),
        help="the axes to blur; the others (time, channels) are not blurred",
    ),
    "backend": Param(
        doc=(
            '``"auto"`` (JAX when it sees a GPU, else Numba), ``"numba"``, ``"jax"`` or\n'
            '``"reference"`` (plain float64 NumPy).\n'
        ),
        help=(
            "the engine that computes the blur: auto (JAX on a GPU, else Numba), numba, jax "
            "or reference"
        ),
    ),
    "precision": Param(
        doc=('``"float32"`` or ``"float64"``: the arithmetic and the result\'s dtype.\n'),
        help=(
            "number type of the computation and result: float32 (faster, smaller) or float64 "
            "(more exact)"
        ),
    ),
    "tolerance": Param(
        doc=(
            "``None`` (default): the exact contract.  A number ``t`` in ``(0, 0.1]`` lets a\n"
            "sigma map be blurred by mixing a few global blurs per pixel, each output within\n"
            "``t * (max - min)`` of the exact result (max/min over the values the blur\n"
            "reads: the image's finite values, and ``cval`` in constant mode; float32 adds\n"
            "its own rounding).  Used only when it is faster.  Ignored for a global sigma\n"
            "(already exact and fast).  Maps with at most 64 distinct values are blurred\n"
            "exactly by global passes whatever ``tolerance`` is.  With a ``mask`` or\n"
            '``nan_policy="omit"`` the bound holds for the sums of valid taps; the result\n'
            "is their ratio, so divide ``t`` by the valid share of a pixel's kernel.\n"
        ),
        help=(
            "sigma maps only: allow each output to differ from the exact blur by at most T "
            "times the value range (0 < T <= 0.1; e.g. 1e-3), for a much faster blur"
        ),
    ),
    "mask": Param(
        doc=(
            "Boolean (or 0/1 numeric) array that broadcasts to ``image.shape``; True (1)\n"
            "marks a valid pixel.  The blur is then a normalised convolution: each output\n"
            "is the Gaussian-weighted mean of the *valid* taps of its window (same weights\n"
            "and radii as without a mask), masked pixels included (they are filled from\n"
            "their valid neighbours), and NaN where a window holds no valid tap.  Edge\n"
            "modes extend the mask with the image; constant-mode taps read ``cval`` and\n"
            "are valid; crop's out-of-bounds taps are not.  Never modified.\n"
        ),
        help="blur over valid pixels only (a normalised convolution; the others are filled "
        "from their valid neighbours): of the image's shape or the blurred axes'; non-zero "
        "marks a valid pixel (or, inverted, an invalid one)",
    ),
    "nan_policy": Param(
        doc=(
            '``"propagate"`` (default): NaN and inf spread over their windows.\n'
            '``"omit"``: non-finite pixels count as masked (a non-finite ``cval`` too).\n'
            '``"raise"``: ``ValueError`` if a valid pixel (or a ``cval`` that constant mode\n'
            'reads) is NaN or inf; finite data is blurred as with ``"propagate"``.\n'
        ),
        help=(
            "NaN and inf in the image: propagate (spread over their windows), omit (left out "
            "like masked pixels) or raise (refuse them)"
        ),
    ),
    "channel_axis": Param(
        doc=(
            "The axis of colour or other channels (scikit-image's convention): never\n"
            "blurred.  With ``axes=None`` every other axis is blurred; ``axes`` that include\n"
            "it are a ``ValueError``.  A sigma map (or mask) may then omit that axis: it\n"
            "applies to every channel.\n"
        ),
        help="axis of colour or other channels, never blurred",
    ),
    "sigma_map": Param(
        doc=(
            "A per-pixel sigma image of the image's shape, or of the shape of its blurred\n"
            "axes (in the order of ``axes``); ``sigma`` multiplies it.  With an extra\n"
            "trailing axis of ``len(axes)``: one sigma per pixel and blurred axis.\n"
        ),
        help="per-pixel sigma image: the image's shape, or the blurred axes' (times sigma)",
    ),
    "world_units": Param(
        doc=(
            "Read ``sigma`` in the image's physical units (its pixel sizes, e.g. µm):\n"
            "each axis's sigma is divided by its pixel size.\n"
        ),
        help="sigma in physical units (the pixel sizes, e.g. µm) instead of pixels",
    ),
    "mask_marks": Param(
        doc=(
            '``"valid"``: a mask\'s non-zero pixels are the ones to use; ``"invalid"``: they\n'
            "are left out (and filled from their valid neighbours).\n"
        ),
        help=(
            "valid: blur over the marked pixels only; invalid: leave the marked pixels out "
            "(they are filled from their valid neighbours)"
        ),
    ),
}


def help_of(name: str) -> str:
    """The one-line help of parameter ``name`` (CLI help, napari tooltip)."""
    return PARAMS[name].help


def fill_doc(function: Callable) -> Callable:
    """Replace ``%(name)s`` in ``function``'s docstring by the parameter's ``doc``,
    indented like a NumPy-style parameter description (8 spaces)."""
    docs = {name: textwrap.indent(p.doc.strip(), " " * 8).lstrip() for name, p in PARAMS.items()}
    function.__doc__ = function.__doc__ % docs
    return function
