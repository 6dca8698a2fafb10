"""The parse cache in the data folder holds JSON, never pickles: a planted pickle is never loaded
(it would run code), a cache written by the pickling version is emptied unread, and real parses
come back from disk exactly as they went in."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from qa_core.text import nlp as nlp_module
from qa_core.text.nlp import ParseCache, parse_many

SENTENCES = [
    "Mark Twain wrote The Adventures of Tom Sawyer in 1876.",
    "Who discovered penicillin?",
    "“Quotes”, ümlauts and emoji 🎉 survive; so do tabs\tand\nnewlines.",
]


class RunsCode:
    """Unpickling this creates ``marker``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_entries_round_trip_through_json(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    parsed = parse_many(SENTENCES, cache=ParseCache(path))
    assert parse_many(SENTENCES, cache=ParseCache(path)) == parsed
    with sqlite3.connect(path) as connection:
        blobs = [blob for (blob,) in connection.execute("SELECT blob FROM parsed")]
    assert len(blobs) == len(SENTENCES)
    assert all(nlp_module.decode(blob) in parsed for blob in blobs)
    assert all(not isinstance(blob, bytes) or not blob.startswith(b"\x80") for blob in blobs)  # no pickle header


def test_a_planted_pickle_is_never_loaded(tmp_path: Path) -> None:
    path, marker = tmp_path / "cache.sqlite", tmp_path / "ran"
    cache = ParseCache(path)
    [expected] = parse_many([SENTENCES[0]], cache=cache)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE parsed SET blob = ?", (pickle.dumps(RunsCode(marker)),))
    reopened = ParseCache(path)
    assert parse_many([SENTENCES[0]], cache=reopened) == [expected]  # a miss: parsed again
    assert reopened.stats["misses"] == 1 and not marker.exists()


def test_a_cache_of_the_pickling_version_is_emptied_unread(tmp_path: Path) -> None:
    path, marker = tmp_path / "cache.sqlite", tmp_path / "ran"
    parse_many([SENTENCES[1]], cache=ParseCache(path))
    with sqlite3.connect(path) as connection:
        version = connection.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0]
        connection.execute("UPDATE meta SET value = ? WHERE key = 'format'", ("1" + version[1:],))
        connection.execute("UPDATE parsed SET blob = ?", (pickle.dumps(RunsCode(marker)),))
    assert len(ParseCache(path)) == 0
    assert not marker.exists()


@pytest.mark.parametrize(
    "blob",
    ['"just text"', "[1, 2]", '["t", ["a"], [], [], [], [], [], [], [], [], []]', "{not json", b"\xff\xfe"],
    ids=["string", "short-list", "ragged-columns", "broken-json", "binary"],
)
def test_malformed_entries_are_misses(tmp_path: Path, blob: str | bytes) -> None:
    path = tmp_path / "cache.sqlite"
    cache = ParseCache(path)
    [expected] = parse_many([SENTENCES[2]], cache=cache)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE parsed SET blob = ?", (blob,))
    assert parse_many([SENTENCES[2]], cache=ParseCache(path)) == [expected]
