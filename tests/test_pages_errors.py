"""The Errors page under AppTest: questions that no model can answer (no right candidate in the pool,
AP 0 for every model) are marked and listed after the questions a model could have got right
(issue 45: TrecQA TEST opened its worst questions with six of them, unmarked)."""

from __future__ import annotations

from db.store import Store
from qa_core.types import Candidate, Dataset, Question
from tests.pages import LANDING, open_page

ERRORS = "pages/5_Errors.py"  # relative to app.py, as the page's links to Ask resolve

HARD = Dataset("hard", [
    # word overlap ranks the wrong answer first: AP 0.5
    Question("q-missed", "Who wrote the play Hamlet?", [
        Candidate("right", "Shakespeare was its author.", label=1),
        Candidate("wrong", "Hamlet is a famous play about a prince.", label=0)], split="test"),
    # no right candidate: AP 0 whatever a model does, and worse than q-missed
    Question("q-none", "When did the war end?", [
        Candidate("a", "The war was long.", label=0), Candidate("b", "Many died.", label=0)], split="test"),
    Question("q-easy", "Where is the Eiffel Tower?", [
        Candidate("right", "The Eiffel Tower is in Paris.", label=1),
        Candidate("wrong", "Towers are tall.", label=0)], split="test"),
])


def test_questions_without_a_right_candidate_come_last_and_marked(store_url):
    store = Store(store_url)
    store.datasets.import_dataset(HARD)
    store.close()
    app = open_page(LANDING)
    app.switch_page(ERRORS).run()
    app.selectbox(key="dataset").select("hard")
    app.selectbox(key="model").select("overlap").run()
    assert not app.exception, app.exception
    worst = app.dataframe[0].value
    assert list(worst["qid"]) == ["q-missed", "q-easy", "q-none"]
    assert list(worst["pool"]) == ["", "", "no right candidate"] and list(worst["AP"]) == [0.5, 1.0, 0.0]
    assert any(caption.value.startswith("1 of 3 questions have no right candidate in the pool (AP 0 for every model)")
               and caption.value.endswith(': q-none.') for caption in app.caption)
    labels = [link.proto.label for link in app.get("page_link")]
    assert labels[0].startswith("q-missed · AP 0.500 · Who wrote")
    assert labels[-1].startswith("q-none · AP 0.000 · no right candidate · When did")
