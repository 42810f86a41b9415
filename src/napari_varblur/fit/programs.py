"""The fit's compiled programs: one L-BFGS step and the final outputs, per model."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp

from .model import Model, gain_offset, penalty
from .noise import energy


@functools.lru_cache(maxsize=8)
def programs(model: Model) -> tuple:
    """The optimiser, one compiled L-BFGS step and the compiled final outputs (an
    :class:`Aside`: it compiles in a thread while the steps run)."""
    import optax  # imported here: only fitting needs it

    k = len(model.nodes)

    def gain_and_offset(image, data):
        if not model.affine:
            return jnp.ones((), image.dtype), jnp.zeros((), image.dtype)
        return gain_offset(image, data["y"], data["weight"])

    def loss(sigma, image, u, data):
        """The objective: the residual after the best gain and offset (projected out),
        less the sharp image's expected noise term, plus the penalty."""
        gain, offset = gain_and_offset(image, data)
        r = gain * image + offset - data["y"]
        s = energy(sigma, k, model.per_axis, model.max_sigma, model.truncate, jnp)
        bias = (gain * data["noise_x"]) ** 2 * s
        data_term = jnp.sum(data["weight"] * (r * r - bias))
        return data_term + data["smoothness"] * penalty(u, k)

    def objective(u, data):
        sigma = model.sigma(u, data["bases"])
        return loss(sigma, model.blur(data["x"], sigma, data["mask"]), u, data)

    optimiser = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    @jax.jit
    def step(u, state, data):
        value, grad = value_and_grad(u, data=data, state=state)
        updates, state = optimiser.update(grad, state, u, value=value, grad=grad,
                                          value_fn=objective, data=data)  # fmt: skip
        return optax.apply_updates(u, updates), state, value

    @jax.jit
    def outputs(u, data):
        """The map, the model image (after gain and offset), ``J = gain d blur(x,
        sigma)(p) / d sigma(p)`` (one per axis map when ``per_axis``, stacked first), the
        objective, the gain and the offset.

        The blur is a gather (each output pixel depends on its own sigma only), so the
        Jacobian is diagonal and one JVP with a tangent of ones gives all of it.
        """
        sigma = model.sigma(u, data["bases"])

        def blur(s):
            return model.blur(data["x"], s, data["mask"], exact=True)

        if model.per_axis:
            ones = [jnp.zeros_like(sigma).at[..., i].set(1) for i in range(sigma.shape[-1])]
        else:
            ones = [jnp.ones_like(sigma)]
        pairs = [jax.jvp(blur, (sigma,), (t,)) for t in ones]  # (model image, J) each
        image = pairs[0][0]
        gain, offset = gain_and_offset(image, data)
        value = loss(sigma, image, u, data)
        return sigma, gain * image + offset, gain * jnp.stack([j for _, j in pairs]), value, \
            gain, offset  # fmt: skip

    return optimiser, step, Aside(outputs)


@dataclass
class Aside:
    """A jitted program that can compile in a thread: XLA compiles with the GIL released,
    so on a second core the final outputs compile (2-3 s for a 3-D fit on 2 cores)
    while the descent runs.  A call waits for that compile, then runs the program."""

    program: Callable
    thread: threading.Thread | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, *args) -> None:
        """Compile for ``args``' shapes in a thread, the first time only (the jit cache
        keeps it: a later fit of the same model compiles nothing)."""
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._compile, args=args, daemon=True,
                                               name="napari-varblur-fit-compile")  # fmt: skip
                self.thread.start()

    def _compile(self, *args) -> None:
        with contextlib.suppress(Exception):  # the caller's own call reports it
            self.program.lower(*args).compile()

    def __call__(self, *args):
        if self.thread is not None:
            self.thread.join()
        return self.program(*args)


@dataclass
class Descent:
    """L-BFGS steps from the first of ``starts`` that moves, appending to ``history``;
    a generator (``(step, loss)`` out, a true ``send`` stops it) that returns ``(u,
    converged, stopped)``."""

    step: Callable
    optimiser: object
    data: dict
    history: list
    max_steps: int
    tol: float

    def __call__(self, starts):
        history, converged, stopped = self.history, False, False
        for u in starts:
            state, first, calm = initial_state(self.optimiser, u), len(history), 0
            for i in range(first, self.max_steps):
                u, state, value = self.step(u, state, self.data)
                history.append(float(value))
                small = i > first and abs(history[-2] - history[-1]) <= self.tol * abs(history[-2])
                calm = calm + 1 if small else 0
                converged = calm >= 2  # one short L-BFGS step is not convergence
                stopped = bool((yield i + 1, history[-1]))
                if stopped or converged or stuck(history[first:]):
                    break
            # The loss did not move: try the next start (the best single sigma).
            if stopped or not stuck(history[first:]) or len(history) >= self.max_steps:
                break
        return u, converged, stopped


def stuck(history: list[float]) -> bool:
    """Three steps without any change: L-BFGS found no way down from this start."""
    return len(history) >= 3 and max(history[:3]) - min(history[:3]) <= 1e-7 * abs(history[0])


@functools.partial(jax.jit, static_argnums=0)
def initial_state(optimiser, u):
    # optax's initial state holds weakly typed scalars, the updated one does not: make
    # them strong now, or the step would compile twice.  One program (per optimiser,
    # and one per model) instead of a dozen small ones run one by one.
    return jax.tree.map(lambda leaf: jnp.asarray(leaf, jnp.result_type(leaf)),
                        optimiser.init(u))  # fmt: skip
