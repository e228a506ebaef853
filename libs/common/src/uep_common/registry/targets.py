"""A registered model as the call target the inference service is given (:class:`ModelTarget`).

The scheduler puts it on every SampleDispatched and the judge sends it with each judge call to the inference
service's internal endpoint: both build it here, so a field added to the registry reaches both.
"""

from __future__ import annotations

from uep_common.contract.events import ModelTarget
from uep_common.tables.models import Model


def model_target(model: Model, default_capacity: int = 0) -> ModelTarget:
    """The registry row ``model`` as a :class:`ModelTarget`.

    Decoding defaults come from ``models.decoding_defaults`` (``max_tokens`` 256, ``temperature`` 0.0, no
    ``stop`` when absent); ``max_concurrency`` (the calls inference makes at once) is ``models.max_in_flight``, else
    ``default_capacity`` (None when 0: unbounded); the API key stays encrypted (the
    Fernet token as text, which only the inference service decrypts); ``tenant_model`` is true for a model a
    tenant owns, which is never called with the site-wide API key.
    """
    d = model.decoding_defaults or {}
    return ModelTarget(
        model_id=model.id,
        name=model.name,
        backend=model.backend,
        endpoint=model.endpoint,
        triton_model_name=model.triton_model_name,
        triton_model_version=model.triton_model_version,
        max_tokens=d.get("max_tokens", 256),
        temperature=d.get("temperature", 0.0),
        stop=d.get("stop", []),
        max_concurrency=model.max_in_flight or default_capacity or None,
        kind=model.kind,
        contract=model.contract,
        spec=model.spec or {},
        api_key_encrypted=model.api_key_encrypted.decode() if model.api_key_encrypted else None,
        api_key_ref=model.api_key_ref,
        tenant_model=model.owner_tenant_id is not None,
    )
