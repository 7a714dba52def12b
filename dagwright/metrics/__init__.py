"""Prometheus metrics of a dagwright deployment, read from Redis at scrape time."""

DEFAULT_PORT = 9464  # without --port or DAGWRIGHT_METRICS_PORT
