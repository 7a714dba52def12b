"""Budgets of LLM calls: the worst case of the next call, and whether a budget has room.

A call is refused before it is made, never cut short after: its worst case (the
estimated input, ``max_tokens`` of output, priced at the model's rates) must fit what the
budget has left. A node's own budget is checked in the agent loop against the node's
usage. The run's is a reservation in Redis (``lua/reserve.lua``), since nodes running at
once would otherwise each see room for themselves and pass it together.

Four dimensions, each optional: input tokens, output tokens, all tokens, cost in USD.
Tokens count as they are billed (``Usage.billed_input_tokens``): a fresh input or output
token 1, a prompt-cache read its price over the input price (0.1 of a token at the
published rates), a cache write 1.25 (5-minute) or 2 (1-hour). So an agent that re-reads
its conversation from the cache each turn spends a tenth of what a fresh read would,
and a budget of N tokens buys about what N fresh tokens cost. The next call's worst case
counts its whole estimated input as fresh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from dagwright.errors import BudgetExceededError
from dagwright.llm.pricing import WEB_SEARCH_USD_PER_1K, priced
from dagwright.llm.protocol import LLMRequest, rough_tokens
from dagwright.models import Budget, Usage, usd
from dagwright.settings import ModelPrice


def input_tokens(usage: Usage) -> int:
    """Input tokens as billed: cache reads and writes weighted by their price."""
    return usage.billed_input_tokens


@dataclass(frozen=True)
class Dimension:
    """One thing a budget limits."""

    name: str
    """The amount's name on the wire (``reserve.lua``, the run's ``reserved`` hash)."""
    limit: str
    """Its field of Budget."""
    run_field: str
    """The field of the run hash that holds the run's limit (read by ``reserve.lua``)."""
    flag: str
    """The submit flag that sets a run's limit."""
    used: Callable[[Usage], float]
    is_usd: bool = False

    def format(self, amount: float) -> str:
        if self.is_usd:
            return usd(amount)
        unit = self.name.replace("_", " ").replace("total ", "")
        return f"{int(amount):,} {unit}"


DIMENSIONS = (
    Dimension("input_tokens", "max_input_tokens", "budget_input_tokens", "--budget-input-tokens",
              input_tokens),
    Dimension("output_tokens", "max_output_tokens", "budget_output_tokens",
              "--budget-output-tokens", lambda usage: usage.output_tokens),
    Dimension("total_tokens", "max_total_tokens", "budget_tokens", "--budget-tokens",
              lambda usage: usage.billed_total_tokens),
    Dimension("cost_usd", "max_cost_usd", "budget_usd", "--budget-usd",
              lambda usage: usage.cost_usd, is_usd=True),
)  # fmt: skip
BY_NAME = {dimension.name: dimension for dimension in DIMENSIONS}


def amounts(usage: Usage) -> dict[str, float]:
    """``usage`` in each dimension, by name (what a reservation holds)."""
    return {dimension.name: dimension.used(usage) for dimension in DIMENSIONS}


def next_call_input_tokens(
    request: LLMRequest, whole_request_estimate: int, last_call_tokens: int
) -> int:
    """Input tokens of an agent's next call: the estimate of the whole request (system,
    tools, messages), or, if more, what the last call read and wrote (as the API counted
    it) plus the messages added since. The larger, since an estimate that errs low lets a
    run pass its budget, and several nodes erring low at once pass it by as many calls."""
    last_answer = max(
        (i for i, m in enumerate(request.messages) if m["role"] == "assistant"), default=None
    )
    if last_answer is None:
        return whole_request_estimate
    added = rough_tokens(json.dumps(request.messages[last_answer + 1 :]))
    return max(whole_request_estimate, last_call_tokens + added)


def worst_case(
    input_estimate: int,
    max_tokens: int,
    price: ModelPrice | None,
    *,
    searches: int = 0,
    search_usd_per_1k: float = WEB_SEARCH_USD_PER_1K,
) -> Usage:
    """The most a call can spend: its estimated input, ``max_tokens`` out, at ``price``
    (input priced as fresh input: no cache discount is counted on), and ``searches``
    server-side web searches (its ``max_uses``)."""
    usage = Usage(
        input_tokens=input_estimate, output_tokens=max_tokens, web_search_requests=searches
    )
    return priced(usage, price, search_usd_per_1k)


def limits_of(budget: Budget | None) -> list[tuple[Dimension, float]]:
    """The limits ``budget`` sets, each with its dimension, in the order of DIMENSIONS."""
    if budget is None:
        return []
    return [(d, limit) for d in DIMENSIONS if (limit := getattr(budget, d.limit)) is not None]


def run_fields(budget: Budget | None) -> dict[str, str]:
    """The run hash fields recording ``budget`` (what ``reserve.lua`` reads)."""
    return {dimension.run_field: str(limit) for dimension, limit in limits_of(budget)}


def budget_of_run(run: dict[str, str]) -> Budget | None:
    """The budget recorded in a run's hash (None: it has none)."""
    limits = {d.limit: run[d.run_field] for d in DIMENSIONS if run.get(d.run_field)}
    return Budget.model_validate(limits) if limits else None


@dataclass(frozen=True)
class Overrun:
    """A call a budget has no room for: which limit, how much was spent, what it needed."""

    scope: str
    """Whose budget: ``run``, ``node 'x'``."""
    dimension: Dimension
    limit: float
    spent: float
    projected: float
    reserved: float = 0.0
    """Held by calls of other nodes in flight (run budgets)."""
    hint: str = ""
    """How to raise it."""
    unpriced: bool = False
    """The call is to a model with no price: its cost, unknown, cannot be held."""

    def error(self) -> BudgetExceededError:
        d = self.dimension
        if self.unpriced:
            return BudgetExceededError(
                f"{self.scope} budget {d.format(self.limit)}: the next LLM call is to a model "
                "missing from model_prices, its cost unknown: the call was not made; add the "
                "model's price to model_prices"
            )
        held = f", {d.format(self.reserved)} held by calls in flight" if self.reserved else ""
        return BudgetExceededError(
            f"{self.scope} budget {d.format(self.limit)}: the next LLM call could use "
            f"{d.format(self.projected)}, {d.format(self.spent)} spent{held}: "
            f"the call was not made; {self.hint}"
        )


def find_overrun(
    budget: Budget | None,
    spent: Usage,
    projected: Usage,
    *,
    scope: str,
    hint: Callable[[Dimension], str],
) -> Overrun | None:
    """The first limit of ``budget`` that ``projected`` on top of ``spent`` would pass."""
    for dimension, limit in limits_of(budget):
        used, needed = dimension.used(spent), dimension.used(projected)
        if dimension.is_usd and not projected.cost_is_known:
            return Overrun(scope, dimension, limit, used, needed, unpriced=True)
        if used + needed > limit:
            return Overrun(scope, dimension, limit, used, needed, hint=hint(dimension))
    return None


RUN_SCOPE = "run"


def run_hint(dimension: Dimension) -> str:
    return f"raise it with {dimension.flag} or the plan's budget.{dimension.limit}"


def run_overrun(budget: Budget | None, spent: Usage, call: Usage) -> Overrun | None:
    """The run's budget checked in one process, where no other node shares it (planning
    without a run, tests): what Redis's reservation is to runs on workers."""
    return find_overrun(budget, spent, call, scope=RUN_SCOPE, hint=run_hint)


def budget_words(budget: Budget) -> str:
    """``50,000 tokens and $0.50``: a budget's limits, for people (and planners)."""
    return " and ".join(d.format(limit) for d, limit in limits_of(budget)) or "no limit"
