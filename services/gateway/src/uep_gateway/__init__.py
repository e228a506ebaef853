"""The gateway: the public REST API (``/v1``), the web UI, authentication, tenancy and the audit log, and
the outbox relay of the events it writes; the application is built by :mod:`uep_gateway.app`."""
