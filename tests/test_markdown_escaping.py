"""Data text in markdown (issue 33): ``as_markdown`` must make Streamlit show any text
exactly as written. Property-tested with hypothesis against Streamlit's markdown syntax: CommonMark
with GFM tables and strikethrough (markdown-it-py parses the escaped text: nothing but paragraphs
of plain text may come out), LaTeX dollars, and what Streamlit 1.67's frontend
(static/js/StreamlitMarkdown.*.js) rewrites in text after parsing, where escapes no longer count:
the patterns below are copied from it and from the GFM literal-link extension it uses. Checked in
Chromium once: those rewrites made links, an emoji, a colour and a logo of the plain text, and
nothing of the escaped."""

from __future__ import annotations

import re
import string

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pages.render.markdown import WORD_JOINER, as_markdown

MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
PLAIN_BLOCKS = {"paragraph_open", "inline", "paragraph_close"}
PLAIN_INLINE = {"text", "softbreak", "hardbreak"}
# Rewrites of the text itself (text nodes, after escapes are resolved).
TEXT_REWRITES = {
    # remark-emoji's names: ASCII words, "+1", "-1" and the digit-only "100" and "1234"
    "emoji shortcode": re.compile(r":(?:[A-Za-z0-9_+-]*[A-Za-z_][A-Za-z0-9_+-]*|[+-]1|100|1234):"),
    "text directive (remark-directive: a colon, then a name that starts with a letter)": re.compile(r":[A-Za-z]"),
    "Streamlit logo": re.compile(r":streamlit:"),
    "GFM literal link": re.compile(r"(?:https?://|www(?=\.)|(?:mailto|xmpp):[-.\w+])", re.IGNORECASE),
    "GFM literal email": re.compile(r"[-.\w+]+@[-\w]+(?:\.[-\w]+)+"),
    "typographic arrow": re.compile(r"(?:^|\s)(?:<->|->|<-|--|>=|<=|~=)(?:\s|$)"),
}
# Rewrites of the source before parsing.
SOURCE_REWRITES = {"material icon": re.compile(r":material/")}

SYNTAX = string.punctuation + " \t\nw:@/.-<>~=$" + WORD_JOINER
ISSUE_CASES = [
    "log in at http://evil.example/login", "mail ada@example.org", "mailto:ada@example.org", ":smile:",
    ":material/home:", ":red[x]", ":streamlit:", "www.evil.example", "a -> b <= c -- d", "    four spaces",
    "- item", "1. first", "# title", "> quote", "[a](http://x)", "<b>bold</b>", "&amp; &lt;", "$x$ and \\$",
    "**bold** _it_ `code` ~~gone~~", "===", "| a | b |", "note:see", ":blue-background[x]", ":100: :+1:",
]


def rendered_text(markdown: str) -> str:
    """The text CommonMark shows for ``markdown``, refusing any construct but plain paragraphs."""
    tokens = MARKDOWN.parse(markdown)
    assert {token.type for token in tokens} <= PLAIN_BLOCKS, [t.type for t in tokens]
    inline = [child for token in tokens if token.type == "inline" for child in token.children or []]
    assert {child.type for child in inline} <= PLAIN_INLINE, [c.type for c in inline]
    return "\n".join("".join(c.content if c.type == "text" else "\n" for c in token.children or [])
                     for token in tokens if token.type == "inline")


def visible(text: str) -> str:
    """What a reader sees, up to the whitespace markdown folds (line ends, runs of spaces); CommonMark
    shows NUL, which the store refuses anyway, as U+FFFD."""
    return "".join(text.replace(WORD_JOINER, "").replace("\x00", "\ufffd").split())


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.sampled_from(SYNTAX + "abcmsw1 "))))
@example(" ".join(ISSUE_CASES))
@example("\n".join(ISSUE_CASES))
def test_data_text_renders_exactly_as_written_and_forms_no_syntax(text: str) -> None:
    markdown = as_markdown(text)
    shown = rendered_text(markdown)
    assert visible(shown) == visible(text)
    assert markdown.count("$") == markdown.count("\\$"), "a dollar would start LaTeX"
    for what, pattern in TEXT_REWRITES.items():
        assert not pattern.search(shown), (what, shown)
    for what, pattern in SOURCE_REWRITES.items():
        assert not pattern.search(markdown), (what, markdown)


def test_the_issue_cases_are_unchanged_but_for_invisible_joiners() -> None:
    for case in ISSUE_CASES:
        assert rendered_text(as_markdown(case)).replace(WORD_JOINER, "") == case


def test_times_dates_and_plain_prose_get_no_joiner() -> None:
    text = "signed out at 2026-11-26 01:15:00 UTC; ratio 3:2, well-known, a - b"
    assert WORD_JOINER not in as_markdown(text)
