"""Model ids as the price table knows them: a dated id or an alias resolved to its family.

The API accepts a family id (``claude-opus-4-5``), a dated snapshot of it
(``claude-opus-4-5-20251101``; ``@20251101`` on Vertex) and ``-latest`` aliases; all
of one family cost the same, so the price table has one row per family. An id that
names no family in the table is unpriced: its cost is unknown, never 0.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # names a type only: the fake API reads this module without settings
    from dagwright.settings import ModelPrice

SNAPSHOT_SUFFIX = re.compile(r"(?:-|@)\d{8}$")
ALIAS_SUFFIX = "-latest"


def model_family(model_id: str) -> str:
    """``model_id`` without its snapshot date or ``-latest``: the family it belongs to."""
    family = model_id.strip()
    family = family.removesuffix(ALIAS_SUFFIX)
    return SNAPSHOT_SUFFIX.sub("", family)


def price_of(model_id: str, prices: dict[str, ModelPrice]) -> ModelPrice | None:
    """The price of ``model_id`` in ``prices`` (``Settings.model_prices``: the prices
    given), else in the published table: its own row (a snapshot priced apart), else its
    family's; None if neither has one (unpriced). Given prices are added to the published
    ones, not replacing them: pricing one more model must not unprice all the others."""
    from dagwright.llm.pricing import DEFAULT_MODEL_PRICES  # pricing stands on settings

    family = model_family(model_id)
    for table in (prices, DEFAULT_MODEL_PRICES):
        found = table.get(model_id) or table.get(family)
        if found is not None:
            return found
    return None


def unpriced(model_ids: set[str], prices: dict[str, ModelPrice]) -> list[str]:
    """The ids of ``model_ids`` the price table has no price for, sorted."""
    return sorted(model_id for model_id in model_ids if price_of(model_id, prices) is None)
