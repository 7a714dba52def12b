"""Which models take ``output_config.effort``, and the output room a thinking turn needs.

Sources: the effort page (``output_config.effort``: ``low``, ``medium``, ``high``,
``xhigh``, ``max``; with no value the model's default applies, ``high`` on most, ``medium``
on Opus 5.5 and Haiku 5.5; its list of supported models) and the Sonnet 5 / 5.5 migration
guides (adaptive thinking on by default, ``max_tokens`` a hard limit on thinking and
answer together: a ``max_tokens`` tuned for answers without thinking is too small).
"""

from __future__ import annotations

from dagwright.llm.messages_api_rules import MODELS_WITH_EFFORT


def takes_effort(model: str) -> bool:
    """Whether a request to ``model`` may carry ``output_config.effort``."""
    return model.lower().removeprefix("anthropic.").startswith(MODELS_WITH_EFFORT)
