"""What every command shares: the store it opens, the operator it acts as, JSON lines out."""

from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qa_core.services.experiments import ScoringProgress

EXIT_NOT_REPRODUCED = 1  # ``reproduce``: the retrained version differs from the stored one
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
ORPHAN_EXAMPLES = 5


@contextmanager
def progress_bar(description: str, quiet: bool) -> Iterator[ScoringProgress | None]:
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


def add_command(
    commands: argparse._SubParsersAction, name: str, func: Callable[[argparse.Namespace], None], **options: Any
) -> argparse.ArgumentParser:
    """The subcommand ``name`` (``options`` as ``add_parser`` takes them: help, description), run by
    ``func``: each command's parser is bound to its handler where it is declared, in one call."""
    parser = commands.add_parser(name, **options)
    parser.set_defaults(func=func)
    return parser


def add_label_arguments(parser: argparse.ArgumentParser) -> None:
    """The label rule of ``qa_core.services.evaluation_labels`` and ``--quiet``."""
    parser.add_argument("--labels", choices=["gold", "training"], default="gold",
                        help="evaluate against the dataset's gold labels (default) or the training-label rule "
                             "(adjudicated > annotators' majority > gold)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar (the final output still prints)")


def terminal_text(text: str) -> str:
    """``text`` as one line of a terminal: runs of blanks (newlines, tabs) as one space, direction
    controls dropped (``visible_text``), and every other control character (Unicode's Cc: ESC, BEL,
    backspace, the C1 set) written as its escape ``\\x1b``, so data printed cannot move the cursor,
    recolour or retitle the terminal, and shows that something was there. (JSON lines need none of
    this: ``json.dumps`` escapes control characters itself.)"""
    from qa_core.text.normalise import visible_text

    return "".join(
        f"\\x{ord(char):02x}" if unicodedata.category(char) == "Cc" else char
        for char in " ".join(visible_text(text).split())
    )


def emit(record: dict) -> None:
    """One JSON line on stdout; timestamps and paths print as strings."""
    print(json.dumps(record, default=str))


def open_store(args: argparse.Namespace):
    """The store of ``--db`` (``store_setup.open_store``: one sentence when it cannot be opened)."""
    from qa_core.services import store_setup

    return store_setup.open_store(args.db)


def actor():
    """The operator running this command (see the module docstring)."""
    from qa_core.access import process_operator

    return process_operator()
