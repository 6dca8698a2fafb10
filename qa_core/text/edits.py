"""Answers with words taken out: the edits of the faithfulness deletions (``qa_core.faithfulness``)
and of word occlusion (``qa_core.rankers.occlusion``). Words are an answer's
non-whitespace tokens, and an edited answer is its kept words joined by single spaces.
"""

from __future__ import annotations

from collections.abc import Sequence


def words(tokens: Sequence[str]) -> list[int]:
    """Positions of the answer's words (its non-whitespace tokens)."""
    return [i for i, token in enumerate(tokens) if token.strip()]


def without(tokens: Sequence[str], dropped: Sequence[int]) -> str:
    gone = set(dropped)
    return " ".join(tokens[i] for i in words(tokens) if i not in gone)


def only(tokens: Sequence[str], kept: Sequence[int]) -> str:
    return " ".join(tokens[i] for i in sorted(kept))
