"""Score millions of (question, candidate) pairs on one machine and write a TREC run.

    .venv/bin/python scripts/batch_score.py pairs.jsonl --model smcnn --out reranked.run
    .venv/bin/python scripts/batch_score.py bm25.run --data wikiqa --model data/models/x.pt --out x.run \\
        --workers 4 --device cuda

Input, read as a stream: a JSONL file of ``{"qid", "question", "docid", "text"}`` objects, or a
TREC run (``qid Q0 docid rank score tag``) whose texts come from a dataset in the store
(``--data``). Pairs of one query must be contiguous (as in every TREC run), because a query is
ranked once all its pairs are scored. The stream is cut into chunks of whole queries; a torch
DataLoader's worker processes parse the chunks with spaCy (the slow part, filling the shared parse
cache), and the main process scores them with any registered or checkpointed model through
``Ranker.score_pools`` (on ``--device``, under ``torch.autocast`` with ``--amp``). The run file
is written atomically: after an error there is no partial file. docs/scaling.md says how to go
beyond one machine.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qa_core import config  # noqa: E402
from qa_core.data.exporters import write_trec_run_chunks  # noqa: E402
from qa_core.rankers.base import Ranker  # noqa: E402
from qa_core.services import workbench  # noqa: E402
from qa_core.text.nlp import Parsed, default_cache, parse_many, text_key  # noqa: E402
from qa_core.types import InputError, NotTrainedError  # noqa: E402

CHUNK_PAIRS = 2048  # pairs per chunk (whole queries, so a chunk may hold more)


@dataclass(frozen=True)
class PairRow:
    line: int
    qid: str
    question: str
    docid: str
    text: str


Texts = Mapping[str, tuple[str, Mapping[str, str]]]  # qid -> (question, {docid: text}), for TREC runs


def _jsonl_pairs(path: Path) -> Iterator[PairRow]:
    with path.open(encoding="utf-8", errors="strict") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise InputError(f"invalid JSON line: {error}", path=str(path), line=number) from None
            if not isinstance(record, dict):
                raise InputError("expected a JSON object", path=str(path), line=number)
            docid = record.get("docid", record.get("doc_id"))
            fields = (record.get("qid"), record.get("question"), docid, record.get("text"))
            if not all(isinstance(f, str | int) and not isinstance(f, bool) and str(f).strip() for f in fields):
                raise InputError("needs non-empty qid, question, docid and text", path=str(path), line=number)
            qid, question, docid, text = (str(f).strip() for f in fields)
            yield PairRow(number, qid, question, docid, text)


def _run_pairs(path: Path, texts: Texts) -> Iterator[PairRow]:
    with path.open(encoding="utf-8", errors="strict") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise InputError(f"expected 6 fields 'qid Q0 docid rank score tag', got {len(fields)}",
                                 path=str(path), line=number)
            qid, docid = fields[0], fields[2]
            question, candidates = texts.get(qid, ("", {}))
            if docid not in candidates:
                raise InputError(f"the dataset has no candidate {docid!r} for query {qid!r}", path=str(path), line=number)
            yield PairRow(number, qid, question, docid, candidates[docid])


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


class ParsedChunks(IterableDataset):
    """Chunks of the input with their texts parsed; worker ``i`` of ``n`` parses chunks ``i, i+n, ...``,
    so the loader hands them back in input order. An input error becomes a message, re-raised by
    the main process (an exception would cross the process boundary with a traceback attached)."""

    def __init__(self, path: Path, texts: Texts | None, size: int):
        self.path, self.texts, self.size = path, texts, size

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        rows = _run_pairs(self.path, self.texts) if self.texts is not None else _jsonl_pairs(self.path)
        try:
            for index, chunk in enumerate(chunks(rows, self.path, self.size)):
                if index % workers == worker:
                    distinct = list(dict.fromkeys(t for row in chunk for t in (row.question, row.text)))
                    yield {"rows": chunk, "parsed": dict(zip(map(text_key, distinct), parse_many(distinct)))}
        except (InputError, UnicodeDecodeError) as error:
            yield {"error": str(error) if isinstance(error, InputError) else f"{self.path}: not UTF-8 text ({error})"}


def store_texts(store, data: str) -> Texts:
    dataset = store.load_dataset(data)
    return {q.qid: (q.text, {c.doc_id: c.text for c in q.candidates}) for q in dataset.questions}


def score_chunk(ranker: Ranker, rows: list[PairRow], parsed: dict[str, Parsed]) -> dict[str, dict[str, float]]:
    default_cache().remember(parsed)  # parsed by a worker: score_pools finds them in memory
    pools = [(group[0].question, [row.text for row in group])
             for group in (list(g) for _, g in itertools.groupby(rows, key=lambda row: row.qid))]
    scores = np.concatenate(ranker.score_pools(pools)) if pools else np.zeros(0)
    run: dict[str, dict[str, float]] = {}
    for row, score in zip(rows, scores):
        run.setdefault(row.qid, {})[row.docid] = float(score)
    return run


def batch_score(
    source: Path, ranker: Ranker, out: Path, *, texts: Texts | None = None, workers: int = 0,
    chunk_pairs: int = CHUNK_PAIRS, amp: bool = False, tag: str | None = None,
) -> int:
    """Score every pair of ``source`` with ``ranker`` and write the TREC run ``out``; returns its lines."""
    if not source.is_file():
        raise InputError("file not found", path=str(source))
    loader = DataLoader(ParsedChunks(source, texts, chunk_pairs), batch_size=None, num_workers=workers,
                        persistent_workers=False)
    device = torch.device(ranker.device)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16

    def runs() -> Iterator[dict[str, dict[str, float]]]:
        for item in loader:
            if "error" in item:
                raise InputError(item["error"])
            precision = torch.autocast(device.type, dtype=amp_dtype) if amp else contextlib.nullcontext()
            with precision:
                run = score_chunk(ranker, item["rows"], item["parsed"])
            yield run

    return write_trec_run_chunks(runs(), out, tag or ranker.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="JSONL of qid/question/docid/text, or a TREC run (with --data)")
    parser.add_argument("--model", required=True, help="a registered model name or a checkpoint path")
    parser.add_argument("--out", type=Path, required=True, help="TREC run file to write")
    parser.add_argument("--data", default=None, help="dataset in the store holding the texts of a TREC run input")
    parser.add_argument("--db", default=None, help="store URL (default: RERANK_LAB_DB or SQLite in the data folder)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes parsing chunks (0: none)")
    parser.add_argument("--chunk-pairs", type=int, default=CHUNK_PAIRS)
    parser.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: the GPU when there is one)")
    parser.add_argument("--amp", action="store_true", help="score under torch.autocast (float16 on CUDA)")
    parser.add_argument("--tag", default=None, help="run tag (default: the model's name)")
    args = parser.parse_args(argv)
    try:
        store = workbench.open_store(args.db or config.database_url())
        ranker = workbench.load_ranker(store, args.model, args.data)
        if args.device:
            ranker.to(args.device)
        texts = store_texts(store, args.data) if args.data else None
        lines = batch_score(args.input, ranker, args.out, texts=texts, workers=args.workers,
                            chunk_pairs=args.chunk_pairs, amp=args.amp, tag=args.tag)
    except (InputError, NotTrainedError) as error:
        print(f"error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(json.dumps({"written": str(args.out), "lines": lines, "model": ranker.name}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
