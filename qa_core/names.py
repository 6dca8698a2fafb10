"""The one rule for the names a user gives: datasets, systems and splits (issue 45).

A name is shown on every page, typed in the CLI, written in URLs and audit entries, and a dataset's
names folders and files (seed runs, exports). So one rule holds for all three: letters (any
script), digits, '_', '-' and '.', starting with a letter or digit, no '..', at most
``MAX_NAME_CHARS`` characters and ``MAX_NAME_BYTES`` bytes in UTF-8 (a file name's limit). No
separator, blank, newline, control character or markup gets in, so a name is never a path
(``../x``) and never draws as something else.

``name_from_file`` derives a name from an uploaded file's name (a page's default), which is never
used as a path itself.
"""

from __future__ import annotations

import re
import unicodedata

from qa_core.types import MAX_NAME_CHARS, InputError

MAX_NAME_BYTES = 255  # the longest file or folder name most file systems keep
NAME_RULE = (f"letters, digits, '_', '-' and '.', starting with a letter or digit, no '..', at most {MAX_NAME_CHARS} "
             f"characters ({MAX_NAME_BYTES} bytes)")
_MARKS = frozenset({"Mn", "Mc"})  # combining marks: part of a letter in Indic scripts and in decomposed accents


def check_name(name: object, what: str) -> str:
    """``name`` stripped, if it follows the rule (``NAME_RULE``); else ``InputError``, one sentence
    naming ``what`` ("dataset name", "system name", "split") and, shown safely, the name."""
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"the {what} is empty: give one made of {NAME_RULE}")
    name = name.strip()
    too_long = len(name) > MAX_NAME_CHARS or len(name.encode("utf-8")) > MAX_NAME_BYTES
    if too_long or not _follows(name):
        if too_long:
            raise InputError(f"the {what} {_shown(name)} is too long ({len(name):,} characters, "
                             f"{len(name.encode('utf-8')):,} bytes; the limit is {MAX_NAME_CHARS} characters and "
                             f"{MAX_NAME_BYTES} bytes); a name holds {NAME_RULE}")
        raise InputError(f"the {what} {_shown(name)} is not allowed: {_fault(name)}; a name holds {NAME_RULE}")
    return name


def name_from_file(file_name: str) -> str:
    """A name that follows the rule, made from an uploaded file's name: its last part without the
    last extension, each run of other characters made one '-', cut to the limits ("" when nothing is
    left: the user types one)."""
    base = re.split(r"[/\\]", unicodedata.normalize("NFC", file_name))[-1]
    stem = base.rpartition(".")[0] or base
    name = re.sub("-+", "-", "".join(c if _in_a_name(c) else "-" for c in stem)).strip("-_.")
    while len(name) > MAX_NAME_CHARS or len(name.encode("utf-8")) > MAX_NAME_BYTES:
        name = name[:-1]
    return name


def _in_a_name(char: str) -> bool:
    return char.isalnum() or char in "_.-" or unicodedata.category(char) in _MARKS


def _follows(name: str) -> bool:
    return name[0].isalnum() and ".." not in name and all(_in_a_name(c) for c in name)


def _fault(name: str) -> str:
    """Where a name that is not too long breaks the rule, in a few words."""
    if not name[0].isalnum():
        return f"it starts with {name[0]!r}"
    if ".." in name:
        return "it holds '..'"
    char = next(c for c in name if not _in_a_name(c))
    return "it holds a NUL character" if char == "\x00" else f"it holds {char!r}"


def _shown(name: str) -> str:
    """The name quoted, cut at 60 characters: a refusal repeats a bad name, not a page of it."""
    return repr(name if len(name) <= 60 else name[:60] + "…")
