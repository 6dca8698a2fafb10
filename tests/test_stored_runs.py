"""Seed runs from files and from the store, and fused runs kept in the store (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from db.base import NewVersion
from qa_core.data.demo import load_demo
from qa_core.data.exporters import write_trec_run
from qa_core.evaluation import qrels_from_questions
from qa_core.rankers import registry
from qa_core.services import model_loading, stored_runs
from qa_core.services.experiments import score_questions
from qa_core.types import InputError
from tests.conftest import model_file


@pytest.fixture
def demo_store(store):
    store.datasets.import_dataset(load_demo())
    return store


def test_run_files_are_grouped_by_model_and_seed(tmp_path):
    test = load_demo().split("test")
    run = {q.qid: {c.doc_id: float(i) for i, c in enumerate(q.candidates)} for q in test}
    for name in ("smcnn.seed2.test.run.gz", "smcnn.seed10.test.run.gz", "smcnn.seed2.dev.run.gz", "bm25.test.run",
                 "notes.txt"):
        path = tmp_path / name
        write_trec_run(run, path, tag="x") if name.endswith((".gz", ".run")) else path.write_text("x")
    found = stored_runs.run_files(tmp_path, "test")
    assert {model: list(seeds) for model, seeds in found.items()} == {"bm25": [None], "smcnn": [2, 10]}
    assert stored_runs.read_run(found["smcnn"][10]) == run
    assert stored_runs.run_files(tmp_path / "missing", "test") == {}


def test_seed_groups_from_files_and_evaluate_runs(demo_store, tmp_path):
    test = load_demo().split("test")
    run = score_questions(registry.create("overlap"), test)
    write_trec_run(run, tmp_path / "cnn_wo.seed1.test.run.gz", tag="x")
    version = demo_store.models.register_model("smcnn", NewVersion("smcnn", model_file("nowhere.pt"), {}, {}))
    demo_store.runs.save_run("demo", "test", run, {}, model_version_id=version, tag="smcnn")
    newer = demo_store.runs.save_run("demo", "test", run, {}, model_version_id=version, tag="smcnn")
    demo_store.runs.save_run("demo", "dev", score_questions(registry.create("overlap"), load_demo().split("dev")), {},
                        model_version_id=version, tag="smcnn")
    groups = stored_runs.seed_groups(demo_store, "demo", "test", tmp_path)
    assert list(groups) == ["cnn_wo · run files", "smcnn · evaluate runs"]
    assert [r.label for r in groups["cnn_wo · run files"]] == ["seed 1"]
    assert [(r.label, r.run_id) for r in groups["smcnn · evaluate runs"]] == [("version 1", newer)]  # newest per version
    loaded = stored_runs.load_runs(demo_store, groups["smcnn · evaluate runs"] + groups["cnn_wo · run files"])
    assert all(set(r) == set(run) for r in loaded)


def test_a_fusion_is_tuned_on_dev_kept_and_found_again(demo_store):
    dataset = demo_store.datasets.load_dataset("demo")
    rankers = {name: model_loading.load_ranker(demo_store, name, "demo") for name in ("bm25", "overlap")}
    test = dataset.split("test")
    split_runs = {name: score_questions(ranker, test) for name, ranker in rankers.items()}
    recipe, fused_dev, fused_test = stored_runs.build_fusion(rankers, dataset.split("dev"), split_runs, "rrf")
    assert recipe.tag == "fusion:rrf(bm25+overlap)" and recipe.params["k"] in range(10, 101, 10)
    assert set(fused_test) == set(qrels_from_questions(test))
    stored_runs.save_fusion(demo_store, "demo", recipe, {"dev": (dataset.split("dev"), fused_dev),
                                                         "test": (test, fused_test)})
    assert stored_runs.fusion_tags(demo_store, "demo") == [recipe.tag]
    loaded = stored_runs.load_tagged_run(demo_store, "demo", recipe.tag, "test")
    assert loaded.keys() == fused_test.keys()
    assert all(loaded[qid] == pytest.approx(fused_test[qid]) for qid in loaded)
    saved = next(run for run in demo_store.runs.runs("demo") if run["split"] == "test")
    assert saved["metrics"]["method"] == "rrf" and saved["metrics"]["members"] == ["bm25", "overlap"]
    assert stored_runs.seed_groups(demo_store, "demo", "test", None) == {}  # fused runs are not seeds
    with pytest.raises(InputError, match="no run on split 'train'"):
        stored_runs.load_tagged_run(demo_store, "demo", recipe.tag, "train")
    with pytest.raises(InputError, match="no dev split"):
        stored_runs.build_fusion(rankers, [], split_runs, "rrf")
