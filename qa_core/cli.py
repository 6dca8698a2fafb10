"""Command line: ``python -m qa_core data|train|worker|train-classifier|evaluate|rank|compare|batch-score|models|gc|users|audit``.

Whoever runs it holds the database URL, so it acts as an operator with every right
(``qa_core.access.operator``), recorded in the audit trail as ``cli:<OS user>``.

Exit status: 0 done; 2 bad input, or the database or the disk refused (one clear ``error:`` line
on stderr, never a traceback, nothing half written); 130 interrupted (Ctrl-C); 1 only for a bug
(with its traceback). Results are JSON lines on stdout; notes for people go to stderr.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from qa_core import config, systems_cli
from qa_core.checkpoints import GC_GRACE_MINUTES, collect_garbage, new_checkpoint_path
from qa_core.services import workbench
from qa_core.types import Dataset, InputError, NotTrainedError, StorageError

if TYPE_CHECKING:
    from qa_core.services.experiments import ScoringProgress

EXIT_NOT_REPRODUCED = 1  # ``reproduce``: the retrained version differs from the stored one
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
ORPHAN_EXAMPLES = 5


@contextmanager
def _progress_bar(description: str, quiet: bool) -> Iterator[ScoringProgress | None]:
    """A progress bar on stderr for a long step, opened at its first report (an input error found
    before any work stays the one line on stderr); none with ``--quiet`` (the final line still prints)."""
    if quiet:
        yield None
        return
    from tqdm.auto import tqdm

    bars = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(desc=description, total=total, unit="question", file=sys.stderr, leave=False))
        bars[0].update(done - bars[0].n)

    try:
        yield progress
    finally:
        for bar in bars:
            bar.close()


def _add_label_arguments(parser: argparse.ArgumentParser) -> None:
    """The label rule of ``qa_core.services.evaluation_labels`` and ``--quiet``."""
    parser.add_argument("--labels", choices=["gold", "training"], default="gold",
                        help="evaluate against the dataset's gold labels (default) or the training-label rule "
                             "(adjudicated > annotators' majority > gold)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (the final output still prints)")


def _emit(record: dict) -> None:
    """One JSON line on stdout; timestamps and paths print as strings."""
    print(json.dumps(record, default=str))


def _store(args: argparse.Namespace):
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from db.store import Store

    try:
        return Store(args.db)
    except InputError as error:  # an unreadable URL: the message repeats none of it
        raise InputError(f"cannot open the store: {error}") from None
    except (ArgumentError, SQLAlchemyError) as error:
        url = workbench.masked_url(args.db)
        reason = str(getattr(error, "orig", None) or error).splitlines()[0]
        raise InputError(f"cannot open the store at {url}: {reason}") from None


def _actor():
    """The operator running this command (see the module docstring)."""
    from qa_core.access import operator

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (some containers)
        user = "unknown"
    return operator(user)


def cmd_data_import(args: argparse.Namespace) -> None:
    from qa_core.data.importers import load_dataset

    dataset = load_dataset(Path(args.path), fmt=args.format, name=args.name)
    store = _store(args)
    report = store.import_dataset(dataset, replace=args.replace, actor=_actor())
    _emit({"imported": dataset.name, **store.dataset_summary(dataset.name), "import": report.summary()})
    if report.moved:
        print(f"note: {len(report.moved)} candidates kept their labels under another id (rows moved in the file)",
              file=sys.stderr)
    listing = f"list them: python -m qa_core data orphans --data {dataset.name}"
    if report.edited_labelled:
        print(f"note: {len(report.edited_labelled)} labelled candidates have another text under the same id: "
              f"{_examples(report.edited_labelled)}; their labels judged the earlier text and stay on the id ({listing})",
              file=sys.stderr)
    if report.retired:
        print(f"note: {len(report.retired)} candidates are no longer in the file: {_examples(report.retired)}; their "
              f"{report.orphaned_labels} labels are kept ({listing})", file=sys.stderr)


def _examples(candidates: Sequence[tuple[str, str, int]]) -> str:
    """``qid/doc_id (N labels)`` of the first ``ORPHAN_EXAMPLES`` candidates, and how many more."""
    shown = ", ".join(f"{qid}/{doc_id} ({labels} labels)" for qid, doc_id, labels in candidates[:ORPHAN_EXAMPLES])
    return shown + (f" and {len(candidates) - ORPHAN_EXAMPLES} more" if len(candidates) > ORPHAN_EXAMPLES else "")


def cmd_data_orphans(args: argparse.Namespace) -> None:
    """Labels kept on candidates that a re-import retired, one JSON line each."""
    for record in _store(args).orphaned_labels(args.data):
        _emit(record)


def cmd_data_demo(args: argparse.Namespace) -> None:
    store = _store(args)
    workbench.ensure_demo(store, beside_others=True)
    _emit({"datasets": store.dataset_names()})


def cmd_data_import_run(args: argparse.Namespace) -> None:
    from qa_core.data.importers import read_trec_run

    run = read_trec_run(Path(args.path))
    _store(args).set_first_stage(args.data, run, actor=_actor())
    _emit({"first_stage_from": args.path, "questions": len(run)})


def cmd_data_import_qrels(args: argparse.Namespace) -> None:
    from qa_core.data.importers import read_qrels_located

    qrels, lines = read_qrels_located(Path(args.path))
    annotator = args.annotator or f"qrels:{Path(args.path).name}"
    result = _store(args).import_qrels(args.data, qrels, annotator, lines=lines, path=args.path, actor=_actor())
    _emit({"labels": result.added, "unchanged": result.unchanged, "annotator": annotator})


def cmd_data_export(args: argparse.Namespace) -> None:
    store = _store(args)
    if args.format == "qrels":
        store.export_qrels(args.data, Path(args.out), source=args.source)
    else:
        store.export_labels_jsonl(args.data, Path(args.out))
    _emit({"written": args.out})


def cmd_data_list(args: argparse.Namespace) -> None:
    store = _store(args)
    for name in store.dataset_names():
        _emit({"dataset": name, **store.dataset_summary(name)})


def cmd_train(args: argparse.Namespace) -> None:
    from qa_core.services import analysis
    from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record

    store = _store(args)
    if args.job is not None:
        from db.jobs import ClaimLost
        from qa_core.services.jobs import run_job

        try:
            _emit({"job": args.job, "model_version_id": run_job(store, args.job, actor=_actor())})
        except ClaimLost as lost:  # cancelled meanwhile: nothing was registered
            raise InputError(str(lost)) from None
        return
    if not args.model or not args.data:
        raise InputError("train needs --model and --data (or --job ID for a job queued in the store)")
    dataset = store.load_dataset(args.data)
    outcome = train_ranker(
        args.model,
        dataset,
        seed=args.seed,
        train_split=args.train_split,
        dev_split=args.dev_split,
        checkpoint=new_checkpoint_path(args.model, args.data, f"seed{args.seed}", owner=store.store_id),
        analyzer=analysis.analyzer_for(store, args.model),
        progress=not args.quiet,
    )
    training_data, metrics = version_record(
        outcome,
        dataset,
        dataset.split(EVAL_SPLIT),
        seed=args.seed,
        train_split=args.train_split,
        dev_split=args.dev_split,
        extra={"labels": "gold", "trained_by": "cli"},
    )
    version_id = store.register_model(
        args.model,
        kind=args.model,
        checkpoint_path=str(outcome.checkpoint),
        training_data=training_data,
        metrics=metrics,
        promote=not args.no_promote,  # for the dataset it was trained on
        actor=_actor(),
    )
    version = next(v["version"] for v in store.model_versions(args.model) if v["id"] == version_id)
    _emit({"model": args.model, "version": version, "model_version_id": version_id,
           "checkpoint": str(outcome.checkpoint), **outcome.metrics})


def cmd_worker(args: argparse.Namespace) -> None:
    """Serve the store's queue of training jobs (``qa_core.services.worker``): progress on stderr,
    one JSON line per job on stdout."""
    import logging

    from qa_core.services.worker import serve

    store = _store(args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s worker %(levelname)s %(message)s")
    logging.getLogger(__name__).info("serving the training jobs of %s", store.engine.url.render_as_string(hide_password=True))
    serve(store, lease_seconds=args.lease, poll_seconds=args.poll, until_idle=args.until_idle, max_jobs=args.max_jobs,
          report=_emit, actor=_actor())


def cmd_train_classifier(args: argparse.Namespace) -> None:
    from qa_core.classifiers import training

    folder = args.path
    if folder is None:
        shared = config.shared_data_dir()
        if shared is None:
            raise InputError("no --path given and no shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
        folder = shared / args.classifier
    train = training.train_question_classifier if args.classifier == "question_class" else training.train_focus_tagger
    store = _store(args)  # before the training: a store that cannot be opened says so at once
    path = new_checkpoint_path(args.classifier, f"seed{args.seed}", owner=store.store_id)
    config.ensure_free_space(path.parent, f"training {args.classifier}")
    outcome = train(Path(folder), seed=args.seed, progress=not args.quiet)
    outcome.model.save(path)
    version = store.register_model(
        args.classifier,
        kind=args.classifier,
        checkpoint_path=str(path),
        training_data={"path": str(folder), "seed": args.seed},
        metrics={**outcome.metrics, "best_epoch": outcome.report["best_epoch"], "train_seconds": outcome.report["seconds"]},
        promote=not args.no_promote,
        actor=_actor(),
    )
    _emit({"model": args.classifier, "version": version, "checkpoint": str(path), **outcome.metrics})


def cmd_evaluate(args: argparse.Namespace) -> None:
    """Metrics as one JSON line (with ``judgements``: judged@10, bpref and condensed lists, where the
    run ranks unjudged candidates); the run is kept in the store (with the model version that made it)
    and, with ``--run-out``, written as a TREC run."""
    from qa_core.evaluation import judgements, qrels_from_questions, tie_aware
    from qa_core.rankers import registry
    from qa_core.services.evaluation_labels import evaluation_labels, parse_rule
    from qa_core.services.experiments import require_split, score_and_evaluate

    store = _store(args)
    version_id = None
    if args.model in registry.trainable():  # else a baseline, a checkpoint path or a system (workbench.load_ranker)
        from qa_core.services.jobs import load_promoted

        if store.promoted_model(args.model, args.data) is None:
            raise NotTrainedError(
                f"model {args.model!r} has no version trained on or promoted for {args.data!r}; train it with: "
                f"{workbench.train_command(args.model, args.data)}"
            )
        loaded = load_promoted(store, args.model, args.data)
        if loaded.notice is not None:
            print(loaded.notice, file=sys.stderr)
        ranker, version_id = loaded.ranker, loaded.version["id"]
    else:
        ranker = workbench.load_ranker(store, args.model, args.data)
    labels = evaluation_labels(store, args.data, parse_rule(args.labels))
    questions = require_split(Dataset(args.data, labels.questions), args.split)
    with _progress_bar(f"scoring {args.split}", args.quiet) as progress:
        run, result = score_and_evaluate(ranker, questions, clean=args.clean, progress=progress)
    if args.run_out:
        from qa_core.data.exporters import write_trec_run

        write_trec_run(run, Path(args.run_out), tag=ranker.name)
    line = {"model": args.model, "data": args.data, "split": args.split, "labels": labels.rule.value,
            **result.aggregate}
    line.update(questions=result.questions, clean=result.clean)
    qrels = qrels_from_questions(questions)
    line.update(tie_aware(run, qrels, clean=args.clean).to_dict())
    judged = judgements(run, qrels, clean=args.clean)
    if not judged.complete:  # beside the standard numbers, which count unjudged candidates as not relevant
        line["judgements"] = judged.to_dict()
    line["run_id"] = store.save_run(args.data, args.split, run, dict(line), model_version_id=version_id, tag=ranker.name,
                                   actor=_actor())
    _emit(line)


def cmd_reproduce(args: argparse.Namespace) -> int:
    from qa_core.services.reproduce import reproduce

    result = reproduce(_store(args), args.model, args.data, args.version, progress=not args.quiet)
    _emit(result.to_dict())
    return 0 if result.identical else EXIT_NOT_REPRODUCED


def cmd_rank(args: argparse.Namespace) -> None:
    from qa_core.services.ranking import rank_pool

    store = _store(args)
    question = workbench.check_question(args.question)
    ranker = workbench.load_ranker(store, args.model, args.data)
    candidates = workbench.candidates_for_question(store, args.data, question, k=args.candidates)
    for scored in rank_pool(ranker, question, candidates, model=args.model).scored[: args.top]:
        # One line per candidate whatever the text holds (newlines, tabs): the output is read line-wise.
        print(f"{scored.rank:>3}  {scored.score:.4f}  {' '.join(scored.candidate.text.split())}")


def cmd_models(args: argparse.Namespace) -> None:
    from qa_core.rankers import registry

    if args.table:
        print(registry.models_table())
        return
    store = _store(args)
    for name in registry.available():
        _emit({"model": name, "versions": store.model_versions(name)})


def cmd_gc(args: argparse.Namespace) -> None:
    """Delete the temporary and unregistered checkpoint files that killed or failed trainings
    left in data/models (the rule: ``qa_core.checkpoints.collect_garbage``)."""
    store = _store(args)
    registered = {Path(version["checkpoint_path"]) for version in store.model_versions()}
    report = collect_garbage(
        config.checkpoint_dir(),
        owner=store.store_id,
        registered=registered,
        grace_minutes=args.older_than,
        include_unmarked=args.unmarked,
        dry_run=args.dry_run,
    )
    verb = "would_delete" if args.dry_run else "deleted"
    for path in report.deleted:
        _emit({verb: str(path)})
    _emit({
        verb: len(report.deleted),
        "freed_bytes": report.freed_bytes,
        "kept_registered": report.registered,
        "kept_recent": len(report.recent),
        "kept_other_store": len(report.not_ours),
        "kept_unmarked": len(report.unmarked),
    })


def cmd_users_grant(args: argparse.Namespace) -> None:
    user = _store(args).grant_role(args.email, args.role, actor=_actor())
    _emit({"user": user["recorded_as"], "role": user["role"]})


def cmd_users_merge(args: argparse.Namespace) -> None:
    """One person signed in under two identities: the second becomes the first (``Store.merge_users``)."""
    user = _store(args).merge_users(args.keep, args.merge, actor=_actor())
    _emit({"user": user["recorded_as"], "merged": args.merge})


def cmd_users_list(args: argparse.Namespace) -> None:
    for user in _store(args).users():
        _emit(user)


def cmd_audit(args: argparse.Namespace) -> None:
    """The audit trail, newest first: JSON lines, or CSV with ``--out``."""
    from qa_core.services.audit import audit_csv, audit_table

    store = _store(args)
    if args.out:
        from qa_core.checkpoints import atomic_file

        table = audit_table(store, args.action)
        with atomic_file(args.out) as handle:
            handle.write(audit_csv(table))
        _emit({"written": args.out, "events": len(table)})
        return
    for event in store.audit_events(args.action):
        _emit(event)


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

    store = _store(args)
    labels = evaluation_labels(store, args.data, parse_rule(args.labels))
    questions = [q for q in require_split(Dataset(args.data, labels.questions), args.split) if q.candidates]
    qrels = qrels_from_questions(questions)
    if not qrels:
        raise InputError(f"split {args.split!r} of dataset {args.data!r} has no labels to compare against")
    runs = {}
    for source in args.runs:
        if source in runs:
            raise InputError(f"{source!r} is named twice")
        if source in workbench.model_names(store, args.data) or source.endswith(".pt"):
            with _progress_bar(f"scoring {source} on {args.split}", args.quiet) as progress:
                runs[source] = score_questions(workbench.load_ranker(store, source, args.data), questions, progress)
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

    store = _store(args)
    source = Path(args.input)
    ranker = workbench.load_ranker(store, args.model, args.data)
    run_input = args.data is not None and source.is_file() and input_format(source) == "trec"
    request = BatchRequest(
        source, Path(args.out), texts=store_texts(store, args.data) if run_input else None,
        engine=args.engine, workers=args.workers, scorers=args.scorers, chunk_pairs=args.chunk_pairs, amp=args.amp,
        tag=args.tag, address=args.address, device=args.device, quiet=args.quiet,
    )
    _emit({"written": args.out, "model": ranker.name, **batch_score(request, ranker).summary()})


def _add_batch_score_parser(commands) -> None:
    from qa_core.services.batch_chunks import CHUNK_PAIRS, ENGINES

    run = commands.add_parser(
        "batch-score", help="score every pair of a JSONL file or a first-stage TREC run with a model; writes a TREC run",
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
    run.set_defaults(func=cmd_batch_score)


def _add_compare_parser(commands) -> None:
    from qa_core.evaluation import METRICS
    from qa_core.significance import FORMATS

    compare = commands.add_parser(
        "compare", help="compare runs and models on a split: means with 95%% CIs, randomisation and t-tests "
        "(Holm-adjusted), W/T/L, minimum detectable difference"
    )
    compare.add_argument("runs", nargs="+", metavar="RUN_OR_MODEL", help="TREC run files (.gz too) or registered models: {models}")
    compare.add_argument("--data", required=True)
    compare.add_argument("--split", default="test")
    compare.add_argument("--metric", nargs="+", choices=METRICS, default=list(METRICS))
    compare.add_argument("--clean", action="store_true", help="drop questions with no or only correct candidates")
    compare.add_argument("--format", choices=FORMATS, default="table")
    _add_label_arguments(compare)
    compare.set_defaults(func=cmd_compare)


class _HelpFormatter(argparse.HelpFormatter):
    """Fills ``{models}`` and ``{trainable}`` in help texts from the ranker registry, and only when
    help is printed: importing every model takes seconds that other commands should not pay."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text and ("{models}" in text or "{trainable}" in text):
            from qa_core.rankers import registry

            text = text.replace("{models}", ", ".join(registry.available()))
            text = text.replace("{trainable}", ", ".join(registry.trainable()))
        return text


class _Parser(argparse.ArgumentParser):
    """Every (sub)command's parser, with the registry-aware help."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m qa_core", description=__doc__)
    parser.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: RERANK_LAB_DB or SQLite in the data folder)")
    commands = parser.add_subparsers(dest="command", required=True)

    data = commands.add_parser("data", help="import, export and list datasets").add_subparsers(dest="data_command", required=True)
    imp = data.add_parser("import", help="import a dataset (WikiQA folder, TrecQA XML, SemEval XML, CSV, JSONL)")
    imp.add_argument("path")
    imp.add_argument("--format", default="auto")
    imp.add_argument("--name", default=None)
    imp.add_argument("--replace", action="store_true", help="replace a dataset of the same name")
    imp.set_defaults(func=cmd_data_import)
    data.add_parser("demo", help="import the bundled demo corpus").set_defaults(func=cmd_data_demo)
    run = data.add_parser("import-run", help="set first-stage ranks and scores from a TREC run file")
    run.add_argument("path")
    run.add_argument("--data", required=True)
    run.set_defaults(func=cmd_data_import_run)
    qrels = data.add_parser("import-qrels", help="add relevance labels from a TREC qrels file")
    qrels.add_argument("path")
    qrels.add_argument("--data", required=True)
    qrels.add_argument("--annotator", default=None)
    qrels.set_defaults(func=cmd_data_import_qrels)
    exp = data.add_parser("export", help="export labels as TREC qrels or JSONL")
    exp.add_argument("--data", required=True)
    exp.add_argument("--format", choices=["qrels", "jsonl"], default="qrels")
    exp.add_argument("--source", choices=["labels", "gold"], default="labels")
    exp.add_argument("--out", required=True)
    exp.set_defaults(func=cmd_data_export)
    data.add_parser("list", help="datasets in the store").set_defaults(func=cmd_data_list)
    orphans = data.add_parser("orphans", help="labels kept on candidates that a re-import no longer holds")
    orphans.add_argument("--data", required=True)
    orphans.set_defaults(func=cmd_data_orphans)

    train = commands.add_parser("train", help="train a model and register it in the store")
    train.add_argument("--model", help="one of: {trainable}")
    train.add_argument("--data")
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--train-split", default="train")
    train.add_argument("--dev-split", default="dev")
    train.add_argument("--no-promote", action="store_true", help="register without making it the version the app uses")
    train.add_argument("--quiet", action="store_true", help="no progress bars (the final JSON line still prints)")
    train.add_argument(
        "--job", type=int, default=None, help="run training job ID queued in the store (its settings come from there)"
    )
    train.set_defaults(func=cmd_train)

    from db.jobs import LEASE_SECONDS
    from qa_core.services.worker import POLL_SECONDS

    worker = commands.add_parser(
        "worker", help="run the training jobs queued in the store (the app queues them with RERANK_LAB_JOB_RUNNER=worker)",
        description="Claims the oldest queued training job, runs it, and goes on, until stopped (SIGTERM or Ctrl-C "
        "give the running job back to the queue; after a SIGKILL or a crash its lease runs out and another worker "
        "takes it). Run as many as you like, on any machine that reaches the store and the data folder.",
    )
    worker.add_argument("--until-idle", action="store_true", help="stop when no job is queued")
    worker.add_argument("--max-jobs", type=int, default=None, help="stop after this many jobs")
    worker.add_argument("--lease", type=float, default=LEASE_SECONDS,
                        help="seconds a claim lasts without a heartbeat (heartbeats come every 5 s)")
    worker.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks at an empty queue")
    worker.set_defaults(func=cmd_worker)

    classify = commands.add_parser(
        "train-classifier", help="train the question class CNN or focus tagger and register it in the store"
    )
    classify.add_argument("classifier", choices=["question_class", "question_focus"])
    classify.add_argument("--path", default=None, help="folder of the label files (default: the shared data's)")
    classify.add_argument("--seed", type=int, default=1)
    classify.add_argument("--quiet", action="store_true", help="no progress bars (the final JSON line still prints)")
    classify.add_argument("--no-promote", action="store_true", help="register without making it the version models use")
    classify.set_defaults(func=cmd_train_classifier)

    ev = commands.add_parser("evaluate", help="evaluate a model on a split; prints one JSON line")
    ev.add_argument("--model", required=True, help="a checkpoint path or one of: {models}")
    ev.add_argument("--data", required=True)
    ev.add_argument("--split", default="test")
    ev.add_argument("--clean", action="store_true", help="drop questions with no or only correct candidates")
    ev.add_argument("--run-out", default=None, help="also write the TREC run file here")
    _add_label_arguments(ev)
    ev.set_defaults(func=cmd_evaluate)

    again = commands.add_parser(
        "reproduce", help="train a stored model version again from its record; says whether weights and metrics match",
        description="Retrains version N (same seed, splits, settings, thread count and label rule; not registered) "
        "and prints one JSON line: identical or not, the largest weight difference, every stored metric against "
        "the retrained one. Exit status 1 when anything differs.",
    )
    again.add_argument("--model", required=True)
    again.add_argument("--data", required=True)
    again.add_argument("--version", type=int, required=True)
    again.add_argument("--quiet", action="store_true", help="no progress bars (the JSON line still prints)")
    again.set_defaults(func=cmd_reproduce)

    rank = commands.add_parser("rank", help="rank BM25 candidates of a dataset's collection for a question")
    rank.add_argument("question")
    rank.add_argument("--data", default="demo")
    rank.add_argument("--model", default="overlap", help="a checkpoint path or one of: {models}")
    rank.add_argument("--candidates", type=int, default=50, help="BM25 candidates to rerank")
    rank.add_argument("--top", type=int, default=10)
    rank.set_defaults(func=cmd_rank)

    models = commands.add_parser("models", help="registered models and their versions")
    models.add_argument("--table", action="store_true", help="print the markdown table of models (README) instead")
    models.set_defaults(func=cmd_models)

    gc = commands.add_parser(
        "gc",
        help="delete stale temporary and unregistered checkpoint files of this store in data/models",
        description=(
            "Deletes, in data/models, temporary files (.NAME.RANDOM.tmp) older than --older-than minutes, "
            "and checkpoint files marked with this store's id that none of its model versions uses, older "
            "than --older-than minutes. Never touches a registered checkpoint of this store or a file "
            "marked by another store sharing the folder; files without a store mark (older names) only "
            "with --unmarked."
        ),
    )
    gc.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    gc.add_argument("--older-than", type=float, default=GC_GRACE_MINUTES, metavar="MINUTES",
                    help=f"grace period: newer files are kept (default {GC_GRACE_MINUTES:.0f})")
    gc.add_argument("--unmarked", action="store_true",
                    help="also unregistered files without a store mark: only when no other store shares the folder")
    gc.set_defaults(func=cmd_gc)


    _add_compare_parser(commands)
    _add_batch_score_parser(commands)

    users = commands.add_parser("users", help="the team's users and roles (team mode)").add_subparsers(
        dest="users_command", required=True
    )
    grant = users.add_parser("grant", help="give a user who has signed in once a role: annotator, reviewer or admin")
    grant.add_argument("email", help="the user's email (or their provider subject)")
    grant.add_argument("role", help="annotator, reviewer or admin")
    grant.set_defaults(func=cmd_users_grant)
    users.add_parser("list", help="every user with their role").set_defaults(func=cmd_users_list)
    merge = users.add_parser("merge", help="make two users one person (a second sign-in identity of the same "
                                           "person): MERGE's identity signs in as KEEP, its labels become KEEP's")
    merge.add_argument("keep", type=int, help="the id of the user to keep (users list)")
    merge.add_argument("merge", type=int, help="the id of the user merged into KEEP")
    merge.set_defaults(func=cmd_users_merge)

    audit = commands.add_parser("audit", help="who imported, trained, promoted, rolled back, adjudicated, changed roles")
    audit.add_argument("--action", nargs="+", default=None, help="only these actions (import, promote, rollback, ...)")
    audit.add_argument("--out", default=None, help="write CSV here instead of JSON lines")
    audit.set_defaults(func=cmd_audit)
    systems_cli.add_parser(commands, _store, _actor)
    return parser


def _one_line(message: str) -> str:
    """Messages quote user data (question text, file lines) that may hold newlines."""
    return " ".join(message.split())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.db is None:
        args.db = config.database_url()
    from sqlalchemy.exc import SQLAlchemyError

    from db.base import describe_database_error

    try:
        status = args.func(args)
    except (InputError, NotTrainedError) as exc:
        print(f"error: {_one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a path the user gave cannot be read or written (no such folder, a file in the way)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {_one_line(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SQLAlchemyError as exc:  # outside the store's own sessions (the store turns its own into StorageError)
        reason = describe_database_error(exc) if hasattr(exc, "orig") else str(exc)
        print(f"error: {_one_line(str(StorageError(reason)))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status or 0
