"""The command line in this process, as the CLI tests drive it (their store and data folder come
from the ``cli_env`` fixture in conftest)."""

from __future__ import annotations

from qa_core.cli import main


def run_cli(*args: str, capsys) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``python -m qa_core *args`` run here."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err
