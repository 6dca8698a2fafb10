"""External systems (issue 36) with real parts: a SQLite store holding the demo corpus, the example
scoring service (``examples/scoring_service.py``) started as a real uvicorn server, and services that
are slow, answer garbage or die in the middle of a whole split (``tests/scoring_services.py``).

A run goes everywhere a model goes through ``model_loading.load_ranker``; scores decide the order with
the one tie rule; a service's explanation is occlusion through ``Ranker.score_edits``; every failure
is one sentence and nothing partial.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine

from db.store import Store
from qa_core import ordering
from qa_core.access import AccessDenied
from qa_core.data.demo import load_demo
from qa_core.rankers.service_client import ServiceClient, ServiceError, shown_url
from qa_core.services import compare, model_loading, systems
from qa_core.services.experiments import score_questions
from qa_core.types import Candidate, InputError
from tests import ROOT
from tests.cli import run_cli
from tests.pages import ASK, LABEL, LANDING, open_page
from tests.scoring_services import serving
from tests.teams import sign_in

COVERED = 20  # of the demo's 28 TEST questions


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    folder = tmp_path_factory.mktemp("systems")
    store = Store(f"sqlite:///{folder / 'store.sqlite'}")
    store.datasets.import_dataset(load_demo())
    yield store
    store.close()


def _run_file(folder: Path, store: Store, covered: int = COVERED) -> tuple[Path, dict[str, dict[str, float]]]:
    """A TREC run of the first ``covered`` TEST questions whose scores tie in pairs (the rule decides)."""
    run = {q.qid: {c.doc_id: float(i // 2) for i, c in enumerate(q.candidates)}
           for q in store.datasets.load_dataset("demo").split("test")[:covered]}
    path = folder / "partial.run"
    path.write_text("".join(f"{qid} Q0 {doc} 1 {score} ext\n" for qid, docs in run.items() for doc, score in docs.items()))
    return path, run


def _labels(store: Store) -> list[tuple]:
    engine = create_engine(store.url)
    try:
        with engine.connect() as connection:
            return sorted(tuple(row) for row in connection.execute(text("SELECT * FROM labels")))
    finally:
        engine.dispose()


def test_run_system_ranks_like_a_model_and_leaves_labels_alone(demo_store: Store, tmp_path: Path):
    store = demo_store
    question = store.datasets.load_dataset("demo").split("test")[0]
    store.labels.import_qrels("demo", {question.qid: {question.candidates[0].doc_id: 2}}, "alice")
    labels = _labels(store)
    path, run = _run_file(tmp_path, store)

    added = systems.add_run(store, path, "demo", "partial")
    assert added["file_sha256"] and added["added_by"] == "local"
    assert "lacks 8 of test" in added["note"]
    assert model_loading.model_names(store, "demo")[-1] == "system:partial"
    assert "a stored run of demo" in model_loading.version_in_use(store, "system:partial", "demo")

    ranker = model_loading.load_ranker(store, "system:partial", "demo")
    ranked = ranker.rank(question.text, question.candidates)
    assert [s.candidate.doc_id for s in ranked] == [doc for doc, _ in ordering.ranked(run[question.qid])]
    with pytest.raises(InputError, match="cannot be explained word by word"):
        ranker.explain(question.text, question.candidates, 0)
    with pytest.raises(InputError, match="no ranking of a question typed here"):
        ranker.score("a question nobody asked", ["an answer"])

    demo = store.datasets.load_dataset("demo")
    coverage = systems.run_coverage(store, "system:partial", demo)
    assert demo.splits[0] != "test" and coverage.splits()[0] == "test"
    metrics = coverage.metrics("test")
    covered, whole = metrics.values()
    assert list(metrics) == [f"over the {COVERED} judged questions it covers",
                            "over all 28 judged questions (uncovered count 0)"]
    assert whole["map"] == pytest.approx(covered["map"] * COVERED / 28)

    systems.rename(store, "system:partial", "renamed")
    systems.remove(store, "system:renamed")
    assert systems.names(store, "demo") == []
    assert _labels(store) == labels
    events = store.users.audit_events(["add_system", "rename_system", "remove_system"])
    assert sorted((e["action"], e["target"]) for e in events) == [
        ("add_system", "partial"), ("remove_system", "renamed"), ("rename_system", "partial")]


def test_a_partial_run_adds_to_a_depth_k_pool_only_what_it_ranks(demo_store: Store, tmp_path: Path):
    """A run of 20 TEST questions, one of them without its first candidate: the deepest pool holds
    exactly the run's pairs (a floor score places the rest last, it does not rank them), and the
    background scoring of the run still ends."""
    from qa_core.services.labeling import BackgroundScores
    from qa_core.services.labeling.strategies import model_scores, pool_order

    path, run = _run_file(tmp_path, demo_store)
    first = next(iter(run))
    dropped = next(iter(run[first]))
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith(f"{first} Q0 {dropped} ")))
    systems.add_run(demo_store, path, "demo", "partial-pool")
    ranker = model_loading.load_ranker(demo_store, "system:partial-pool", "demo")
    records = demo_store.datasets.candidate_rows("demo", split="test")
    pooled = pool_order(records, {"system:partial-pool": model_scores(ranker, records)}, depth=100, judged=(), seed=1)
    in_run = {(qid, doc) for qid, docs in run.items() for doc in docs} - {(first, dropped)}
    assert {(r.qid, r.doc_id) for r in records if r.candidate_id in set(pooled)} == in_run
    progress = BackgroundScores(ranker, records).wait(timeout=60)
    assert progress.done and progress.scored == progress.total == len(records) and progress.error is None
    systems.remove(demo_store, "partial-pool")


def test_a_run_as_one_more_annotator_in_the_agreement_view(demo_store: Store, tmp_path: Path):
    """Its first-ranked candidate of each question is relevant, the rest not; Cohen's κ on relevance
    against each annotator over the pairs both judged (a pair of a question the run lacks is not one),
    as scikit-learn gives it; below ten pairs no κ."""
    from sklearn.metrics import cohen_kappa_score

    from qa_core.services.labeling.strategies import model_scores
    from qa_core.services.labeling.suggestions import store_annotator_agreement

    store = demo_store
    path, run = _run_file(tmp_path, store)
    systems.add_run(store, path, "demo", "annotating")
    test = store.datasets.load_dataset("demo").split("test")
    gold = {q.qid: {c.doc_id: 3 * c.label for c in q.candidates} for q in test}
    store.labels.import_qrels("demo", {q.qid: gold[q.qid] for q in [*test[:4], test[COVERED]]}, "carol")
    store.labels.import_qrels("demo", {q.qid: dict.fromkeys(gold[q.qid], 0) for q in test[:2]}, "dave")
    store.labels.import_qrels("demo", {test[0].qid: dict(list(gold[test[0].qid].items())[:3])}, "erin")
    ranker = model_loading.load_ranker(store, "system:annotating", "demo")
    table = store_annotator_agreement(store, "demo", model_scores(ranker, store.datasets.candidate_rows("demo")))
    rows = table.set_index("annotator").loc[["carol", "dave", "erin"]]

    def expected(grades: dict[str, dict[str, int]]) -> tuple[int, float]:
        people = [int(g > 0) for qid in grades if qid in run for g in grades[qid].values()]
        model = [int(doc == ordering.ranked(run[qid])[0][0]) for qid in grades if qid in run for doc in grades[qid]]
        return len(people), cohen_kappa_score(people, model)

    carol = expected({q.qid: gold[q.qid] for q in [*test[:4], test[COVERED]]})
    assert (rows.loc["carol", "pairs both judged"], rows.loc["carol", "Cohen's κ"]) == pytest.approx(carol)
    assert rows.loc["carol", "pairs both judged"] == sum(len(q.candidates) for q in test[:4])  # not test[COVERED]'s
    assert rows.loc["carol", "κ low"] <= rows.loc["carol", "Cohen's κ"] <= rows.loc["carol", "κ high"]
    assert rows.loc["dave", "Cohen's κ"] == pytest.approx(0.0) and rows.loc["dave", "annotator: relevant"] == 0
    assert rows.loc["erin", "note"] == "not enough overlap" and pd.isna(rows.loc["erin", "Cohen's κ"])
    systems.remove(store, "annotating")


def test_team_mode_lets_only_admins_add_or_remove(demo_store: Store, tmp_path: Path):
    team = Store(demo_store.url, team=True)
    admin, annotator = sign_in(team, "root-admin"), sign_in(team, "annie")
    path, _ = _run_file(tmp_path, team)
    assert admin.role == "admin"  # the store's first user
    with pytest.raises(AccessDenied, match="may not add, rename or remove external systems"):
        systems.add_run(team, path, "demo", "by-annie", actor=annotator)
    with pytest.raises(AccessDenied, match="sign in first"):
        systems.add_run(team, path, "demo", "by-nobody")
    systems.add_run(team, path, "demo", "by-admin", actor=admin)
    with pytest.raises(AccessDenied):
        systems.remove(team, "by-admin", actor=annotator)
    systems.remove(team, "by-admin", actor=admin)
    assert [r["name"] for r in team.systems.systems()] == []


def test_jsonl_run_through_the_cli(demo_store: Store, tmp_path: Path, capsys: pytest.CaptureFixture):
    questions = demo_store.datasets.load_dataset("demo").split("test")
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps({"qid": q.qid, "doc_id": c.doc_id, "score": len(c.text)}) + "\n"
                            for q in questions for c in q.candidates))
    db = ["--db", demo_store.url]
    code, out, err = run_cli(*db, "systems", "add-run", str(path), "--data", "demo", "--name", "lengths", capsys=capsys)
    assert code == 0, err
    assert json.loads(out)["note"] == "ranks all 28 questions with candidates of the splits it covers"
    code, out, _ = run_cli(*db, "systems", "list", "--data", "demo", capsys=capsys)
    assert json.loads(out)["system"] == "system:lengths"
    code, out, _ = run_cli(*db, "evaluate", "--model", "system:lengths", "--data", "demo", "--quiet", capsys=capsys)
    assert code == 0 and json.loads(out)["questions"] == 28
    code, out, err = run_cli(*db, "systems", "evaluate", "system:lengths", "--data", "demo", capsys=capsys)
    assert code == 0, err
    _, _, covered, whole = json.loads(out).values()  # system, split, then the run covers every TEST question
    assert covered == whole and 0 < covered["map"] < 1
    code, out, err = run_cli(*db, "systems", "remove", "lengths", capsys=capsys)
    assert code == 0 and json.loads(out) == {"removed": "lengths"}
    code, _, err = run_cli(*db, "systems", "remove", "lengths", capsys=capsys)
    assert code == 2 and err.strip() == "error: unknown system 'lengths'"


def test_a_run_on_the_ask_and_errors_pages(store_url: str, tmp_path: Path):
    """Through the pages' own model lists: Ask ranks a linked question with the run and says plainly
    that it cannot explain it word by word; Errors lists the run's worst questions."""
    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    path, run = _run_file(tmp_path, store)
    systems.add_run(store, path, "demo", "partial")
    store.close()
    ask = open_page(ASK, dataset="demo", qid="demo-33", model="system:partial")
    assert ask.selectbox(key="model").value == "system:partial"
    table = ask.dataframe[0].value
    assert list(table["text"]) == [next(c.text for c in load_demo().split("test")[0].candidates if c.doc_id == doc)
                                   for doc, _ in ordering.ranked(run["demo-33"])]
    assert any("cannot be explained word by word" in info.value for info in ask.info)
    errors = open_page(LANDING)
    errors.switch_page(str(ROOT / "pages" / "5_Errors.py")).run()
    errors.selectbox(key="model").select("system:partial").run()
    assert not errors.exception, errors.exception
    assert len(errors.dataframe[0].value) == 28


def test_the_agreement_view_judges_a_run_against_each_annotator(store_url: str, tmp_path: Path):
    """Label's agreement view: with the toggle on, the run picked joins as an annotator, and the table
    (scored in the background: rerun until it is done) gives its κ against carol's labels."""
    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    systems.add_run(store, _run_file(tmp_path, store)[0], "demo", "partial")
    test = store.datasets.load_dataset("demo").split("test")
    store.labels.import_qrels("demo", {q.qid: {c.doc_id: 3 * c.label for c in q.candidates} for q in test[:4]}, "carol")
    store.close()
    app = open_page(LABEL)
    app.radio(key="label_view").set_value("Agreement").run()
    app.toggle(key="agreement_model_on").set_value(True).run()
    app.selectbox(key="agreement_model").select("system:partial").run()
    for _ in range(60):  # the run's scores fill in in the background
        if not any(p.proto.text.startswith("Scoring with") for p in app.get("progress")):
            break
        app.run()
    assert not app.exception, app.exception
    (table,) = [t.value for t in app.dataframe if "alike" in t.value.columns]
    assert table.to_dict("records")[0]["annotator"] == "carol"
    assert table["pairs both judged"].tolist() == [sum(len(q.candidates) for q in test[:4])]
    assert any("its first-ranked candidate of each question counts as relevant" in c.value for c in app.caption)


def test_the_systems_page_names_a_runs_coverage(store_url: str, tmp_path: Path):
    """The run's metrics as trec_eval gives them over the questions it covers and over the whole
    split, its scores read from the store once per page run (the split's list and the metrics share
    the read)."""
    from qa_core.evaluation import evaluate, qrels_from_questions

    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    path, run = _run_file(tmp_path, store)
    systems.add_run(store, path, "demo", "partial")
    qrels = qrels_from_questions(store.datasets.load_dataset("demo").split("test"))
    store.close()
    with _reads_of_run_scores() as reads:
        page = open_page(str(ROOT / "pages" / "7_Systems.py"))
    assert len(reads) == 1
    assert page.dataframe[0].value["system"].tolist() == ["system:partial"]
    assert page.selectbox(key="systems_metrics_split").value == "test"  # the split the run ranks, not the first
    metrics = page.dataframe[1].value
    assert metrics["questions"].tolist() == [f"over the {COVERED} judged questions it covers",
                                             "over all 28 judged questions (uncovered count 0)"]
    covered = {qid: grades for qid, grades in qrels.items() if qid in run}
    for row, expected in zip(metrics.to_dict("records"), (evaluate(run, covered), evaluate(run, qrels)), strict=True):
        assert {name: row[name] for name in expected.aggregate} == pytest.approx(expected.aggregate)
    assert metrics["map"].iloc[1] == pytest.approx(metrics["map"].iloc[0] * COVERED / 28)
    with _reads_of_run_scores() as reads:
        page.selectbox(key="systems_metrics_split").select("train").run()
    assert not page.exception, page.exception
    assert len(reads) == 1
    assert any("ranks none of these" in info.value for info in page.info)  # TRAIN: the run ranks none of it


@contextmanager
def _reads_of_run_scores() -> Iterator[list[str]]:
    """The SQL statements that read a run's stored scores (``systems.scores``) while the block runs,
    on any engine of this process (the page opens its own store)."""
    reads: list[str] = []

    def count(connection: object, cursor: object, statement: str, *args: object) -> None:
        if "systems.scores" in statement:
            reads.append(statement)

    event.listen(Engine, "before_cursor_execute", count)
    try:
        yield reads
    finally:
        event.remove(Engine, "before_cursor_execute", count)


@pytest.fixture(scope="module")
def example_service(demo_store: Store) -> Iterator[str]:
    """The example service serving the IDF overlap baseline fitted on the demo's TRAIN split."""
    with serving(["examples.scoring_service", "--model", "overlap", "--data", "demo", "--db", demo_store.url]) as url:
        yield url


def test_example_service_scores_as_in_process_explains_by_occlusion_and_caches(demo_store: Store, example_service: str):
    store = demo_store
    added = systems.add_service(store, example_service, "served-overlap")
    assert added["info"] == {"name": "overlap", "version": "overlap", "max_batch": 1000}
    questions = store.datasets.load_dataset("demo").split("test")
    served = model_loading.load_ranker(store, "system:served-overlap", "demo")
    local = model_loading.load_ranker(store, "overlap", "demo")
    remote_run, local_run = score_questions(served, questions), score_questions(local, questions)
    assert max(abs(remote_run[q][d] - local_run[q][d]) for q in local_run for d in local_run[q]) <= 1e-6

    question = questions[0]
    explanation = served.explain(question.text, question.candidates, 1)
    assert explanation.weight_kind == "occlusion"
    assert explanation.score == pytest.approx(served.score(question.text, question.candidates)[1])
    assert any(weight > 0 for weight in explanation.answer_weights)  # a shared word's removal lowers the overlap

    comparison = compare.compare_split({"overlap": local, "system:served-overlap": served}, questions)
    assert comparison.models == ["overlap", "system:served-overlap"]
    systems.remove(store, "served-overlap")


def test_service_cache_answers_without_the_service(demo_store: Store, example_service: str):
    """Scores are cached per (system, version, question, candidates): the same system and version
    moved to a dead address still answers what it answered; a new question reaches the dead address."""
    store = demo_store
    systems.add_service(store, example_service, "cached")
    first, second = store.datasets.load_dataset("demo").split("dev")[:2]
    scores = model_loading.load_ranker(store, "system:cached", "demo").score(first.text, first.candidates)
    systems.remove(store, "cached")
    with serving(["tests.scoring_services", "dies", "--after", "0"]) as dead_url:
        store.systems.add_system("cached", "service", url=dead_url, info={"name": "overlap", "version": "overlap"})
        moved = model_loading.load_ranker(store, "system:cached", "demo")
        np.testing.assert_array_equal(moved.score(first.text, first.candidates), scores)
        with pytest.raises(ServiceError, match="is down or unreachable"):
            moved.score(second.text, second.candidates)
    systems.remove(store, "cached")


@pytest.fixture(scope="module")
def faulty_service() -> Iterator[str]:
    with serving(["tests.scoring_services", "faulty"]) as url:
        yield url


@pytest.mark.parametrize(("route", "sentence"), [
    ("slow", "did not answer in full (headers and body) within 0.5 s"),
    ("count", "returned 2 scores for 3 candidates"),
    ("nan", "returned a string for candidate '0', which is not a finite number"),
    ("html", "answered 41 bytes that are not JSON (not shown)"),
    ("error", "answered HTTP 500 Internal Server Error"),
])
def test_a_failing_service_is_one_sentence(demo_store: Store, faulty_service: str, route: str, sentence: str):
    from qa_core.rankers.external import ServiceRanker

    ranker = ServiceRanker("system:faulty", ServiceClient(f"{faulty_service}{route}", timeout=0.5, retries=0))
    with pytest.raises(ServiceError) as caught:
        ranker.score("who wrote hamlet", ["Shakespeare", "a play", "Denmark"])
    assert sentence in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_service_dripping_its_answer_meets_the_deadline_of_the_whole_request(faulty_service: str):
    """Headers at once, then a byte every 0.25 s: no read waits as long as the 1 s timeout, so a
    per-read timeout waits the whole 5 s and takes the scores; the deadline of the whole request ends
    each try at 1 s, and no retry starts after two."""
    client = ServiceClient(f"{faulty_service}drip", timeout=1.0, retries=3, backoff=0.01)
    with pytest.raises(ServiceError) as caught:
        client.score_pools([("dripped?", [Candidate("a", "yes"), Candidate("b", "no")])])
    assert str(caught.value).endswith("did not answer in full (headers and body) within 1 s (after 2 tries)")


@pytest.mark.parametrize("route", ["huge", "huge-declared"])
def test_a_huge_answer_is_refused_at_the_limit_not_read_whole(faulty_service: str, route: str):
    """64 MiB streamed without a length (valid JSON: scores, then blanks) and 9 MiB with its
    Content-Length: both over the 8 MiB limit, refused once (not retried: it will not change)."""
    client = ServiceClient(f"{faulty_service}{route}", retries=3, backoff=0.01)
    with pytest.raises(ServiceError) as caught:
        client.score_pools([(f"huge {route}?", [Candidate("a", "yes"), Candidate("b", "no")])])
    assert str(caught.value) == (f"the service at {faulty_service}{route} sent an answer over 8 MiB, the most one "
                                 "answer may hold; the rest was not read")


@pytest.mark.parametrize(("route", "sentence"), [
    ("secret-error", "answered HTTP 500 Internal Server Error"),
    ("secret-text", "answered 12 bytes that are not JSON (not shown)"),
    ("secret-shape", 'answered a JSON object whose "scores" is not a list instead of {"scores": [...]}'),
    ("secret-score", "returned a string for candidate 'a', which is not a finite number"),
])
def test_a_refusal_never_repeats_the_services_body(faulty_service: str, route: str, sentence: str):
    from tests.scoring_services import SECRET

    client = ServiceClient(f"{faulty_service}{route}", retries=0)
    with pytest.raises(ServiceError) as caught:
        client.score_pools([("secret?", [Candidate("a", "yes"), Candidate("b", "no")])])
    assert str(caught.value).endswith(sentence)
    assert SECRET.partition("=")[2] not in str(caught.value)


def _seen(faulty_service: str) -> dict[str, int]:
    return httpx.get(f"{faulty_service}seen").json()


@pytest.mark.parametrize(("route", "scored", "sent", "sentence"), [
    ("flaky", True, 3, None),  # 503, 503, then scores
    ("stalls", True, 2, None),  # no answer within the timeout, then scores
    ("unavailable", False, 4, "answered HTTP 503 Service Unavailable (after 4 tries)"),  # the first try and 3 retries
    ("hangs", False, 2, "did not answer in full (headers and body) within 1 s (after 2 tries)"),  # no retry after two timeouts
    ("refused", False, 1, "answered HTTP 400 Bad Request"),  # a 4xx will not pass: sent once
])
def test_a_service_is_retried_only_for_what_may_pass(
    faulty_service: str, route: str, scored: bool, sent: int, sentence: str | None
):
    """Bounded retries with backoff for 502-504 and timeouts (none after two timeouts in all), counted
    by the server; never a 4xx."""
    client = ServiceClient(f"{faulty_service}{route}", timeout=1.0, retries=3, backoff=0.01)
    question = f"retried on {route}?"
    pools = [(question, [Candidate("a", "yes"), Candidate("b", "no")])]
    if scored:
        np.testing.assert_array_equal(client.score_pools(pools)[0], [1.0, 1.0])
    else:
        with pytest.raises(ServiceError) as caught:
            client.score_pools(pools)
        assert str(caught.value).endswith(sentence) and "\n" not in str(caught.value)
    assert _seen(faulty_service)[f"{route} {question}"] == sent


def test_a_services_occlusion_is_one_batched_request(faulty_service: str):
    """A service scoring a candidate by its word count: deleting any word drops the score by 1, the
    explanation's score is its pool score, and the server saw one request for the explanation. Its
    own explanation is that occlusion: the picker offers it once, as occlusion."""
    from qa_core.explain import explainers
    from qa_core.rankers.external import ServiceRanker
    from qa_core.services import explaining

    ranker = ServiceRanker("system:words", ServiceClient(f"{faulty_service}words"))
    assert list(explaining.choices(ranker)) == ["occlusion"]  # not also "the model's own weights"
    question, pool = "one request?", ["Hamlet was written by Shakespeare.", "It was  1600 ,  roughly"]
    explanation = explainers.explain(ranker, question, pool, 1, "occlusion")
    assert _seen(faulty_service)[f"words {question}"] == 1
    assert explanation.weight_kind == "occlusion" and explanation.score == 5.0 == ranker.score(question, pool)[1]
    assert [w for t, w in zip(explanation.answer_tokens, explanation.answer_weights, strict=True) if t.strip()] == [
        1.0] * 5  # It, was, 1600, the comma, roughly
    assert explainers.explain(ranker, question, pool, 1).answer_weights == explanation.answer_weights  # its own
    linked = explainers.explain(ranker, "Who wrote Hamlet?", pool, 0, "occlusion").links  # the texts' own links
    assert [(link.q_start, link.a_start) for link in linked] == [(1, 2), (2, 0)]  # wrote-written, Hamlet: as built-in models draw


def test_cli_names_a_garbage_service_in_one_line(demo_store: Store, faulty_service: str, capsys: pytest.CaptureFixture):
    db = ["--db", demo_store.url]
    code, out, err = run_cli(*db, "systems", "add-service", f"{faulty_service}count", "--name", "garbage", capsys=capsys)
    assert code == 0 and json.loads(out)["info"] is None  # no /info: it is optional
    code, out, err = run_cli(*db, "evaluate", "--model", "system:garbage", "--data", "demo", "--quiet", capsys=capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "scores for" in err and "Traceback" not in err
    run_cli(*db, "systems", "remove", "garbage", capsys=capsys)


SECRET = "s3cret-Pw"
NOWHERE = "127.0.0.1:9"  # the discard port: a URL that is refused is never asked anything
SECRET_URLS = [f"http://reader:{SECRET}@{NOWHERE}/score", f"http://{SECRET}@{NOWHERE}/",
               f"http://{NOWHERE}/score?api_key={SECRET}", f"https://{NOWHERE}/score?model=a&token={SECRET}"]


def test_a_service_url_with_a_password_or_token_is_refused_and_nothing_kept(demo_store: Store):
    """Refused in one sentence that names the URL without its secret, says why and what to do; no
    system and no audit entry is written. A service kept before the refusal existed is listed and
    described without its secret, and is not called (loading it is the same refusal)."""
    audited = len(demo_store.users.audit_events(["add_system"]))
    for url in SECRET_URLS:
        with pytest.raises(InputError) as refused:
            systems.add_service(demo_store, url, "guarded")
        sentence = str(refused.value)
        assert sentence.startswith(f"refused the service URL http{'s' if url.startswith('https') else ''}://")
        assert "proxy" in sentence and "private address" in sentence and "\n" not in sentence
        assert SECRET not in sentence
    with pytest.raises(InputError, match="absolute http") as refused:  # no scheme: not a URL, still not echoed
        systems.add_service(demo_store, f"reader:{SECRET}@{NOWHERE}/score", "guarded")
    assert SECRET not in str(refused.value)
    assert demo_store.systems.systems() == []
    assert len(demo_store.users.audit_events(["add_system"])) == audited
    demo_store.systems.add_system("kept-before", "service", url=f"http://reader:{SECRET}@{NOWHERE}/?token={SECRET}")
    try:
        assert systems.overview(demo_store)[0]["source"] == f"http://…@{NOWHERE}/?…"
        assert SECRET not in systems.describe(demo_store, "kept-before")
        with pytest.raises(InputError, match="refused the service URL") as refused:
            systems.load(demo_store, "system:kept-before", "demo")
        assert SECRET not in str(refused.value)
    finally:
        demo_store.systems.remove_system("kept-before")


def test_cli_refuses_a_service_url_with_a_password_in_one_line(demo_store: Store, capsys: pytest.CaptureFixture):
    code, out, err = run_cli("--db", demo_store.url, "systems", "add-service", SECRET_URLS[0], "--name", "guarded",
                             capsys=capsys)
    assert code != 0 and out == ""
    assert err.startswith(f"error: refused the service URL http://…@{NOWHERE}/score: it carries a user name or "
                          "password") and len(err.strip().splitlines()) == 1
    assert SECRET not in err
    assert demo_store.systems.systems() == []


def test_the_systems_page_refuses_a_service_url_with_a_password_and_keeps_what_was_typed(store_url: str):
    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    store.close()
    page = open_page(str(ROOT / "pages" / "7_Systems.py"))
    page.text_input(key="systems_url").input(SECRET_URLS[2]).run()
    page.text_input(key="systems_service_name").input("guarded").run()
    page.button(key="systems_add_service").click().run()
    assert not page.exception, page.exception
    (error,) = page.error
    assert error.value.startswith("refused the service URL") and SECRET not in error.value
    assert "query string" in error.value
    assert page.text_input(key="systems_url").value == SECRET_URLS[2]  # bad input loses nothing
    assert page.text_input(key="systems_service_name").value == "guarded"
    assert not page.success and not page.dataframe  # nothing added, nothing listed
    assert not [e.value for e in [*page.markdown, *page.caption, *page.info, *page.error] if SECRET in e.value]


def test_a_service_dying_mid_split_gives_no_half_table(demo_store: Store):
    questions = demo_store.datasets.load_dataset("demo").split("test")
    with serving(["tests.scoring_services", "dies", "--after", "5"]) as url:
        demo_store.systems.add_system("dying", "service", url=url)
        ranker = model_loading.load_ranker(demo_store, "system:dying", "demo")
        with pytest.raises(ServiceError, match="is down or unreachable"):
            compare.compare_split({"overlap": model_loading.load_ranker(demo_store, "overlap", "demo"),
                                   "system:dying": ranker}, questions)
    demo_store.systems.remove_system("dying")


@pytest.mark.parametrize(("url", "shown"), [
    ("http://10.0.0.5/a@b/score", "http://10.0.0.5/a@b/score"),  # an '@' in the path: the real host is shown
    ("http://reader:s3cret@10.0.0.5/score", "http://…@10.0.0.5/score"),
    ("reader:s3cret@10.0.0.5", "…@10.0.0.5"),  # no scheme: cut by hand
    ("http://10.0.0.5:bad@x/", "http://…@x/"),  # does not parse: cut by hand
    ("http://10.0.0.5/score?key=k3y@x", "http://10.0.0.5/score?…"),
    ("http://admin:1234?x@10.0.0.5/", "http://admin:…"),  # httpx reads host admin, port 1234
    ("http://u:12/34@10.0.0.5/x", "http://u:…"),
    ("http://u:9#s@10.0.0.5/", "http://u:…"),
    ("http://10.0.0.5:8000/docs/a@b", "http://10.0.0.5:…"),  # a port and an '@' in the path: the host, not b
    ("http://10.0.0.5:8000/score", "http://10.0.0.5:8000/score"),
    ("http://u:p@10.0.0.5/a@b", "http://…@10.0.0.5/a@b"),
])
def test_a_service_url_is_shown_without_its_secrets_and_with_its_host(url: str, shown: str) -> None:
    """The cut was made at any last '@', so a path holding one showed its tail as the host; a URL a
    URL parser reads without user info (``u:12`` as host and port) still hides what its writer meant
    as a password."""
    assert shown_url(url) == shown


def test_a_services_version_is_shown_by_its_file_name_cut_with_an_ellipsis(demo_store: Store) -> None:
    """A service serving a trained version names its checkpoint path as its version: the Systems
    table and the line under a model box (Ask, Compare, Errors) showed the server's folders, cut at
    80 characters mid-name; the table showed None where a kind of system has no value."""
    path = "12:/home/someone/rerank-lab/data/models/smcnn/demo-2026-11-29T07-31-46-abcdef0123456789.pt"
    demo_store.systems.add_system("pathy", "service", url="http://127.0.0.1:9/",
                                  info={"name": "smcnn", "version": path, "max_batch": 64})
    try:
        (row,) = [row for row in systems.overview(demo_store) if row["system"] == "system:pathy"]
        assert row["version"] == "demo-2026-11-29T07-31-4…" and len(row["version"]) == 24
        assert row["sha256"] == "" and None not in row.values() and row["added"].endswith(" UTC")
        line = model_loading.version_in_use(demo_store, "system:pathy", "demo")  # Ask's caption under the model box
        assert "(smcnn demo-2026-11-29T07-31-4…)" in line and "/home/someone" not in line
    finally:
        demo_store.systems.remove_system("pathy")


def test_compare_lists_a_system_added_meanwhile_on_its_next_run(store_url: str, tmp_path: Path) -> None:
    """Compare reads its model list, systems included, on every run (no cache): a system added on
    the Systems page is an option at the next run (issue 45, item 20: the browser test was early, not
    the page)."""
    from tests.pages import COMPARE

    store = Store(store_url)
    store.datasets.import_dataset(load_demo())
    compare = open_page(COMPARE)
    assert "system:partial" not in compare.multiselect(key="models").options
    systems.add_run(store, _run_file(tmp_path, store)[0], "demo", "partial")
    store.close()
    compare.run()
    assert not compare.exception, compare.exception
    assert "system:partial" in compare.multiselect(key="models").options
