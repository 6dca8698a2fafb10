"""Bad input everywhere a user can give it: the CLI (as a process), the importers and the Ask page.

Every case asserts the same contract: a clear message (one ``error:`` line on stderr, naming the
file and line for files), no traceback, nothing partial written and nothing lost (every row of the
store's data tables is unchanged, labels included). Data holding HTML is shown escaped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from streamlit.testing.v1 import AppTest

from db.store import Store
from qa_core.cli import main
from qa_core.data.demo import load_demo
from qa_core.data.importers import load_dataset, read_qrels, read_trec_run
from qa_core.rankers import registry
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.pages import ASK, markdown, open_page

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = "<script>alert(1)</script>"
ESCAPED_SCRIPT = "&lt;script&gt;alert(1)&lt;/script&gt;"
DATA_TABLES = ("datasets", "questions", "candidates", "labels", "model_versions", "runs")


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
    store.import_dataset(load_demo())
    store.import_qrels("demo", {"demo-01": {"demo-01-0": 2, "demo-01-1": 0}}, "alice")
    store.import_dataset(_no_positives())
    store.close()
    return folder


@dataclass
class Env:
    """A copy of the seeded store and a data folder, as the CLI and the app read them from the environment."""

    folder: Path
    url: str
    environ: dict[str, str]


@pytest.fixture
def env(seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Env:
    for path in seeded.glob("store.sqlite*"):
        shutil.copy(path, tmp_path / path.name)
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", url)
    return Env(tmp_path, url, os.environ.copy())


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


def cli(env: Env, *args: str) -> subprocess.CompletedProcess:
    """``python -m qa_core ARGS`` as a user runs it: its own process, the store from the environment."""
    return subprocess.run(
        [sys.executable, "-m", "qa_core", *args], cwd=ROOT, env=env.environ, capture_output=True, text=True, timeout=300
    )


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
    "run-unknown-doc": FileCase({"r.run": b"demo-01 Q0 demo-01-0 1 3.5 t\ndemo-01 Q0 no-such-doc 2 1.0 t\n"},
                                "r.run", None, "no-such-doc", "import-run"),
    "qrels-three-fields": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 demo-01-3 1\n"}, "q.qrels", 2,
                                   "4 fields", "import-qrels"),
    "qrels-grade-word": FileCase({"q.qrels": b"demo-01 0 demo-01-2 relevant\n"}, "q.qrels", 1, "grade", "import-qrels"),
    "qrels-judged-twice": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 demo-01-2 0\n"}, "q.qrels", 2,
                                   "twice", "import-qrels"),
    "qrels-unknown-doc": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 nope 1\n"}, "q.qrels", None, "nope",
                                  "import-qrels"),
    "qrels-grade-9": FileCase({"q.qrels": b"demo-01 0 demo-01-2 1\ndemo-01 0 demo-01-3 9\n"}, "q.qrels", None,
                              "outside 0..4", "import-qrels"),
}
STORE_LEVEL = {"run-unknown-doc", "qrels-unknown-doc", "qrels-grade-9"}  # well-formed files the store refuses


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
    if name not in STORE_LEVEL:
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
                             ("not trained", "python -m qa_core train --model smcnn")),
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
}


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_cli_refuses_bad_argument_and_changes_nothing(env: Env, name: str):
    make_args, needles = CLI_CASES[name]
    before = snapshot(env.url)
    assert_refused(cli(env, *make_args(env.folder)), *needles)
    assert snapshot(env.url) == before


def test_cli_refuses_a_megabyte_question(env: Env, capsys: pytest.CaptureFixture):
    """1 MB cannot pass through a process's argv (128 KiB per argument), so through ``main``."""
    before = snapshot(env.url)
    assert_refused(cli_in_process(capsys, "rank", "x" * 1_000_000, "--data", "demo"), "1,000,000 characters")
    assert snapshot(env.url) == before


def test_cli_output_keeps_html_as_data(env: Env):
    """HTML, quotes and newlines in texts: JSON lines stay one parseable record each with the text
    byte for byte (JSON is data, escaping is the renderer's job), and ``rank`` prints one line per
    candidate."""
    source = env.folder / "html.csv"
    tricky = f'{SCRIPT} "Hamlet" & <b>Macbeth</b>\nsecond line'
    source.write_text('qid,question,doc_id,candidate,label\n'
                      f'q1,who wrote alert,d1,"{tricky.replace(chr(34), chr(34) * 2)}",1\n'
                      'q1,who wrote alert,d2,an alert nobody wrote,0\n')
    imported = cli(env, "data", "import", str(source), "--name", "<i>html</i>")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["imported"] == "<i>html</i>"

    qrels = env.folder / "judged.qrels"
    qrels.write_text("q1 0 d1 2\n")
    labelled = cli(env, "data", "import-qrels", str(qrels), "--data", "<i>html</i>", "--annotator", "<b>ann</b>")
    assert labelled.returncode == 0, labelled.stderr
    out = env.folder / "labels.jsonl"
    exported = cli(env, "data", "export", "--data", "<i>html</i>", "--format", "jsonl", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    [record] = [json.loads(line) for line in out.read_text().splitlines()]
    assert (record["candidate"], record["annotator"], record["value"]) == (tricky, "<b>ann</b>", 2)

    ranked = cli(env, "rank", "alert", "--data", "<i>html</i>", "--top", "2")
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
    and every bit of its text arrives as text."""
    name = '<img src=x onerror="alert(1)">'
    dataset = Dataset(name, [Question("q1", f"who wrote {SCRIPT}", [
        Candidate("d1", f"{SCRIPT} was written by nobody", label=0),
        Candidate("d2", "<b>bold</b> claims about the script", label=0),
    ], split="test")])
    store = Store(env.url)
    store.import_dataset(dataset)
    store.close()
    before = snapshot(env.url)

    app = open_page(ASK)
    app.selectbox(key="dataset").select(name)
    app.selectbox(key="model").select("overlap")
    app.radio(key="source").set_value("Pick a dataset question").run()
    app.button[0].click().run()
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    table = app.dataframe[0].value
    assert list(table["gold_label"]) == [0, 0]
    assert {f"{SCRIPT} was written by nobody", "<b>bold</b> claims about the script"} == set(table["text"])
    text = markdown(app)
    assert "&lt;img src=x onerror=\"alert(1)\"&gt;" in text and ESCAPED_SCRIPT in text
    assert "<img" not in text and "<script>" not in text and "<b>" not in text
    assert snapshot(env.url) == before


def test_ask_reports_a_corrupt_checkpoint_and_keeps_the_store(env: Env):
    """A promoted version whose file was damaged (and no other version): an error on the page, the
    Rank button off, the registry and labels as they were."""
    corrupt = _corrupt_checkpoint(env.folder)
    store = Store(env.url)
    store.register_model("smcnn", kind="smcnn", checkpoint_path=str(corrupt), training_data={}, metrics={})
    store.close()
    before = snapshot(env.url)

    app = open_page(ASK)
    app.selectbox(key="model").select("smcnn").run()
    assert not app.exception, app.exception
    errors = " ".join(e.value for e in app.error)
    assert "no version of model 'smcnn' could be loaded" in errors and "corrupt" in errors
    assert app.button[0].disabled
    assert snapshot(env.url) == before
