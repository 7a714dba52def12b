"""``dagwright server``: the HTTP API under ``/api/v1`` and the web dashboard.

A thin layer over the Python client: every endpoint calls ``dagwright.Client`` (or one of
its sub-clients) and no rule of dagwright is implemented a second time here.
"""
