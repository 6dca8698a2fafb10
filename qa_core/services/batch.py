"""Batch scoring: every (question, candidate) pair of a file through one model, into one TREC run.

``python -m qa_core batch-score INPUT --model M --out RUN [--engine local|ray]``. The input
(``qa_core.services.batch_chunks``: JSONL pairs, or a TREC run whose texts are in the store) is
read as a stream and cut into chunks of whole queries of at least ``chunk_pairs`` pairs; every
engine scores exactly these chunks, one pool per query, so their runs are equal (same lines in
the same order, scores within 1e-6: ``tests/test_batch_ray.py``).

A chunk's pools are ``Candidate`` records carrying the first-stage rank and URL, never bare
strings: a model that reads them (``capabilities.reads``: the attention LSTM reads the rank,
MP-HCNN the URL) scores a pair as the app does.

``--engine local`` (this module): a torch DataLoader's worker processes parse the chunks with spaCy
(the slow part, filling the shared parse cache) and this process scores them with
``Ranker.score_pools``. ``--engine ray`` (``qa_core.services.batch_ray``): the same chunks through
Ray Data, parsed in CPU actors and scored in actors that build the model once. Either way the run
file is written atomically: after an error there is no partial file.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from qa_core.data.exporters import write_trec_run_chunks
from qa_core.services.batch_chunks import (
    BatchRequest,
    BatchResult,
    Progress,
    Run,
    Texts,
    check_request,
    chunks,
    parse_chunk,
    read_rows,
    score_chunk,
)
from qa_core.types import InputError

if TYPE_CHECKING:
    from qa_core.rankers.base import Ranker


def batch_score(request: BatchRequest, ranker: Ranker) -> BatchResult:
    """Score every pair of ``request.source`` with ``ranker`` and write the TREC run ``request.out``."""
    check_request(request)
    if request.device:
        ranker.to(request.device)
    if request.engine == "ray":
        from qa_core.services.batch_ray import score_on_ray

        return score_on_ray(request, ranker)
    return _score_locally(request, ranker)


# ---------------------------------------------------------------------------- the local engine


def _score_locally(request: BatchRequest, ranker: Ranker) -> BatchResult:
    loader = DataLoader(ParsedChunks(request.source, request.texts, request.chunk_pairs), batch_size=None,
                        num_workers=request.workers, persistent_workers=False)
    progress = Progress(request.quiet)

    def runs() -> Iterator[Run]:
        for item in loader:
            if "error" in item:
                raise InputError(item["error"])
            run = score_chunk(ranker, item["rows"], item["parsed"], amp=request.amp)
            progress.add(len(item["rows"]))
            yield run

    lines = write_trec_run_chunks(runs(), request.out, request.tag or ranker.name)
    return BatchResult(lines, progress.pairs, progress.seconds, "local", request.workers)


class ParsedChunks(IterableDataset):
    """Chunks of the input with their texts parsed; worker ``i`` of ``n`` parses chunks ``i, i+n, ...``,
    so the loader hands them back in input order. An input error becomes a message, re-raised by
    the main process (an exception would cross the process boundary with a traceback attached)."""

    def __init__(self, path: Path, texts: Texts | None, size: int):
        self.path, self.texts, self.size = path, texts, size

    def __iter__(self) -> Iterator[dict]:
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        try:
            for index, chunk in enumerate(chunks(read_rows(self.path, self.texts), self.path, self.size)):
                if index % workers == worker:
                    yield {"rows": chunk, "parsed": parse_chunk(chunk)}
        except InputError as error:
            yield {"error": str(error)}
