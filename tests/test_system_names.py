"""Names of systems, datasets and splits (issue 45): one rule for all three (``qa_core.names``), a
bad name one sentence before any work is done, an uploaded file's name never used as a path, and
two same-name systems added at once by separate processes: one is added, the others told it exists
(SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from db.store import Store
from qa_core.data.demo import load_demo
from qa_core.names import NAME_RULE, check_name, name_from_file
from qa_core.services import keep, systems
from qa_core.types import Candidate, Dataset, InputError, Question
from tests.test_concurrency import run_processes

WRITERS = 6
TWIN = "twin"
BAD_NAMES = ["a\nb", "../../x", "..", "<b>x</b>", "a b", "中" * 100, "_x", "x" * 201, "a\x00b"]


def add_the_same_system(url: str, folder: str, writer: int, barrier: Any) -> None:
    """Add system ``twin`` once the others are ready too; write down what happened (any other
    exception ends the process with an error, which ``run_processes`` reports)."""
    store = Store(url)
    try:
        barrier.wait(timeout=120)
        try:
            store.systems.add_system(TWIN, "service", url=f"http://127.0.0.1:9/{writer}")
            outcome = "added"
        except InputError as error:
            outcome = str(error)
        Path(folder, str(writer)).write_text(outcome)
    finally:
        store.close()


def test_same_name_systems_added_at_once_give_one_system_and_one_sentence(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    run_processes([(add_the_same_system, (database_url, str(tmp_path), writer)) for writer in range(WRITERS)])
    outcomes = [Path(tmp_path, str(writer)).read_text() for writer in range(WRITERS)]
    assert sorted(outcomes, key=lambda outcome: outcome != "added") == ["added"] + [
        f"a system named {TWIN!r} exists already; choose another name or remove it first"] * (WRITERS - 1)
    assert [row["name"] for row in store.systems.systems()] == [TWIN]
    assert len(store.users.audit_events(["add_system"])) == 1


@pytest.mark.parametrize("name", BAD_NAMES)
def test_one_rule_refuses_a_bad_name_of_a_dataset_a_system_and_a_split(store: Store, tmp_path: Path, name: str) -> None:
    """The same sentence for the three, before a run is read or a service asked; nothing kept."""
    store.datasets.import_dataset(load_demo())
    run = tmp_path / "r.run"
    run.write_text("demo-33 Q0 demo-33-0 1 1.0 x\n")
    with pytest.raises(InputError) as refused:
        check_name(name, "system name")
    sentence = str(refused.value)
    assert sentence.endswith(NAME_RULE) and "\n" not in sentence
    with pytest.raises(InputError, match="^the system name .* (is not allowed|is too long)"):
        systems.add_run(store, run, "demo", name)
    with pytest.raises(InputError, match="^the system name .* (is not allowed|is too long)"):
        systems.add_service(store, "http://127.0.0.1:9/", name)  # refused before the discard port is asked
    with pytest.raises(InputError, match="^the dataset name .* (is not allowed|is too long)"):
        store.datasets.import_dataset(Dataset(name, [Question("q", "who?", [Candidate("d", "me")])]))
    with pytest.raises(InputError, match=r"^the split \(dataset 'd', question 'q'\) .* (is not allowed|is too long)"):
        store.datasets.import_dataset(Dataset("d", [Question("q", "who?", [Candidate("d", "me")], name)]))
    assert store.systems.systems() == [] and store.datasets.dataset_names() == ["demo"]


def test_a_good_name_in_any_script_passes() -> None:
    for name in ("demo", "trec-qa.v2", "中文数据", "हिन्दी", "Ωmega_1"):
        assert check_name(f"  {name} ", "dataset name") == name


@pytest.mark.parametrize(("file_name", "suggested"), [
    ("lengths.test.run", "lengths.test"),
    ("..", ""),
    ("../../etc/passwd.jsonl", "passwd"),
    ("my run (1).trec", "my-run-1"),
    ("中" * 100 + ".trec", "中" * 85),  # 255 bytes: a name, not a path, still within a file name's limit
])
def test_an_uploaded_file_name_suggests_a_name_that_follows_the_rule(file_name: str, suggested: str) -> None:
    assert name_from_file(file_name) == suggested
    if suggested:
        assert check_name(suggested, "system name") == suggested


@pytest.mark.parametrize("file_name", ["中" * 100 + ".trec", "..", "../../x.run", "a\nb.run", "/"])
def test_an_uploaded_file_name_is_provenance_never_a_path(store: Store, file_name: str) -> None:
    """Written to a temporary file of its own name (a 305-byte name or '..' was an OSError
    traceback); the uploaded name is kept as the run's provenance and names it in errors."""
    store.datasets.import_dataset(load_demo())
    question = load_demo().split("test")[0]
    content = "".join(f"{question.qid} Q0 {c.doc_id} 1 {len(c.text)} x\n" for c in question.candidates).encode()
    added = systems.add_run_upload(store, content, file_name, "demo", "uploaded")
    assert added["file_name"] == file_name and "ranks 1 questions" in added["note"]
    with pytest.raises(InputError) as refused:
        systems.add_run_upload(store, b"not a run\n", file_name, "demo", "broken")
    assert str(refused.value).startswith(f"{systems.shown_file_name(file_name)}, line 1: ")
    assert "\n" not in str(refused.value) and len(str(refused.value)) < 200
    systems.remove(store, "uploaded")


def test_keeping_a_question_checks_its_split_and_text(store: Store) -> None:
    """The split by the one name rule (``../x`` was kept as a split), a NUL refused (PostgreSQL
    stores none), the question's length as the import's limit; nothing kept."""
    from tests.teams import small
    from tests.test_keep import typed_ranking

    store.datasets.import_dataset(small())
    for split in ("../x", "a b", "x" * 201):
        with pytest.raises(InputError, match="^the split .* (is not allowed|is too long)"):
            keep.keep_question(store, "d", typed_ranking(store, "who wrote hamlet"), split)
    with pytest.raises(InputError, match="^the question holds a NUL character"):
        keep.keep_question(store, "d", typed_ranking(store, "who wrote\x00 hamlet"))
    with pytest.raises(InputError, match=r"^the question is too long \(1,001 characters\); the limit is 1,000"):
        keep.keep_question(store, "d", typed_ranking(store, "who wrote hamlet " + "x" * 984))
    assert store.users.audit_events(["keep question"]) == []


def test_a_runs_note_does_not_count_questions_without_candidates(store: Store, tmp_path: Path) -> None:
    """TrecQA's TEST has questions with no candidate: a run ranking every other one lacks nothing
    (it said "lacks 5 of test" and then gave metrics "over all 95 questions"); the note and the
    metrics both say over which questions they count."""
    questions = [Question(f"q{i}", f"question {i}?", [Candidate("d1", "yes", label=1), Candidate("d2", "no", label=0)],
                          "test") for i in range(3)]
    empty = [Question(f"e{i}", f"empty {i}?", [], "test") for i in range(2)]
    store.datasets.import_dataset(Dataset("holes", [*questions, *empty]))
    run = tmp_path / "all.run"
    run.write_text("".join(f"{q.qid} Q0 d{d} 1 {3 - d} x\n" for q in questions for d in (1, 2)))
    added = systems.add_run(store, run, "holes", "every-pool")
    assert added["note"] == "ranks all 3 questions with candidates of the splits it covers"
    run.write_text("".join(f"q0 Q0 d{d} 1 {3 - d} x\n" for d in (1, 2)))
    partial = systems.add_run(store, run, "holes", "one-pool")
    assert partial["note"] == "ranks 1 questions; lacks 2 of test (q1, q2), counting questions with candidates"
    coverage = systems.run_coverage(store, "one-pool", store.datasets.load_dataset("holes"))
    assert list(coverage.metrics("test")) == ["over the 1 judged questions it covers",
                                              "over all 3 judged questions (uncovered count 0)"]
