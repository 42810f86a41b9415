"""Scoring a bead measurement against the truth, for ``beads/measure.py``: paired bead
images (the same isolated beads and noise, with and without planted defects), table rows
matched to the planted beads, per-bead errors and their Cramér-Rao bound, the map's
errors, and the defects' statuses.

Everything here takes NumPy arrays and the generator's ``BeadTruth``; nothing is timed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

#: A row belongs to a planted bead within this many of the bead's sigmas (each axis its
#: own); a doublet's pair is reached from either member or their midpoint.
MATCH = 1.5
#: The reason a planted defect should be given.
REASON = {"doublet": "doublet", "saturated": "saturated", "edge": "edge"}
#: What a planted defect's rows can say, in the confusion table's order.
OUTCOMES = ("ok", "edge", "saturated", "doublet", "faint", "poor_fit", "outlier", "not found")


# --------------------------------------------------------------------------- images


def draw(expected: np.ndarray, centre, sigma, photons: float) -> None:
    """Add one bead as the generator draws it: the blur's sampled kernel (radius
    ``ceil(5 sigma)``, normalised over that radius) at a sub-pixel centre, ``photons``
    in all, including what falls outside the image."""
    profiles, slices = [], []
    for c, s, n in zip(centre, sigma, expected.shape):
        radius = int(np.ceil(5.0 * s))
        k = np.arange(int(np.floor(c)) - radius, int(np.floor(c)) + radius + 2)
        g = np.exp(-0.5 * ((k - c) / s) ** 2)
        g /= g.sum()
        inside = (k >= 0) & (k < n)
        if not inside.any():
            return
        profiles.append(g[inside])
        slices.append(slice(k[inside][0], k[inside][-1] + 1))
    patch = photons * profiles[0]
    for p in profiles[1:]:
        patch = np.multiply.outer(patch, p)
    expected[tuple(slices)] += patch


def paired_images(truth, background: float, seed: int, gain=1.0, offset=100.0):
    """The truth's beads as two ``uint16`` images: isolated beads only, and the same
    Poisson draw plus an independent draw of the planted defects (a sum of independent
    Poisson counts is Poisson), so the two differ by the defects alone."""
    rng = np.random.default_rng([seed, 7])
    shape = truth.sigma_map.shape[:-1]
    isolated = np.full(shape, float(background))
    defects = np.zeros(shape)
    for centre, sigma, n, kind in zip(truth.centres, truth.sigmas, truth.photons, truth.kind):
        draw(isolated if kind == "isolated" else defects, centre, sigma, n)
    counts = rng.poisson(isolated).astype(np.float64)
    extra = rng.poisson(defects).astype(np.float64)

    def camera(photons):
        return np.clip(np.round(gain * photons + offset), 0, truth.saturation).astype(np.uint16)

    return camera(counts), camera(counts + extra)


# --------------------------------------------------------------------------- matching


@dataclass(frozen=True)
class Planted:
    """The planted beads as entities: isolated beads, saturated and edge beads one each,
    a doublet's pair one; ``kind`` per entity and ``members`` (truth rows)."""

    kind: list[str]
    members: list[tuple[int, ...]]


def planted(truth) -> Planted:
    """Entities in the generator's order (isolated, pairs, saturated, edge)."""
    kind = truth.kind
    pairs = np.flatnonzero(kind == "doublet")
    half = len(pairs) // 2  # first members, then their partners
    kinds, members = [], []
    for i, k in enumerate(kind):
        if k != "doublet":
            kinds.append(str(k))
            members.append((i,))
    at = int(np.count_nonzero(kind == "isolated"))
    pair_entities = [(int(pairs[j]), int(pairs[j + half])) for j in range(half)]
    kinds[at:at] = ["doublet"] * half
    members[at:at] = pair_entities
    return Planted(kinds, members)


def match(rows: np.ndarray, truth, entities: Planted) -> tuple[np.ndarray, np.ndarray]:
    """Each row's entity (-1: none within :data:`MATCH`) and its distance in sigmas."""
    points, sigmas, owner = [], [], []
    for e, members in enumerate(entities.members):
        centres, widths = truth.centres[list(members)], truth.sigmas[list(members)]
        if len(members) == 2:
            centres = np.vstack([centres, centres.mean(axis=0)])
            widths = np.vstack([widths, widths.mean(axis=0)])
        points.append(centres)
        sigmas.append(widths)
        owner += [e] * len(centres)
    points, sigmas, owner = np.vstack(points), np.vstack(sigmas), np.array(owner)
    if len(rows) == 0:
        return np.zeros(0, dtype=int), np.zeros(0)
    d = np.sqrt(np.sum(((rows[:, None, :] - points[None]) / sigmas[None]) ** 2, axis=-1))
    nearest = np.argmin(d, axis=1)
    distance = d[np.arange(len(rows)), nearest]
    return np.where(distance < MATCH, owner[nearest], -1), distance


def centres_of(table, names) -> np.ndarray:
    return np.stack([np.asarray(table[n], dtype=np.float64) for n in names], axis=1)


def detection(status: np.ndarray, entity: np.ndarray, entities: Planted) -> dict:
    """Recall (isolated beads with an ``ok`` row), false detections (``ok`` rows on no
    isolated bead, split by what they are on) and why isolated beads were lost."""
    isolated = np.array([k == "isolated" for k in entities.kind])
    ok = status == "ok"
    on_isolated = ok & (entity >= 0) & isolated[np.maximum(entity, 0)]
    found = np.unique(entity[on_isolated])
    n_ok = int(ok.sum())
    false = int(n_ok - on_isolated.sum())
    lost = Counter()
    for e in np.flatnonzero(isolated):
        if e in found:
            continue
        mine = status[entity == e]
        lost["not found" if len(mine) == 0 else str(Counter(mine).most_common(1)[0][0])] += 1
    return {
        "isolated": int(isolated.sum()),
        "recall": len(found) / max(int(isolated.sum()), 1),
        "ok_rows": n_ok,
        "false": false / max(n_ok, 1),
        "false_unmatched": int(np.count_nonzero(ok & (entity < 0))),
        "false_on_defect": int(
            np.count_nonzero(ok & (entity >= 0) & ~isolated[np.maximum(entity, 0)])
        ),
        "duplicates": int(on_isolated.sum() - len(found)),
        "lost": dict(lost),
        "unmatched_rows": dict(Counter(status[entity < 0].tolist())),
    }


def kept_isolated(status, entity, distance, entities: Planted) -> tuple[np.ndarray, np.ndarray]:
    """Rows and truth rows of the isolated beads kept ``ok`` (the nearest row of each)."""
    rows, truths = [], []
    for e, kind in enumerate(entities.kind):
        if kind != "isolated":
            continue
        mine = np.flatnonzero((entity == e) & (status == "ok"))
        if len(mine):
            rows.append(mine[np.argmin(distance[mine])])
            truths.append(entities.members[e][0])
    return np.array(rows, dtype=int), np.array(truths, dtype=int)


# --------------------------------------------------------------------------- per bead


def cramer_rao(centre, sigma, photons: float, background: float) -> np.ndarray:
    """The Poisson Cramér-Rao bound's standard deviation of each sigma (pixels) for a
    bead drawn as the generator draws it: parameters background, amplitude, centre and
    sigma per axis, Fisher information summed over pixels within ``5 sigma``."""
    centre, sigma = np.asarray(centre, float), np.asarray(sigma, float)
    ndim = len(centre)
    axes = []
    for c, s in zip(centre, sigma):
        radius = int(np.ceil(5.0 * s))
        axes.append(np.arange(int(np.floor(c)) - radius, int(np.floor(c)) + radius + 2) - c)
    norm = np.prod([np.exp(-0.5 * (a / s) ** 2).sum() for a, s in zip(axes, sigma)])
    amplitude = photons / norm
    grid = np.meshgrid(*axes, indexing="ij")
    g = np.exp(-0.5 * sum((x / s) ** 2 for x, s in zip(grid, sigma)))
    signal = amplitude * g
    mu = background + signal
    jac = [np.ones_like(g), g]
    jac += [signal * x / s**2 for x, s in zip(grid, sigma)]
    jac += [signal * x**2 / s**3 for x, s in zip(grid, sigma)]
    jac = np.stack([j.ravel() for j in jac], axis=1)
    fisher = jac.T @ (jac / mu.ravel()[:, None])
    bound = np.linalg.inv(fisher)
    return np.sqrt(np.diag(bound)[2 + ndim :])


def per_bead(table, names, rows, truths, truth, background: float) -> dict:
    """Per axis: relative errors of the kept isolated beads' sigmas, their SE calibration
    and the Cramér-Rao bound's figures."""
    if len(rows) == 0:
        return {}
    crb = np.array([cramer_rao(truth.centres[t], truth.sigmas[t], truth.photons[t],
                               background) for t in truths])  # fmt: skip
    out = {}
    for i, name in enumerate(names):
        fit = np.asarray(table[f"sigma_{name}"], float)[rows]
        se = np.asarray(table[f"sigma_{name}_se"], float)[rows]
        true = truth.sigmas[truths, i]
        rel = (fit - true) / true
        z = (fit - true) / se
        bound = crb[:, i] / true
        out[name] = {
            "beads": len(rows),
            "median_abs": float(np.median(np.abs(rel))),
            "bias_median": float(np.median(rel)),
            "bias_mean": float(np.mean(rel)),
            "rms": float(np.sqrt(np.mean(rel**2))),
            "z_sd": float(np.std(z)),
            "beyond_3se": float(np.mean(np.abs(z) > 3)),
            "crb_median_abs": float(0.6745 * np.median(bound)),
            "crb_rms": float(np.sqrt(np.mean(bound**2))),
            "se_over_crb": float(np.median(se / crb[:, i])),
        }
    return out


# --------------------------------------------------------------------------- the map


def corners(shape: tuple[int, ...]) -> np.ndarray:
    """The lateral corners: 1/8 of each of the last two axes at each of their four
    corners, in every plane."""
    masks = []
    for n in shape[-2:]:
        edge = max(n // 8, 1)
        index = np.arange(n)
        masks.append((index < edge) | (index >= n - edge))
    lateral = masks[0][:, None] & masks[1][None, :]
    return np.broadcast_to(lateral, shape)


def map_errors(fit, true_map: np.ndarray, names, inside=None) -> dict:
    """Per axis: RMS relative error inside the hull and in the corners, the
    uncertainty's calibration inside, and the same RMS for one global sigma per axis
    (the kept beads' median)."""
    inside = ~fit.extrapolated if inside is None else inside
    corner = corners(inside.shape)
    ok = fit.beads.ok
    out = {"hull_share": float(inside.mean())}
    if inside.ndim == 3:  # the corners of the planes the kept beads span in z
        z = np.asarray(fit.beads["z"])[ok]
        planes = np.arange(inside.shape[0])
        spanned = (planes >= z.min()) & (planes <= z.max())
        out["planes_spanned"] = [int(planes[spanned].min()), int(planes[spanned].max())]
        corner_in = corner & spanned[:, None, None]
    for i, name in enumerate(names):
        true = true_map[..., i]
        rel = (fit.sigma_map[..., i] - true) / true
        z = (fit.sigma_map[..., i] - true)[inside] / fit.uncertainty[..., i][inside]
        naive = float(np.median(np.asarray(fit.beads[f"sigma_{name}"])[ok]))
        naive_rel = (naive - true) / true
        out[name] = {
            "rms_hull": float(np.sqrt(np.mean(rel[inside] ** 2))),
            "rms_corners": float(np.sqrt(np.mean(rel[corner] ** 2))),
            "rms_corners_spanned": float(np.sqrt(np.mean(rel[corner_in] ** 2)))
            if inside.ndim == 3
            else None,
            "max_hull": float(np.max(np.abs(rel[inside]))),
            "z_sd": float(np.std(z)),
            "naive_sigma": naive,
            "naive_rms_hull": float(np.sqrt(np.mean(naive_rel[inside] ** 2))),
            "naive_rms_corners": float(np.sqrt(np.mean(naive_rel[corner] ** 2))),
        }
    return out


# --------------------------------------------------------------------------- defects


def defects(status: np.ndarray, entity: np.ndarray, entities: Planted) -> dict:
    """Per planted kind: how many, kept out (no ``ok`` row), flagged with the right
    reason (no ``ok`` row and the reason among its rows), and the confusion counts
    (``ok`` when any row is kept, else the reason if present, else its most common
    status, or ``not found``)."""
    out = {}
    for kind, reason in REASON.items():
        chosen = [e for e, k in enumerate(entities.kind) if k == kind]
        confusion = dict.fromkeys(OUTCOMES, 0)
        for e in chosen:
            mine = status[entity == e].tolist()
            if not mine:
                confusion["not found"] += 1
            elif "ok" in mine:
                confusion["ok"] += 1
            elif reason in mine:
                confusion[reason] += 1
            else:
                confusion[Counter(mine).most_common(1)[0][0]] += 1
        n = len(chosen)
        out[kind] = {
            "planted": n,
            "kept_out": (n - confusion["ok"]) / max(n, 1),
            "right": confusion[reason] / max(n, 1),
            "confusion": confusion,
        }
    total = sum(v["planted"] for v in out.values())
    right = sum(v["right"] * v["planted"] for v in out.values())
    kept_out = sum(v["kept_out"] * v["planted"] for v in out.values())
    out["all"] = {"planted": total, "right": right / max(total, 1),
                  "kept_out": kept_out / max(total, 1)}  # fmt: skip
    return out
