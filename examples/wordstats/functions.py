"""Functions for examples/wordstats/plan.yaml: declare your own with @dagwright.function.

dagwright run examples/wordstats/plan.yaml --import examples.wordstats.functions
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import dagwright


@dagwright.function
def word_stats(text: str, top: int = 3) -> dict[str, Any]:
    """Count the words of a text and its most common ones."""
    words = [word.strip(".,;:!?").lower() for word in text.split()]
    words = [word for word in words if word]
    return {
        "words": len(words),
        "distinct": len(set(words)),
        "top": Counter(words).most_common(top),
    }


@dagwright.function
def compare_stats(inputs: dict[str, dict[str, Any]]) -> str:
    """A one-line comparison of the word statistics of every input."""
    parts = [
        f"{name}: {stats['words']} words ({stats['distinct']} distinct)"
        for name, stats in inputs.items()
    ]
    longest = max(inputs, key=lambda name: inputs[name]["words"])
    return "; ".join(parts) + f"; longest: {longest}"
