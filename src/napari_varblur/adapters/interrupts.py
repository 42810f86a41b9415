"""Ctrl-C for the command line: it always stops a run, and never lets an output in.

Python turns SIGINT into a ``KeyboardInterrupt`` wherever the main thread is.  Inside a
garbage-collector callback (JAX registers one), a ``__del__`` or a weakref callback
that exception is printed ("Exception ignored in ...") and dropped, and the run went on
to replace its output.  While :func:`caught_interrupts` is active, SIGINT is remembered
as well as raised: inside a callback known to drop it, it is raised again a moment later
from outside; and :func:`committing`, around the move of a finished output into place,
raises it once more when it was dropped all the same, and holds it off while the move
runs (a move stopped half-way could delete the old output and leave no new one).
"""

from __future__ import annotations

import contextlib
import gc
import signal
import threading
from collections.abc import Iterator
from types import FrameType

__all__ = ["caught_interrupts", "committed", "committing", "interrupted", "raise_if_interrupted"]

_INTERRUPTED = threading.Event()
_ACTIVE = threading.Event()
_DEFERRED = threading.Event()
#: Outputs moved into place since :func:`caught_interrupts` was entered.
_COMMITTED: list[str] = []
#: How long a deferred interrupt waits for the callback that would drop it to return.
_RETRY_S = 0.01


def interrupted() -> bool:
    """True once SIGINT arrived under :func:`caught_interrupts` (until it is next entered)."""
    return _INTERRUPTED.is_set()


def raise_if_interrupted() -> None:
    """Raise ``KeyboardInterrupt`` if SIGINT arrived under an active
    :func:`caught_interrupts`, even if a callback dropped it.  (Outside one, e.g. a
    library call after an interrupted command in the same process, nothing.)"""
    if _ACTIVE.is_set() and _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def committed() -> list[str]:
    """The outputs moved into place since :func:`caught_interrupts` was entered."""
    return list(_COMMITTED)


@contextlib.contextmanager
def committing(path: object) -> Iterator[None]:
    """Around the move of a finished output into place at ``path``: raise first if
    SIGINT came (even one a callback dropped); then hold it off until the move is done."""
    raise_if_interrupted()
    _DEFERRED.set()
    try:
        yield
        _COMMITTED.append(str(path))
    finally:
        _DEFERRED.clear()


@contextlib.contextmanager
def caught_interrupts() -> Iterator[None]:
    """Handle SIGINT as above for the block, then restore the previous handler.

    Nothing changes off the main thread (no handler can be set there), nor where SIGINT
    is ignored: a shell's background job keeps ignoring it, as it would have.
    """
    _INTERRUPTED.clear()
    _COMMITTED.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, _on_sigint)
    _ACTIVE.set()
    try:
        yield
    finally:
        _ACTIVE.clear()
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _INTERRUPTED.set()
    if _DEFERRED.is_set():  # an output is being moved into place: let it finish
        return
    if _dropped_here(frame):
        timer = threading.Timer(_RETRY_S, _signal_main_thread)
        timer.daemon = True
        timer.start()
        return
    raise KeyboardInterrupt


def _dropped_here(frame: FrameType | None) -> bool:
    """Is the main thread inside a gc callback or a ``__del__``, where Python prints
    and drops an exception instead of raising it?"""
    callbacks = {getattr(c, "__code__", None) for c in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _signal_main_thread() -> None:
    if not _ACTIVE.is_set():  # the run ended meanwhile
        return
    if hasattr(signal, "pthread_kill"):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    else:  # Windows: the C handler only sets a flag the main thread reads
        signal.raise_signal(signal.SIGINT)
