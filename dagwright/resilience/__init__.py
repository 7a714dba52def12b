"""Resilience: circuit breakers with state shared in Redis."""

from dagwright.resilience.breakers import Breakers, BreakerStatus, call_directly

__all__ = ["BreakerStatus", "Breakers", "call_directly"]
