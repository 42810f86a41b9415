"""napari layers in, napari layers out: the plugin's adapter over :func:`gaussian_blur`.

This module (with :mod:`.widgets`) is the only place that imports napari.  It turns a
layer and the user's choices into the library's arguments, runs the blur, and adds or
updates result layers that keep the input's transforms and display settings.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from napari.layers import Image, Labels, Layer

from .. import engine
from .._version import __version__
from ..adapters.numpy_api import gaussian_blur
from ..adapters.request import marked_pixels, normalize_marks, pixel_sigma, sigma_argument
from ..core.options import BlurOptions
from ..core.params import DEFAULT, fill_doc
from ..core.spec import BlurSpec, is_dask_array
from ..core.steps import run_to_end
from .layer_data import (
    _array,
    _layer_data,
    _level_of,
    _units,
    _world_scale,
    blurred_axes,
    level_factors,
)
from .schema import METADATA_KEY, is_per_axis_map, layer_id, map_in_pixels, placement, upsert

if TYPE_CHECKING:
    import napari

#: NumPy layers bigger than this get a lazy result (one dask chunk per plane).
LAZY_BYTES = 512 * 2**20
DIFFERENCE_COLORMAP = "PiYG"
#: napari's default sigma (the blur widget's, and :func:`blur_layer`'s).
SIGMA = 2.0
#: The blur's settings a layer blur takes besides the layer's own choices (its axes).
LAYER_OPTIONS = ("mode", "cval", "truncate", "backend", "precision", "tolerance", "nan_policy",
                 "model")  # fmt: skip


@dataclass(frozen=True)
class LayerBlur:
    """A blur request against a napari layer, checked and turned into library arguments.

    Build it with :meth:`from_layer`; every problem with the layers or the choices is
    raised there (``ValueError``/``TypeError`` with the engine's message).
    """

    layer: Image
    image: np.ndarray
    sigma: Any
    #: The blur's settings, with the blurred axes resolved.
    options: BlurOptions
    settings: dict[str, Any] = field(default_factory=dict)
    #: The lazy result (a dask graph) when the input, the map or the mask is a dask array.
    graph: Any = None
    #: The library's ``mask`` (True = valid, broadcasting to the image), or None.
    mask: Any = None
    #: How much coarser the blurred data is than the layer's level 0, per axis (a
    #: multiscale level; ones otherwise): the result's scale is the layer's times this.
    factors: tuple[float, ...] = ()
    #: The validated spec of the whole (NumPy) blur, for the planner; None when lazy.
    spec: BlurSpec | None = None

    @classmethod
    def from_layer(
        cls,
        layer: Layer,
        sigma: float | Sequence[float] = SIGMA,
        sigma_map: Layer | np.ndarray | None = None,
        *,
        options: BlurOptions | None = None,
        world_units: bool = DEFAULT.world_units,
        axes: str | Sequence[int] = "2d",
        mask: Layer | np.ndarray | None = None,
        mask_marks: str = DEFAULT.mask_marks,
        level: int | None = None,
    ) -> LayerBlur:
        """The request to blur ``layer`` (at ``level`` when multiscale) over ``axes``
        (a choice of :data:`AXES_CHOICES` or explicit indices) with ``options`` (their
        ``axes`` is set here); ``sigma``, ``sigma_map``, ``world_units``, ``mask`` and
        ``mask_marks`` as :func:`blur_layer` takes them."""
        image = _layer_data(layer, "layer", level)
        blurred = blurred_axes(layer, axes)
        if not is_dask_array(image) and image.nbytes > LAZY_BYTES:
            image = _as_planes(image, blurred)
        factors = level_factors(layer, level)
        pixel_size = _world_scale(layer, blurred, factors) if world_units else None
        map_name, sigma_arg = _sigma_of(sigma, sigma_map, image.shape, blurred, pixel_size,
                                        level)  # fmt: skip
        mask_name, valid = _valid_pixels(mask, mask_marks, image.shape, blurred, level)
        options = (options or BlurOptions()).replace(axes=blurred)
        graph, spec = _checked(image, sigma_arg, valid, options)
        settings = dict(
            sigma=sigma if np.isscalar(sigma) else tuple(sigma),
            sigma_map=map_name,
            world_units=world_units,
            units=_units(layer, blurred) if world_units else "px",
            # per blurred axis (times the map, with one)
            sigma_pixels=list(pixel_sigma(sigma, len(blurred), pixel_size)),
            level=level if layer.multiscale else None,
            axes=list(blurred),
            mask=mask_name,
            mask_marks=mask_marks,
            **{name: getattr(options, name) for name in LAYER_OPTIONS},
        )
        return cls(layer, image, sigma_arg, options, settings, graph, valid, factors, spec)

    @property
    def axes(self) -> tuple[int, ...]:
        return self.options.axes

    @property
    def lazy(self) -> bool:
        """Whether the result is a lazy dask array (computed as napari shows it)."""
        return self.graph is not None

    @property
    def batch_chunks(self) -> list[tuple[slice | int, ...]]:
        """Independent pieces of work (one per index of the first batch axis)."""
        batch = [a for a in range(self.image.ndim) if a not in self.axes]
        if self.lazy or not batch or self.image.shape[batch[0]] <= 1:
            return [()]
        lead = batch[0]
        return [(slice(None),) * lead + (i,) for i in range(self.image.shape[lead])]

    def run(self) -> Iterator[int]:
        """Blur piece by piece, yielding the number done; the result is the return value.

        Written as a generator so a napari ``thread_worker`` can report progress and stop
        between pieces.
        """
        start = time.perf_counter()
        resolved = engine.resolve(self.options.backend)
        if self.lazy:  # the graph was built (and checked) by from_layer
            yield 1
            return BlurResult(self, self.graph, resolved, engine.device_name(resolved),
                              time.perf_counter() - start)  # fmt: skip
        out = np.empty(self.image.shape, dtype=np.dtype(self.options.precision))
        compiled = engine.compiles(resolved)
        for done, index in enumerate(self.batch_chunks, start=1):
            sigma, mask = self.sigma, self.mask
            if isinstance(sigma, np.ndarray) and index:
                sigma = _take_batch(sigma, index)
            if mask is not None and index:
                mask = _take_batch(mask, index)
            piece = self.options.replace(backend=resolved, axes=_axes_after(self.axes, index))
            out[index] = gaussian_blur(self.image[index], sigma, mask=mask, **piece.kwargs())
            yield done
        return BlurResult(self, out, resolved, engine.device_name(resolved),
                          time.perf_counter() - start,
                          compiled=engine.compiles(resolved) > compiled)  # fmt: skip

    def compute(self) -> BlurResult:
        """Run to the end on this thread."""
        return run_to_end(self.run())

    def python_call(self) -> str:
        """The :func:`blur_layer` call that reproduces this blur in napari's console,
        its keywords in the order of its signature (``viewer`` last)."""
        s = self.settings
        layers = {k: f"viewer.layers[{s[k]!r}]" if s[k] else "None" for k in ("sigma_map", "mask")}
        values = {**{k: repr(getattr(self.options, k)) for k in LAYER_OPTIONS}, **layers,
                  **{k: repr(s[k]) for k in ("sigma", "world_units", "mask_marks", "level")},
                  "axes": repr(tuple(s["axes"]))}  # fmt: skip
        keywords = [f"{k}={values[k]}" for k in inspect.signature(blur_layer).parameters
                    if k in values]  # fmt: skip
        return (
            "from napari_varblur import blur_layer\n"
            f"blur_layer(viewer.layers[{self.layer.name!r}], {', '.join(keywords)}, viewer=viewer)"
        )


def _sigma_of(sigma, sigma_map, shape, blurred, pixel_size, level) -> tuple[str | None, Any]:
    """The map's name (a layer's, or ``"array"``) and the library's ``sigma``: ``sigma``
    (in world units with ``pixel_size``) times the map, placed in the image."""
    map_name, where, values = None, "sigma_map", None
    if sigma_map is not None:
        is_layer = isinstance(sigma_map, Layer)
        map_name = sigma_map.name if is_layer else "array"
        where = f"sigma_map {map_name!r}" if is_layer else where  # names it in errors
        if pixel_size is not None and map_in_pixels(sigma_map):
            raise ValueError(
                f"world_units: {where} is already in pixels (the world units were "
                "converted when it was made); turn off sigma in world units"
            )
        values = _map_values(sigma_map, level)
    arg = sigma_argument(sigma, shape, blurred, pixel_size=pixel_size, map_values=values,
                         map_name=where)  # fmt: skip
    return map_name, arg


def _checked(image, sigma, valid, options: BlurOptions) -> tuple[Any, BlurSpec | None]:
    """Validate now, on the caller's thread, so a bad choice fails before any work: the
    lazy result's graph (building it checks everything, dask maps too), or the spec of
    the image itself (``nan_policy="raise"`` checks it here, with its own index)."""
    if any(is_dask_array(a) for a in (image, sigma, valid)):
        return gaussian_blur(_lazy(image), sigma, mask=valid, **options.kwargs()), None
    return None, BlurSpec.build(image, sigma, options, valid)


@dataclass(frozen=True)
class BlurResult:
    request: LayerBlur
    data: np.ndarray
    backend: str
    device: str
    seconds: float
    compiled: bool = False  # the run compiled kernels (first run only)

    def metadata(self, role: str) -> dict[str, Any]:
        return {
            METADATA_KEY: {
                "role": role,
                "source_layer": self.request.layer.name,
                "source_id": layer_id(self.request.layer),
                "parameters": dict(self.request.settings),
                "backend": self.backend,
                "device": self.device,
                "seconds": round(self.seconds, 6),
                "version": __version__,
                "python": self.request.python_call(),
            }
        }

    def name(self) -> str:
        """E.g. ``"cells blurred σ=0.5 µm crop numba"``; a map's name follows a ×."""
        s = self.request.settings
        sigma = f"{s['sigma']}" + (f"×{s['sigma_map']}" if s["sigma_map"] else "")
        level = f" level {s['level']}" if s["level"] is not None else ""
        name = self.request.layer.name
        return f"{name}{level} blurred σ={sigma} {s['units']} {s['mode']} {self.backend}"

    def difference(self) -> np.ndarray:
        image = self.request.image
        if is_dask_array(self.data):  # a lazy result gets a lazy difference
            image = _lazy(image)
        return image.astype(self.data.dtype) - self.data


@fill_doc
def blur_layer(
    layer: Layer,
    sigma: float | Sequence[float] = SIGMA,
    sigma_map: Layer | np.ndarray | None = None,
    *,
    viewer: napari.Viewer | None = None,
    world_units: bool = DEFAULT.world_units,
    axes: str | Sequence[int] = "2d",
    mode: str = DEFAULT.mode,
    cval: float = DEFAULT.cval,
    truncate: float = DEFAULT.truncate,
    backend: str = DEFAULT.backend,
    precision: str = DEFAULT.precision,
    tolerance: float | None = DEFAULT.tolerance,
    mask: Layer | np.ndarray | None = None,
    mask_marks: str = DEFAULT.mask_marks,
    nan_policy: str = DEFAULT.nan_policy,
    model: str = DEFAULT.model,
    difference: bool = False,
    level: int | None = None,
) -> Image:
    """Blur a napari Image layer and return the result layer.

    Parameters
    ----------
    layer
        The Image layer to blur (RGB layers blur each channel over Y and X).
    sigma
        Sigma in pixels (or world units with ``world_units``): one number or one per
        blurred axis.  With ``sigma_map`` it multiplies the map.
    sigma_map
        Optional per-pixel sigma: an Image layer (or array) of the image's shape or of
        the shape of its blurred axes.
    viewer
        If given, the result is added to it, or replaces the data of the result layer
        an earlier call made from the same input layer.
    world_units
        %(world_units)s  The pixel sizes are the layer's ``scale``.
    axes
        ``"2d"`` (per plane, the last two axes), ``"3d"`` (the last three), ``"all"``,
        or explicit axis indices.
    mode
        %(mode)s
    cval
        %(cval)s
    truncate
        %(truncate)s
    backend
        %(backend)s
    precision
        %(precision)s
    tolerance
        %(tolerance)s
    nan_policy
        %(nan_policy)s
    model
        %(model)s
    mask
        Optional Labels or Image layer (or array) of the image's shape or of the shape of
        its blurred axes; its non-zero pixels are marked.  The blur then averages over
        the valid pixels only (a normalised convolution; see ``gaussian_blur``).
    mask_marks
        %(mask_marks)s
    difference
        Also add a difference layer (input minus result) to ``viewer``.
    level
        Level of a multiscale layer to blur.

    Returns
    -------
    napari.layers.Image
        The result layer, with the input's transforms and display settings, and the
        parameters, backend, device, timing, version and an equivalent Python call in
        ``metadata['napari_varblur']``.
    """
    # The layer's axes are chosen by ``axes`` above, not the library's: from_layer sets them.
    options = BlurOptions.pick(locals()).replace(axes=None)
    request = LayerBlur.from_layer(layer, sigma, sigma_map, options=options,
                                   world_units=world_units, axes=axes, mask=mask,
                                   mask_marks=mask_marks, level=level)  # fmt: skip
    result = request.compute()
    return publish(result, viewer, difference=difference)[0]


def publish(
    result: BlurResult,
    viewer: napari.Viewer | None,
    *,
    difference: bool,
    role: str = "result",
    difference_data: np.ndarray | None = None,
    difference_name: str | None = None,
    difference_limit: float | None = None,
) -> tuple[Image, Image | None]:
    """Add the result (and difference) layers to ``viewer``, or update the ones an
    earlier run made from the same input; without a viewer, return new layers.

    The difference is input minus result unless ``difference_data`` is given; its
    contrast is ``±difference_limit`` when given (e.g. computed off the GUI thread).
    It goes directly below the result, so the result (what was asked for) stays the
    visible top layer; hide the result to see the difference.
    """
    source, factors = result.request.layer, result.request.factors
    out = _upsert(viewer, source, role, result.data, result.name(), result.metadata(role), {},
                  factors)  # fmt: skip
    diff_layer = None
    if difference:
        diff = result.difference() if difference_data is None else difference_data
        limit = _difference_limit(diff, source) if difference_limit is None else difference_limit
        limit = limit if np.isfinite(limit) and limit > 0 else 1.0  # napari needs low < high
        diff_layer = _upsert(
            viewer,
            source,
            f"{role}-difference",
            diff,
            difference_name or f"{source.name} minus blurred",
            result.metadata(f"{role}-difference"),
            {"colormap": DIFFERENCE_COLORMAP, "contrast_limits": (-limit, limit)},
            factors,
        )
        if viewer is not None:
            _keep_below(viewer, diff_layer, out)
    return out, diff_layer


def _keep_below(viewer, lower: Image, upper: Image) -> None:
    """Move ``lower`` directly below ``upper`` if it is above it; ``upper`` stays the
    selected layer."""
    layers = viewer.layers
    low, up = layers.index(lower), layers.index(upper)
    if low > up:
        layers.move(low, up)
        layers.selection.active = upper


def difference_stats(a, b) -> dict[str, float]:
    """``max |a - b|`` and the RMS of ``a - b`` (NaN ignored), in float64.

    This computes: call it off the GUI thread.  Lazy (dask) inputs are reduced chunk by
    chunk, both statistics in one pass, and never held whole.
    """
    if a.size == 0:
        return {"max_abs_diff": 0.0, "rms_diff": 0.0}
    diff = a.astype(np.float64) - b.astype(np.float64)
    stats = (np.nanmax(np.abs(diff)), np.sqrt(np.nanmean(diff**2)))
    if is_dask_array(diff):
        import dask

        stats = dask.compute(*stats)
    return {"max_abs_diff": float(stats[0]), "rms_diff": float(stats[1])}


def _difference_limit(diff, source: Image) -> float:
    """Half-width of the difference layer's contrast range."""
    if is_dask_array(diff):  # lazy: do not compute it all for the contrast limits
        low, high = source.contrast_limits
        return float(high - low) / 4
    return float(np.nanmax(np.abs(diff), initial=0.0))


def _lazy(image):
    """A dask array as is; a NumPy array wrapped whole (one chunk, no copy)."""
    if is_dask_array(image):
        return image
    import dask.array as da

    return da.from_array(image, chunks=image.shape)


def _as_planes(image: np.ndarray, axes: tuple[int, ...]):
    """Wrap a big NumPy image lazily, one chunk per plane (or volume) of the blurred
    axes, so napari computes only what it shows."""
    import dask.array as da

    chunks = tuple(n if a in axes else 1 for a, n in enumerate(image.shape))
    return da.from_array(image, chunks=chunks)


def _map_values(sigma_map: Layer | np.ndarray, level: int | None):
    """The sigma map's data: a layer's (at ``level`` when multiscale) or the array's.  A
    per-axis map layer (one plane per axis first, as napari shows it) gets its planes
    last, as the library takes them."""
    if isinstance(sigma_map, Layer):
        values = _layer_data(sigma_map, "sigma_map", level if sigma_map.multiscale else None)
        return np.moveaxis(values, 0, -1) if is_per_axis_map(sigma_map) else values
    return _array(sigma_map)


def _valid_pixels(
    mask: Layer | np.ndarray | None,
    marks: str,
    shape: tuple[int, ...],
    axes: tuple[int, ...],
    level: int | None,
) -> tuple[str | None, Any]:
    """The mask's name (a layer's, or ``"array"``) and the library's ``mask``: True
    where a pixel is valid, broadcasting to the image (non-zero values are marked).

    Never modifies the mask's data: the result is a new boolean array (lazy for dask).
    """
    marks = normalize_marks(marks)
    if mask is None:
        return None, None
    if isinstance(mask, Layer):
        if not isinstance(mask, (Labels, Image)):
            raise TypeError(
                f"mask: {mask.name!r} is a {type(mask).__name__} layer; a mask is a Labels "
                "or Image layer"
            )
        name, where = mask.name, f"mask {mask.name!r}"
        values = _array(_level_of(mask, where, level))
    else:
        name, where = "array", "mask"
        values = _array(mask)
    return name, marked_pixels(values, shape, axes, where, marks)


def _take_batch(values: np.ndarray, index: tuple) -> np.ndarray:
    """Index a broadcastable map like the image, keeping length-1 axes whole."""
    fixed = tuple(
        (0 if values.shape[i] == 1 else ix) if isinstance(ix, int) else ix
        for i, ix in enumerate(index)
    )
    return values[fixed]


def _axes_after(axes: tuple[int, ...], index: tuple) -> tuple[int, ...]:
    """Axis numbers once the integer indices in ``index`` have removed their axes."""
    removed = [i for i, ix in enumerate(index) if isinstance(ix, int)]
    return tuple(a - sum(r < a for r in removed) for a in axes)


def _upsert(viewer, source, role, data, name, metadata, display, factors=()) -> Image:
    """Update the result made earlier for (source, role), or make a new one, placed
    like ``source`` (a multiscale level's pixels ``factors`` times coarser) and shown
    with ``display`` (default: the source's contrast and colormap)."""
    if not display:
        display = {"contrast_limits": source.contrast_limits}
        if not source.rgb:
            display["colormap"] = source.colormap
    place = placement(source)
    if factors:  # napari draws level k's pixel i at level 0's i * factor
        place["scale"] = np.asarray(source.scale) * np.asarray(factors)
    return upsert(viewer, Image, role, layer_id(source), data, name, metadata,
                  {**place, **display}, create={"rgb": source.rgb})  # fmt: skip
