"""``python -m qa_core data ...``: import, export and list datasets, through ``qa_core.services.datasets``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from qa_core.cli.common import ORPHAN_EXAMPLES, actor, add_command, emit, open_store, terminal_text
from qa_core.services import store_setup


def cmd_data_import(args: argparse.Namespace) -> None:
    from qa_core.services import datasets

    store = open_store(args)
    name, report = datasets.import_file(store, Path(args.path), fmt=args.format, name=args.name, replace=args.replace,
                                        actor=actor())
    emit({"imported": name, **store.datasets.dataset_summary(name), "import": report.summary()})
    if report.moved:
        _note(f"{len(report.moved)} candidates kept their labels under another id (rows moved in the file)")
    listing = f"list them: python -m qa_core data orphans --data {name}"
    if report.edited_labelled:
        _note(f"{len(report.edited_labelled)} labelled candidates have another text under the same id: "
              f"{_examples(report.edited_labelled)}; their labels judged the earlier text and stay on the id ({listing})")
    if report.retired:
        _note(f"{len(report.retired)} candidates are no longer in the file: {_examples(report.retired)}; their "
              f"{report.orphaned_labels} labels are kept ({listing})")


def _note(message: str) -> None:
    """A note for people on stderr; it quotes ids and names from the file, shown as ``terminal_text``."""
    print(f"note: {terminal_text(message)}", file=sys.stderr)


def _examples(candidates: Sequence[tuple[str, str, int]]) -> str:
    """``qid/doc_id (N labels)`` of the first ``ORPHAN_EXAMPLES`` candidates, and how many more."""
    shown = ", ".join(f"{qid}/{doc_id} ({labels} labels)" for qid, doc_id, labels in candidates[:ORPHAN_EXAMPLES])
    return shown + (f" and {len(candidates) - ORPHAN_EXAMPLES} more" if len(candidates) > ORPHAN_EXAMPLES else "")


def cmd_data_orphans(args: argparse.Namespace) -> None:
    """Labels kept on candidates that a re-import retired, one JSON line each."""
    for record in open_store(args).labels.orphaned_labels(args.data):
        emit(record)


def cmd_data_demo(args: argparse.Namespace) -> None:
    store = open_store(args)
    store_setup.ensure_demo(store, beside_others=True)
    emit({"datasets": store.datasets.dataset_names()})


def cmd_data_import_run(args: argparse.Namespace) -> None:
    from qa_core.services import datasets

    questions = datasets.import_run(open_store(args), args.data, Path(args.path), actor=actor())
    emit({"first_stage_from": args.path, "questions": questions})


def cmd_data_import_qrels(args: argparse.Namespace) -> None:
    from qa_core.services import datasets

    emit(datasets.import_qrels(open_store(args), args.data, Path(args.path), args.annotator, actor=actor()))


def cmd_data_export(args: argparse.Namespace) -> None:
    from qa_core.services import datasets

    datasets.export(open_store(args), args.data, Path(args.out), args.format, args.source)
    emit({"written": args.out})


def cmd_data_list(args: argparse.Namespace) -> None:
    store = open_store(args)
    for name in store.datasets.dataset_names():
        emit({"dataset": name, **store.datasets.dataset_summary(name)})


def add_commands(commands: argparse._SubParsersAction) -> None:
    """The ``data`` command group."""
    data = commands.add_parser("data", help="import, export and list datasets").add_subparsers(dest="data_command", required=True)
    imp = add_command(data, "import", cmd_data_import, help="import a dataset (WikiQA folder, TrecQA XML, SemEval XML, CSV, JSONL)")
    imp.add_argument("path")
    imp.add_argument("--format", default="auto")
    imp.add_argument("--name", default=None)
    imp.add_argument("--replace", action="store_true", help="replace a dataset of the same name")
    add_command(data, "demo", cmd_data_demo, help="import the bundled demo corpus")
    run = add_command(data, "import-run", cmd_data_import_run, help="set first-stage ranks and scores from a TREC run file")
    run.add_argument("path")
    run.add_argument("--data", required=True)
    qrels = add_command(data, "import-qrels", cmd_data_import_qrels, help="add relevance labels from a TREC qrels file")
    qrels.add_argument("path")
    qrels.add_argument("--data", required=True)
    qrels.add_argument("--annotator", default=None)
    exp = add_command(data, "export", cmd_data_export, help="export labels as TREC qrels or JSONL")
    exp.add_argument("--data", required=True)
    exp.add_argument("--format", choices=["qrels", "jsonl"], default="qrels")
    exp.add_argument("--source", choices=["labels", "gold"], default="labels")
    exp.add_argument("--out", required=True)
    add_command(data, "list", cmd_data_list, help="datasets in the store")
    orphans = add_command(data, "orphans", cmd_data_orphans, help="labels kept on candidates that a re-import no longer holds")
    orphans.add_argument("--data", required=True)
