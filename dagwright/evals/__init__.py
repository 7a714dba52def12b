"""Evals: whether the agents' work is good, and whether a change made it better.

A suite file (``suite.py``) names what to run (a plan with inputs, or a goal), its cases
and the scorers that grade them. ``runner.py`` runs every case as an ordinary run on the
queue and grades it: deterministic and behaviour scorers (``scorers.py``, over the run's
record as ``outcomes.py`` reads it) and an LLM judge whose verdicts are cached in Redis
(``judge.py``). ``store.py`` keeps each eval (``results.py``: its record and its case runs'
scores); ``baselines.py`` compares an eval with an earlier one or a saved report, and
``reports.py`` prints tables and writes JUnit XML for CI.

This package sits between the server and the client: it submits runs through
``Client``; the server and the CLI read and start evals through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagwright.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from dagwright.evals.results import CaseResult, EvalRecord, EvalReport, Score
    from dagwright.evals.runner import EvalOptions, evaluate
    from dagwright.evals.store import EvalStore
    from dagwright.evals.suite import EvalCase, EvalSuite, SuiteError, load_suite, parse_suite

_LAZY = {
    "CaseResult": "dagwright.evals.results",
    "EvalRecord": "dagwright.evals.results",
    "EvalReport": "dagwright.evals.results",
    "Score": "dagwright.evals.results",
    "EvalStore": "dagwright.evals.store",
    "EvalOptions": "dagwright.evals.runner",
    "evaluate": "dagwright.evals.runner",
    "EvalCase": "dagwright.evals.suite",
    "EvalSuite": "dagwright.evals.suite",
    "SuiteError": "dagwright.evals.suite",
    "load_suite": "dagwright.evals.suite",
    "parse_suite": "dagwright.evals.suite",
}

__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)

__all__ = [
    "CaseResult",
    "EvalCase",
    "EvalOptions",
    "EvalRecord",
    "EvalReport",
    "EvalStore",
    "EvalSuite",
    "Score",
    "SuiteError",
    "evaluate",
    "load_suite",
    "parse_suite",
]
