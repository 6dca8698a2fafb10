"""``python -m qa_core train|worker|train-classifier``: training a model in this process, serving
queued training jobs, training the question classifiers. ``cmd_train`` (with its ``--job`` path)
is moved here verbatim from ``qa_core/cli.py``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qa_core import config
from qa_core.checkpoints import new_checkpoint_path
from qa_core.cli.common import actor, emit, open_store
from qa_core.types import InputError


def cmd_train(args: argparse.Namespace) -> None:
    from qa_core.services import analysis
    from qa_core.services.experiments import EVAL_SPLIT, train_ranker, version_record

    store = open_store(args)
    if args.job is not None:
        from qa_core.services.jobs import ClaimLost, run_job

        try:
            emit({"job": args.job, "model_version_id": run_job(store, args.job, actor=actor())})
        except ClaimLost as lost:  # cancelled meanwhile: nothing was registered
            raise InputError(str(lost)) from None
        return
    if not args.model or not args.data:
        raise InputError("train needs --model and --data (or --job ID for a job queued in the store)")
    dataset = store.datasets.load_dataset(args.data)
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
    version_id = store.models.register_model(
        args.model,
        kind=args.model,
        checkpoint_path=str(outcome.checkpoint),
        training_data=training_data,
        metrics=metrics,
        promote=not args.no_promote,  # for the dataset it was trained on
        actor=actor(),
    )
    version = next(v["version"] for v in store.models.model_versions(args.model) if v["id"] == version_id)
    emit({"model": args.model, "version": version, "model_version_id": version_id,
           "checkpoint": str(outcome.checkpoint), **outcome.metrics})


def cmd_worker(args: argparse.Namespace) -> None:
    """Serve the store's queue of training jobs (``qa_core.services.worker``): progress on stderr,
    one JSON line per job on stdout."""
    import logging

    from qa_core.services.worker import serve

    store = open_store(args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s worker %(levelname)s %(message)s")
    logging.getLogger(__name__).info("serving the training jobs of %s", store.engine.url.render_as_string(hide_password=True))
    serve(store, lease_seconds=args.lease, poll_seconds=args.poll, until_idle=args.until_idle, max_jobs=args.max_jobs,
          report=emit, actor=actor())


def cmd_train_classifier(args: argparse.Namespace) -> None:
    from qa_core.classifiers import training

    folder = args.path
    if folder is None:
        shared = config.shared_data_dir()
        if shared is None:
            raise InputError("no --path given and no shared data folder (../shared/data or RERANK_LAB_SHARED_DATA)")
        folder = shared / args.classifier
    train = training.train_question_classifier if args.classifier == "question_class" else training.train_focus_tagger
    store = open_store(args)  # before the training: a store that cannot be opened says so at once
    path = new_checkpoint_path(args.classifier, f"seed{args.seed}", owner=store.store_id)
    config.ensure_free_space(path.parent, f"training {args.classifier}")
    outcome = train(Path(folder), seed=args.seed, progress=not args.quiet)
    outcome.model.save(path)
    version = store.models.register_model(
        args.classifier,
        kind=args.classifier,
        checkpoint_path=str(path),
        training_data={"path": str(folder), "seed": args.seed},
        metrics={**outcome.metrics, "best_epoch": outcome.report["best_epoch"], "train_seconds": outcome.report["seconds"]},
        promote=not args.no_promote,
        actor=actor(),
    )
    emit({"model": args.classifier, "version": version, "checkpoint": str(path), **outcome.metrics})


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``train``, ``worker`` and ``train-classifier`` commands."""
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

    from qa_core.services.jobs import LEASE_SECONDS
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
