"""What both engines of batch scoring share: the request and its result, the input read as a
stream of pairs cut into chunks of whole queries, and the scoring of a parsed chunk.

Imports neither torch nor spaCy at the top and needs the store only as a type, because Ray's
workers import it on every node: a light import is what keeps a read task or a parsing actor cheap.

The input is a JSONL file of ``{"qid", "question", "docid", "text"}`` objects (optional
``"rank"``: the first-stage rank, ``"url"``), or a TREC run (``qid Q0 docid rank score tag``) whose
texts come from a dataset in the store; ``input_format`` tells them apart by the first line. Pairs
of one query must be contiguous (as in every TREC run), because a query is ranked once all its
pairs are scored. Every error names the file and line.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from qa_core import ordering
from qa_core.text.nlp import Parsed, default_cache, parse_many, text_key
from qa_core.types import Candidate, InputError

if TYPE_CHECKING:
    from db.store import Store
    from qa_core.rankers.base import Ranker

InputFormat = Literal["jsonl", "trec"]
CHUNK_PAIRS = 2048  # pairs per chunk (whole queries, so a chunk may hold more)
PROGRESS_EVERY_S = 10.0  # seconds between progress notes on stderr
Engine = Literal["local", "ray"]
ENGINES: tuple[Engine, ...] = ("local", "ray")
Run = dict[str, dict[str, float]]


# ---------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class PairRow:
    """One input line: where it is (line number, byte range) and the candidate it describes."""

    line: int
    start: int  # byte offset of the line in the file
    end: int  # byte offset after it
    qid: str
    question: str
    docid: str
    text: str
    rank: int | None = None  # first-stage rank (1-based)
    url: str | None = None
    score: float | None = None  # a TREC run's first-stage score

    def candidate(self) -> Candidate:
        return Candidate(self.docid, self.text, first_stage_rank=self.rank, first_stage_score=self.score, url=self.url)


def _pool(group: Sequence[PairRow]) -> list[Candidate]:
    """One query's candidates. A TREC run's first-stage ranks come from its scores and the tie rule
    (``qa_core.ordering``), as every run file is read: the rank column only has to be valid."""
    candidates = [row.candidate() for row in group]
    if any(row.score is None for row in group):
        return candidates
    order = ordering.order([row.docid for row in group], [row.score for row in group])
    for rank, index in enumerate(order, start=1):
        candidates[index] = replace(candidates[index], first_stage_rank=rank)
    return candidates


# qid -> (question, {docid: (text, url)}): a TREC run's texts, from a dataset in the store.
Texts = Mapping[str, tuple[str, Mapping[str, tuple[str, str | None]]]]


def _lines(path: Path, start: int = 0, end: int | None = None, first_line: int = 1) -> Iterator[tuple[int, int, int, str]]:
    """``(number, start, end, text)`` of the lines of ``path`` in the byte range ``[start, end)``;
    a line that is not UTF-8 is an ``InputError`` naming it."""
    with path.open("rb") as handle:
        handle.seek(start)
        offset = start
        for number, raw in enumerate(handle, start=first_line):
            if end is not None and offset >= end:
                return
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InputError(f"not UTF-8 text ({error.reason})", path=str(path), line=number) from None
            yield number, offset, offset + len(raw), text
            offset += len(raw)


def _field(value: object) -> str | None:
    """A JSON id or text as a stripped string; ``None`` when missing, empty or not a string/number."""
    if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    return None


def jsonl_row(path: Path, number: int, start: int, end: int, line: str) -> PairRow | None:
    """One JSONL line as a pair (``None`` for a blank line); ``InputError`` naming the line."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise InputError(f"invalid JSON line: {error}", path=str(path), line=number) from None
    if not isinstance(record, dict):
        raise InputError("expected a JSON object", path=str(path), line=number)
    fields = [_field(record.get(key)) for key in ("qid", "question")]
    fields += [_field(record.get("docid", record.get("doc_id"))), _field(record.get("text"))]
    if None in fields:
        raise InputError("needs non-empty qid, question, docid and text", path=str(path), line=number)
    rank = record.get("rank")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
        raise InputError(f"rank must be a whole number from 1 (the first-stage rank), got {rank!r}",
                         path=str(path), line=number)
    url = record.get("url")
    if url is not None and not isinstance(url, str):
        raise InputError(f"url must be a string, got {url!r}", path=str(path), line=number)
    qid, question, docid, text = fields
    return PairRow(number, start, end, qid, question, docid, text, rank, url or None)


def run_row(path: Path, number: int, start: int, end: int, line: str, texts: Texts) -> PairRow | None:
    """One TREC run line as a pair whose texts come from ``texts`` (``None`` for a blank line)."""
    fields = line.split()
    if not fields:
        return None
    if len(fields) != 6:
        raise InputError(f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}", path=str(path), line=number)
    qid, docid, rank = fields[0], fields[2], fields[3]
    if not rank.isdigit() or int(rank) < 1:
        raise InputError(f"the rank must be a whole number from 1, got {rank!r}", path=str(path), line=number)
    try:
        score = float(fields[4])
    except ValueError:
        score = math.nan
    if not math.isfinite(score):
        raise InputError(f"the score must be a finite number, got {fields[4]!r}", path=str(path), line=number)
    question, candidates = texts.get(qid, ("", {}))
    if docid not in candidates:
        raise InputError(f"the dataset has no candidate {docid!r} for query {qid!r}", path=str(path), line=number)
    text, url = candidates[docid]
    return PairRow(number, start, end, qid, question, docid, text, int(rank), url, score)


def read_rows(path: Path, texts: Texts | None, start: int = 0, end: int | None = None, first_line: int = 1) -> Iterator[PairRow]:
    """The pairs of ``path`` (a TREC run when ``texts`` is given, else JSONL) in a byte range."""
    for number, begin, stop, line in _lines(path, start, end, first_line):
        row = run_row(path, number, begin, stop, line, texts) if texts is not None else jsonl_row(path, number, begin, stop, line)
        if row is not None:
            yield row


def chunks(rows: Iterator[PairRow], path: Path, size: int) -> Iterator[list[PairRow]]:
    """Whole queries, at least ``size`` pairs a chunk (fewer at the end); a query seen again later,
    or a docid twice in a query, is an ``InputError`` naming the line."""
    done: set[str] = set()
    chunk: list[PairRow] = []
    for qid, group in itertools.groupby(rows, key=lambda row: row.qid):
        pairs = list(group)
        if qid in done:
            raise InputError(f"query {qid} appears again: the pairs of a query must be contiguous",
                             path=str(path), line=pairs[0].line)
        done.add(qid)
        seen: set[str] = set()
        for row in pairs:
            if row.docid in seen:
                raise InputError(f"document {row.docid} appears twice for query {qid}", path=str(path), line=row.line)
            seen.add(row.docid)
        chunk.extend(pairs)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def store_texts(store: Store, data: str) -> Texts:
    """Question and candidate texts (with URLs) of every question of a stored dataset, by id."""
    dataset = store.datasets.load_dataset(data)
    return {q.qid: (q.text, {c.doc_id: (c.text, c.url) for c in q.candidates}) for q in dataset.questions}


def input_format(path: Path) -> InputFormat:
    """``"jsonl"`` when the first non-blank line is a JSON object, else ``"trec"`` (a run file)."""
    for _, _, _, line in _lines(path):
        if line.strip():
            return "jsonl" if line.lstrip().startswith("{") else "trec"
    raise InputError("the file holds no pairs", path=str(path))


# ---------------------------------------------------------------------------- scoring


def parse_chunk(rows: Sequence[PairRow]) -> dict[str, Parsed]:
    """The parses of a chunk's distinct texts, by ``text_key`` (through the parse cache)."""
    distinct = list(dict.fromkeys(t for row in rows for t in (row.question, row.text)))
    return dict(zip(map(text_key, distinct), parse_many(distinct)))


def score_chunk(ranker: Ranker, rows: Sequence[PairRow], parsed: Mapping[str, Parsed], *, amp: bool = False) -> Run:
    """``{qid: {docid: score}}`` of a chunk of whole queries, its texts parsed elsewhere (a worker);
    each query is one pool of ``Candidate`` records (first-stage rank and URL included)."""
    import torch  # here: Ray's parsing actors import this module and need no torch

    from qa_core.device import autocast_dtype

    default_cache().remember(dict(parsed))  # score_pools finds them in memory
    groups = [list(g) for _, g in itertools.groupby(rows, key=lambda row: row.qid)]
    pools = [(group[0].question, _pool(group)) for group in groups]
    device = torch.device(ranker.device)
    precision = torch.autocast(device.type, dtype=autocast_dtype(device)) if amp else contextlib.nullcontext()
    with precision:
        scores = np.concatenate(ranker.score_pools(pools)) if pools else np.zeros(0)
    run: Run = {}
    for row, score in zip(rows, scores):
        run.setdefault(row.qid, {})[row.docid] = float(score)
    return run


# ---------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class BatchRequest:
    """What to score and how: the engine and its parallelism (``workers``: parsing processes or
    actors; ``scorers``: Ray's scoring actors, default one per GPU of the cluster, else one)."""

    source: Path
    out: Path
    texts: Texts | None = None
    engine: Engine = "local"
    workers: int = 2
    scorers: int | None = None
    chunk_pairs: int = CHUNK_PAIRS
    amp: bool = False
    tag: str | None = None
    address: str | None = None  # Ray: join this cluster (else start a local one and stop it after)
    device: str | None = None
    quiet: bool = False


@dataclass
class BatchResult:
    """What a batch run did: lines written, pairs scored, wall seconds, and per stage (Ray: parse,
    score) the actors and their busy seconds, from which per-actor rates follow."""

    lines: int
    pairs: int
    seconds: float
    engine: str
    workers: int
    scorers: int = 0  # Ray's scoring actors (the local engine scores in this process)
    gpus: int = 0  # GPUs of the Ray cluster
    stages: dict[str, dict[str, float | int | None]] = field(default_factory=dict)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> dict[str, object]:
        return {"lines": self.lines, "pairs": self.pairs, "seconds": round(self.seconds, 3),
                "pairs_per_second": round(self.pairs_per_second, 1), "engine": self.engine,
                "workers": self.workers, **({"scorers": self.scorers, "gpus": self.gpus, "stages": self.stages}
                                            if self.engine == "ray" else {})}


def check_request(request: BatchRequest) -> None:
    if not request.source.is_file():
        raise InputError("file not found", path=str(request.source))
    if input_format(request.source) == "trec" and request.texts is None:
        raise InputError("not JSONL pairs (line 1 is no JSON object), so a TREC run: its texts come from a dataset "
                         "in the store, named with --data", path=str(request.source))
    if request.engine not in ENGINES:
        raise InputError(f"unknown engine {request.engine!r}; choose one of: {', '.join(ENGINES)}")
    if request.workers < 0 or (request.engine == "ray" and request.workers < 1):
        raise InputError(f"--workers must be at least {1 if request.engine == 'ray' else 0}, got {request.workers}")
    if request.scorers is not None and request.scorers < 1:
        raise InputError(f"--scorers must be at least 1, got {request.scorers}")
    if request.chunk_pairs < 1:
        raise InputError(f"--chunk-pairs must be at least 1, got {request.chunk_pairs}")
    if request.address is not None and request.engine != "ray":
        raise InputError("--address names a Ray cluster: it needs --engine ray")


class Progress:
    """A note on stderr every ``PROGRESS_EVERY_S`` seconds (pairs scored, rate); silent when quiet."""

    def __init__(self, quiet: bool):
        self.quiet, self.pairs = quiet, 0
        self.started = self.last = time.perf_counter()

    def add(self, pairs: int) -> None:
        self.pairs += pairs
        now = time.perf_counter()
        if not self.quiet and now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            print(f"batch-score: {self.pairs:,} pairs scored ({self.pairs / (now - self.started):,.0f} pairs/s)",
                  file=sys.stderr, flush=True)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started
