"""``sigma_map_from_beads``: a sigma map measured from an image of sub-resolution beads."""

from __future__ import annotations

from collections.abc import Generator
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ..core.bead_params import BEAD_DEFAULT as DEFAULT
from ..core.bead_params import BeadOptions, fill_bead_doc
from ..core.checks import ArgumentError
from . import field, pipeline
from . import status as status_rules
from .result import FWHM, BeadFit, BeadTable, summarise
from .settings import Settings, settings

#: The field needs at least this many kept beads.
FEWEST = 3


class Progress(NamedTuple):
    """A step of :func:`sigma_map_from_beads_steps`: ``stage`` ("fitting plane 1/1",
    "field"), and ``done`` of ``total`` units of it."""

    stage: str
    done: int
    total: int


@fill_bead_doc
def sigma_map_from_beads(
    image: npt.ArrayLike,
    *,
    spacing: float | tuple[float, ...] | None = DEFAULT.spacing,
    threshold: float = DEFAULT.threshold,
    min_separation: float = DEFAULT.min_separation,
    saturation: float | None = DEFAULT.saturation,
    axes: tuple[int, ...] | None = DEFAULT.axes,
    per_axis: bool = DEFAULT.per_axis,
    truncate: float = DEFAULT.truncate,
    degree: int | None = DEFAULT.degree,
) -> BeadFit:
    """Measure a sigma map from an image of sub-resolution beads.

    Beads are found as local maxima of the image smoothed at their size, standing
    ``threshold`` noise standard deviations above a robust background; each is fitted
    with a Gaussian plus a background by weighted least squares (Poisson variance with
    the camera's gain, estimated from the beads), using the blur's own sampled kernel,
    so a fitted sigma is the one ``gaussian_blur`` takes.  Beads cut by the border,
    saturated, doubled, faint or badly fitted are left out with that reason; a smooth
    field (a polynomial of a degree chosen by the data, with iterative outlier
    rejection) over the kept ones gives the map and its uncertainty.  One failed fit
    never stops the others.

    Parameters
    ----------
    image
        A 2-D or 3-D bead image (a z-stack: z first), or a stack of them (see ``axes``).
    spacing
        %(spacing)s
    threshold
        %(threshold)s
    min_separation
        %(min_separation)s
    saturation
        %(saturation)s
    axes
        %(axes)s
    per_axis
        %(per_axis)s
    truncate
        %(truncate)s
    degree
        %(degree)s

    Returns
    -------
    BeadFit
        ``sigma_map`` (the image's shape, plus one sigma per axis with ``per_axis``),
        ``uncertainty``, ``extrapolated``, ``beads`` (a table: one row per candidate,
        its ``status`` ``"ok"`` or why it was left out) and ``summary``.

    Raises
    ------
    ValueError
        An argument is wrong, or the image holds too few usable beads (the message
        says what was found).

    Examples
    --------
    >>> fit = sigma_map_from_beads(beads, spacing=(0.3, 0.1, 0.1))  # doctest: +SKIP
    >>> print(fit)  # doctest: +SKIP
    >>> sharp = deblur(image, fit.sigma_map, model="scatter", iterations=30)  # doctest: +SKIP
    """
    options = BeadOptions.pick(locals())
    steps = sigma_map_from_beads_steps(image, **options.kwargs())
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def sigma_map_from_beads_steps(
    image: npt.ArrayLike, **options
) -> Generator[Progress, None, BeadFit]:
    """:func:`sigma_map_from_beads` as a generator: it yields :class:`Progress` between
    batches of beads (where a caller may stop it) and returns the :class:`BeadFit`.

    The arguments are checked when it is made, not at the first ``next`` (as
    ``deblur_steps`` and ``fit_sigma_map_steps``): a GUI shows a bad choice at once,
    before it starts a worker thread."""
    return _steps(settings(image, BeadOptions(**options)))


def _steps(setting: Settings) -> Generator[Progress, None, BeadFit]:
    planes = setting.image if setting.stack is not None else setting.image[None]
    found = []
    for index, plane in enumerate(planes):
        stage = f"fitting beads, plane {index + 1}/{len(planes)}"
        steps = pipeline.measure(plane, setting)
        while True:
            try:
                done, total = next(steps)
            except StopIteration as result:
                found.append(result.value)
                break
            yield Progress(stage, done, total)
    yield Progress("field", 0, 1)
    return _field(found, setting)


def _field(found: list[pipeline.Plane], setting: Settings) -> BeadFit:
    centres = np.concatenate([p.centres for p in found])
    sigmas = np.concatenate([p.sigmas for p in found])
    errors = np.concatenate([p.sigma_se for p in found])
    status = np.concatenate([p.status for p in found])
    evidence = np.concatenate([p.evidence for p in found])
    if np.count_nonzero(status == "ok") < FEWEST:
        _too_few(status)
    columns = list(range(sigmas.shape[1])) if setting.per_axis else [0]
    names = [f"sigma_{setting.names[c]}" for c in columns] if setting.per_axis else ["sigma"]
    shape = setting.image.shape[-len(setting.axes) :]
    fits = _reject(centres, sigmas[:, columns], errors[:, columns], status, shape, setting)
    _blends(centres, sigmas[:, columns], errors[:, columns], status, evidence, fits)
    kept = status == "ok"
    fields = dict(zip(names, fits))
    sigma_map, uncertainty, outside = field.render(list(fields.values()), centres[kept], shape)
    if not setting.per_axis:
        sigma_map, uncertainty = sigma_map[..., 0], uncertainty[..., 0]
    noise = float(np.median([p.noise for p in found]))
    gain = float(np.median([p.gain for p in found]))
    summary = summarise(sigmas, kept, status, setting.names, setting.spacing, fields, noise, gain)
    table = _table(found, status, setting)
    return BeadFit(*_placed((sigma_map, uncertainty, outside), setting), table, summary,
                   setting.axes, setting.names)  # fmt: skip


def _reject(centres, sigmas, errors, status, shape, setting: Settings) -> list[field.Field]:
    """The field of each sigma column over the kept beads; a bead out on one column is
    an ``"outlier"`` on all, and the others are refitted without it."""
    for _ in range(3):
        kept = status == "ok"
        fits = [field.fit(centres[kept], sigmas[kept, c], errors[kept, c], shape, setting.degree)
                for c in range(sigmas.shape[1])]  # fmt: skip
        inside = np.all([k for _, k in fits], axis=0)
        if inside.all():
            break
        status[np.flatnonzero(kept)[~inside]] = "outlier"
    return [f for f, _ in fits]


def _blends(centres, sigmas, errors, status, evidence, fields) -> None:
    """An outlier wider than the field (its worst column) that two Gaussians split into
    comparable parts is a ``"doublet"``: blended beads widen a fit, and below two
    sigmas apart the blend's shape alone cannot tell them (at 1,000 photons the
    expected chi-square drop is under ten)."""
    out = np.flatnonzero(status == "outlier")
    if out.size == 0:
        return
    residual = sigmas[out] - np.stack([f.value(centres[out]) for f in fields], axis=1)
    spread = np.sqrt(errors[out] ** 2 + np.array([f.tau for f in fields]) ** 2)
    worst = np.take_along_axis(
        residual / spread, np.argmax(np.abs(residual / spread), axis=1)[:, None], 1
    )
    split = status_rules.doublet(*evidence[out].T, least=-np.inf)
    status[out[(worst[:, 0] > 0) & split]] = "doublet"


def _too_few(status: np.ndarray) -> None:
    reasons = ", ".join(f"{np.count_nonzero(status == s)} {s}" for s in np.unique(status)
                        if s != "ok")  # fmt: skip
    reasons = f" ({reasons} left out)" if reasons else ""
    raise ArgumentError(
        f"image: {np.count_nonzero(status == 'ok')} usable beads of {len(status)} "
        f"candidates{reasons}; a map needs at least {FEWEST}: image more beads, or "
        f"check threshold=, saturation= and min_separation="
    )


def _placed(arrays, setting: Settings):
    """The maps in the image's own axis order (a stack axis gets the same map)."""
    spatial = len(setting.axes)
    placed = []
    for array in arrays:
        extra = array.ndim - spatial
        if setting.stack is not None:
            array = np.broadcast_to(array, (setting.image.shape[0], *array.shape))
            order = (setting.stack, *setting.axes)
        else:
            order = setting.axes
        inverse = np.argsort(order)
        array = np.transpose(array, (*inverse, *range(len(order), len(order) + extra)))
        placed.append(np.ascontiguousarray(array))
    return placed


def _table(found: list[pipeline.Plane], status, setting: Settings) -> BeadTable:
    def joined(name):
        return np.concatenate([getattr(p, name) for p in found])

    columns = {}
    if setting.stack is not None:
        columns["plane"] = np.concatenate([np.full(len(p.status), i) for i, p in enumerate(found)])
    centres, centre_se = joined("centres"), joined("centre_se")
    sigmas, sigma_se = joined("sigmas"), joined("sigma_se")
    for i, name in enumerate(setting.names):
        columns[name], columns[f"{name}_se"] = centres[:, i], centre_se[:, i]
    if setting.per_axis:
        for i, name in enumerate(setting.names):
            columns[f"sigma_{name}"], columns[f"sigma_{name}_se"] = sigmas[:, i], sigma_se[:, i]
    else:
        columns["sigma"], columns["sigma_se"] = sigmas[:, 0], sigma_se[:, 0]
    for i, name in enumerate(setting.names):
        columns[f"fwhm_{name}"] = FWHM * sigmas[:, i] * setting.spacing[i]
    for name in ("amplitude", "amplitude_se", "background", "background_se"):
        columns[name] = joined(name)
    columns["chi2"] = joined("chi2")
    columns["status"] = status.astype(str)
    return BeadTable(columns)
