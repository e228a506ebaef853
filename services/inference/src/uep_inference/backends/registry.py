"""The backend registry: ``@register_backend("name")`` and the dispatcher that picks a backend by the
model's ``backend`` name.

The names a model may carry are one list in the event contract, :class:`uep_common.contract.events.Backend` (a
``models`` row's backend is checked against it in code, ``uep_common.tables.models.BACKENDS``); :func:`check_against_contract`
fails the inference service's start-up when the registered backends and that list differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from uep_common.contract.events import Backend, ModelTarget
from uep_inference.backends.base import ModelBackend

if TYPE_CHECKING:
    from uep_inference.settings import InferenceSettings

_REGISTRY: dict[str, type[ModelBackend]] = {}


def register_backend(name: str) -> Callable[[type], type]:
    """Class decorator: register a :class:`~uep_inference.backends.base.ModelBackend` implementation
    under ``name`` (sets ``cls.name``).

    Raises:
        ValueError: ``name`` is already registered by another class.
        TypeError: the class lacks a member of the protocol (``generate``, ``probe``, ``capacity``,
            ``close``, ``transient_errors``).
    """

    def decorate(cls: type) -> type:
        missing = [m for m in ("generate", "probe", "capacity", "close", "transient_errors") if not hasattr(cls, m)]
        if missing:
            raise TypeError(f"backend {name!r} ({cls.__qualname__}) lacks {', '.join(missing)}")
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"backend {name!r} is already registered by {_REGISTRY[name].__qualname__}")
        cls.name = name  # type: ignore[attr-defined]  # the registry is what gives a backend class its name
        _REGISTRY[name] = cls
        return cls

    return decorate


def registered_backends() -> dict[str, type[ModelBackend]]:
    """Registered backend classes by name (a copy)."""
    return dict(_REGISTRY)


def transient_errors() -> frozenset[str]:
    """The union of every registered backend's ``transient_errors`` (error kinds worth another attempt)."""
    return frozenset().union(*(cls.transient_errors for cls in _REGISTRY.values()))


def check_against_contract(registered: set[str], known: set[str] | None = None) -> None:
    """Raise ``RuntimeError`` naming the difference when ``registered`` is not exactly ``known`` (default:
    the values of :class:`uep_common.contract.events.Backend`): a name only registered could never reach this
    service in a SampleDispatched, a name only in the contract would be dispatched to a replica that cannot
    call it."""
    known = {b.value for b in Backend} if known is None else known
    if registered != known:
        raise RuntimeError(
            "model backends differ from uep_common.contract.events.Backend: "
            f"registered only {sorted(registered - known)}, in the contract only {sorted(known - registered)}"
        )


class Backends:
    """One instance of every registered backend, picked by ``target.backend``."""

    def __init__(self, settings: InferenceSettings | None = None) -> None:
        if settings is None:
            from uep_inference.settings import InferenceSettings

            settings = InferenceSettings()
        self._backends: dict[str, ModelBackend] = {name: cls(settings) for name, cls in _REGISTRY.items()}

    def for_target(self, target: ModelTarget) -> ModelBackend:
        """The backend of ``target``. Raises ``KeyError`` for a name no backend is registered under (cannot
        happen for a decoded event: :func:`check_against_contract` runs at import)."""
        return self._backends[str(target.backend)]

    async def close(self) -> None:
        """Close every backend's clients."""
        for backend in self._backends.values():
            await backend.close()
