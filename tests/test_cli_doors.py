"""The command line's doors and words: a database secret in the URL's query is never shown, a
system named ``system:<name>`` is kept under ``<name>``, text from data cannot drive the terminal,
and counts and periods that would do something else than asked (``rank --top 0``, ``gc --older-than
nan``) are refused in one line. Each case runs the CLI in this process on a small SQLite store."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from db.store import Store
from qa_core import config
from qa_core.data.demo import load_demo
from qa_core.services.store_setup import masked_url
from qa_core.types import Candidate, Dataset, Question
from tests.cli import run_cli

SECRET = "s3@cr3t"
NOWHERE = "postgresql+psycopg://bob@127.0.0.1:1/db"  # nothing listens on port 1


def _refused(code: int, out: str, err: str, *needles: str) -> str:
    """Exit status 2, nothing on stdout, one ``error:`` line naming ``needles``."""
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert all(needle in err for needle in needles), (needles, err)
    return err


def _hidden(text: str) -> bool:
    return all(part not in text for part in (SECRET, *SECRET.split("@")))


@pytest.mark.parametrize("key", ["password", "sslpassword", "passfile", "odbc_connect"])
def test_a_secret_in_the_database_urls_query_is_never_shown(key: str, cli_env: Path,
                                                            capsys: pytest.CaptureFixture) -> None:
    """libpq takes a password in the query too (``?password=``); only the one before the '@' was
    masked, so the landing page, the sign-in page and the CLI's error showed it."""
    url = f"{NOWHERE}?sslmode=require&{key}={SECRET}"
    assert masked_url(url) == f"{NOWHERE}?sslmode=***&{key}=***"
    err = _refused(*run_cli("--db", url, "data", "list", capsys=capsys), f"cannot open the store at {NOWHERE}?")
    assert _hidden(err) and f"{key}=***" in err


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://host?password=s3@cr3t", "postgresql://host?password=***"),  # no database: the '@' is the query's
    ("postgresql://host:5432?password=s3@cr3t", "postgresql://host:5432?password=***"),
    ("postgresql://bob:s3?x=@cr3t/db", "postgresql://bob:***@cr3t/db"),  # a '?' and '=' in the password
    ("postgresql://bob:s3?x=1@cr3t", "(unparseable database URL)"),  # either reading is a guess: nothing shown
])
def test_a_password_beside_a_question_mark_and_an_at_sign_is_never_shown(url: str, shown: str) -> None:
    """Which '@' ends a password and which '?' starts a query is a guess when both are unencoded; a
    wrong guess showed the query's password as the user name (``host%3Fpassword%3Ds3``) or its tail
    as the host (``host:***@cr3t``)."""
    assert masked_url(url) == shown


def test_the_worker_logs_its_store_without_the_querys_values(cli_env: Path, capsys: pytest.CaptureFixture,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    url = f"sqlite:///{cli_env / 'store.sqlite'}?timeout=31337"  # a value that is no secret, but stands for one
    caplog.set_level(logging.INFO)
    code, _, err = run_cli("--db", url, "worker", "--until-idle", capsys=capsys)
    assert code == 0, err
    assert "store.sqlite?timeout=***" in caplog.text and "31337" not in caplog.text


def _demo_run(folder: Path, url: str) -> Path:
    """A TREC run of the demo's TEST questions: each candidate scored by its length."""
    store = Store(url)
    try:
        store.datasets.import_dataset(load_demo())
        questions = store.datasets.load_dataset("demo").split("test")
    finally:
        store.close()
    path = folder / "lengths.run"
    path.write_text("".join(f"{q.qid} Q0 {c.doc_id} 1 {len(c.text)} ext\n" for q in questions for c in q.candidates))
    return path


def test_a_system_added_as_system_name_is_found_by_that_name(cli_env: Path, capsys: pytest.CaptureFixture) -> None:
    """add kept the prefix (listed as system:system:lengths) while remove stripped it: the system
    could not be removed by the name it was added under."""
    url = f"sqlite:///{cli_env / 'store.sqlite'}"
    run = _demo_run(cli_env, url)
    db = ("--db", url)
    code, out, err = run_cli(*db, "systems", "add-run", str(run), "--data", "demo", "--name", " system:lengths",
                             capsys=capsys)
    assert code == 0 and json.loads(out)["name"] == "lengths", err
    code, out, _ = run_cli(*db, "systems", "list", capsys=capsys)
    assert [json.loads(line)["system"] for line in out.splitlines()] == ["system:lengths"]
    for name in ("system:", "system: ", "system:  "):
        _refused(*run_cli(*db, "systems", "add-run", str(run), "--data", "demo", "--name", name, capsys=capsys),
                 "a system needs a name after 'system:'")
        _refused(*run_cli(*db, "systems", "rename", "system:lengths", name, capsys=capsys),
                 "a system needs a name after 'system:'")
    code, out, err = run_cli(*db, "systems", "remove", "system:lengths", capsys=capsys)
    assert code == 0 and json.loads(out) == {"removed": "system:lengths"}, err
    assert run_cli(*db, "systems", "list", capsys=capsys)[1] == ""


ESCAPES = "\x1b[2J\x1b]0;owned\x07\x9b31m"  # clear the screen, retitle the window, C1 CSI: red


def test_rank_prints_no_control_character_and_refuses_a_top_below_one(cli_env: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    url = f"sqlite:///{cli_env / 'store.sqlite'}"
    store = Store(url)
    try:
        store.datasets.import_dataset(Dataset("esc", [Question("q1", "who painted the mona lisa", [
            Candidate("d1", f"Leonardo {ESCAPES}painted the Mona Lisa.", label=1),
            Candidate("d2", "The Louvre shows the Mona Lisa\tto\nvisitors.", label=0),
        ])]))
    finally:
        store.close()
    code, out, err = run_cli("--db", url, "rank", "who painted the mona lisa", "--data", "esc", capsys=capsys)
    assert code == 0, err
    texts = sorted(line.split(maxsplit=2)[2] for line in out.splitlines())  # rank, score, text
    assert texts == [r"Leonardo \x1b[2J\x1b]0;owned\x07\x9b31mpainted the Mona Lisa.",
                     "The Louvre shows the Mona Lisa to visitors."]
    assert not any(char in out for char in ESCAPES if not char.isprintable())
    for top in ("0", "-2"):
        _refused(*run_cli("--db", url, "rank", "who painted", "--data", "esc", "--top", top, capsys=capsys),
                 f"--top is the number of candidates to print, at least 1; got {top}")
    # An error line quotes data as it came (here a file name): written the same way.
    err = _refused(*run_cli("--db", url, "data", "import", str(cli_env / f"x{ESCAPES}.csv"), capsys=capsys))
    assert r"x\x1b[2J" in err and "\x1b" not in err


@pytest.mark.parametrize("older_than", ["nan", "-5", "0", "0.5", "inf", "-inf"])
def test_gc_refuses_a_grace_period_that_is_negative_or_not_finite(older_than: str, cli_env: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """NaN, 0 or a negative period made a running training's temporary file count as stale."""
    running = config.checkpoint_dir() / ".smcnn-demo.abc123.tmp"
    running.write_bytes(b"half a checkpoint")
    _refused(*run_cli("gc", f"--older-than={older_than}", capsys=capsys),
             f"the grace period is a number of minutes, 1 or more (a younger file may be one a running "
             f"training is writing); got {float(older_than)}")
    assert running.read_bytes() == b"half a checkpoint"
