"""Models built on their first request and dropped after an idle period.

:class:`LazyModel` stands in for a model object when it is bound into Triton: binding reads only the class's
attributes (``structured_output``, ``class_names``, ``N_FEATURES`` …) and takes the model's methods as
callables, so nothing is loaded until Triton hands the first request to one of them. The first call builds
the model (its weights read, a classifier trained) under a lock; later calls use it. With ``idle_s`` > 0,
:meth:`LazyModel.unload_if_idle` (called by the server's monitoring loop about once a second) drops a model
that has served no request for ``idle_s`` seconds and has none in progress: its ``close()`` is called, the
object freed and the C heap trimmed (``malloc_trim``), so its memory goes back to the system; the next
request builds it again.

The Triton side does not change: every model stays loaded in Triton (ready, its Python backend stub running);
only the model behind it comes and goes, so clients see a slower first request and nothing else.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

LOGGER = logging.getLogger("uep_model_server.lazy")


def _trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``; a no-op elsewhere)."""
    name = ctypes.util.find_library("c")
    if not name:
        return
    trim = getattr(ctypes.CDLL(name), "malloc_trim", None)
    if trim is not None:
        trim(0)


class LazyModel:
    """A model of class ``cls`` built by ``factory()`` on its first use (see the module docstring).

    Attribute reads go to the built model when there is one, else to the class: a plain class attribute is
    returned as is, a method as a callable that builds the model when called. Calls are counted in progress
    so that an idle unload never drops a model while a request uses it.

    Args:
        name: the Triton model name (for logs).
        cls: the model's class (its attributes answer reads before the model is built).
        factory: builds the model; may raise (the error reaches the request that triggered it, and the next
            request tries again).
        idle_s: drop the model after this many seconds without a request; 0 keeps it once built.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self,
        name: str,
        cls: type,
        factory: Callable[[], Any],
        idle_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._name = name
        self._cls = cls
        self._factory = factory
        self._idle_s = idle_s
        self._clock = clock
        self._lock = threading.Lock()
        self._model: Any = None
        self._busy = 0
        self._last_used = clock()
        self.loads = 0
        """How many times the model was built (first use, and again after each idle unload)."""

    @property
    def name(self) -> str:
        """The Triton model name."""
        return self._name

    @property
    def model_class(self) -> type:
        """The model's class."""
        return self._cls

    @property
    def loaded(self) -> bool:
        """Whether the model is built now."""
        return self._model is not None

    def _build(self) -> Any:
        """The model, built now if it is not; the caller holds the lock."""
        if self._model is None:
            started = time.perf_counter()
            self._model = self._factory()
            self.loads += 1
            LOGGER.info("model %s loaded on first use in %.2f s", self._name, time.perf_counter() - started)
        return self._model

    def load(self) -> Any:
        """The model, built now if it is not (blocking; concurrent callers wait for one build)."""
        with self._lock:
            return self._build()

    def _use(self, method: str, *args: Any, **kwargs: Any) -> Any:
        with self._lock:  # built and counted in one step: an idle unload cannot slip in between
            model = self._build()
            self._busy += 1
        try:
            return getattr(model, method)(*args, **kwargs)
        finally:
            with self._lock:
                self._busy -= 1
                self._last_used = self._clock()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the model (``model(requests)``), building it first if need be."""
        return self._use("__call__", *args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        model = self.__dict__.get("_model")
        if model is not None and not callable(getattr(type(model), attr, None)):
            return getattr(model, attr)  # an instance's data attribute
        declared = getattr(self._cls, attr)  # AttributeError when the class has no such attribute
        if not callable(declared):
            return declared
        return functools.partial(self._use, attr)

    def unload_if_idle(self) -> bool:
        """Drop the model if it is built, unused for ``idle_s`` seconds and serving no request; returns whether
        it was dropped. Never drops anything when ``idle_s`` is 0."""
        with self._lock:
            if self._idle_s <= 0 or self._model is None or self._busy:
                return False
            if self._clock() - self._last_used < self._idle_s:
                return False
            model, self._model = self._model, None
        close = getattr(model, "close", None)
        if close is not None:
            close()
        del model
        gc.collect()
        _trim_heap()
        LOGGER.info("model %s unloaded after %.0f s idle", self._name, self._idle_s)
        return True
