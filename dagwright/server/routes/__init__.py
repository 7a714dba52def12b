"""The ``/api/v1`` routes, one module per domain, each a thin call of the client."""
