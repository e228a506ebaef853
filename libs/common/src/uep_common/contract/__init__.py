"""The public contract: event schemas and topics (:mod:`.events`), the model tensor contracts
(:mod:`.model_contracts`), the typed configuration of benchmarks, evaluations and judges (:mod:`.configs`,
:mod:`.judge_config`, :mod:`.params`), the cost model (:mod:`.costs`) and benchmark versions (:mod:`.benchmarks`).

Imports nothing else of ``uep_common``: everything else may import it. Enforced by the import-linter contracts
in the root ``pyproject.toml`` (``make check``)."""
