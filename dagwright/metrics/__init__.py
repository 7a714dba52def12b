"""Prometheus metrics of a dagwright deployment, read from Redis at scrape time."""
