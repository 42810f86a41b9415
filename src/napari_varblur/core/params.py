"""Every parameter declared once: name, default, choices, description, one-line help, and
hints for the command line and the napari forms.

Each surface reads these declarations: the library's docstrings (:func:`docfiller` puts
``doc`` where a docstring says ``%(name)s``, as scipy.ndimage's ``docfiller``), the public
signatures' defaults (:data:`DEFAULT`), ``varblur``'s options (``cli``: argparse keywords),
napari's forms (``widget``: the kind of field and its options) and the frozen options
objects that carry a call's settings from an adapter to the engine
(:mod:`napari_varblur.core.options`).  A new capability (a deconvolution, a bead fit)
declares only its own few parameters and selects the shared ones by name.
"""

from __future__ import annotations

import argparse
import dataclasses
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .modes import MODE_ALIASES, MODE_NAMES

#: The default of a parameter that has none (the caller must give it).
REQUIRED = object()

BACKENDS: tuple[str, ...] = ("auto", "numba", "jax", "reference")
PRECISIONS: tuple[str, ...] = ("float32", "float64")
#: scipy.stats' names: keep NaN/inf (they spread over their windows), leave them out
#: like masked pixels, or refuse them.
NAN_POLICIES: tuple[str, ...] = ("propagate", "omit", "raise")
#: How the blur spreads: each output averages its window with its own sigma (gather),
#: or each input spreads its value with its own sigma (scatter: the exact transpose).
MODELS: tuple[str, ...] = ("gather", "scatter")
#: What a mask's non-zero pixels mark in the adapters (CLI, napari).
MASK_MARKS: tuple[str, ...] = ("valid", "invalid")
#: napari's accuracy choices: the exact contract, or a tolerance (share of the range).
ACCURACY: dict[str, float | None] = {"exact": None, "1e-3": 1e-3, "1e-4": 1e-4}


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``doc`` is its NumPy-style description (paragraphs, unindented); ``help`` one line
    for ``--help`` and tooltips.  ``cli`` holds argparse keywords (``None``: not an
    option of the command line; the flag is ``--name`` with ``-`` for ``_``); ``widget``
    the napari field: ``kind`` (``"choice"``, ``"float"``, ``"int"``, ``"text"``,
    ``"check"``) and its options (``label``, ``min``, ``max``, ``step``, ``text``;
    ``advanced``: folded under "Advanced"; ``parse``: field value -> argument).
    """

    name: str
    doc: str
    help: str
    default: Any = REQUIRED
    choices: tuple | None = None
    cli: Mapping[str, Any] | None = None
    widget: Mapping[str, Any] | None = None

    def but(self, **changes: Any) -> Param:
        """This parameter with some fields changed (a variant for one function)."""
        return dataclasses.replace(self, **changes)

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def flag(self) -> str:
        """The command line's option: ``--nan-policy`` for ``nan_policy``."""
        return "--" + self.name.replace("_", "-")


_MODES = MODE_NAMES + tuple(MODE_ALIASES)


def _cli_number(expected: str) -> Callable[[str], float]:
    """An option's number: ``--tolerance fast`` says "expected a number in (0, 0.1],
    got 'fast'" (the range is checked with the library's own normaliser)."""

    def number(text: str) -> float:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None

    return number


_BLUR = (
    Param(
        "image",
        "Real-valued array (bool, integer or float), ``ndim >= 1``.  Never modified.\n",
        "the image to blur; it is left unchanged",
    ),
    Param(
        "sigma",
        "Standard deviation in pixels, each value >= 0: a number (every blurred axis),\n"
        "a sequence with one number per blurred axis, or a NumPy *sigma map*: an array\n"
        "with the image's ndim that broadcasts to ``image.shape`` (one isotropic sigma\n"
        "per pixel), or of shape ``image.shape + (len(axes),)`` (one per pixel and axis).\n",
        "blur width in pixels: one value or one per blurred axis (multiplies the sigma map)",
        cli={"type": float, "nargs": "+", "required": True},
        widget={"kind": "text", "label": "sigma (× map)", "number": "several"},
    ),
    Param(
        "mode",
        '``"crop"`` (default): the window is cut at the border and the kernel\n'
        'renormalised over the in-bounds taps.  Or one of scipy.ndimage\'s ``"reflect"``,\n'
        '``"mirror"``, ``"nearest"``, ``"wrap"``, ``"constant"`` (and the aliases\n'
        '``"grid-mirror"``, ``"grid-wrap"``, ``"grid-constant"``); or one mode per\n'
        "blurred axis.\n",
        "edge mode: crop (window cut at the border, kernel renormalised: no darkened "
        "border), or scipy's " + ", ".join(_MODES[1:]),
        default="crop",
        choices=_MODES,
        cli={},
        widget={"kind": "choice", "label": "mode", "advanced": True},
    ),
    Param(
        "cval",
        'Value outside the image in ``"constant"`` mode.\n',
        "the value assumed outside the image in constant mode (ignored otherwise)",
        default=0.0,
        cli={"type": float},
        widget={"kind": "float", "label": "cval", "min": -1e12, "max": 1e12, "advanced": True},
    ),
    Param(
        "truncate",
        "The radius at a pixel is ``ceil(truncate * sigma)``, computed in float64.\n",
        "how far the blur reaches, in sigmas: radius = ceil(truncate * sigma)",
        default=3.0,
        cli={"type": float},
        widget={
            "kind": "float",
            "label": "truncate",
            "min": 0.1,
            "max": 50.0,
            "step": 0.5,
            "advanced": True,
        },
    ),
    Param(
        "radius",
        "Explicit radius (one int or one per blurred axis); overrides ``truncate``.\n"
        "Global sigma only.\n",
        "explicit radius in pixels (one, or one per blurred axis); overrides truncate",
        default=None,
    ),
    Param(
        "axes",
        "Axes to blur (negative allowed); default all.  The others are batch axes.\n",
        "the axes to blur; the others (time, channels) are not blurred",
        default=None,
        cli={"type": int, "nargs": "+"},
    ),
    Param(
        "backend",
        '``"auto"`` (JAX when it sees a GPU, else Numba), ``"numba"``, ``"jax"`` or\n'
        '``"reference"`` (plain float64 NumPy).  Before Numba\'s kernels are compiled\n'
        "(a fresh install), a small float32 ``auto`` call runs on ``reference`` while a\n"
        "child process compiles them.\n",
        "the engine that computes the blur: auto (JAX on a GPU, else Numba), numba, jax "
        "or reference",
        default="auto",
        choices=BACKENDS,
        cli={"choices": BACKENDS},
    ),
    Param(
        "precision",
        '``"float32"`` or ``"float64"``: the arithmetic and the result\'s dtype.\n',
        "number type of the computation and result: float32 (faster, smaller) or float64 "
        "(more exact)",
        default="float32",
        choices=PRECISIONS,
        cli={"choices": PRECISIONS},
        widget={"kind": "choice", "label": "precision", "advanced": True},
    ),
    Param(
        "tolerance",
        "``None`` (default): the exact contract.  A number ``t`` in ``(0, 0.1]`` lets a\n"
        "sigma map be blurred by mixing a few global blurs per pixel, each output within\n"
        "``t * (max - min)`` of the exact result (max/min over the values the blur\n"
        "reads: the image's finite values, and ``cval`` in constant mode; float32 adds\n"
        "its own rounding).  Used only when it is faster.  Ignored for a global sigma\n"
        "(already exact and fast).  Maps with at most 64 distinct values are blurred\n"
        "exactly by global passes whatever ``tolerance`` is.  With a ``mask`` or\n"
        '``nan_policy="omit"`` the bound holds for the sums of valid taps; the result\n'
        "is their ratio, so divide ``t`` by the valid share of a pixel's kernel.\n",
        "sigma maps only: allow each output to differ from the exact blur by at most T "
        "times the value range (0 < T <= 0.1; e.g. 1e-3), for a much faster blur",
        default=None,
        cli={"type": _cli_number("a number in (0, 0.1]")},
        widget={
            "kind": "choice",
            "label": "accuracy",
            "choices": tuple(ACCURACY),
            "value": "exact",
            "parse": ACCURACY.get,
            "advanced": True,
        },
    ),
    Param(
        "mask",
        "Boolean (or 0/1 numeric) array that broadcasts to ``image.shape``; True (1)\n"
        "marks a valid pixel.  The blur is then a normalised convolution: each output\n"
        "is the Gaussian-weighted mean of the *valid* taps of its window (same weights\n"
        "and radii as without a mask), masked pixels included (they are filled from\n"
        "their valid neighbours), and NaN where a window holds no valid tap.  Edge\n"
        "modes extend the mask with the image; constant-mode taps read ``cval`` and\n"
        "are valid; crop's out-of-bounds taps are not.  Never modified.\n",
        "blur over valid pixels only (a normalised convolution; the others are filled "
        "from their valid neighbours): of the image's shape or the blurred axes'; non-zero "
        "marks a valid pixel (or, inverted, an invalid one)",
        default=None,
        cli={"metavar": "FILE"},
    ),
    Param(
        "nan_policy",
        '``"propagate"`` (default): NaN and inf spread over their windows.\n'
        '``"omit"``: non-finite pixels count as masked (a non-finite ``cval`` too).\n'
        '``"raise"``: ``ValueError`` if a valid pixel (or a ``cval`` that constant mode\n'
        'reads) is NaN or inf; finite data is blurred as with ``"propagate"``.\n',
        "NaN and inf in the image: propagate (spread over their windows), omit (left out "
        "like masked pixels) or raise (refuse them)",
        default="propagate",
        choices=NAN_POLICIES,
        cli={"choices": NAN_POLICIES},
        widget={"kind": "choice", "label": "NaN policy", "advanced": True},
    ),
    Param(
        "model",
        '``"gather"`` (default): each output pixel averages its neighbourhood with its\n'
        'own sigma (the contract\'s blur).  ``"scatter"``: each input pixel spreads its\n'
        "value with its own sigma over the pixels its window reaches, keeping its flux\n"
        "(the model of a point source whose blur depends on where it is: what a bead\n"
        "shows).  For the same arguments ``scatter`` is exactly the transpose of\n"
        "``gather`` as a linear map of the image (for ``constant`` mode, of its linear\n"
        "part: the fill is left out); with a ``mask`` it is the transpose of the masked\n"
        "(normalised) gather, zero at masked pixels.  The two agree for a global sigma\n"
        "away from the border.\n",
        "gather: each output averages its window with its own sigma; scatter: each input "
        "spreads its value with its own sigma (the exact transpose: a point source's blur)",
        default="gather",
        choices=MODELS,
        cli={"choices": MODELS},
        widget={"kind": "choice", "label": "model", "advanced": True},
    ),
    Param(
        "channel_axis",
        "The axis of colour or other channels (scikit-image's convention): never\n"
        "blurred.  With ``axes=None`` every other axis is blurred; ``axes`` that include\n"
        "it are a ``ValueError``.  A sigma map (or mask) may then omit that axis: it\n"
        "applies to every channel.\n",
        "axis of colour or other channels, never blurred",
        default=None,
        cli={},
    ),
)

#: The adapters' own parameters (command line, napari, the JAX-native API).
_ADAPTERS = (
    Param(
        "sigma_map",
        "A per-pixel sigma image of the image's shape, or of the shape of its blurred\n"
        "axes (in the order of ``axes``); ``sigma`` multiplies it.  With an extra\n"
        "trailing axis of ``len(axes)``: one sigma per pixel and blurred axis.\n",
        "per-pixel sigma image: the image's shape, or the blurred axes' (times sigma)",
        default=None,
        cli={},
    ),
    Param(
        "world_units",
        "Read ``sigma`` in the image's physical units (its pixel sizes, e.g. µm):\n"
        "each axis's sigma is divided by its pixel size.\n",
        "sigma in physical units (the pixel sizes, e.g. µm) instead of pixels",
        default=False,
        cli={"action": "store_true"},
        widget={"kind": "check", "text": "sigma in world units"},
    ),
    Param(
        "mask_marks",
        '``"valid"``: a mask\'s non-zero pixels are the ones to use; ``"invalid"``: they\n'
        "are left out (and filled from their valid neighbours).\n",
        "valid: blur over the marked pixels only; invalid: leave the marked pixels out "
        "(they are filled from their valid neighbours)",
        default="valid",
        choices=MASK_MARKS,
        widget={
            "kind": "choice",
            "label": "mask marks",
            "advanced": True,
            "labels": {"valid": "valid pixels", "invalid": "invalid pixels"},
        },
    ),
    Param(
        "max_radius",
        "Static largest radius (one int or one per blurred axis) for a traced sigma.\n"
        "Each pixel uses ``min(ceil(truncate * sigma), max_radius)``; values are not\n"
        "checked when traced (a negative sigma acts like its absolute value).\n",
        "largest radius of a traced sigma map (one, or one per blurred axis)",
        default=None,
    ),
)

#: ``fit_sigma_map``'s own parameters, and its variants of the blur's.
_FIT = (
    Param(
        "max_sigma",
        "Largest sigma the map may take (pixels, > 0); sets the blur's radius\n"
        "``ceil(truncate * max_sigma)`` and so the cost.  Choose it above the largest\n"
        "sigma you expect: the map stays below it.\n",
        "the largest sigma the map may take (pixels); choose it above the largest blur "
        "you expect: it sets the cost",
        cli={"type": float, "required": True, "metavar": "S"},
        widget={
            "kind": "float",
            "label": "max sigma",
            "value": 4.0,
            "min": 0.0,
            "max": 1000.0,
            "step": 0.5,
        },
    ),
    Param(
        "per_axis",
        "Fit one map per blurred axis (returned with a trailing axis), for blur that\n"
        "differs along, e.g., Y and X.\n",
        "one map per fitted axis (blur that differs between Y and X): a trailing axis in "
        "the map, one plane per axis in napari",
        default=False,
        cli={"action": "store_true"},
        widget={"kind": "check", "text": "one map per axis", "advanced": True},
    ),
    Param(
        "spacing",
        "Distance between the control nodes of the map (pixels, >= 1): the finest detail\n"
        "the map can have.  Smaller is more detailed and noisier.\n",
        "distance between the map's control nodes (pixels, >= 1): the finest detail the "
        "map can have; smaller is more detailed and noisier",
        default=16.0,
        cli={"type": float},
        widget={
            "kind": "float",
            "label": "node spacing",
            "min": 1.0,
            "max": 1e6,
            "step": 2.0,
            "advanced": True,
        },
    ),
    Param(
        "smoothness",
        "Weight (>= 0) of the penalty on the nodes' second differences, relative to the\n"
        "data term (which is normalised by the blurred image's variance).\n",
        "weight of the penalty on the map's curvature (>= 0; e.g. 1e-3; 0: none): how "
        "strongly the map is kept smooth where the images say little",
        default=1e-3,
        cli={"type": float},
        widget={"kind": "text", "label": "smoothness", "advanced": True},
    ),
    Param(
        "max_steps",
        "L-BFGS stops after ``max_steps`` steps, or when the objective's relative change\n"
        "is below ``tol`` over two steps in a row.\n",
        "L-BFGS steps at most; the fit stops earlier once it has converged",
        default=150,
        cli={"type": int},
        widget={"kind": "int", "label": "max steps", "min": 1, "max": 100_000, "advanced": True},
    ),
    Param(
        "tol",
        "Converged when the objective's relative change is below ``tol`` (two steps in a\nrow).\n",
        "converged when the loss changes by less than this (relative)",
        default=1e-6,
        cli={"type": float},
    ),
    Param(
        "max_error",
        "A pixel is observable when its standard error is at most ``max_error`` times its\n"
        "sigma; elsewhere ``sigma_map`` is NaN.\n",
        "observable where the standard error is at most this share of sigma",
        default=0.1,
        cli={"type": float},
    ),
    Param(
        "intensity",
        '``"affine"`` (default): also fit one gain and one offset between the images\n'
        '(two acquisitions rarely share both); ``"none"``: the blurred image is the blur\n'
        "of the sharp one as it is.\n",
        "affine: the blurred image may differ from the blurred sharp one by a gain and an "
        "offset (fitted); none: it may not",
        default="affine",
        choices=("affine", "none"),
        cli={"choices": ("affine", "none")},
    ),
)


#: ``deblur``'s own parameters.
DEBLUR_METHODS: tuple[str, ...] = ("richardson_lucy", "rl_tv")
_DEBLUR = (
    Param(
        "iterations",
        "How many iterations to run at most (an integer >= 1).  Richardson-Lucy sharpens\n"
        "with every iteration and, on noisy data, amplifies noise after a while: tens of\n"
        "iterations are typical (more with ``rl_tv``, which holds the noise back).\n",
        "iterations to run at most (>= 1; tens are typical)",
        cli={"type": int, "required": True, "metavar": "N"},
        widget={"kind": "int", "label": "iterations", "value": 30, "min": 1, "max": 100_000},
    ),
    Param(
        "method",
        '``"richardson_lucy"``: the maximum-likelihood iteration for Poisson noise.\n'
        '``"rl_tv"``: Dey et al.\'s Richardson-Lucy with total-variation regularisation\n'
        "(weight ``regularization``), which keeps noise from growing with the iterations;\n"
        "identical to ``richardson_lucy`` at ``regularization=0``.\n",
        "richardson_lucy: Poisson maximum likelihood; rl_tv: with total-variation "
        "regularisation (keeps noise down)",
        default="richardson_lucy",
        choices=DEBLUR_METHODS,
        cli={"choices": DEBLUR_METHODS},
        widget={"kind": "choice", "label": "method"},
    ),
    Param(
        "regularization",
        "The total-variation weight of ``rl_tv`` (>= 0; 0.001-0.01 typical: larger\n"
        "flattens more).  The term is divided by the pixel spacing per axis.\n",
        "rl_tv's total-variation weight (>= 0; 0.001-0.01 typical)",
        default=0.0,
        cli={"type": float},
        widget={"kind": "text", "label": "regularisation", "value": "0.002"},
    ),
    Param(
        "acceleration",
        "Biggs-Andrews acceleration: each iteration starts from a step extrapolated\n"
        "along the last two (fewer iterations for the same sharpness).\n",
        "Biggs-Andrews acceleration (fewer iterations for the same result)",
        default=False,
        cli={"action": "store_true"},
        widget={"kind": "check", "text": "accelerate (Biggs-Andrews)", "advanced": True},
    ),
    Param(
        "pixel_spacing",
        "The pixel spacing along each blurred axis (one number, or one per axis), for\n"
        "``rl_tv``'s gradients on anisotropic data (e.g. z steps larger than the pixels).\n",
        "pixel spacing per blurred axis, for rl_tv on anisotropic data",
        default=None,
        cli={"type": float, "nargs": "+", "metavar": "D"},
    ),
    Param(
        "stop",
        "Stop before ``iterations`` once an iteration changes the estimate by less than\n"
        "this share (sum of absolute changes over the sum of the estimate); ``None``: run\n"
        "every iteration.\n",
        "stop once an iteration changes the estimate by less than this share (e.g. 1e-4)",
        default=None,
        cli={"type": float},
        widget={"kind": "text", "label": "stop at change", "advanced": True},
    ),
    Param(
        "callback",
        "Called as ``callback(iteration, estimate)`` after each iteration (1-based; the\n"
        "estimate is read-only): for progress, or to stop early by returning ``True``.\n",
        "called after each iteration; return True to stop",
        default=None,
    ),
)


def _table(*params: Param) -> Mapping[str, Param]:
    return MappingProxyType({p.name: p for p in params})


#: Every parameter of the blur and its adapters, by name.
PARAMS: Mapping[str, Param] = _table(*_BLUR, *_ADAPTERS)

#: ``fit_sigma_map``'s parameters: its own, and the blur's it shares (``nan_policy``
#: refuses ``"propagate"``: a NaN would reach every step).
FIT_PARAMS: Mapping[str, Param] = _table(
    *(PARAMS[name] for name in ("mode", "truncate", "axes", "mask")),
    PARAMS["nan_policy"].but(
        doc='``"raise"`` (default): a NaN or inf in a valid pixel of either image is a\n'
        'ValueError.  ``"omit"``: such pixels become invalid.  (``"propagate"`` is not\n'
        "accepted: a NaN would stop the fit.)\n",
        help="a NaN or inf in either image: raise (an error) or omit (an invalid pixel)",
        default="raise",
        choices=("raise", "omit"),
        cli={"choices": ("raise", "omit")},
        widget={"kind": "choice", "label": "NaN policy", "advanced": True},
    ),
    PARAMS["mode"].but(
        widget={"kind": "choice", "label": "mode", "advanced": True, "choices": MODE_NAMES}
    ),
    PARAMS["mask"].but(
        help="non-zero marks a valid pixel, left out of the fit otherwise (the images' "
        "shape or the fitted axes')"
    ),
    *_FIT,
)

#: ``deblur``'s parameters: its own, and those of the blur it undoes (``mask``: the
#: observed pixels that carry weight; ``model``: which of the two blurs it undoes).
DEBLUR_PARAMS: Mapping[str, Param] = _table(
    *(p for p in PARAMS.values() if p.name not in ("model", "mask")),
    PARAMS["mask"].but(
        doc="Non-zero marks an observed pixel that counts; the others (and, with\n"
        '``nan_policy="omit"``, NaN and inf pixels) carry no weight in the data term:\n'
        "the estimate there is what the counted pixels around them say.\n",
        help="non-zero marks an observed pixel that counts (the others carry no weight)",
    ),
    PARAMS["model"].but(
        doc='The blur to undo: ``"gather"`` (default), the contract\'s blur, or\n'
        '``"scatter"``, its transpose (each point spreads with the sigma where it sits:\n'
        "what a bead-measured map describes).\n",
        widget={"kind": "choice", "label": "model"},
    ),
    *_DEBLUR,
)

#: The settings a blur carries from an adapter to the engine (:class:`BlurOptions`).
BLUR_OPTIONS = ("mode", "cval", "truncate", "radius", "axes", "backend", "precision",
                "tolerance", "nan_policy", "channel_axis", "model")  # fmt: skip
#: Those of a deblur (:class:`DeblurOptions`): the blur's, and its own.
DEBLUR_OPTIONS = (*BLUR_OPTIONS, "iterations", "method", "regularization", "acceleration",
                  "pixel_spacing", "stop")  # fmt: skip
#: Those of a fit (:class:`FitOptions`).
FIT_OPTIONS = ("mode", "truncate", "axes", "nan_policy", "per_axis", "spacing", "smoothness",
               "max_steps", "tol", "max_error", "intensity")  # fmt: skip


class Defaults:
    """Attribute access to declared defaults: ``DEFAULT.mode == "crop"``."""

    def __init__(self, params: Mapping[str, Param]) -> None:
        self.__dict__.update({n: p.default for n, p in params.items() if not p.required})


#: The blur's defaults, for the public signatures (one place types ``"crop"``).
DEFAULT = Defaults(PARAMS)
#: ``fit_sigma_map``'s defaults.
FIT_DEFAULT = Defaults(FIT_PARAMS)
#: ``deblur``'s defaults.
DEBLUR_DEFAULT = Defaults(DEBLUR_PARAMS)


def help_of(name: str, params: Mapping[str, Param] = PARAMS) -> str:
    """The one-line help of parameter ``name`` (CLI help, napari tooltip)."""
    return params[name].help


def docfiller(params: Mapping[str, Param]) -> Callable[[Callable], Callable]:
    """A decorator replacing ``%(name)s`` in a docstring by the parameter's ``doc``,
    indented like a NumPy-style parameter description (8 spaces)."""
    docs = {name: textwrap.indent(p.doc.strip(), " " * 8).lstrip() for name, p in params.items()}

    def fill(function: Callable) -> Callable:
        function.__doc__ = function.__doc__ % docs
        return function

    return fill


#: The blur's docstring filler (``@fill_doc``); ``fill_fit_doc`` for the fit's.
fill_doc = docfiller(PARAMS)
fill_fit_doc = docfiller(FIT_PARAMS)
fill_deblur_doc = docfiller(DEBLUR_PARAMS)


def select(params: Mapping[str, Param], names: Iterable[str]) -> list[Param]:
    """The declared parameters ``names``, in that order."""
    return [params[name] for name in names]
