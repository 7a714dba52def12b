"""Sandboxed execution of model-written code: docker and bubblewrap backends.

Code never runs unsandboxed: with no working backend it is refused
(SandboxUnavailableError).
"""

from dagwright.sandbox.base import RUNNER, ExecutionResult, Limits, Sandbox, encode_stdin

__all__ = ["RUNNER", "ExecutionResult", "Limits", "Sandbox", "encode_stdin"]
