"""The fusion ranker (``qa_core/rankers/score_fusion.py``) on the demo corpus: trained through the
path jobs and the CLI take, it never reads TEST labels (poisoned TEST labels give the same model,
poisoned DEV labels do not), its scores are ranx's fusion of its members' scores, a checkpoint gives
the same scores, and its explanation is of the scored pool."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from qa_core import ordering
from qa_core.data.demo import load_demo
from qa_core.evaluation import run_from_scores
from qa_core.fusion import METHODS, Fusion
from qa_core.rankers import registry
from qa_core.rankers.score_fusion import FusionConfig
from qa_core.services.experiments import train_ranker
from qa_core.types import Dataset, InputError, Question

QUESTIONS_PER_SPLIT = {"train": 30, "dev": 10, "test": 10}
CHEAP = {"members": ["bm25", "overlap"]}  # members without a network: the label tests train three times


def small_demo(**flip: bool) -> Dataset:
    """The demo's first questions of each split; ``flip={"test": True}`` turns that split's labels
    around (relevant <-> not), so a model that read them would learn something else."""
    demo = load_demo()
    questions = [
        _flipped(q) if flip.get(split) else q for split, count in QUESTIONS_PER_SPLIT.items()
        for q in demo.split(split)[:count]
    ]  # fmt: skip
    return Dataset(demo.name, questions, demo.source)


def _flipped(question: Question) -> Question:
    return replace(question, candidates=[replace(c, label=None if c.label is None else int(c.label <= 0))
                                         for c in question.candidates])  # fmt: skip


def _pools(data: Dataset, split: str) -> list[tuple[str, list]]:
    return [(q.text, q.candidates) for q in data.split(split)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):
    """The default fusion (compare-aggregate + overlap), one epoch, trained as a job trains it."""
    folder = tmp_path_factory.mktemp("fusion")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RERANK_LAB_DATA", str(folder / "data"))
        events = []
        outcome = train_ranker("fusion", small_demo(), model_config={"max_epochs": 1}, progress=False,
                               callback=events.append, checkpoint=folder / "fusion.pt")  # fmt: skip
        yield outcome, events


def test_training_never_reads_test_labels(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    clean, poisoned_test, poisoned_dev = (
        train_ranker("fusion", data, model_config=CHEAP, progress=False, checkpoint=tmp_path / f"{i}.pt").ranker
        for i, data in enumerate([small_demo(), small_demo(test=True), small_demo(dev=True)])
    )
    pools = _pools(small_demo(), "test")
    assert poisoned_test.recipe == clean.recipe
    for ours, theirs in zip(poisoned_test.score_pools(pools), clean.score_pools(pools)):
        assert np.array_equal(ours, theirs)
    # The comparison can fail: the labels the fusion is tuned on (DEV's) change the model.
    assert poisoned_dev.recipe.params != clean.recipe.params


def test_members_train_and_the_fusion_is_tuned_with_typed_progress(trained) -> None:
    outcome, events = trained
    ranker = outcome.ranker
    assert list(ranker.members) == ["compare_aggregate", "overlap"] and ranker.config.method == "wsum-minmax"
    assert ranker.members["compare_aggregate"].config.max_epochs == 1  # the training setting is passed on
    assert outcome.report["members"]["compare_aggregate"]["epochs_run"] == 1
    assert all(e.unit == "stage" and e.total == 3 and 1 <= e.step <= 3 for e in events)
    assert [e.step for e in events] == sorted(e.step for e in events)
    assert {"compare_aggregate epoch", "compare_aggregate epochs planned"} <= set(events[0].detail)
    assert events[-1].dev_map == outcome.report["best_dev_map"] == ranker.recipe.dev_map
    assert sum(ranker.recipe.params["weights"]) == pytest.approx(1.0)


@pytest.mark.parametrize("method", list(METHODS))
def test_scores_are_ranx_fusion_of_the_members_scores(trained, method: str) -> None:
    from ranx import Run, fuse

    ranker = registry.ranker_class("fusion").from_state(trained[0].ranker.state())
    params = {"rrf": {"k": 20}, "combmnz": {}}.get(method, {"weights": [0.3, 0.7]})
    ranker.recipe = Fusion(method, tuple(ranker.members), params)
    questions = small_demo().split("test")
    pools = [(q.text, q.candidates) for q in questions]
    norm, ranx_method = METHODS[method]
    # RRF fuses ranks: the members' ties ranked by the tie rule, which ranx alone leaves to its sort
    ranked = (lambda run: {q: ordering.strict(s) for q, s in run.items()}) if method == "rrf" else (lambda run: run)
    runs = [Run(ranked(run_from_scores(questions, member.score_pools(pools))), name=name)
            for name, member in ranker.members.items()]  # fmt: skip
    expected = fuse(runs, norm=norm, method=ranx_method, params=params).to_dict()
    for question, scores in zip(questions, ranker.score_pools(pools)):
        assert scores == pytest.approx([expected[question.qid][c.doc_id] for c in question.candidates], abs=1e-9)


def test_checkpoint_gives_identical_scores_and_explanations(trained, tmp_path) -> None:
    outcome, _ = trained
    loaded = registry.load(outcome.checkpoint)
    assert loaded.recipe == outcome.ranker.recipe
    pools = _pools(small_demo(), "test")
    for ours, theirs in zip(loaded.score_pools(pools), outcome.ranker.score_pools(pools)):
        assert np.array_equal(ours, theirs)
    question, candidates = pools[0]
    assert loaded.explain(question, candidates, 1) == outcome.ranker.explain(question, candidates, 1)


def test_explanation_is_the_pools_score_and_the_members_weights_mixed(trained) -> None:
    ranker = trained[0].ranker
    question, candidates = _pools(small_demo(), "test")[0]
    scores = ranker.score(question, candidates)
    weights = dict(zip(ranker.recipe.members, ranker.recipe.params["weights"]))
    for index in range(len(candidates)):
        explanation = ranker.explain(question, candidates, index)
        assert explanation.score == pytest.approx(scores[index], abs=1e-9)
        parts = {name: m.explain(question, candidates, index) for name, m in ranker.members.items()}
        expected = sum(
            weights[name] * np.asarray(p.answer_weights) / (np.abs(p.answer_weights).sum() or 1.0)
            for name, p in parts.items()
        ) / sum(weights.values())
        assert explanation.answer_weights == pytest.approx(expected.tolist(), abs=1e-12)
        assert explanation.answer_tokens == parts["overlap"].answer_tokens
        assert set(explanation.links) == {link for p in parts.values() for link in p.links}
        assert set(explanation.matrices) == {f"compare_aggregate: {k}" for k in parts["compare_aggregate"].matrices}
    assert explanation.question_weights is None  # overlap has none: no mix over some members only


def test_capabilities_follow_the_members() -> None:
    cls = registry.ranker_class("fusion")
    assert cls.capabilities.trainable and cls.capabilities.pool_dependent
    assert cls.capabilities.training_settings == ("max_epochs",)
    assert cls.capabilities.reads == {"question_analysis"}  # compare-aggregate's, the default member
    other = registry.create("fusion", members=["attention_lstm", "mphcnn"])
    assert other.capabilities.reads == {"first_stage_rank", "url"}
    assert "question_weights" in registry.create("fusion", members=["smcnn", "cnn_wo"]).capabilities.explains
    assert registry.create("fusion", members=["bm25", "tree_kernel"]).members["tree_kernel"].config == (
        registry.ranker_class("tree_kernel").config_class()  # takes no max_epochs: nothing passed on
    )
    assert FusionConfig().max_epochs == registry.ranker_class("compare_aggregate").config_class().max_epochs


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"members": ["bm25"]}, "two or more"),
        ({"members": ["bm25", "bm25"]}, "two or more"),
        ({"members": ["bm25", "fusion"]}, "cannot have a fusion"),
        ({"members": ["bm25", "nope"]}, "unknown model 'nope'"),
        ({"method": "borda"}, "unknown fusion 'borda'"),
    ],
)
def test_bad_settings_are_input_errors(settings: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        registry.create("fusion", **settings)


def test_untrained_fusion_refuses_to_score() -> None:
    from qa_core.types import NotTrainedError

    with pytest.raises(NotTrainedError, match="train"):
        registry.create("fusion", **CHEAP).score("who wrote hamlet", ["Shakespeare wrote Hamlet."])


def test_batch_score_gives_the_rankers_scores(trained, tmp_path, monkeypatch, capsys) -> None:
    """``batch-score`` cuts a file into chunks of whole queries: each query is one pool to fuse."""
    import json

    from qa_core.cli import main
    from qa_core.data.importers import read_trec_run

    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RERANK_LAB_DB", f"sqlite:///{tmp_path / 'store.sqlite'}")
    outcome, _ = trained
    questions = small_demo().split("test")[:4]
    pairs, out = tmp_path / "pairs.jsonl", tmp_path / "fusion.run"
    pairs.write_text("".join(
        json.dumps({"qid": q.qid, "question": q.text, "docid": c.doc_id, "text": c.text, "rank": rank}) + "\n"
        for q in questions for rank, c in enumerate(q.candidates, start=1)
    ))  # fmt: skip
    code = main(["batch-score", str(pairs), "--model", str(outcome.checkpoint), "--out", str(out),
                 "--workers", "1", "--chunk-pairs", "5", "--quiet"])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    run = read_trec_run(out)
    for q in questions:
        expected = dict(zip((c.doc_id for c in q.candidates), outcome.ranker.score(q.text, q.candidates)))
        assert {doc: score for doc, _, score in run[q.qid]} == pytest.approx(expected, abs=1e-6)


def test_a_job_trains_with_the_store_analyzer_only_when_its_members_read_analysis(tmp_path) -> None:
    from db.store import Store
    from qa_core.services.analysis import analyzer_for

    store = Store(f"sqlite:///{tmp_path / 'store.sqlite'}")
    try:
        assert analyzer_for(store, "fusion") is not None  # compare-aggregate reads question analysis
        assert analyzer_for(store, "fusion", {"members": ["bm25", "overlap"]}) is None
    finally:
        store.close()
