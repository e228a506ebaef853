"""REST routers of the gateway."""
