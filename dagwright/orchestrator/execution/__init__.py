"""Executing nodes on a worker: claim, lease, limits, services, outcome, and the reconciler."""
