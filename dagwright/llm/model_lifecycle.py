"""Models near or past their end of life: a warning within 30 days, a refusal after.

The API refuses every call to a retired model (404 ``not_found_error``), so a deployment
configured with one fails every node; a model near its end of life works today and fails
on a known day. ``dagwright doctor``, ``run``/``submit`` and the worker ask this module,
which reads the end-of-life dates the installed anthropic SDK carries (the same dates its
own deprecation warning prints) and, for models the SDK no longer lists, the retirements
of :mod:`dagwright.llm.messages_api_rules`, with the replacement named there.

``today`` is a parameter everywhere, so tests stay deterministic whatever the date.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagwright.errors import LLMRequestError, ModelEndOfLifeWarning, RetiredModelError
from dagwright.llm import messages_api_rules as api
from dagwright.llm.model_ids import model_family
from dagwright.llm.sdk_models import sdk_end_of_life

if TYPE_CHECKING:  # a type only: the fake API reads this module without loading settings
    from dagwright.settings import Settings

logger = logging.getLogger(__name__)

SDK_DATE = re.compile(r"^(?P<month>[A-Za-z]+) (?P<day>\d{1,2})(?:st|nd|rd|th)?, (?P<year>\d{4})$")
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
DEPRECATIONS_PAGE = "https://platform.claude.com/docs/en/about-claude/model-deprecations"


@dataclass(frozen=True)
class EndOfLife:
    """When a model family retires, and what replaces it."""

    model: str
    date: dt.date
    replacement: str | None

    def retired(self, today: dt.date) -> bool:
        """From its end-of-life day on, the API refuses the model."""
        return today >= self.date

    def near(self, today: dt.date) -> bool:
        return not self.retired(today) and (self.date - today).days <= (
            api.END_OF_LIFE_WARNING_DAYS
        )

    def instead(self) -> str:
        return f"use {self.replacement}" if self.replacement else f"see {DEPRECATIONS_PAGE}"


def parse_sdk_date(text: str) -> dt.date | None:
    """``November 30th, 2026`` as a date; None if the SDK changed its wording."""
    found = SDK_DATE.match(text.strip())
    if found is None or found["month"].lower() not in MONTHS:
        return None
    month = MONTHS.index(found["month"].lower()) + 1
    return dt.date(int(found["year"]), month, int(found["day"]))


@functools.cache
def end_of_life_table() -> dict[str, EndOfLife]:
    """Every model family with an end of life: the SDK's dates, then the retirements it no
    longer lists (messages_api_rules.RETIRED_MODELS)."""
    dates = {family: dt.date.fromisoformat(day) for family, day in api.RETIRED_MODELS.items()}
    for model, words in sdk_end_of_life().items():
        parsed = parse_sdk_date(words)
        if parsed is not None:
            dates[model_family(model)] = parsed
    return {
        family: EndOfLife(family, day, api.MODEL_REPLACEMENTS.get(family))
        for family, day in dates.items()
    }


def end_of_life(model: str) -> EndOfLife | None:
    """The end of life of ``model`` on the Claude API (a dated id or alias counts as its
    family); None if it has none announced."""
    return end_of_life_table().get(model_family(model))


def retirement_warning(model: str, today: dt.date) -> str | None:
    """One line if ``model`` retires within END_OF_LIFE_WARNING_DAYS of ``today``."""
    found = end_of_life(model)
    if found is None or not found.near(today):
        return None
    days = (found.date - today).days
    return (
        f"model {model} reaches its end of life on {found.date.isoformat()} (in {days} "
        f"day{'s' if days != 1 else ''}); after that the API refuses it: {found.instead()}"
    )


def retired_problem(model: str, today: dt.date) -> str | None:
    """One line if ``model`` is past its end of life (every call to it fails); else None."""
    found = end_of_life(model)
    if found is None or not found.retired(today):
        return None
    return (
        f"model {model} was retired on {found.date.isoformat()}: the API refuses every call "
        f"to it; {found.instead()}"
    )


def check_models(models: Iterable[str], today: dt.date) -> list[str]:
    """Raise RetiredModelError for the first retired model of ``models``; the warnings
    for those near their end of life otherwise (none: an empty list)."""
    unique = sorted(set(models))
    for model in unique:
        problem = retired_problem(model, today)
        if problem is not None:
            raise RetiredModelError(problem)
    return [warning for model in unique if (warning := retirement_warning(model, today))]


def check_configured_models(models: Iterable[str], settings: Settings) -> list[str]:
    """``check_models`` on the day ``settings`` say (``model_lifecycle_date``, else
    today). Partner platforms (Bedrock, Vertex) retire on their own schedules, which the
    SDK does not carry: their models are not judged."""
    if settings.llm.provider != "anthropic":
        return []
    return check_models(models, lifecycle_today(settings))


def warn_of_end_of_life(models: Iterable[str], settings: Settings) -> None:
    """RetiredModelError for a retired model; a ModelEndOfLifeWarning per model near its
    end of life (the CLI prints each as one line, a library caller's filters decide)."""
    for line in check_configured_models(models, settings):
        warnings.warn(line, ModelEndOfLifeWarning, stacklevel=3)


def end_of_life_lines(models: Iterable[str], settings: Settings) -> list[str]:
    """A line per model of ``models`` near or past its end of life, none raised."""
    if settings.llm.provider != "anthropic":
        return []
    today = lifecycle_today(settings)
    lines = (retired_problem(m, today) or retirement_warning(m, today) for m in set(models))
    return sorted(line for line in lines if line is not None)


def lifecycle_today(settings: Settings) -> dt.date:
    return settings.llm.model_lifecycle_date or utc_today()


def utc_today() -> dt.date:
    """Today in UTC: end-of-life dates are the API's, not the local calendar's."""
    return dt.datetime.now(dt.UTC).date()


class LifecycleGuard:
    """The worker's check before each call: a retired model is a permanent error naming
    its replacement (the call would be a 404 anyway, less clearly worded); one near its
    end of life is logged once per process."""

    def __init__(self, provider: str, day: dt.date | None = None) -> None:
        self._judged = provider == "anthropic"
        self._day = day
        self._warned: set[str] = set()

    def check(self, model: str) -> None:
        if not self._judged:
            return
        today = self._day or utc_today()
        problem = retired_problem(model, today)
        if problem is not None:
            raise LLMRequestError(problem)
        warning = retirement_warning(model, today)
        if warning is not None and model not in self._warned:
            self._warned.add(model)
            logger.warning("%s", warning)
