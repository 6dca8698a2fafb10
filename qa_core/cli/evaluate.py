"""``python -m qa_core evaluate|reproduce|rank|compare|batch-score``: scoring and comparing models."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qa_core.cli.common import (
    EXIT_NOT_REPRODUCED,
    actor,
    add_command,
    add_label_arguments,
    emit,
    open_store,
    progress_bar,
    terminal_text,
)
from qa_core.services import candidate_pools, model_loading
from qa_core.types import Dataset, InputError


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Metrics as one JSON line (with ``judgements``: judged@10, bpref and condensed lists, where the
    run ranks unjudged candidates); the run is kept in the store (with the model version that made it)
    and, with ``--run-out``, written as a TREC run."""
    from qa_core.services.stored_runs import evaluate_and_keep

    store = open_store(args)
    with progress_bar(f"scoring {args.split}", args.quiet) as progress:
        kept = evaluate_and_keep(store, args.model, args.data, args.split, args.labels, clean=args.clean,
                                 progress=progress, actor=actor())
    if kept.notice is not None:
        print(kept.notice, file=sys.stderr)
    if args.run_out:
        from qa_core.data.exporters import write_trec_run

        write_trec_run(kept.run, Path(args.run_out), tag=kept.ranker_name)
    emit(kept.line)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from qa_core.services.reproduce import reproduce

    result = reproduce(open_store(args), args.model, args.data, args.version, progress=not args.quiet)
    emit(result.to_dict())
    return 0 if result.identical else EXIT_NOT_REPRODUCED


def cmd_rank(args: argparse.Namespace) -> None:
    """The ``--top`` candidates, one line each: rank, score and the text as a terminal may show it
    (``terminal_text``: the output is read line-wise, and a dataset must not drive the terminal)."""
    from qa_core.services.ranking import rank_pool

    if args.top < 1:
        raise InputError(f"--top is the number of candidates to print, at least 1; got {args.top}")
    store = open_store(args)
    question = candidate_pools.check_question(args.question)
    ranker = model_loading.load_ranker(store, args.model, args.data)
    candidates = candidate_pools.candidates_for_question(store, args.data, question, k=args.candidates)
    for scored in rank_pool(ranker, question, candidates, model=args.model).scored[: args.top]:
        print(f"{scored.rank:>3}  {scored.score:.4f}  {terminal_text(scored.candidate.text)}")


def cmd_compare(args: argparse.Namespace) -> None:
    """Print the significance table (``qa_core.significance``) of TREC run files and registered
    models (scored on the split's own pools) against the split's gold labels, and, where a run ranks
    unjudged candidates, every run's judged@10, bpref and condensed lists."""
    from qa_core.data.importers import read_trec_run
    from qa_core.evaluation import judgements, qrels_from_questions, tie_aware
    from qa_core.rankers import registry
    from qa_core.services.evaluation_labels import describe, evaluation_labels, parse_rule
    from qa_core.services.experiments import require_split, score_questions
    from qa_core.significance import compare_runs

    store = open_store(args)
    labels = evaluation_labels(store, args.data, parse_rule(args.labels))
    questions = [q for q in require_split(Dataset(args.data, labels.questions), args.split) if q.candidates]
    qrels = qrels_from_questions(questions)
    if not qrels:
        raise InputError(f"split {args.split!r} of dataset {args.data!r} has no labels to compare against")
    runs = {}
    for source in args.runs:
        if source in runs:
            raise InputError(f"{source!r} is named twice")
        if source in model_loading.model_names(store, args.data) or source.endswith(".pt"):
            with progress_bar(f"scoring {source} on {args.split}", args.quiet) as progress:
                runs[source] = score_questions(model_loading.load_ranker(store, source, args.data), questions, progress)
        elif Path(source).is_file():
            run = {qid: {doc: score for doc, _, score in docs} for qid, docs in read_trec_run(Path(source)).items()}
            if not run.keys() & qrels.keys():
                raise InputError(f"no question of split {args.split!r} of dataset {args.data!r} is in the run",
                                 path=source)
            runs[source] = run
        else:
            raise InputError(f"{source!r} is neither a run file nor a registered model "
                             f"({', '.join(registry.available())})")
    result = compare_runs(runs, qrels, metrics=args.metric, clean=args.clean)
    ties = {name: tie_aware(run, qrels, clean=args.clean) for name, run in runs.items()}
    judged = {name: judgements(run, qrels, clean=args.clean) for name, run in runs.items()}
    if all(report.complete for report in judged.values()):
        judged = {}  # every candidate ranked is judged: nothing to add to the standard numbers
    if args.format == "json":
        print(json.dumps({**result.to_dict(), "labels": labels.rule.value,
                          "ties": {name: report.to_dict() for name, report in ties.items()},
                          **({"judgements": {name: report.to_dict() for name, report in judged.items()}}
                             if judged else {})}, indent=2))
    else:
        comment = "% " if args.format == "latex" else ""
        print(result.render(args.format) + comment + describe(labels.rule))
        for name, report in ties.items():
            print(f"{comment}ties in {name}: {report.describe()}")
        for name, report in judged.items():
            print(f"{comment}judgements in {name}: {report.describe()}")


def cmd_batch_score(args: argparse.Namespace) -> None:
    """Score a file of pairs (or a first-stage run) with a model into one TREC run (``qa_core.services.batch``)."""
    from qa_core.services.batch import batch_score
    from qa_core.services.batch_chunks import BatchRequest, input_format, store_texts

    store = open_store(args)
    source = Path(args.input)
    ranker = model_loading.load_ranker(store, args.model, args.data)
    run_input = args.data is not None and source.is_file() and input_format(source) == "trec"
    request = BatchRequest(
        source, Path(args.out), texts=store_texts(store, args.data) if run_input else None,
        engine=args.engine, workers=args.workers, scorers=args.scorers, chunk_pairs=args.chunk_pairs, amp=args.amp,
        tag=args.tag, address=args.address, device=args.device, quiet=args.quiet,
    )
    emit({"written": args.out, "model": ranker.name, **batch_score(request, ranker).summary()})


def _add_batch_score_parser(commands) -> None:
    from qa_core.services.batch_chunks import CHUNK_PAIRS, ENGINES

    run = add_command(
        commands, "batch-score", cmd_batch_score,
        help="score every pair of a JSONL file or a first-stage TREC run with a model; writes a TREC run",
        description=(
            "INPUT is JSONL ({\"qid\", \"question\", \"docid\", \"text\"}, optional \"rank\" and \"url\") or a "
            "TREC run whose texts are in the store (--data). The pairs of a query must be contiguous. "
            "--engine local parses in DataLoader worker processes and scores here; --engine ray runs Ray Data "
            "(parsing actors, scoring actors) on the cluster at --address, or on a local cluster started and "
            "stopped for this command. The run file appears only when complete."
        ),
    )
    run.add_argument("input", help="JSONL of qid/question/docid/text, or a TREC run (with --data)")
    run.add_argument("--model", required=True, help="a checkpoint path or one of: {models}")
    run.add_argument("--out", required=True, help="TREC run file to write (.gz: compressed)")
    run.add_argument("--data", default=None, help="dataset in the store: a trained --model scores with the version "
                     "in use for it (a baseline fits its IDF on it); a TREC run INPUT takes its texts from it")
    run.add_argument("--engine", choices=ENGINES, default="local")
    run.add_argument("--address", default=None, help="Ray: join this cluster (e.g. 10.0.0.5:6379) instead of starting one")
    run.add_argument("--workers", type=int, default=2, help="parsing processes (local; 0: none) or Ray parsing actors")
    run.add_argument("--scorers", type=int, default=None, help="Ray scoring actors (default: one per GPU, else one)")
    run.add_argument("--chunk-pairs", type=int, default=CHUNK_PAIRS, help="pairs per chunk (whole queries)")
    run.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: RERANK_LAB_DEVICE, else the GPU when there is one; a Ray actor: the GPU Ray gave it)")
    run.add_argument("--amp", action="store_true", help="score under torch.autocast (float16 on CUDA)")
    run.add_argument("--tag", default=None, help="run tag (default: the model's name)")
    run.add_argument("--quiet", action="store_true", help="no progress notes or Ray logs on stderr")


def _add_compare_parser(commands) -> None:
    from qa_core.evaluation import METRICS
    from qa_core.significance import FORMATS

    compare = add_command(
        commands, "compare", cmd_compare,
        help="compare runs and models on a split: means with 95%% CIs, randomisation and t-tests "
        "(Holm-adjusted), W/T/L, minimum detectable difference"
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_OR_MODEL", help="TREC run files (.gz too) or registered models: {models}")
    compare.add_argument("--data", required=True)
    compare.add_argument("--split", default="test")
    compare.add_argument("--metric", nargs="+", choices=METRICS, default=list(METRICS))
    compare.add_argument("--clean", action="store_true", help="drop questions with no or only correct candidates")
    compare.add_argument("--format", choices=FORMATS, default="table")
    add_label_arguments(compare)


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``evaluate``, ``reproduce``, ``rank``, ``compare`` and ``batch-score`` commands."""
    ev = add_command(commands, "evaluate", cmd_evaluate, help="evaluate a model on a split; prints one JSON line")
    ev.add_argument("--model", required=True, help="a checkpoint path or one of: {models}")
    ev.add_argument("--data", required=True)
    ev.add_argument("--split", default="test")
    ev.add_argument("--clean", action="store_true", help="drop questions with no or only correct candidates")
    ev.add_argument("--run-out", default=None, help="also write the TREC run file here")
    add_label_arguments(ev)

    again = add_command(
        commands, "reproduce", cmd_reproduce,
        help="train a stored model version again from its record; says whether weights and metrics match",
        description="Retrains version N (same seed, splits, settings, thread count and label rule; not registered) "
        "and prints one JSON line: identical or not, the largest weight difference, every stored metric against "
        "the retrained one. Exit status 1 when anything differs.",
    )
    again.add_argument("--model", required=True)
    again.add_argument("--data", required=True)
    again.add_argument("--version", type=int, required=True)
    again.add_argument("--quiet", action="store_true", help="no progress bars (the JSON line still prints)")

    rank = add_command(commands, "rank", cmd_rank, help="rank BM25 candidates of a dataset's collection for a question")
    rank.add_argument("question")
    rank.add_argument("--data", default="demo")
    rank.add_argument("--model", default="overlap", help="a checkpoint path or one of: {models}")
    rank.add_argument("--candidates", type=int, default=50, help="BM25 candidates to rerank")
    rank.add_argument("--top", type=int, default=10, help="candidates to print (at least 1)")

    _add_compare_parser(commands)
    _add_batch_score_parser(commands)
