"""The JAX backend: XLA code compiled with ``jax.jit``, on the GPU when JAX sees one.

Shapes are static: radii and tap counts come from the host plan and are part of the
compilation key, while weights, crop normalisers, per-pixel radii and exponents are
array arguments, so a new sigma with the same radius reuses the compiled code.

Split by job: :mod:`.passes` (the one 1-D pass), :mod:`.gather` (the exact per-pixel
gather) and :mod:`.native` (the differentiable steps the JAX-native API runs: the same
passes and gather on ``jax.Array`` data, and the level mix).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ...core.spec import BlurSpec
from ...core.taps import AxisPass, from_working_layout, global_plan, map_plan, working_layout
from ..base import Backend
from .gather import float64_ceil_product, varying_blur
from .passes import correlate, correlate_axis, extend_axis

__all__ = ["BACKEND", "correlate_axis", "extend_axis", "float64_ceil_product", "varying_blur"]


def has_gpu() -> bool:
    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:
        return False


def describe() -> str:
    devices = ", ".join(f"{d.platform}:{d.device_kind}" for d in jax.devices())
    return f"jax {jax.__version__}, {devices}"


_COMPILES = [0]


def _count_compile(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[0] += 1


jax.monitoring.register_event_duration_secs_listener(_count_compile)


def compiles() -> int:
    """How many XLA programs this process compiled so far."""
    return _COMPILES[0]


def device_name() -> str:
    d = jax.devices()[0]
    # "cpu", or the platform and the card ("gpu:NVIDIA H200"); never "cpu:cpu".
    return d.platform if d.device_kind == d.platform else f"{d.platform}:{d.device_kind}"


# --------------------------------------------------------------------------- backend


@partial(jax.jit, static_argnames=("layout",))
def _separable(x, weights, scales, fills, layout):
    for (axis, n, mode, left), w, scale, fill in zip(layout, weights, scales, fills):
        x = correlate_axis(x, axis, n, mode, left, w, scale, fill)
    return x


_varying_jit = jax.jit(varying_blur, static_argnames=("layout",))


def padding_bucket(pad: int, limit: int) -> int:
    """The static padding for a largest radius ``pad``: the next power of two (at most
    ``limit``), so that sweeping sigma over a factor of 3.5 compiles at most 3 programs;
    the loops still stop at the true radius (a traced bound)."""
    bucket = pad if pad <= 2 else 1 << (pad - 1).bit_length()
    return min(bucket, max(pad, limit))


def _on_host(run):
    """Run a blur with x64 switched on for float64 only (for this call: the user's
    global JAX configuration stays as it was), as a new writeable NumPy array (JAX's
    own buffers are read-only)."""

    def call(spec: BlurSpec, *args) -> np.ndarray:
        with jax.enable_x64(spec.precision == np.float64):
            out = run(spec, *args)
        return np.array(out, dtype=spec.precision)

    return call


def _global_blur(spec: BlurSpec, plan: list[AxisPass] | None = None) -> np.ndarray:
    dtype = spec.precision
    passes = global_plan(spec) if plan is None else plan
    out = _separable(
        jnp.asarray(spec.image.astype(dtype, copy=False)),
        tuple(jnp.asarray(p.weights, dtype) for p in passes),
        tuple(jnp.asarray(p.scale, dtype) for p in passes),
        tuple(jnp.asarray(p.fill, dtype) for p in passes),
        layout=tuple((p.axis, p.n, p.mode, p.left) for p in passes),
    )
    return np.asarray(out)


def _map_arrays(spec: BlurSpec, plan, memo: dict | None) -> tuple[jax.Array, jax.Array]:
    """The per-pixel radii and exponents of ``plan`` on the device, in the working
    layout; kept in ``memo`` for the next call on the same map (2.1 ms of a 12.3 ms
    map blur at 512², twice per deblur iteration)."""
    key = ("map arrays", tuple(m.pad for m in plan), np.dtype(spec.precision))
    if memo is not None and key in memo and memo[key][0] is spec.sigma_map:
        return memo[key][1]
    dtype = spec.precision

    def per_pixel(values: np.ndarray, kind) -> jax.Array:
        return jnp.asarray(working_layout(np.broadcast_to(values, spec.shape), spec.axes), kind)

    # An isotropic map sends one radius and one exponent array, broadcast over axes.
    # Its radius is capped at the largest limit only: the loops never go past an
    # axis's own reach, so the per-axis cap needs no array of its own.
    axes_data = plan[:1] if spec.isotropic else plan
    limit = max(m.limit for m in plan) if spec.isotropic else None
    radius = jnp.stack([per_pixel(m.radius(limit), jnp.int32) for m in axes_data])
    exponent = jnp.stack([per_pixel(m.exponent(dtype), dtype) for m in axes_data])
    if memo is not None:  # (the map is held too: an identity check needs it alive)
        memo[key] = (spec.sigma_map, (radius, exponent))
    return radius, exponent


def _map_program(spec: BlurSpec, pad_floor: tuple[int, ...] | None, fill: bool = True,
                 memo: dict | None = None):  # fmt: skip
    """The exact gather of ``spec`` as a function of the image in the working layout
    (and that layout): constant mode's fill included, or left out (``fill`` False: the
    gather's linear part, which :func:`_map_scatter` transposes)."""
    dtype = spec.precision
    plan = map_plan(spec, pad_floor)
    radius, exponent = _map_arrays(spec, plan, memo)
    fills = tuple(jnp.asarray(m.fill if fill else 0.0, dtype) for m in plan)
    if not fill:  # transposed: loops of static length (reverse mode needs them)
        layout = tuple((m.n, m.mode, m.pad) for m in plan)
        return lambda work: _varying_jit(work, radius, exponent, fills, layout=layout)
    layout = tuple((m.n, m.mode, padding_bucket(m.pad, m.limit)) for m in plan)
    reach = jnp.asarray([m.pad for m in plan], jnp.int32)
    return lambda work: _varying_jit(work, radius, exponent, fills, layout=layout, reach=reach)


def _map_blur(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None
              ) -> np.ndarray:  # fmt: skip
    work = working_layout(spec.image, spec.axes).astype(spec.precision)
    out = _map_program(spec, pad_floor, memo=memo)(jnp.asarray(work))
    return from_working_layout(np.asarray(out), spec.shape, spec.axes)


def _map_scatter(spec: BlurSpec, pad_floor: tuple[int, ...] | None = None, memo=None
                 ) -> np.ndarray:  # fmt: skip
    """The exact transpose of :func:`_map_blur`'s linear part (``jax.linear_transpose``
    of the same program)."""
    work = jnp.asarray(working_layout(spec.image, spec.axes).astype(spec.precision))
    program = _map_program(spec, pad_floor, fill=False, memo=memo)
    (out,) = jax.linear_transpose(program, work)(work)
    return from_working_layout(np.asarray(out), spec.shape, spec.axes)


#: The level walk runs whole-image passes here: every pass of an axis has one shape, so a
#: few compiled programs serve every level.
BACKEND = Backend(
    name="jax",
    global_blur=_on_host(_global_blur),
    gather=_on_host(_map_blur),
    scatter=_on_host(_map_scatter),
    correlate=correlate,
    whole_image_levels=True,
    describe=describe,
    device_name=device_name,
    compiles=compiles,
    has_gpu=has_gpu,
)
