"""The Ray engine of batch scoring (``python -m qa_core batch-score ... --engine ray``).

The driver (this process) reads the input once to check it and to find its chunks of whole
queries, exactly the chunks of the local engine (``qa_core.services.batch_chunks.chunks``), so a
bad line is one ``InputError`` naming it before the cluster does any work. Then Ray Data runs

    read_datasource(QueryBlocks): one read task per chunk (its byte range of the file, read on a
        node that sees the file at the same path), one block of whole queries; fused by Ray Data
        into the parsing actors, so no process is started for reading
      -> Parser actors (CPU, ``--workers`` of them; spaCy loaded once per actor)
      -> Scorer actors (``--scorers``: one GPU each when the cluster has GPUs, else one CPU; each
         builds the model once from the checkpoint's state, put once into the object store)
      -> the driver, which receives the blocks in input order and writes one TREC run atomically.

Scores equal the local engine's: the same chunks become the same pools of ``Candidate`` records
(first-stage rank, URL) for the same model state. Every node must see the input file at its path
(as Ray Data's own file readers need), not the model file or the store.

This module is imported by Ray's worker processes: it imports neither torch nor the store at the
top (a scorer imports torch with the model), so a parsing actor starts with spaCy alone. Each block carries how long its parse and its scoring took and which actor did them;
the result's ``stages`` add these up, so ``benchmarks/speed.py`` gets per-actor rates.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from qa_core.data.exporters import write_trec_run_chunks
from qa_core.services.batch_chunks import BatchResult, PairRow, Progress, Texts, chunks, read_rows, score_chunk
from qa_core.text.nlp import decode, encode, get_nlp, parse_many, text_key
from qa_core.types import InputError

if TYPE_CHECKING:
    from qa_core.rankers.base import Ranker
    from qa_core.services.batch_chunks import BatchRequest, Run

ROW_COLUMNS = ["chunk", "chunk_pairs", "line", "qid", "question", "docid", "text", "rank", "url"]
STAGES = {"parse": ("parse_s", "parser"), "score": ("score_s", "scorer")}  # seconds and actor columns


@dataclass(frozen=True)
class Span:
    """A chunk of whole queries: its byte range and first line in the file, its pairs, and (for a
    TREC run) the texts of its pairs from the store."""

    index: int
    start: int
    end: int
    first_line: int
    pairs: int
    texts: Texts | None


def find_spans(request: BatchRequest) -> list[Span]:
    """Check the whole input and cut it into the local engine's chunks."""
    spans = []
    for index, chunk in enumerate(chunks(read_rows(request.source, request.texts), request.source, request.chunk_pairs)):
        texts = None
        if request.texts is not None:
            subset: dict[str, tuple[str, dict[str, tuple[str, str | None]]]] = {}
            for row in chunk:
                subset.setdefault(row.qid, (row.question, {}))[1][row.docid] = (row.text, row.url)
            texts = subset
        spans.append(Span(index, chunk[0].start, chunk[-1].end, chunk[0].line, len(chunk), texts))
    return spans


def read_span(path: Path, span: Span) -> Iterator[pd.DataFrame]:
    """A read task: the span's lines as one block (rows in file order)."""
    rows = list(read_rows(path, span.texts, span.start, span.end, span.first_line))
    yield pd.DataFrame(
        [(span.index, span.pairs, r.line, r.qid, r.question, r.docid, r.text, r.rank, r.url) for r in rows],
        columns=ROW_COLUMNS,
    ).astype({"rank": "Int64"})


def _query_blocks(path: Path, spans: list[Span]) -> Any:
    """The input as a Ray Data datasource, one block per span (built here: Ray is imported late)."""
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    class QueryBlocks(Datasource):
        def estimate_inmemory_data_size(self) -> int:
            return sum(span.end - span.start for span in spans)

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None) -> list[ReadTask]:
            # One task per chunk whatever the parallelism: a block must hold whole queries.
            return [
                ReadTask(functools.partial(read_span, path, span),
                         BlockMetadata(num_rows=span.pairs, size_bytes=span.end - span.start,
                                       input_files=[str(path)], exec_stats=None))
                for span in spans
            ]

    return QueryBlocks()


def _rows(frame: pd.DataFrame) -> list[PairRow]:
    return [
        PairRow(int(line), 0, 0, qid, question, docid, text, None if pd.isna(rank) else int(rank), url or None)
        for line, qid, question, docid, text, rank, url in frame[
            ["line", "qid", "question", "docid", "text", "rank", "url"]
        ].itertuples(index=False)
    ]


class Parser:
    """A CPU actor: loads spaCy once, then parses blocks (through its node's parse cache) and adds
    each pair's parses as JSON (the parse cache's format) for the scorers."""

    def __init__(self) -> None:
        get_nlp()

    def __call__(self, block: pd.DataFrame) -> pd.DataFrame:
        started = time.perf_counter()
        texts = list(dict.fromkeys([*block["question"], *block["text"]]))
        parsed = {text: encode(p) for text, p in zip(texts, parse_many(texts))}
        block = block.assign(question_parse=block["question"].map(parsed), text_parse=block["text"].map(parsed))
        return block.assign(parse_s=_first_row(len(block), time.perf_counter() - started), parser=os.getpid())


class Scorer:
    """A scoring actor: builds the model once from ``(kind, state)``, then scores blocks chunk by
    chunk (the local engine's pools) and returns ``qid, docid, score`` and the stage timings."""

    def __init__(self, kind: str, state: dict[str, Any], device: str | None, amp: bool) -> None:
        import ray

        from qa_core.checkpoints import rebuild
        from qa_core.rankers import registry

        self.ranker = rebuild("(sent by the driver)", kind, registry.ranker_class(kind).from_state, state)
        self.ranker.to(device or ("cuda" if ray.get_gpu_ids() else "cpu"))
        self.amp = amp

    def __call__(self, block: pd.DataFrame) -> pd.DataFrame:
        started = time.perf_counter()
        scored = []
        for _, chunk in block.groupby("chunk", sort=False):
            if len(chunk) != chunk["chunk_pairs"].iloc[0]:  # Ray split a block: pools would be cut
                raise RuntimeError(f"chunk {chunk['chunk'].iloc[0]} reached a scorer incomplete")
            texts = {**dict(zip(chunk["question"], chunk["question_parse"])), **dict(zip(chunk["text"], chunk["text_parse"]))}
            parsed = {text_key(text): decode(blob) for text, blob in texts.items()}
            run = score_chunk(self.ranker, _rows(chunk), parsed, amp=self.amp)
            scored += [run[qid][docid] for qid, docid in zip(chunk["qid"], chunk["docid"])]
        out = block[["qid", "docid", "parse_s", "parser"]].assign(score=scored)
        return out.assign(score_s=_first_row(len(block), time.perf_counter() - started), scorer=os.getpid())


def _first_row(rows: int, seconds: float) -> list[float]:
    """A block-level number as a column: on its first row, 0 elsewhere (so sums stay right)."""
    return [seconds] + [0.0] * (rows - 1)


def score_on_ray(request: BatchRequest, ranker: Ranker) -> BatchResult:
    """``qa_core.services.batch.batch_score`` on a Ray cluster (see the module docstring)."""
    from qa_core.services import cluster

    if request.quiet:
        cluster.quiet_logs()
    import ray.data
    from ray.data import ActorPoolStrategy, DataContext

    spans = find_spans(request)
    kind, state = ranker.name, ranker.state()
    scorers_wanted = request.scorers or 1
    with cluster.ray_cluster(request.address, num_cpus=max(os.cpu_count() or 1, request.workers + scorers_wanted),
                             quiet=request.quiet) as resources:
        gpus = int(resources.get("GPU", 0))
        scorers = request.scorers or max(gpus, 1)
        cpus_needed = request.workers + (0 if gpus else scorers)
        if resources.get("CPU", 0) < cpus_needed:
            raise InputError(
                f"the Ray cluster has {resources.get('CPU', 0):g} CPUs; {request.workers} parsing and "
                f"{scorers} scoring actors need {cpus_needed}: lower --workers or --scorers"
            )
        context = DataContext.get_current()
        context.execution_options.preserve_order = True  # blocks come back in input order
        context.enable_progress_bars = not request.quiet
        scorer_resources = {"num_gpus": 1, "num_cpus": 0} if gpus else {"num_cpus": 1}
        dataset = (
            # One block per span, never split (a split would cut queries and keep Ray Data from
            # fusing the reads into the parsing actors, where they need no CPU of their own).
            ray.data.read_datasource(_query_blocks(request.source, spans), override_num_blocks=len(spans))
            .map_batches(Parser, batch_size=None, batch_format="pandas", num_cpus=1,
                         compute=ActorPoolStrategy(size=request.workers))
            .map_batches(Scorer, batch_size=None, batch_format="pandas",
                         fn_constructor_kwargs={"kind": kind, "state": state, "device": request.device,
                                                "amp": request.amp},
                         compute=ActorPoolStrategy(size=scorers), **scorer_resources)
        )
        progress = Progress(request.quiet)
        stages: dict[str, dict[str, Any]] = {stage: {"actors": set(), "busy_s": 0.0, "pairs": 0} for stage in STAGES}

        def runs() -> Iterator[Run]:
            for block in dataset.iter_batches(batch_size=None, batch_format="pandas"):
                run: Run = {}
                for qid, docid, score in zip(block["qid"], block["docid"], block["score"]):
                    run.setdefault(qid, {})[docid] = float(score)
                for stage, (seconds, actor) in STAGES.items():
                    stages[stage]["actors"].update(block[actor].unique().tolist())
                    stages[stage]["busy_s"] += float(block[seconds].sum())
                    stages[stage]["pairs"] += len(block)
                progress.add(len(block))
                yield run

        lines = write_trec_run_chunks(runs(), request.out, request.tag or ranker.name)
    summary = {stage: {"actors": len(s["actors"]), "busy_s": round(s["busy_s"], 3), "pairs": s["pairs"],
                       "pairs_per_actor_second": round(s["pairs"] / s["busy_s"], 1) if s["busy_s"] else None}
               for stage, s in stages.items()}
    return BatchResult(lines, progress.pairs, progress.seconds, "ray", request.workers, scorers, gpus, summary)
