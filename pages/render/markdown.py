"""Data text for Streamlit's markdown, shown exactly as written: the app's one escaping function
(the escaping is Streamlit's concern, so it lives with the pages, not in a service)."""

from __future__ import annotations

import html
import re

# What forms markdown, GFM or LaTeX syntax anywhere in a line (``&<>`` become entities, which never
# form syntax; ``(`` ``)`` ``!`` only follow an escaped ``]`` or ``[``), and what does at a line's
# start: list items (``-`` ``+`` ``1.`` ``1)``), setext underlines (``=`` ``-``).
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]#~|$])")
_LINE_START_SPECIALS = re.compile(r"^([-+=]|\d{1,9}(?=[.)]))", re.MULTILINE)


# Streamlit's markdown (1.67, frontend StreamlitMarkdown) also rewrites the text itself after
# parsing, where no escape reaches: emoji and ``:streamlit:`` shortcodes, ``:material/...:``
# icons, ``:name[...]`` directives (colours, badges, ``:small``), GFM's literal links (http(s)://,
# www., emails, mailto:) and typographic arrows (``->``, ``<=``, ``--`` ...). A WORD JOINER
# (U+2060: invisible, no width, no line break) breaks each pattern where it would start, so the
# text still reads exactly as written; tests/test_markdown_escaping.py holds the patterns.
WORD_JOINER = "\u2060"


# After a colon: a directive or shortcode name (an ASCII letter, ``_``, ``+``, ``-``; the digit-only
# emoji names), a link's ``//``; after ``@``: an email's domain; ``www`` before its dot; inside
# ``->``, ``<=``, ``--`` ... (a time such as 12:30 or a date gets none).
_REWRITTEN = re.compile(
    r"(?<=:)(?=[A-Za-z_+/-]|(?:100|1234):)|(?<=@)(?=[\w-])|(?<=www)(?=\.)|(?<=[<>~=-])(?=[<>~=-])",
    re.IGNORECASE,
)


_LINE_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)


def as_markdown(text: str) -> str:
    """Data text for ``st.markdown``, shown exactly as written: no markdown, LaTeX or HTML from
    data (punctuation backslash-escaped, ``&<>`` as entities, a line's indentation as entities, so
    it is no code block), and nothing Streamlit rewrites in text (word joiners, see above): no
    links, emoji, icons or colours. The one escaping function for data in markdown.

    Escapes before entities, and quotes left to the backslash, so no entity gets a backslash inside."""
    escaped = _MARKDOWN_SPECIALS.sub(r"\\\1", _REWRITTEN.sub(WORD_JOINER, text))
    escaped = html.escape(_LINE_START_SPECIALS.sub(_escape_line_start, escaped), quote=False)
    return _LINE_INDENT.sub(lambda indent: "".join(f"&#{ord(c)};" for c in indent.group()), escaped)


def _escape_line_start(match: re.Match[str]) -> str:
    """``-`` -> ``\\-``; ``12`` (before ``.`` or ``)``) -> ``12\\`` (the delimiter gets the backslash)."""
    marker = match.group()
    return f"{marker}\\" if marker[0].isdigit() else f"\\{marker}"
