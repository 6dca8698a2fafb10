"""Text as it is shown and tokenised: characters that draw nothing but change what is seen or how
words split are neutralised (issue 32), while the store keeps the text as imported or typed.

- Direction controls (the bidi embeddings, overrides and isolates U+202A-U+202E, U+2066-U+2069,
  and the marks U+200E, U+200F, U+061C) are removed: a right-to-left override makes "evil" display
  as "live" in a table, a heatmap and the Label page, and no question or answer of a reranking
  corpus needs one (the text's own script sets its direction).
- A zero-width space (U+200B) becomes a space: it marks a word break, so "who\u200bdiscovered" is
  two words for spaCy and for the question classifier, as it is for a reader.
- The word joiner (U+2060), the byte order mark / zero-width no-break space (U+FEFF) and the soft
  hyphen (U+00AD) are removed: they join what is one word anyway.
- The zero-width joiner and non-joiner (U+200D, U+200C) stay: they shape Arabic, Persian and Indic
  script and emoji sequences.

Not NFKC: compatibility folding would change what the text says (ligatures, superscripts), and the
store's name checks (``db.base``) refuse hidden characters in names instead of removing them.
"""

from __future__ import annotations

DIRECTION_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
JOINED = "\u2060\ufeff\u00ad"
WORD_BREAK = "\u200b"

_TABLE = {ord(c): None for c in DIRECTION_CONTROLS + JOINED} | {ord(WORD_BREAK): " "}


def visible_text(text: str) -> str:
    """``text`` as it is shown and tokenised (see the module docstring); the same string when it
    holds none of those characters."""
    return text.translate(_TABLE)
