"""The plugin's layer metadata, in one place: the key, the roles, how a derived layer is
tagged, found, placed and updated (never clobbering a layer the user made).

Every layer this package makes carries ``metadata[METADATA_KEY]``, a dict with at least
``role`` (what it is: a blur result, a sigma map, a residual...) and ``source_id`` (the
layer it was made from); the fit widget adds ``kind``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from napari.layers import Image, Layer

METADATA_KEY = "napari_varblur"
#: ``metadata[METADATA_KEY]["role"]`` of a sigma map made by the sample, the "Make sigma
#: map" or the "Estimate sigma map" widget; the blur widget preselects such a map.
SIGMA_MAP_ROLE = "sigma-map"
#: The role of a per-axis map ("Estimate sigma map" with one sigma per axis): one plane
#: per blurred axis along its first axis (napari shows the last axes).
PER_AXIS_ROLE = "sigma-map-per-axis"
#: ``metadata[METADATA_KEY]["units"]`` of a map whose values are sigmas in pixels (every
#: map this package makes: world units are converted when it is made).
PIXELS = "pixels"


def layer_id(layer: Layer) -> str:
    return str(getattr(layer, "unique_id", id(layer)))


def placement(source: Layer) -> dict[str, Any]:
    """Where ``source`` sits in the world: a derived layer takes the same."""
    return {
        "scale": source.scale,
        "translate": source.translate,
        "rotate": source.rotate,
        "shear": source.shear,
        "affine": source.affine,
    }


def find_tagged(viewer, source_id: str, role: str, kind: str | None = None, cls=Layer):
    """The ``cls`` layer this package made for (source layer, role), and of ``kind``
    when given; None if there is none."""
    for layer in viewer.layers:
        info = layer.metadata.get(METADATA_KEY) if isinstance(layer, cls) else None
        if (
            isinstance(info, dict)
            and info.get("role") == role
            and info.get("source_id") == source_id
            and (kind is None or info.get("kind") == kind)
        ):
            return layer
    return None


def upsert(
    viewer,
    cls,
    role: str,
    source_id: str,
    data,
    name: str,
    metadata: dict,
    settings: dict,
    *,
    kind: str | None = None,
    create: dict | None = None,
    keep_name: bool = False,
    ndim: int | None = None,
) -> Layer:
    """Update the ``cls`` layer made earlier for (role, source), or add a new one.

    ``settings`` (placement and display) are applied either way, ``create`` only to a
    new layer.  A layer whose number of axes changed is replaced at the same place in
    the list.  The name follows the new one, except with ``keep_name`` while the source
    layer's name is the same (a name napari made unique, "... [1]", or the user's own
    name for it stays).  ``ndim`` is the new layer's number of axes when it is not the
    data's (a Points layer's: its columns).  Without a viewer the layer is only made.
    """
    existing = None if viewer is None else find_tagged(viewer, source_id, role, kind, cls)
    if existing is not None and existing.ndim == (np.ndim(data) if ndim is None else ndim):
        if not keep_name or _source_renamed(existing, metadata):
            existing.name = name
        existing.data = data
        existing.metadata = metadata
        for key, value in settings.items():
            setattr(existing, key, value)
        return existing
    layer = cls(data, name=name, metadata=metadata, **settings, **(create or {}))
    if viewer is None:
        return layer
    if existing is None:
        viewer.add_layer(layer)
    else:
        index = viewer.layers.index(existing)
        viewer.layers.remove(existing)
        viewer.layers.insert(index, layer)
    return layer


def _source_renamed(existing: Layer, metadata: dict) -> bool:
    old = existing.metadata.get(METADATA_KEY, {}).get("source_layer")
    return old != metadata.get(METADATA_KEY, {}).get("source_layer")


def _info(layer: object) -> dict:
    info = layer.metadata.get(METADATA_KEY) if isinstance(layer, Image) else None
    return info if isinstance(info, dict) else {}


def is_sigma_map(layer: object) -> bool:
    """Whether ``layer`` is an Image layer tagged as a sigma map (by the sample or the
    "Make sigma map" or "Estimate sigma map" widget), per-axis ones included."""
    return _info(layer).get("role") in (SIGMA_MAP_ROLE, PER_AXIS_ROLE)


def is_per_axis_map(layer: object) -> bool:
    """Whether ``layer`` is a tagged per-axis map (one plane per blurred axis first)."""
    return _info(layer).get("role") == PER_AXIS_ROLE


def map_in_pixels(layer: object) -> bool:
    """Whether ``layer`` is a tagged sigma map whose values are already in pixels (so
    sigma in world units would divide them by the scale a second time)."""
    return is_sigma_map(layer) and _info(layer).get("units", PIXELS) == PIXELS


def map_fits(sigma_map: Layer, image: Layer, naxes: int | None = None) -> bool:
    """Whether the map layer's shape fits the image layer: it broadcasts to the image
    (same number of axes) or it has the shape of the image's last two (Y, X) axes.  A
    per-axis map fits with its first axis taken off, and that axis ``naxes`` long
    (when given; else 2 or 3)."""
    if sigma_map is image or sigma_map.multiscale or image.multiscale:
        return False
    shape, target = tuple(sigma_map.data.shape), tuple(image.data.shape)
    if is_per_axis_map(sigma_map):
        if not shape or shape[0] not in ((naxes,) if naxes else (2, 3)):
            return False
        shape = shape[1:]
    if len(shape) == len(target) and all(s in (1, n) for s, n in zip(shape, target)):
        return True
    spatial = target[-3:-1] if getattr(image, "rgb", False) else target[-2:]
    return shape == spatial


def fitting_sigma_map(
    layers: Sequence[Layer], image: Layer | None, naxes: int | None = None
) -> Image | None:
    """The topmost tagged sigma map in ``layers`` that fits ``image`` (a per-axis one
    with ``naxes`` planes: see :func:`map_fits`), or None."""
    if image is None:
        return None
    for layer in reversed(list(layers)):
        if is_sigma_map(layer) and map_fits(layer, image, naxes):
            return layer
    return None
