"""The model registry: registered models, their backends and contracts, who may see them, API keys at rest and
the probe at registration (:mod:`.model_registry`); a registered model as a call target (:mod:`.targets`).

May import :mod:`uep_common.runtime`, :mod:`uep_common.tables` and :mod:`uep_common.contract`."""
