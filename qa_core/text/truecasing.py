"""Letter case put back into text that was distributed lowercased (WikiQA as castorini ships it).

Why: spaCy's tagger, parser and entity recogniser learnt from cased text. On lowercased text they
miss names ("lucille ball" is no PERSON), and the semantic-overlap and focus links are built from
those entities. The statistical truecaser of the ``truecase`` package (unigram, bigram and trigram
casing counts) picks each token's most likely casing; it works token by token, so the token
boundaries of pre-tokenised text never move.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def is_lowercased(texts: Iterable[str]) -> bool:
    """True when the texts hold letters and none of them is uppercase (case was thrown away)."""
    has_letters = False
    for text in texts:
        if any(c.isupper() for c in text):
            return False
        has_letters = has_letters or any(c.isalpha() for c in text)
    return has_letters


def restore_case(token_lists: Sequence[Sequence[str]]) -> list[list[str]]:
    """Each token list with its likely casing (as many tokens; unknown words stay as they are).

    The truecaser's tables take about 2 s and 0.5 GB to load, so they are loaded per call and
    dropped afterwards rather than cached for the life of the process (an app imports rarely).
    """
    if not token_lists:
        return []
    from truecase import TrueCaser  # imported here: importing nltk alone takes over a second

    caser = TrueCaser()
    # The package keeps each word's casings in a set and keeps the first of equally scored ones:
    # set order follows Python's per-process string hashing, so a text could come out cased
    # differently from run to run ("Hamlet" or "hamlet"). Sorted lists make every run agree.
    caser.word_casing_lookup = {word: sorted(casings) for word, casings in caser.word_casing_lookup.items()}
    return [
        caser.get_true_case_from_tokens(list(tokens), out_of_vocabulary_token_option="as-is") for tokens in token_lists
    ]
