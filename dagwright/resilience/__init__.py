"""Resilience: circuit breakers with state shared in Redis."""

from dagwright.resilience.breakers import BreakerEvent, Breakers, BreakerStatus, call_directly

__all__ = ["BreakerEvent", "BreakerStatus", "Breakers", "call_directly"]
