"""``python -m qa_core train|worker|train-classifier``: training a model in this process, serving
queued training jobs, training the question classifiers."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qa_core import config
from qa_core.checkpoints import new_checkpoint_path
from qa_core.cli.common import actor, add_command, emit, open_store
from qa_core.types import InputError


def cmd_train(args: argparse.Namespace) -> None:
    from qa_core.services.registration import TrainingPlan, train_and_register

    store = open_store(args)
    plan = TrainingPlan(args.model, args.seed, args.train_split, args.dev_split, promote=not args.no_promote)
    trained = train_and_register(
        store, plan, store.datasets.load_dataset(args.data),
        checkpoint=new_checkpoint_path(args.model, args.data, f"seed{args.seed}", owner=store.store_id),
        extra={"labels": "gold", "trained_by": "cli"}, progress=not args.quiet, actor=actor(),
    )
    version = store.models.model_version(trained.version_id)["version"]
    emit({"model": args.model, "version": version, "model_version_id": trained.version_id,
          "checkpoint": str(trained.outcome.checkpoint), **trained.outcome.metrics})


def cmd_worker(args: argparse.Namespace) -> None:
    """Serve the store's queue of training jobs (``qa_core.services.worker``): progress on stderr,
    one JSON line per job on stdout."""
    import logging

    from qa_core.services.store_setup import masked_url
    from qa_core.services.worker import serve

    store = open_store(args)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s worker %(levelname)s %(message)s")
    logging.getLogger(__name__).info("serving the training jobs of %s", masked_url(store.url))
    serve(store, lease_seconds=args.lease, poll_seconds=args.poll, until_idle=args.until_idle, max_jobs=args.max_jobs,
          report=emit, actor=actor())


def cmd_train_classifier(args: argparse.Namespace) -> None:
    from qa_core.classifiers import training
    from qa_core.services.registration import register_version

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
    version_id = register_version(
        store, args.classifier, path, {"path": str(folder), "seed": args.seed},
        {**outcome.metrics, "best_epoch": outcome.report["best_epoch"], "train_seconds": outcome.report["seconds"]},
        promote=not args.no_promote, actor=actor(),
    )
    version = store.models.model_version(version_id)["version"]  # as ``train`` says it (it said the id)
    emit({"model": args.classifier, "version": version, "model_version_id": version_id, "checkpoint": str(path),
          **outcome.metrics})


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``train``, ``worker`` and ``train-classifier`` commands."""
    train = add_command(commands, "train", cmd_train, help="train a model and register it in the store")
    train.add_argument("--model", required=True, help="one of: {trainable}")
    train.add_argument("--data", required=True)
    train.add_argument("--seed", type=int, default=1)
    train.add_argument("--train-split", default="train")
    train.add_argument("--dev-split", default="dev")
    train.add_argument("--no-promote", action="store_true", help="register without making it the version the app uses")
    train.add_argument("--quiet", action="store_true", help="no progress bars (the final JSON line still prints)")

    from qa_core.services.jobs import LEASE_SECONDS
    from qa_core.services.worker import POLL_SECONDS

    worker = add_command(
        commands, "worker", cmd_worker,
        help="run the training jobs queued in the store (the app queues them with RERANK_LAB_JOB_RUNNER=worker)",
        description="Claims the oldest queued training job, runs it, and goes on, until stopped (SIGTERM or Ctrl-C "
        "give the running job back to the queue; after a SIGKILL or a crash its lease runs out and another worker "
        "takes it). Run as many as you like, on any machine that reaches the store and the data folder.",
    )
    worker.add_argument("--until-idle", action="store_true", help="stop when no job is queued")
    worker.add_argument("--max-jobs", type=int, default=None, help="stop after this many jobs")
    worker.add_argument("--lease", type=float, default=LEASE_SECONDS,
                        help="seconds a claim lasts without a heartbeat (heartbeats come every 5 s)")
    worker.add_argument("--poll", type=float, default=POLL_SECONDS, help="seconds between looks at an empty queue")

    classify = add_command(
        commands, "train-classifier", cmd_train_classifier,
        help="train the question class CNN or focus tagger and register it in the store"
    )
    classify.add_argument("classifier", choices=["question_class", "question_focus"])
    classify.add_argument("--path", default=None, help="folder of the label files (default: the shared data's)")
    classify.add_argument("--seed", type=int, default=1)
    classify.add_argument("--quiet", action="store_true", help="no progress bars (the final JSON line still prints)")
    classify.add_argument("--no-promote", action="store_true", help="register without making it the version models use")
