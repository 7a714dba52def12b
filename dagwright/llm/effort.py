"""Which models take ``output_config.effort``, and the output room a thinking turn needs.

Sources: the effort page (``output_config.effort``: ``low``, ``medium``, ``high``,
``xhigh``, ``max``; with no value the model's default applies, ``high`` on most, ``medium``
on Opus 5.5 and Haiku 5.5; its list of supported models) and the Sonnet 5 / 5.5 migration
guides (adaptive thinking on by default, ``max_tokens`` a hard limit on thinking and
answer together: a ``max_tokens`` tuned for answers without thinking is too small).
"""

from __future__ import annotations

# By prefix, as the effort page lists them (a dated or Bedrock ``anthropic.`` id is its
# family's). A model not listed is sent no effort: the API would refuse it.
MODELS_WITH_EFFORT = (
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5",
    "claude-sonnet-5",
    "claude-haiku-5-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-opus-4-5",
    "claude-sonnet-4-6",
)


def takes_effort(model: str) -> bool:
    """Whether a request to ``model`` may carry ``output_config.effort``."""
    return model.lower().removeprefix("anthropic.").startswith(MODELS_WITH_EFFORT)
