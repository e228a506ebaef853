"""Model backends of the inference service: a protocol, a registry and one module per backend.

Adding a backend is a new module in this package with a class decorated ``@register_backend("name")``
(every module here is imported below, so nothing else in the service changes) and the name added to
:class:`uep_common.contract.events.Backend`; docs/howto-add-a-model-backend.md has the steps.
"""

from __future__ import annotations

import importlib
import pkgutil

from uep_inference.backends.base import (
    BackendError,
    Generation,
    GenerationRequest,
    ModelBackend,
    PredictionOutput,
    PredictionRequest,
    Probe,
)
from uep_inference.backends.registry import (
    Backends,
    check_against_contract,
    register_backend,
    registered_backends,
    transient_errors,
)

_FRAMEWORK = {"base", "registry", "triton_contracts"}  # not backends: the triton backend's request builders

for _module in pkgutil.iter_modules(__path__):
    if _module.name not in _FRAMEWORK:
        importlib.import_module(f"{__name__}.{_module.name}")

check_against_contract(set(registered_backends()))

__all__ = [
    "BackendError",
    "Backends",
    "Generation",
    "GenerationRequest",
    "ModelBackend",
    "PredictionOutput",
    "PredictionRequest",
    "Probe",
    "check_against_contract",
    "register_backend",
    "registered_backends",
    "transient_errors",
]
