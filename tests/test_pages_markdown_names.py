"""Names from data in widget labels, which Streamlit renders as Markdown (a button's or toggle's
label, its help, a toast): a dataset, question id and system name holding Markdown read as written
on Compare and Train (``as_markdown``), one store for both pages."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from db.base import NewVersion
from db.store import Store
from pages.render.markdown import as_markdown
from qa_core.data.demo import load_demo
from qa_core.data.exporters import write_trec_run
from qa_core.services import store_setup, systems
from qa_core.types import Dataset
from tests.conftest import model_file
from tests.pages import COMPARE, TRAIN, open_page, select_points

# Markdown, were it rendered: "x.**y**", a link, "s.**t**" (a dataset or system name holds only letters,
# digits, "_", "-" and ".": names.NAME_RULE)
DATASET, QID, SYSTEM = "x.__y__", "[q](http://e)-", "s.__t__"


@pytest.fixture
def store(store_url: str, tmp_path: Path) -> Store:
    """The demo and a copy named ``DATASET`` (qids prefixed ``QID``) with system ``SYSTEM``'s run
    (gold answers first) and two smcnn versions promoted for it in turn (checkpoints never loaded)."""
    store = Store(store_url)
    store_setup.ensure_demo(store)
    questions = [dataclasses.replace(q, qid=QID + q.qid) for q in load_demo().questions]
    store.datasets.import_dataset(Dataset(DATASET, questions))
    run = {q.qid: {c.doc_id: float(c.label) - i / 1000 for i, c in enumerate(q.candidates)} for q in questions}
    write_trec_run(run, tmp_path / "gold.run", tag="gold")
    systems.add_run(store, tmp_path / "gold.run", DATASET, SYSTEM)
    for version in (1, 2):
        store.models.register_model("smcnn", NewVersion("smcnn", model_file(f"v{version}.pt"), {"dataset": DATASET},
                                                        {}, promote=True))
    yield store
    store.close()


def test_names_with_markdown_read_as_written_in_labels(store):
    compare = open_page(COMPARE)
    compare.selectbox(key="dataset").select(DATASET).run()
    models = [systems.listed_name(SYSTEM), "bm25"]
    compare.multiselect(key="models").set_value(models)
    compare.radio(key="source").set_value("Pick a dataset question").run()
    compare.button(key="compare_question").click().run()
    assert not compare.exception, compare.exception
    assert compare.toggle(key="compare_missed").label.startswith(f"Only right answers {as_markdown(models[0])} ranked")

    compare.radio(key="view").set_value("Whole split").run()
    compare.button(key="compare_split").click().run()
    assert not compare.exception, compare.exception
    assert compare.button(key="fuse").help.startswith(as_markdown(f"ranx fusion of {', '.join(models)}, tuned on DEV of {DATASET}"))
    qid = f"{QID}demo-33"
    select_points(compare, "delta_chart", [{"customdata": [qid]}])
    assert [link.proto.label for link in compare.get("link_button")] == [f"Open {as_markdown(qid)} in Ask"]

    train = open_page(TRAIN)
    train.selectbox(key="train_dataset").select(DATASET).run()
    train.selectbox(key="train_model").select("smcnn").run()
    assert not train.exception, train.exception
    assert train.button(key="train_promote").label == f"Promote for {as_markdown(DATASET)}"
    rollback = train.button(key="train_rollback")
    assert rollback.help.startswith(f"Promote version 1 again for {as_markdown(DATASET)}:")
    rollback.click().run()
    assert not train.exception, train.exception
    assert [toast.value for toast in train.toast] == [f"Version 1 promoted again for {as_markdown(DATASET)}"]
