"""Command line: ``python -m qa_core data|train|worker|train-classifier|evaluate|reproduce|rank|compare|batch-score|models|gc|users|audit|systems``.

Whoever runs it holds the database URL, so it acts as an operator with every right
(``qa_core.access.operator``), recorded in the audit trail as ``cli:<OS user>``.

Exit status: 0 done; 2 bad input, or the database or the disk refused (one clear ``error:`` line
on stderr, never a traceback, nothing half written); 130 interrupted (Ctrl-C); 1 only for a bug
(with its traceback). Results are JSON lines on stdout; notes for people go to stderr.
"""

from __future__ import annotations

import argparse
import functools
import sys
import warnings
from collections.abc import Callable, Sequence

from qa_core import config
from qa_core.cli import admin, data, evaluate, systems, training
from qa_core.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, terminal_text
from qa_core.types import InputError, NotTrainedError, StorageError


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

    for group in (data, training, evaluate, admin, systems):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.db is None:
        args.db = config.database_url()
    from sqlalchemy.exc import SQLAlchemyError

    from qa_core.services.datasets import database_refusal

    try:
        with warnings.catch_warnings():  # restores Python's own display afterwards (tests call main in-process)
            warnings.showwarning = functools.partial(_note, warnings.showwarning)
            status = args.func(args)
    except (InputError, NotTrainedError) as exc:
        print(f"error: {terminal_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as exc:  # a path the user gave cannot be read or written (no such folder, a file in the way)
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {terminal_text(where + (exc.strerror or str(exc)))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SQLAlchemyError as exc:  # outside the store's own sessions (the store turns its own into StorageError)
        print(f"error: {terminal_text(str(StorageError(database_refusal(exc))))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return status or 0


def _note(python_display: Callable[..., None], message: Warning | str, category: type[Warning], filename: str,
          lineno: int, *args: object, **kwargs: object) -> None:
    """This project's warnings (a fallback to an earlier model version, an index rebuilt) as one
    sentence on stderr, as every other note for people: Python's own display adds the file, line and
    source of the ``warnings.warn`` call. Other packages' warnings keep that display (it is theirs)."""
    if category.__module__.split(".")[0] in ("qa_core", "db"):
        print(f"warning: {terminal_text(str(message))}", file=sys.stderr)
    else:
        python_display(message, category, filename, lineno, *args, **kwargs)
