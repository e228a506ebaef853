"""The gateway's use cases: what the routes share, free of HTTP.

A route parses its request, checks the caller's role (:mod:`uep_gateway.access`), calls a use case and shapes
the response. A use case takes a tenant-scoped session (:func:`uep_gateway.deps.db_session`) and plain values,
keeps the owner-tenant rule (another tenant's object is ``not_found``, as an unknown one) and raises
:class:`uep_gateway.errors.DomainError` with a kind, never an HTTP status; :mod:`uep_gateway.error_responses`
answers it. Use cases import neither :mod:`uep_gateway.api` nor FastAPI (import-linter checks both).

- :mod:`~uep_gateway.usecases.evaluations`: an owned evaluation, its view, its running accuracy;
- :mod:`~uep_gateway.usecases.planning`: resolving a benchmark and models and planning the evaluations of a
  create request (batches, A/B arms, sampling, trial render of templates);
- :mod:`~uep_gateway.usecases.lifecycle`: cancel, stop, retry;
- :mod:`~uep_gateway.usecases.judging`: checking judge configurations;
- :mod:`~uep_gateway.usecases.catalog`: the catalogue as a caller sees it.
"""
