"""Bad input everywhere a user can give it: the CLI (as a process), the importers, the store API and
the Ask and Label pages; and the faults a careful user or an attacker meets (issue 14): checkpoints
made to run code or of the wrong shape, names too long for the database or holding NUL, a full
disk (a real tmpfs in a private mount namespace), a database that refuses writes.

Every case asserts the same contract: a clear message (one ``error:`` line on stderr, naming the
file and line for files), no traceback, nothing partial written and nothing lost (every row of the
store's data tables is unchanged, labels included). Data holding HTML is shown escaped.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from streamlit.testing.v1 import AppTest

from db.base import NewVersion
from db.labeling import QueueScope
from db.store import Store
from qa_core import config
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.data.importers import load_dataset, read_qrels, read_trec_run
from qa_core.rankers import registry
from qa_core.types import Candidate, Dataset, InputError, Question, StorageError
from tests import ROOT
from tests.conftest import model_file
from tests.pages import ASK, LABEL, markdown, open_page

SCRIPT = "<script>alert(1)</script>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
DATA_TABLES = ("datasets", "questions", "candidates", "labels", "model_versions", "runs", "systems")


# ------------------------------------------------------------------------------ store and helpers


def _no_positives() -> Dataset:
    """Every candidate judged, none relevant: nothing can be trained or evaluated on it."""
    pools = {
        split: Question(f"{split}-1", f"who wrote the {split} report", [
            Candidate("d1", f"The {split} report was long.", label=0),
            Candidate("d2", f"Nobody read the {split} report.", label=0),
        ], split=split)
        for split in ("train", "dev", "test")
    }
    return Dataset("nopos", list(pools.values()))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding work that must survive: the demo corpus with labels, and a dataset without positives."""
    folder = tmp_path_factory.mktemp("seeded")
    store = Store(f"sqlite:///{folder / 'store.sqlite'}")
    store.datasets.import_dataset(load_demo())
    store.labels.import_qrels("demo", {"demo-01": {"demo-01-0": 2, "demo-01-1": 0}}, "alice")
    store.datasets.import_dataset(_no_positives())
    store.close()
    return folder


@dataclass
class Env:
    """A copy of the seeded store and a data folder, as the CLI and the app read them from the environment."""

    folder: Path
    url: str


@pytest.fixture
def env(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    for path in seeded.glob("store.sqlite*"):
        shutil.copy(path, tmp_path / path.name)
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", url)
    return Env(tmp_path, url)


def snapshot(url: str) -> dict[str, list[tuple]]:
    """Every row of the data tables: equal before and after means nothing partial and nothing lost."""
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            return {
                table: sorted((tuple(row) for row in connection.execute(text(f"SELECT * FROM {table}"))), key=repr)
                for table in DATA_TABLES
            }
    finally:
        engine.dispose()


def cli_in_process(capsys: pytest.CaptureFixture, *args: str) -> subprocess.CompletedProcess:
    """The same entry point called in this process (``__main__`` only adds ``sys.exit``): the file
    cases run by the dozen, and a process start each would cost a second apiece."""
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["qa_core", *args], code, out, err)


def assert_refused(result: subprocess.CompletedProcess, *needles: str) -> str:
    """Exit status 2 and exactly one ``error:`` line naming what is wrong."""
    err = result.stderr
    assert result.returncode == 2, (result.returncode, result.stdout, err)
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    for needle in needles:
        assert needle.lower() in err.lower(), (needle, err)
    return err


# ------------------------------------------------------------------------------ malformed files

CSV_HEAD = b"question,candidate,label\n"
JSONL_OK = b'{"question": "who wrote hamlet", "candidate": "Shakespeare wrote it.", "label": 1}\n'
SEMEVAL_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<xml>\n<OrgQuestion ORGQ_ID="Q1">\n'
SEMEVAL_REL = (
    b'  <OrgQSubject>visa</OrgQSubject>\n  <OrgQBody>how long is a visa</OrgQBody>\n'
    b'  <Thread THREAD_SEQUENCE="Q1_R1">\n'
    b'    <RelQuestion RELQ_ID="Q1_R1" RELQ_RANKING_ORDER="1" RELQ_RELEVANCE2ORGQ="%s">\n'
    b"      <RelQSubject>visa time</RelQSubject>\n    </RelQuestion>\n  </Thread>\n"
)
WIKIQA_OK = {"a.toks": b"who wrote hamlet\nwho wrote hamlet\n", "b.toks": b"Shakespeare wrote it\nit is a play\n",
             "id.txt": b"1\n1\n"}


@dataclass(frozen=True)
class FileCase:
    """Files to write (relative path -> bytes), the path to give, the command and what the message holds."""

    files: dict[str, bytes]
    target: str
    line: int | None
    needle: str
    command: str = "import"  # "import", "import-run" or "import-qrels"


FILE_CASES = {
    "csv-latin1": FileCase({"p.csv": CSV_HEAD + b"who is caf\xe9 owner,x,1\n"}, "p.csv", 2, "UTF-8"),
    "csv-utf16": FileCase({"p.csv": "question,candidate,label\nq,c,1\n".encode("utf-16")}, "p.csv", 1, "binary"),
    "jsonl-binary": FileCase({"p.jsonl": JSONL_OK + b"\x00\x01\x02\xff"}, "p.jsonl", 2, "binary"),
    "jsonl-empty-file": FileCase({"p.jsonl": b"\n  \n"}, "p.jsonl", None, "empty"),
    "jsonl-broken-json": FileCase({"p.jsonl": JSONL_OK + b'{"question": "q", "candidate"\n'}, "p.jsonl", 2, "invalid JSON"),
    "jsonl-not-an-object": FileCase({"p.jsonl": JSONL_OK + b"[1, 2, 3]\n"}, "p.jsonl", 2, "JSON object"),
    "jsonl-label-word": FileCase({"p.jsonl": JSONL_OK + JSONL_OK.replace(b"1}", b'"yes"}')}, "p.jsonl", 2, "label"),
    "jsonl-label-out-of-range": FileCase({"p.jsonl": JSONL_OK.replace(b"1}", b"7}")}, "p.jsonl", 1, "label"),
    "jsonl-label-bool": FileCase({"p.jsonl": JSONL_OK.replace(b"1}", b"true}")}, "p.jsonl", 1, "label"),
    "jsonl-empty-question": FileCase({"p.jsonl": JSONL_OK.replace(b"who wrote hamlet", b"   ")}, "p.jsonl", 1, "question"),
    "jsonl-same-qid-other-text": FileCase(
        {"p.jsonl": b'{"qid": "q1", "question": "a", "candidate": "x", "label": 1}\n'
                    b'{"qid": "q1", "question": "b", "candidate": "y", "label": 0}\n'}, "p.jsonl", 2, "different"),
    "csv-missing-column": FileCase({"p.csv": b"question,candidate\nq,c\n"}, "p.csv", 1, "label"),
    "csv-extra-field": FileCase({"p.csv": CSV_HEAD + b"q,c,1\nq,c2,0,surplus\n"}, "p.csv", 3, "fields"),
    "csv-open-quote": FileCase({"p.csv": CSV_HEAD + b'"who,x,0\n'}, "p.csv", 2, "fields"),
    "csv-unknown-label": FileCase({"p.csv": CSV_HEAD + b"q,c,1\nq,d,maybe\n"}, "p.csv", 3, "label"),
    "csv-duplicate-doc-id": FileCase(
        {"p.csv": b"qid,question,doc_id,candidate,label\nq1,q,d1,c,1\nq1,q,d1,other,0\n"}, "p.csv", 3, "duplicate"),
    "semeval-truncated": FileCase({"s.xml": SEMEVAL_HEAD + SEMEVAL_REL % b"Relevant"}, "s.xml", 11, "malformed XML"),
    "semeval-unknown-label": FileCase(
        {"s.xml": SEMEVAL_HEAD + SEMEVAL_REL % b"Maybe" + b"</OrgQuestion>\n</xml>\n"}, "s.xml", 7, "Maybe"),
    "semeval-entity-bomb": FileCase(
        {"s.xml": b'<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY a "aaaa">]>\n<xml><OrgQuestion/></xml>\n'},
        "s.xml", 2, "DOCTYPE"),
    "trecqa-unclosed": FileCase(
        {"t.xml": b"<QApairs id='1'>\n<question>\nwho wrote hamlet\n<positive>\nShakespeare\n</positive>\n</QApairs>\n"},
        "t.xml", 4, "not closed"),
    "wikiqa-label-2": FileCase(
        {f"w/train/{name}": data for name, data in {**WIKIQA_OK, "sim.txt": b"1\n2\n"}.items()}, "w", 2, "label"),
    "wikiqa-misaligned": FileCase(
        {f"w/train/{name}": data for name, data in {**WIKIQA_OK, "sim.txt": b"1\n"}.items()}, "w", 2, "line-aligned"),
    "run-five-fields": FileCase({"r.run": b"demo-01 Q0 demo-01-0 1 3.5 bm25\ndemo-01 Q0 demo-01-1 2 bm25\n"},
                                "r.run", 2, "6 fields", "import-run"),
    "run-rank-not-integer": FileCase({"r.run": b"demo-01 Q0 demo-01-0 first 3.5 bm25\n"}, "r.run", 1, "rank",
                                     "import-run"),
    "run-score-nan": FileCase({"r.run": b"demo-01 Q0 demo-01-0 1 nan bm25\n"}, "r.run", 1, "score", "import-run"),
    "run-duplicate-doc": FileCase(
        {"r.run": b"demo-01 Q0 demo-01-0 1 3.5 t\ndemo-01 Q0 demo-01-1 2 3.0 t\ndemo-01 Q0 demo-01-0 3 1.0 t\n"},
        "r.run", 3, "twice", "import-run"),
    "run-unknown-doc": FileCase(  # the store refuses it: the message once named neither file nor line
        {"r.run": b"demo-01 Q0 demo-01-0 1 3.5 t\ndemo-01 Q0 demo-01-1 2 3.0 t\ndemo-01 Q0 no-such-doc 3 1.0 t\n"
                  b"demo-01 Q0 nor-this-doc 4 9.0 t\n"},  # the first bad line is named, not the best-scored
        "r.run", 3, "no-such-doc", "import-run"),
    "qrels-three-fields": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 demo-01-3 1\n"}, "q.qrels", 2,
                                   "4 fields", "import-qrels"),
    "qrels-grade-word": FileCase({"q.qrels": b"demo-01 0 demo-01-2 relevant\n"}, "q.qrels", 1, "grade", "import-qrels"),
    "qrels-judged-twice": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 demo-01-2 0\n"}, "q.qrels", 2,
                                   "twice", "import-qrels"),
    "qrels-unknown-doc": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 nope 1\n"}, "q.qrels", 2, "nope",
                                  "import-qrels"),
    "qrels-grade-9": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 demo-01-3 9\n"}, "q.qrels", 2,
                              "outside 0..4", "import-qrels"),
    # issue 14: grades, documents and questions the store refuses name the file and line
    "qrels-grade-7": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 demo-01-3 1\ndemo-01 0 demo-01-4 7\n"},
                              "q.qrels", 3, "grade 7", "import-qrels"),
    "qrels-negative-grade": FileCase({"q.qrels": b"demo-01 0 demo-01-2 -1\n"}, "q.qrels", 1, "outside 0..4",
                                     "import-qrels"),
    "qrels-unknown-question": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\nnosuch 0 demo-01-2 1\n"}, "q.qrels", 2,
                                       "nosuch", "import-qrels"),
    "qrels-a-folder": FileCase({"d/q.qrels": b"demo-01 0 demo-01-2 1\n"}, "d", None, "is a folder", "import-qrels"),
    "run-a-folder": FileCase({"d/r.run": b"demo-01 Q0 demo-01-0 1 3.5 t\n"}, "d", None, "is a folder", "import-run"),
    "run-negative-rank": FileCase({"r.run": b"demo-01 Q0 demo-01-0 1 3.5 t\ndemo-01 Q0 demo-01-1 -3 3.0 t\n"}, "r.run",
                                  2, "non-negative", "import-run"),
    "csv-field-over-the-csv-limit": FileCase({"p.csv": CSV_HEAD + b"q,ok,1\nq," + b"x" * 131_073 + b",0\n"}, "p.csv", 3,
                                             "131,072 characters"),
    "csv-quoted-field-over-the-limit": FileCase(
        {"p.csv": CSV_HEAD + b'q,"' + b"y\n" * 70_000 + b'",1\n'}, "p.csv", 2, "longer than"),
    "csv-contradicting-gold": FileCase({"p.csv": CSV_HEAD + b"q,same text,1\nq,other,0\nq,same text,0\n"}, "p.csv", 4,
                                       "on line 2"),
    "jsonl-contradicting-gold": FileCase(
        {"p.jsonl": JSONL_OK + JSONL_OK.replace(b"1}", b"0}")}, "p.jsonl", 2, "gold label 0 here but 1"),
    "wikiqa-contradicting-gold": FileCase(
        {f"w/train/{name}": data for name, data in {**WIKIQA_OK, "b.toks": b"it is a play\nit is a play\n",
                                                    "sim.txt": b"1\n0\n"}.items()}, "w", 2, "gold label"),
    "trecqa-contradicting-gold": FileCase(
        {"t.xml": b"<QApairs id='1'>\n<question>\nwho wrote hamlet\n</question>\n<positive>\nShakespeare\n</positive>\n"
                  b"<negative>\nShakespeare\n</negative>\n</QApairs>\n"}, "t.xml", 8, "gold label 0 here but 1"),
    "semeval-contradicting-gold": FileCase(
        {"s.xml": SEMEVAL_HEAD + (SEMEVAL_REL % b"Relevant").replace(b"</Thread>\n", b"")
                  + b'    <RelQuestion RELQ_ID="Q1_R2" RELQ_RANKING_ORDER="2" RELQ_RELEVANCE2ORGQ="Irrelevant">\n'
                  b"      <RelQSubject>visa time</RelQSubject>\n    </RelQuestion>\n  </Thread>\n</OrgQuestion>\n</xml>\n"},
        "s.xml", 10, "gold label"),
    "jsonl-nul-in-candidate": FileCase({"p.jsonl": JSONL_OK.replace(b"Shakespeare", b"Shake\\u0000speare")}, "p.jsonl",
                                       1, "NUL"),
    "jsonl-nul-in-question": FileCase({"p.jsonl": JSONL_OK.replace(b"who wrote", b"who\\u0000wrote")}, "p.jsonl", 1,
                                      "NUL"),
    "jsonl-doc-id-too-long": FileCase(
        {"p.jsonl": JSONL_OK.replace(b"}", b', "doc_id": "' + b"d" * 300 + b'"}')}, "p.jsonl", 1, "at most 200"),
    "jsonl-qid-too-long": FileCase(
        {"p.jsonl": JSONL_OK.replace(b"}", b', "qid": "' + b"q" * 10_000 + b'"}')}, "p.jsonl", 1, "at most 200"),
    "jsonl-candidate-of-200-kb": FileCase(
        {"p.jsonl": JSONL_OK + b'{"question": "q", "candidate": "' + b"word " * 40_000 + b'", "label": 0}\n'},
        "p.jsonl", 2, "candidate is too long (199,999 characters; the limit is 5,000)"),
    "csv-question-over-the-limit": FileCase({"p.csv": CSV_HEAD + b"q,ok,1\n" + b"why" * 400 + b",ok,0\n"}, "p.csv",
                                            3, "question is too long (1,200 characters; the limit is 1,000)"),
    "jsonl-rank-negative": FileCase({"p.jsonl": JSONL_OK.replace(b"}", b', "rank": -2}')}, "p.jsonl", 1, "rank"),
    # issue 33: an escape JSON allows that makes no character (UnicodeEncodeError before)
    "jsonl-lone-surrogate": FileCase({"p.jsonl": JSONL_OK + JSONL_OK.replace(b"who wrote", b"who\\ud800wrote")},
                                     "p.jsonl", 2, "\\ud800 is half of a surrogate pair"),
}
STORE_LEVEL = {  # well-formed files the store refuses
    "run-unknown-doc", "qrels-unknown-doc", "qrels-grade-9", "qrels-grade-7", "qrels-negative-grade",
    "qrels-unknown-question",
}


def write_case(case: FileCase, folder: Path) -> Path:
    for relative, data in case.files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return folder / case.target


def _expected_path(case: FileCase, target: Path) -> Path:
    """The file a message names: the target, or for a WikiQA folder the split file at fault (sim.txt)."""
    return target if len(case.files) == 1 else target / "train" / "sim.txt"


@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_cli_refuses_malformed_file_and_changes_nothing(env: Env, capsys: pytest.CaptureFixture, name: str):
    case = FILE_CASES[name]
    target = write_case(case, env.folder / "in")
    before = snapshot(env.url)
    args = ["data", case.command, str(target)] + (["--data", "demo"] if case.command != "import" else [])
    err = assert_refused(cli_in_process(capsys, *args), case.needle)
    assert ".tmp" not in err
    if name not in STORE_LEVEL or case.line is not None:
        where = str(_expected_path(case, target))
        assert (f"{where}, line {case.line}:" if case.line else f"{where}:") in err
    assert snapshot(env.url) == before


_READERS: dict[str, Callable[[Path], object]] = {"import": load_dataset, "import-run": read_trec_run,
                                                 "import-qrels": read_qrels}


@pytest.mark.parametrize("name", sorted(set(FILE_CASES) - STORE_LEVEL))
def test_importer_raises_input_error_with_file_and_line(tmp_path: Path, name: str):
    case = FILE_CASES[name]
    target = write_case(case, tmp_path)
    with pytest.raises(InputError) as caught:
        _READERS[case.command](target)
    assert caught.value.path == str(_expected_path(case, target))
    assert caught.value.line == case.line
    assert case.needle.lower() in str(caught.value).lower()


# ------------------------------------------------------------------------------ runs added as systems (issue 36)

SYSTEM_RUN_OK = b"".join(b"demo-33 Q0 demo-33-%d %d %d.5 ext\n" % (i, i + 1, 9 - i) for i in range(4))
SYSTEM_JSONL_OK = b'{"qid": "demo-33", "doc_id": "demo-33-0", "score": 2.5}\n'
SYSTEM_RUN_CASES = {
    "unknown-question": FileCase({"r.run": SYSTEM_RUN_OK + b"nosuch Q0 demo-33-0 5 1.0 ext\n"}, "r.run", 5,
                                 "question nosuch is not in it", "add-run"),
    "unknown-candidate": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-33 Q0 demo-34-0 5 1.0 ext\n"}, "r.run", 5,
                                  "candidate demo-34-0 is not one of question demo-33's", "add-run"),
    "duplicate-pair": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-33 Q0 demo-33-1 5 1.0 ext\n"}, "r.run", 5,
                               "appears twice for query demo-33 (first on line 2)", "add-run"),
    "score-nan": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-34 Q0 demo-34-0 1 nan ext\n"}, "r.run", 5, "finite", "add-run"),
    "score-inf": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-34 Q0 demo-34-0 1 -inf ext\n"}, "r.run", 5, "finite",
                          "add-run"),
    "score-word": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-34 Q0 demo-34-0 1 high ext\n"}, "r.run", 5, "finite",
                           "add-run"),
    "five-fields": FileCase({"r.run": SYSTEM_RUN_OK + b"demo-34 Q0 demo-34-0 1 2.0\n"}, "r.run", 5, "6 fields", "add-run"),
    "another-datasets-run": FileCase({"r.run": b"".join(b"Q%d Q0 D%d-%d 1 1.0 ext\n" % (q, q, d) for q in range(3)
                                                        for d in range(2)) + SYSTEM_RUN_OK}, "r.run", 1,
                                     "does not fit dataset 'demo': 6 of its 10", "add-run"),
    "empty": FileCase({"r.run": b"\n\n"}, "r.run", None, "empty", "add-run"),
    "jsonl-nan": FileCase({"r.jsonl": SYSTEM_JSONL_OK + SYSTEM_JSONL_OK.replace(b"-0", b"-1").replace(b"2.5", b"NaN")},
                          "r.jsonl", 2, "finite", "add-run"),
    "jsonl-no-score": FileCase({"r.jsonl": SYSTEM_JSONL_OK + b'{"qid": "demo-33", "doc_id": "demo-33-1"}\n'},
                               "r.jsonl", 2, "score must be a finite number, got None", "add-run"),
    "jsonl-score-text": FileCase({"r.jsonl": SYSTEM_JSONL_OK.replace(b"2.5", b'"2.5"')}, "r.jsonl", 1, "finite",
                                 "add-run"),
    "jsonl-no-doc-id": FileCase({"r.jsonl": b'{"qid": "demo-33", "score": 1}\n'}, "r.jsonl", 1, "doc_id", "add-run"),
    "jsonl-duplicate": FileCase({"r.jsonl": SYSTEM_JSONL_OK * 2}, "r.jsonl", 2, "twice", "add-run"),
    "jsonl-unknown-candidate": FileCase({"r.jsonl": SYSTEM_JSONL_OK + SYSTEM_JSONL_OK.replace(b"-33-0", b"-33-99")},
                                        "r.jsonl", 2, "candidate demo-33-99", "add-run"),
}


@pytest.mark.parametrize("name", sorted(SYSTEM_RUN_CASES))
def test_a_run_that_breaks_the_contract_is_refused_whole(env: Env, capsys: pytest.CaptureFixture, name: str):
    """``systems add-run``: one line naming the file and line, and no system (nor anything else) kept."""
    case = SYSTEM_RUN_CASES[name]
    target = write_case(case, env.folder / "in")
    before = snapshot(env.url)
    err = assert_refused(cli_in_process(capsys, "systems", "add-run", str(target), "--data", "demo", "--name", "x"),
                         case.needle)
    assert (f"{target}, line {case.line}:" if case.line else f"{target}:") in err
    assert snapshot(env.url) == before


# ------------------------------------------------------------------------------ other CLI input


def _corrupt_checkpoint(folder: Path) -> Path:
    path = folder / "corrupt.pt"
    path.write_bytes(os.urandom(4096))
    return path


def _truncated_checkpoint(folder: Path) -> Path:
    """A real checkpoint cut in half, as a full disk or a killed copy leaves it."""
    path = registry.save(registry.create("overlap"), folder / "whole.pt")
    cut = folder / "truncated.pt"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return cut


def _malformed_csv(folder: Path) -> Path:
    path = folder / "broken.csv"
    path.write_bytes(CSV_HEAD + b"q,c,1\nq,d,maybe\n")
    return path


CLI_CASES: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    # --replace with a bad file: the old dataset, its labels and first-stage ranks stay as they were.
    "import-replace-with-malformed": (lambda f: ["data", "import", str(_malformed_csv(f)), "--name", "demo",
                                                 "--replace"], ("broken.csv, line 3",)),
    "rank-empty-question": (lambda f: ["rank", "   ", "--data", "demo"], ("empty",)),
    # 120,000 characters: near the kernel's 128 KiB limit on one argument (1 MB goes through the page).
    "rank-huge-question": (lambda f: ["rank", "why " * 30_000, "--data", "demo"], ("too long", "1,000")),
    "evaluate-missing-checkpoint": (lambda f: ["evaluate", "--model", str(f / "none.pt"), "--data", "demo"],
                                    ("not found", "none.pt")),
    "evaluate-corrupt-checkpoint": (lambda f: ["evaluate", "--model", str(_corrupt_checkpoint(f)), "--data", "demo"],
                                    ("corrupt", "corrupt.pt")),
    "evaluate-truncated-checkpoint": (lambda f: ["evaluate", "--model", str(_truncated_checkpoint(f)), "--data",
                                                 "demo"], ("corrupt", "truncated.pt")),
    "rank-corrupt-checkpoint": (lambda f: ["rank", "who painted the mona lisa", "--model",
                                           str(_corrupt_checkpoint(f)), "--data", "demo"], ("corrupt",)),
    "rank-untrained-model": (lambda f: ["rank", "who painted the mona lisa", "--model", "smcnn", "--data", "demo"],
                             ("no version trained on or promoted for", "python -m qa_core train --model smcnn")),
    "evaluate-no-positives": (lambda f: ["evaluate", "--model", "overlap", "--data", "nopos"], ("no relevant",)),
    "train-no-positives": (lambda f: ["train", "--model", "smcnn", "--data", "nopos"], ("no relevant", "'train'")),
    "import-existing-name": (lambda f: ["data", "import", str(ROOT / "qa_core/data/demo_corpus.jsonl"), "--name",
                                        "demo"], ("already exists",)),
    "import-missing-path": (lambda f: ["data", "import", str(f / "nothing.csv")], ("no such file",)),
    "import-unknown-format": (lambda f: ["data", "import", str(f), "--format", "xlsx"], ("unknown format",)),
    "export-into-a-file": (lambda f: ["data", "export", "--data", "demo", "--out",
                                      str(_corrupt_checkpoint(f) / "labels.qrels")], ("corrupt.pt",)),
    "export-unknown-dataset": (lambda f: ["data", "export", "--data", "nosuch", "--out", str(f / "x.qrels")],
                               ("unknown dataset",)),
    "db-unparseable-url": (lambda f: ["--db", "not a url", "data", "list"], ("cannot open the store",)),
    # issue 33
    "db-mysql-without-its-driver": (lambda f: ["--db", "mysql://bob:secret@127.0.0.1/db", "data", "list"],
                                    ("driver for 'mysql' is not installed", "MySQLdb")),
    "db-empty-url": (lambda f: ["--db", "", "data", "list"], ("database URL is empty",)),
    "import-name-with-a-newline": (lambda f: ["data", "import", DEMO_FILE, "--name", "a\nb"], ("not allowed",)),
    "import-name-climbing-out": (lambda f: ["data", "import", DEMO_FILE, "--name", "../../etc"], ("not allowed",)),
    "import-name-an-absolute-path": (lambda f: ["data", "import", DEMO_FILE, "--name", str(f / "runs")],
                                     ("not allowed",)),
    "evaluate-raw-pickle": (lambda f: ["evaluate", "--model", str(_raw_pickle(f)), "--data", "demo"],
                            ("raw.pt is a raw Python pickle",)),
}


def _raw_pickle(folder: Path) -> Path:
    path = folder / "raw.pt"
    path.write_bytes(pickle.dumps({"format": 1, "kind": "overlap", "state": {}}))
    return path


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_refuses_bad_argument_and_changes_nothing(env: Env, name: str, capsys: pytest.CaptureFixture):
    """In this process, like the file cases (87 process starts cost minutes of CI); the process path,
    exit status and stderr included, is tested by the tests around and by test_cli.py."""
    make_args, needles = CLI_CASES[name]
    before = snapshot(env.url)
    assert_refused(cli_in_process(capsys, *make_args(env.folder)), *needles)
    assert snapshot(env.url) == before


def test_cli_refuses_a_megabyte_question(env: Env, capsys: pytest.CaptureFixture):
    """1 MB cannot pass through a process's argv (128 KiB per argument), so through ``main``."""
    before = snapshot(env.url)
    assert_refused(cli_in_process(capsys, "rank", "x" * 1_000_000, "--data", "demo"), "1,000,000 characters")
    assert snapshot(env.url) == before


def test_cli_output_keeps_html_as_data(env: Env, capsys: pytest.CaptureFixture):
    """HTML, quotes and newlines in texts: JSON lines stay one parseable record each with the text
    byte for byte (JSON is data, escaping is the renderer's job), and ``rank`` prints one line per
    candidate."""
    source = env.folder / "html.csv"
    tricky = f'{SCRIPT} "Hamlet" & <b>Macbeth</b>\nsecond line'
    source.write_text('qid,question,doc_id,candidate,label\n'
                      f'q1,who wrote alert,d1,"{tricky.replace(chr(34), chr(34) * 2)}",1\n'
                      'q1,who wrote alert,d2,an alert nobody wrote,0\n')
    imported = cli_in_process(capsys, "data", "import", str(source), "--name", "html")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == "html"

    qrels = env.folder / "judged.qrels"
    qrels.write_text("q1 0 d1 2\n")
    labelled = cli_in_process(capsys, "data", "import-qrels", str(qrels), "--data", "html",
                              "--annotator", "<b>ann</b>")
    assert labelled.returncode == 0, labelled.stderr
    out = env.folder / "labels.jsonl"
    exported = cli_in_process(capsys, "data", "export", "--data", "html", "--format", "jsonl",
                              "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["candidate"], record["annotator"], record["value"]) == (tricky, "<b>ann</b>", 2)

    ranked = cli_in_process(capsys, "rank", "alert", "--data", "html", "--top", "2")
    assert ranked.returncode == 0, ranked.stderr
    lines = ranked.stdout.strip().splitlines()
    assert len(lines) == 2 and any(SCRIPT in line for line in lines)


# ------------------------------------------------------------------------------ the Ask page


def rank_typed(app: AppTest, question: str, model: str = "overlap") -> AppTest:
    app.selectbox(key="model").select(model)
    app.text_input(key="question").input(question)
    app.button[0].click().run()
    assert not app.exception, app.exception
    return app


@pytest.mark.parametrize(
    "question, message",
    [("", "empty"), ("\n\t ", "empty"), ("x" * 1_000_000, "1,000,000 characters")],
    ids=["empty", "whitespace", "1MB"],
)
def test_ask_refuses_bad_question_and_changes_nothing(env: Env, question: str, message: str):
    before = snapshot(env.url)
    app = rank_typed(open_page(ASK), question)
    assert [e.value for e in app.error] and message in app.error[0].value
    assert not app.dataframe
    assert snapshot(env.url) == before


def test_ask_escapes_html_in_a_typed_question(env: Env):
    app = rank_typed(open_page(ASK), f"{SCRIPT} who discovered penicillin")
    assert not app.error, [e.value for e in app.error]
    text = markdown(app)
    assert ESCAPED_SCRIPT in text and "<script>" not in text
    assert "Alexander Fleming" in app.dataframe[0].value["text"].iloc[0]


def test_ask_shows_html_dataset_without_positives_escaped(env: Env):
    """A dataset named and filled with HTML, with no relevant candidate: it ranks, shows gold 0s,
    and every bit of its text arrives as text. (Such a name is refused at import since issue 33; a
    store from before may hold one, so it is renamed so here.)"""
    name = '<img src=x onerror="alert(1)">'
    dataset = Dataset("htmlnamed", [Question("q1", f"who wrote {SCRIPT}", [
        Candidate("d1", f"{SCRIPT} was written by nobody", label=0),
        Candidate("d2", "<b>bold</b> claims about the script", label=0),
    ], split="test")])
    store = Store(env.url)
    store.datasets.import_dataset(dataset)
    store.close()
    engine = create_engine(env.url)
    with engine.begin() as connection:
        connection.execute(text("UPDATE datasets SET name = :name WHERE name = 'htmlnamed'"), {"name": name})
    engine.dispose()
    before = snapshot(env.url)

    app = open_page(ASK)
    app.selectbox(key="dataset").select(name)
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    table = app.dataframe[0].value
    assert list(table["gold_label"]) == ["0", "0"]
    assert {f"{SCRIPT} was written by nobody", "<b>bold</b> claims about the script"} == set(table["text"])
    shown = markdown(app)
    assert "&lt;img src=x onerror=\"alert(1)\"&gt;" in shown and ESCAPED_SCRIPT in shown
    assert "<img" not in shown and "<script>" not in shown and "<b>" not in shown
    assert snapshot(env.url) == before


def test_ask_reports_a_corrupt_checkpoint_and_keeps_the_store(env: Env):
    """A promoted version whose file was damaged (and no other version): an error on the page, the
    Rank button off, the registry and labels as they were."""
    corrupt = _corrupt_checkpoint(config.checkpoint_dir())  # registered only from the data folder
    store = Store(env.url)
    store.models.register_model("smcnn", NewVersion("smcnn", str(corrupt), {}, {}))
    store.close()
    before = snapshot(env.url)

    app = open_page(ASK)
    app.selectbox(key="model").select("smcnn").run()
    assert not app.exception, app.exception
    errors = " ".join(e.value for e in app.error)
    assert "no version of model 'smcnn' could be loaded" in errors and "corrupt" in errors
    assert app.button[0].disabled
    assert snapshot(env.url) == before


# ------------------------------------------------------------------------------ issue 14: more CLI input


class RunsCode:
    """Unpickling this creates ``marker``: a checkpoint made to run code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def _saved(folder: Path, name: str, payload: object) -> Path:
    path = folder / name
    torch.save(payload, path)
    return path


def _folder(folder: Path, name: str = "a-folder") -> Path:
    path = folder / name
    path.mkdir(exist_ok=True)
    return path


def _qrels(folder: Path) -> Path:
    path = folder / "ok.qrels"
    path.write_text("demo-01 0 demo-01-2 1\n")
    return path


DEMO_FILE = str(ROOT / "qa_core/data/demo_corpus.jsonl")
IN_PROCESS_CASES: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    "import-empty-name": (lambda f: ["data", "import", DEMO_FILE, "--name", ""], ("name is empty",)),
    "import-blank-name": (lambda f: ["data", "import", DEMO_FILE, "--name", "   "], ("name is empty",)),
    "import-name-of-10000-characters": (lambda f: ["data", "import", DEMO_FILE, "--name", "n" * 10_000],
                                        ("too long", "10,000", "limit is 200")),
    "import-a-folder-as-csv": (lambda f: ["data", "import", str(_folder(f)), "--format", "csv"], ("is a folder",)),
    "import-qrels-annotator-too-long": (lambda f: ["data", "import-qrels", str(_qrels(f)), "--data", "demo",
                                                   "--annotator", "a" * 300], ("too long",)),
    "import-qrels-unknown-dataset": (lambda f: ["data", "import-qrels", str(_qrels(f)), "--data", "nosuch"],
                                     ("unknown dataset",)),
    "import-run-unknown-dataset": (lambda f: ["data", "import-run", str(_run(f)), "--data", "nosuch"],
                                   ("unknown dataset",)),
    "export-qrels-to-a-folder": (lambda f: ["data", "export", "--data", "demo", "--out", str(_folder(f))],
                                 ("is a folder",)),
    "export-jsonl-to-a-folder": (lambda f: ["data", "export", "--data", "demo", "--format", "jsonl", "--out",
                                            str(_folder(f))], ("is a folder",)),
    "orphans-of-an-unknown-dataset": (lambda f: ["data", "orphans", "--data", "nosuch"], ("unknown dataset",)),
    "evaluate-code-running-checkpoint": (lambda f: ["evaluate", "--model", str(_saved(f, "evil.pt", RunsCode(f / "ran"))),
                                                    "--data", "demo"], ("refused", "evil.pt")),
    "evaluate-checkpoint-of-none": (lambda f: ["evaluate", "--model", str(_saved(f, "none.pt", None)), "--data", "demo"],
                                    ("not a Rerank Lab checkpoint",)),
    "evaluate-zero-byte-checkpoint": (lambda f: ["evaluate", "--model", str(_zero_bytes(f)), "--data", "demo"],
                                      ("corrupt", "zero.pt")),
    "evaluate-a-folder-as-checkpoint": (lambda f: ["evaluate", "--model", str(_folder(f, "dir.pt")), "--data", "demo"],
                                        ("is a folder",)),
    "evaluate-foreign-checkpoint": (lambda f: ["evaluate", "--model", str(_saved(f, "tensor.pt", torch.zeros(3))),
                                               "--data", "demo"], ("not a Rerank Lab checkpoint",)),
    "evaluate-checkpoint-with-empty-state": (
        lambda f: ["evaluate", "--model", str(_saved(f, "hollow.pt", {"format": 1, "kind": "smcnn", "state": {}})),
                   "--data", "demo"], ("does not fit", "hollow.pt")),
    "db-url-with-at-in-password": (lambda f: ["--db", "postgresql+psycopg://bob:s3@cr3t@127.0.0.1:1/db", "data",
                                              "list"], ("cannot open the store",)),
    "db-url-with-a-word-for-a-port": (lambda f: ["--db", "postgresql://bob:p@ss:w0rd@127.0.0.1:port/db", "data",
                                                 "list"], ("cannot open the store",)),
}


def _run(folder: Path) -> Path:
    path = folder / "ok.run"
    path.write_text("demo-01 Q0 demo-01-0 1 3.5 bm25\n")
    return path


def _zero_bytes(folder: Path) -> Path:
    path = folder / "zero.pt"
    path.write_bytes(b"")
    return path


@pytest.mark.parametrize("name", sorted(IN_PROCESS_CASES))
def test_cli_refuses_more_bad_arguments_and_changes_nothing(env: Env, capsys: pytest.CaptureFixture, name: str):
    make_args, needles = IN_PROCESS_CASES[name]
    before = snapshot(env.url)
    err = assert_refused(cli_in_process(capsys, *make_args(env.folder)), *needles)
    assert ".tmp" not in err and not (env.folder / "ran").exists()
    assert snapshot(env.url) == before


@pytest.mark.parametrize("url", ["postgresql+psycopg://bob:s3@cr3t@127.0.0.1:1/db", "postgresql://bob:p@ss:w0rd@h:port/db"])
def test_a_database_url_never_shows_its_password(env: Env, capsys: pytest.CaptureFixture, url: str):
    """The issue's case: an '@' in the password printed part of it (and a ValueError traceback)."""
    err = assert_refused(cli_in_process(capsys, "--db", url, "data", "list"), "cannot open the store")
    secret = url.split("bob:", 1)[1].rsplit("@", 1)[0]
    assert all(part not in err for part in (secret, *secret.split("@"), *secret.split(":")) if len(part) > 2)


def test_importing_the_same_qrels_twice_adds_nothing(env: Env, capsys: pytest.CaptureFixture):
    qrels = _qrels(env.folder)
    first = cli_in_process(capsys, "data", "import-qrels", str(qrels), "--data", "demo", "--annotator", "trec")
    assert first.returncode == 0 and json.loads(first.stdout)["labels"] == 1
    before = snapshot(env.url)
    again = cli_in_process(capsys, "data", "import-qrels", str(qrels), "--data", "demo", "--annotator", "trec")
    assert again.returncode == 0 and json.loads(again.stdout) == {"labels": 0, "unchanged": 1, "annotator": "trec"}
    assert snapshot(env.url) == before


def test_training_is_refused_before_it_starts_when_the_disk_is_nearly_full(env: Env, monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture):
    """Free space below the threshold (here set above the disk's size): refused at once, not after the run."""
    monkeypatch.setenv("RERANK_LAB_MIN_FREE_MB", str(100 * 2**20))  # 100 TB
    before = snapshot(env.url)
    err = assert_refused(cli_in_process(capsys, "train", "--model", "smcnn", "--data", "demo"),
                         "MB free", "RERANK_LAB_MIN_FREE_MB")
    assert "training smcnn" in err
    assert snapshot(env.url) == before
    assert not list((env.folder / "data" / "models").glob("*"))


# ------------------------------------------------------------------------------ issue 14: the store API


def _one_question(**changes: object) -> Dataset:
    """A valid one-question dataset with one field changed (``name``, ``qid``, ``doc_id``, texts, rank, labels)."""
    fields = {"name": "fresh", "qid": "q1", "question": "who wrote it", "doc_id": "d1", "candidate": "she did",
              "rank": 1, "second": ("d2", "he did", 0), **changes}
    first = Candidate(str(fields["doc_id"]), str(fields["candidate"]), label=1, first_stage_rank=fields["rank"])
    doc_id, text, label = fields["second"]
    return Dataset(str(fields["name"]), [Question(str(fields["qid"]), str(fields["question"]),
                                                  [first, Candidate(doc_id, text, label=label)])])


STORE_CASES: dict[str, tuple[Callable[[Store, int], object], str]] = {
    "dataset-name-of-10000-characters": (lambda s, c: s.datasets.import_dataset(_one_question(name="d" * 10_000)), "too long"),
    "dataset-name-with-nul": (lambda s, c: s.datasets.import_dataset(_one_question(name="a\x00b")), "NUL"),
    "question-id-too-long": (lambda s, c: s.datasets.import_dataset(_one_question(qid="q" * 300)), "too long"),
    "candidate-id-with-nul": (lambda s, c: s.datasets.import_dataset(_one_question(doc_id="d\x001")), "NUL"),
    "question-text-with-nul": (lambda s, c: s.datasets.import_dataset(_one_question(question="who\x00")), "NUL"),
    "candidate-text-with-nul": (lambda s, c: s.datasets.import_dataset(_one_question(candidate="she\x00did")), "NUL"),
    "negative-first-stage-rank": (lambda s, c: s.datasets.import_dataset(_one_question(rank=-4)), "first-stage rank"),
    "contradicting-gold-labels": (lambda s, c: s.datasets.import_dataset(_one_question(second=("d2", "she did", 0))),
                                  "gold label"),
    "annotator-of-10000-characters": (lambda s, c: s.labels.add_label(c, "a" * 10_000, 1), "too long"),
    "annotator-with-nul": (lambda s, c: s.labels.add_label(c, "ann\x00", 1), "NUL"),
    "note-with-nul": (lambda s, c: s.labels.add_label(c, "ann", 1, note="fine\x00"), "NUL"),
    "adjudicator-too-long": (lambda s, c: s.labels.adjudicate(c, 1, "r" * 300), "too long"),
    "model-name-too-long": (lambda s, c: s.models.register_model("m" * 300, NewVersion("smcnn", model_file("x.pt"), {}, {})), "too long"),
    "model-name-with-nul": (lambda s, c: s.models.register_model("m\x00", NewVersion("smcnn", model_file("x.pt"), {}, {})), "NUL"),
    "queue-holder-too-long": (lambda s, c: s.queue.claim_next(QueueScope("demo", [c], "ann", holder="h" * 300)), "too long"),
    "job-dataset-name-too-long": (lambda s, c: s.jobs.create_job("smcnn", "d" * 300, {}), "too long"),
    "qrels-annotator-with-nul": (lambda s, c: s.labels.import_qrels("demo", {"demo-01": {"demo-01-0": 1}}, "a\x00"), "NUL"),
}


@pytest.mark.parametrize("name", sorted(STORE_CASES))
def test_store_refuses_what_the_database_cannot_hold_before_it_sees_it(database_url: str, name: str):
    """Names too long for the indexes and NUL characters: one InputError, on SQLite and PostgreSQL
    (where they used to surface as DataError / ProgramLimitExceeded), and nothing written."""
    store = Store(database_url)
    try:
        store.datasets.import_dataset(load_demo())
        candidate = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0")
        store.labels.add_label(candidate, "alice", 2)
        before = snapshot(database_url)
        action, needle = STORE_CASES[name]
        with pytest.raises(InputError, match=needle) as caught:
            action(store, candidate)
        assert type(caught.value) is InputError and len(str(caught.value)) < 300
        assert snapshot(database_url) == before
    finally:
        store.close()


# ------------------------------------------------------------------------------ issue 14: a full disk, a read-only database
# A real full disk: a small tmpfs mounted in a private mount namespace (``unshare``), seen only by
# the process under test; the rest of the machine is untouched.

FULL_DISK_PRELUDE = """
import json, os, sys
from pathlib import Path
from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.types import StorageError

disk = Path(sys.argv[1])

def fill():
    with open(disk / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"x" * 4096)
        except OSError:  # ENOSPC: the disk is full
            pass

def free():
    (disk / "filler").unlink()
"""


def _unshare_prefix() -> list[str]:
    return ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]


@pytest.fixture(scope="module")
def full_disk_runner() -> Callable[..., subprocess.CompletedProcess]:
    """``run(folder, script, size)``: ``python -c PRELUDE+script FOLDER`` with FOLDER a fresh tmpfs of ``size``."""
    probe = subprocess.run([*_unshare_prefix(), "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs in a private namespace here: {probe.stderr.strip()}")

    def run(folder: Path, script: str, size: str = "2m", env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        folder.mkdir(exist_ok=True)
        mount = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'
        command = [*_unshare_prefix(), "sh", "-c", mount, "sh", size, str(folder),
                   sys.executable, "-c", FULL_DISK_PRELUDE + script, str(folder)]
        return subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=600)

    return run


def _json_result(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_labelling_on_a_full_disk_reports_it_and_keeps_every_saved_label(tmp_path: Path, full_disk_runner):
    result = _json_result(full_disk_runner(tmp_path / "disk", """
store = Store(f"sqlite:///{disk / 'store.sqlite'}")
store.datasets.import_dataset(load_demo())
rows = store.datasets.candidate_rows("demo")
saved = [store.labels.add_label(rows[i].candidate_id, "ann", 1) for i in range(10)]
error = None
fill()
for i in range(5000):
    try:
        saved.append(store.labels.add_label(rows[i % len(rows)].candidate_id, "ann", i % 5))
    except Exception as exc:
        error = exc
        break
free()
store.close()
store = Store(f"sqlite:///{disk / 'store.sqlite'}")
found = {h["id"] for row in rows for h in store.labels.label_history(row.candidate_id)}
print(json.dumps({"saved": len(saved), "error": type(error).__name__, "message": str(error),
                  "found": len(found), "lost": len(set(saved) - found)}))
"""))
    assert result["error"] == "StorageError", result
    assert "disk is full" in result["message"] and "\n" not in result["message"]
    assert result["saved"] >= 10 and result["lost"] == 0 and result["found"] == result["saved"]


def test_importing_on_a_full_disk_reports_it_and_changes_nothing(tmp_path: Path, full_disk_runner):
    result = _json_result(full_disk_runner(tmp_path / "disk", """
from qa_core.types import Candidate, Dataset, Question
store = Store(f"sqlite:///{disk / 'store.sqlite'}")
store.datasets.import_dataset(load_demo())
store.labels.add_label(store.datasets.candidate_rows("demo")[0].candidate_id, "ann", 3)
big = Dataset("big", [Question(f"q{i}", f"question {i} " * 20, [Candidate(f"d{j}", f"answer {i} {j} " * 30)
                                                                  for j in range(20)]) for i in range(200)])
fill()
try:
    store.datasets.import_dataset(big)
    error = None
except Exception as exc:
    error = exc
free()
print(json.dumps({"error": type(error).__name__, "message": str(error), "datasets": store.datasets.dataset_names(),
                  "labels": store.labels.current_labels("demo") != {}}))
"""))
    assert result["error"] == "StorageError" and "disk is full" in result["message"]
    assert result["datasets"] == ["demo"] and result["labels"]


def test_a_disk_that_fills_during_training_stops_it_at_once(tmp_path: Path, full_disk_runner):
    """Checkpoints on a small disk that something else fills after the first progress point: the
    next point stops the training, long before its last epoch, and no file is left behind."""
    result = _json_result(full_disk_runner(tmp_path / "disk", """
from qa_core.services.experiments import train_ranker
points = []
def filled_after_the_first(point):
    points.append(point)
    if len(points) == 1:
        fill()
try:
    train_ranker("smcnn", load_demo(), progress=False, callback=filled_after_the_first,
                 model_config={"max_epochs": 6, "patience": 6})
    error = None
except Exception as exc:
    error = exc
print(json.dumps({"error": type(error).__name__, "message": str(error), "points": len(points),
                  "models": sorted(p.name for p in (disk / "data" / "models").iterdir())}))
""", size="64m", env={"RERANK_LAB_DATA": str(tmp_path / "disk" / "data"), "RERANK_LAB_MIN_FREE_MB": "1"}))
    assert result["error"] == "StorageError" and "MB free" in result["message"], result
    assert result["points"] == 1 and result["models"] == []


def test_a_checkpoint_that_does_not_fit_on_the_disk_is_one_sentence(tmp_path: Path, full_disk_runner):
    """Where the disk fills between the check and the write: one sentence naming the checkpoint,
    and no temporary file left."""
    result = _json_result(full_disk_runner(tmp_path / "disk", """
from qa_core.checkpoints import new_checkpoint_path
from qa_core.rankers import registry
ranker = registry.create("overlap")  # what is saved does not matter here, only where
target = new_checkpoint_path("overlap", "demo")  # makes the models folder
fill()
try:
    registry.save(ranker, target)
    error = None
except Exception as exc:
    error = exc
print(json.dumps({"error": type(error).__name__, "message": str(error), "target": str(target),
                  "left": sorted(p.name for p in target.parent.iterdir())}))
""", size="64m", env={"RERANK_LAB_DATA": str(tmp_path / "disk" / "data"), "RERANK_LAB_MIN_FREE_MB": "0"}))
    assert result["error"] == "StorageError", result
    assert result["message"].startswith(f"cannot write {result['target']}: the disk is full")
    assert result["left"] == []


def read_only(url: str) -> str:
    """The same database, refusing every write from now on: PostgreSQL's read-only default for new
    sessions (open ones are ended), SQLite opened read-only."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return f"sqlite:///file:{parsed.database}?mode=ro&uri=true"
    admin = create_engine(parsed.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:  # generated test database name, no user input
            connection.execute(text(f'ALTER DATABASE "{parsed.database}" SET default_transaction_read_only = on'))
            connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"),
                               {"name": parsed.database})
    finally:
        admin.dispose()
    return url


@pytest.fixture
def refusing_store(database_url: str) -> str:
    """URL of a store holding the demo corpus and one label, whose database now refuses writes."""
    store = Store(database_url)
    store.datasets.import_dataset(load_demo())
    store.labels.add_label(store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0"), "alice", 2)
    store.close()
    return read_only(database_url)


def test_a_database_that_refuses_writes_is_one_sentence(refusing_store: str, capsys: pytest.CaptureFixture):
    store = Store(refusing_store)
    try:
        candidate = store.datasets.find_candidate_id("demo", "demo-01", "demo-01-1")
        for write in (lambda: store.labels.add_label(candidate, "bob", 1), lambda: store.datasets.import_dataset(load_demo(), replace=True),
                      lambda: store.models.register_model("smcnn", NewVersion("smcnn", model_file("x.pt"), {}, {}))):
            with pytest.raises(StorageError, match="read-only, so nothing was saved"):
                write()
        assert store.labels.current_labels("demo") == {store.datasets.find_candidate_id("demo", "demo-01", "demo-01-0"): {"alice": 2}}
    finally:
        store.close()
    demo_file = str(ROOT / "qa_core/data/demo_corpus.jsonl")
    assert_refused(cli_in_process(capsys, "--db", refusing_store, "data", "import", demo_file, "--name", "demo",
                                  "--replace"), "read-only")


def test_the_label_page_says_when_the_database_refuses_a_label(refusing_store: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RERANK_LAB_DB", refusing_store)
    app = open_page(LABEL)
    app.text_input(key="new_annotator").input("carol").run()
    assert not app.exception, app.exception
    errors = " ".join(e.value for e in app.error)
    assert "read-only, so nothing was saved" in errors and "Traceback" not in errors


# ------------------------------------------------------------------------------ issue 33


def test_an_edited_candidate_under_the_same_id_is_reported_with_its_labels(env: Env, capsys: pytest.CaptureFixture):
    """A re-import that changes a labelled candidate's text keeps its labels on the id, says so on
    stderr and lists them with ``data orphans`` (before: only ``"edited": 1`` in the JSON)."""
    edited = env.folder / "demo.jsonl"
    edited.write_text(Path(DEMO_FILE).read_text().replace("Leonardo da Vinci painted the portrait",
                                                          "Raphael painted the portrait", 1))
    result = cli_in_process(capsys, "data", "import", str(edited), "--name", "demo", "--replace")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["import"]["edited"] == 1
    assert ("note: 1 labelled candidates have another text under the same id: demo-01/demo-01-0 (1 labels); "
            "their labels judged the earlier text") in result.stderr
    orphans = [json.loads(line) for line in cli_in_process(capsys, "data", "orphans", "--data", "demo").stdout.splitlines()]
    assert [(o["doc_id"], o["annotator"], o["value"], o["reason"].split(" at ")[0]) for o in orphans] == [
        ("demo-01-0", "alice", 2, "text edited")]


def test_a_read_only_data_folder_says_so_and_still_reads(tmp_path: Path):
    """Before: "unable to open database file" for every command, reads included."""
    folder = tmp_path / "data"
    folder.mkdir()
    url = f"sqlite:///{folder / 'store.sqlite'}"
    store = Store(url)
    store.datasets.import_dataset(load_demo())
    store.close()
    read_only_mount = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"'

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*_unshare_prefix(), "sh", "-c", read_only_mount, "sh", str(folder), sys.executable,
                               "-m", "qa_core", "--db", url, *args], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, "RERANK_LAB_DATA": str(folder)}, timeout=300)

    listed = cli("data", "list")
    if listed.returncode != 0 and "mount" in listed.stderr:
        pytest.skip(f"cannot mount a folder read-only in a private namespace here: {listed.stderr.strip()}")
    assert listed.returncode == 0 and json.loads(listed.stdout)["dataset"] == "demo", listed.stderr
    assert_refused(cli("data", "import", DEMO_FILE, "--name", "again"), "the database is read-only, so nothing was saved")


# ------------------------------------------------------------------------------ issue 45: systems

BAD_SYSTEM_NAMES = ["a\nb", "../../x", "<b>x</b>", "中" * 100, ".."]


@pytest.mark.parametrize("name", BAD_SYSTEM_NAMES)
def test_cli_refuses_a_bad_system_name_and_changes_nothing(env: Env, name: str, capsys: pytest.CaptureFixture):
    """A system's name follows the dataset's rule (a newline, markup and ``../../x`` were kept)."""
    run = env.folder / "one.run"
    run.write_text("demo-01 Q0 demo-01-0 1 1.0 x\n")
    before = snapshot(env.url)
    assert_refused(cli_in_process(capsys, "systems", "add-run", str(run), "--data", "demo", "--name", name),
                   "system name", "a name holds letters")
    assert_refused(cli_in_process(capsys, "systems", "add-service", "http://127.0.0.1:9/", "--name", name),
                   "system name", "a name holds letters")
    assert snapshot(env.url) == before


def test_the_systems_page_refuses_a_bad_name_in_a_sentence_and_keeps_what_was_typed(env: Env):
    page = open_page(str(ROOT / "pages" / "7_Systems.py"))
    page.text_input(key="systems_url").input("http://127.0.0.1:9/").run()
    page.text_input(key="systems_service_name").input("../../x").run()
    page.button(key="systems_add_service").click().run()
    assert not page.exception, page.exception
    (error,) = page.error
    assert error.value.replace("\u2060", "").startswith("the system name '../../x' is not allowed: it starts with '.'")
    assert page.text_input(key="systems_service_name").value == "../../x"
    assert not page.success


@pytest.mark.parametrize(("route", "needle"), [("secret-error", "answered HTTP 500 Internal Server Error"),
                                               ("huge", "sent an answer over 8 MiB")])
def test_cli_names_a_secret_or_huge_answer_in_one_line_without_its_body(
    env: Env, route: str, needle: str, capsys: pytest.CaptureFixture
):
    from tests.scoring_services import SECRET, serving

    with serving(["tests.scoring_services", "faulty"]) as url:
        added = cli_in_process(capsys, "systems", "add-service", f"{url}{route}", "--name", "faulty")
        assert added.returncode == 0, added.stderr
        before = snapshot(env.url)
        err = assert_refused(cli_in_process(capsys, "evaluate", "--model", "system:faulty", "--data", "demo",
                                            "--quiet"), needle)
    assert SECRET.partition("=")[2] not in err
    assert snapshot(env.url) == before


# ------------------------------------------------------------------------------ issue 45: doors


def test_a_checkpoint_of_another_model_is_refused_at_registration_in_one_sentence(env: Env) -> None:
    """A cnn_wo checkpoint registered as smcnn was registered and promoted; loading refused it later."""
    from qa_core.checkpoints import save_checkpoint

    path = save_checkpoint("cnn_wo", {"config": {}}, model_file("cnn_wo.pt"))
    before = snapshot(env.url)
    store = Store(env.url)
    try:
        with pytest.raises(InputError) as refused:
            store.models.register_model("smcnn", NewVersion("smcnn", path, {"dataset": "demo"}, {}, promote=True))
    finally:
        store.close()
    assert str(refused.value).endswith("holds model 'cnn_wo' (a 'cnn_wo' model), not model 'smcnn' (a 'smcnn' "
                                       "model); nothing was registered") and "\n" not in str(refused.value)
    assert snapshot(env.url) == before


@pytest.mark.parametrize("edit", ["scores x10", "doc ids shuffled"])
def test_an_edited_saved_index_is_rebuilt_and_rank_says_so_in_one_line(env: Env, capsys: pytest.CaptureFixture,
                                                                        edit: str) -> None:
    """A saved BM25 index edited so that it still reads ranked otherwise without a word (issue 45)."""
    from qa_core import retrieval
    from qa_core.services import candidate_pools
    from tests.test_retrieval import READABLE_EDITS

    store = Store(env.url)
    try:
        folder, version = candidate_pools.index_folder(store, "demo"), candidate_pools.dataset_version(store, "demo")
        passages = candidate_pools.collection_passages(store.datasets.candidate_texts("demo"), retrieval.FIRST_STAGE)
    finally:
        store.close()
    retrieval.saved_index(folder, version, lambda: passages)  # as an earlier process saved it
    (saved,) = folder.iterdir()
    READABLE_EDITS[edit](saved)
    before = snapshot(env.url)
    result = cli_in_process(capsys, "rank", "who wrote hamlet", "--top", "1")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("warning: the saved BM25 index ") and len(result.stderr.splitlines()) == 1
    assert "checksum differs); rebuilding it" in result.stderr
    assert len(result.stdout.splitlines()) == 1  # ranked from the rebuilt index (tests/test_retrieval.py: as built)
    assert snapshot(env.url) == before
