"""``python -m qa_core systems ...``: external systems (runs and scoring services) from the command line.

    systems add-run FILE --data D --name N [--format trec|jsonl]
    systems add-service URL --name N
    systems list [--data D]
    systems rename NAME NEW_NAME
    systems remove NAME
    systems evaluate NAME --data D [--split test]   (a run: over the questions it covers and the whole split)

The rules are ``qa_core.services.systems``; this module only parses and prints (one JSON line per
result, as the other commands), so a
bad file or a service that is down is one ``error:`` line there, as everywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qa_core.cli.common import actor, emit, open_store
from qa_core.services import systems


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``systems`` command and its subcommands."""
    parser = commands.add_parser("systems", help="external systems: stored runs and live scoring services that rank "
                                 "like a model on every page")
    sub = parser.add_subparsers(dest="systems_command", required=True)
    run = sub.add_parser("add-run", help="keep a TREC run or JSONL {qid, doc_id, score} of a dataset as a system")
    run.add_argument("path", metavar="FILE")
    run.add_argument("--data", required=True, help="the dataset the run ranks")
    run.add_argument("--name", required=True)
    run.add_argument("--format", default=None, help="trec or jsonl (default: jsonl for a .jsonl name, else trec)")
    service = sub.add_parser("add-service", help="keep an HTTP scoring service (README: Scoring services) as a system")
    service.add_argument("url", metavar="URL")
    service.add_argument("--name", required=True)
    listing = sub.add_parser("list", help="every system with its provenance")
    listing.add_argument("--data", default=None, help="only the runs of this dataset (and every service)")
    rename = sub.add_parser("rename", help="give a system another name")
    rename.add_argument("name")
    rename.add_argument("new_name")
    remove = sub.add_parser("remove", help="remove a system (labels are never touched)")
    remove.add_argument("name")
    evaluate = sub.add_parser("evaluate", help="a run's metrics over the questions it covers and over the whole split")
    evaluate.add_argument("name")
    evaluate.add_argument("--data", required=True)
    evaluate.add_argument("--split", default="test")
    for command in (run, service, listing, rename, remove, evaluate):
        command.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> None:
    store = open_store(args)
    command = args.systems_command
    if command == "add-run":
        emit(systems.add_run(store, Path(args.path), args.data, args.name, actor=actor(), fmt=args.format))
    elif command == "add-service":
        emit(systems.add_service(store, args.url, args.name, actor=actor()))
    elif command == "list":
        for row in systems.overview(store, args.data):
            emit(row)
    elif command == "rename":
        systems.rename(store, args.name, args.new_name, actor=actor())
        emit({"renamed": args.name, "to": args.new_name})
    elif command == "remove":
        systems.remove(store, args.name, actor=actor())
        emit({"removed": args.name})
    else:
        coverage = systems.run_coverage(store, args.name, store.datasets.load_dataset(args.data))
        emit({"system": args.name, "split": args.split, **coverage.metrics(args.split)})
