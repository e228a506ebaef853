"""The inference service: each dispatched item's prompt rendered and its model called through a model backend
(:mod:`uep_inference.backends`), the output published as OutputGenerated; see :mod:`uep_inference.service`."""
