"""Question-class CNN and focus tagger: loaders, masking, learning on real data, checkpoints."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from qa_core import config
from qa_core.classifiers import syntax_ids, syntax_labels
from qa_core.classifiers.analysis import QuestionAnalyzer
from qa_core.classifiers.focus import FocusCNN, FocusConfig, FocusTagger
from qa_core.classifiers.question_class import QuestionClassConfig, QuestionClassifier, QuestionCNN
from qa_core.data.questions import (
    COARSE_CLASSES,
    ClassifiedQuestion,
    FocusQuestion,
    load_focus_questions,
    load_question_classes,
)
from qa_core.text.nlp import parse
from qa_core.types import InputError, NotTrainedError

FIXTURES = Path(__file__).parent / "fixtures" / "questions"
SHARED = config.shared_data_dir()
needs_shared_data = pytest.mark.skipif(
    SHARED is None, reason="shared benchmark data absent (../shared/data or RERANK_LAB_SHARED_DATA)"
)

# Small settings so that training in tests takes seconds; the architecture stays as specified.
FAST_CLASS = QuestionClassConfig(filters=100, lr=2e-3, max_epochs=6, patience=6)
FAST_FOCUS = FocusConfig(lr=1e-3, max_epochs=6, patience=6)


# ------------------------------------------------------------------------------------ loaders


def test_uiuc_loader_decodes_iso_8859_1_and_skips_blank_lines():
    questions = load_question_classes(FIXTURES / "classes_latin1.label")
    assert [q.coarse for q in questions] == ["DESC", "HUM", "NUM"]
    assert questions[1] == ClassifiedQuestion("Who directed the film Amélie ?", "HUM", "ind")


def test_uiuc_loader_names_file_and_line_of_a_malformed_line():
    path = FIXTURES / "classes_malformed.label"
    with pytest.raises(InputError, match=r"classes_malformed.label, line 2: expected 'COARSE:fine") as error:
        load_question_classes(path)
    assert error.value.line == 2


def test_uiuc_loader_rejects_unknown_coarse_class(tmp_path: Path):
    path = tmp_path / "bad.label"
    path.write_text("COLOR:red What colour is the sky ?\n")
    with pytest.raises(InputError, match="line 1: unknown coarse class 'COLOR'"):
        load_question_classes(path)


def test_focus_loader_strips_marks_and_picks_the_head_of_a_multiword_focus():
    first, multi, quoted = load_focus_questions(FIXTURES / "focus.label")
    assert first == FocusQuestion(
        "1", tuple("Who is the author of the book , “The Iron Lady” ?".split()), focus=3, marked=(3,)
    )
    assert multi.tokens[3:6] == ("Riverside", "Transport", "Museum") and multi.marked == (3, 4, 5)
    assert multi.focus == 5
    # Marks after an opening quote count; "of" ends the head: "Garden" of "The Garden of Delights".
    assert quoted.tokens == ("Who", "painted", "“The", "Garden", "of", "Delights”", "?")
    assert quoted.marked == (2, 3, 4, 5) and quoted.focus == 3


def test_focus_loader_names_file_and_line_of_a_question_without_focus():
    with pytest.raises(InputError, match=r"focus_malformed.label, line 2: no focus word marked"):
        load_focus_questions(FIXTURES / "focus_malformed.label")


def test_focus_loader_rejects_a_line_without_tab(tmp_path: Path):
    path = tmp_path / "focus.label"
    path.write_text("1 Who is the #author ?\n")
    with pytest.raises(InputError, match="line 1: expected 'id<TAB>question'"):
        load_focus_questions(path)


@needs_shared_data
def test_real_files_load_with_their_documented_counts():
    assert SHARED is not None
    train = load_question_classes(SHARED / "question_class" / "train_5500.label")
    test = load_question_classes(SHARED / "question_class" / "TREC_10.label")
    focus = load_focus_questions(SHARED / "question_focus" / "train_1228.label")
    assert (len(train), len(test), len(focus)) == (5452, 500, 1228)
    assert {q.coarse for q in train} == {"ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"}
    assert all(not token.startswith("#") for q in focus for token in q.tokens)


# ---------------------------------------------------------------------------- shapes and masking


def _vectors(rows: int = 30) -> torch.Tensor:
    torch.manual_seed(0)
    vectors = torch.randn(rows, 50)
    vectors[0] = 0
    return vectors


def _syntax(*rows: list[int]) -> dict[str, torch.Tensor]:
    """Tag and dependency ids for word-id rows: a made-up id per real token, 0 on padding."""
    ids = torch.tensor(rows)
    return {"tag": torch.where(ids > 0, ids % 40 + 1, 0), "dep": torch.where(ids > 0, ids % 30 + 1, 0)}


def test_class_cnn_logits_do_not_depend_on_padding_length():
    model = QuestionCNN(_vectors(), QuestionClassConfig(), classes=6).eval()
    assert model.syntax is not None  # padding reaches the syntax embeddings too
    question = [5, 9, 2, 17]
    alone = model(torch.tensor([question]), **_syntax(question))
    rows = [question + [0] * 11, list(range(2, 17))]
    padded = model(torch.tensor(rows), **_syntax(*rows))
    assert alone.shape == (1, 6)
    torch.testing.assert_close(padded[0], alone[0])
    one_word = model(torch.tensor([[7]]), **_syntax([7]))  # shorter than the widest filter
    torch.testing.assert_close(model(torch.tensor([[7, 0, 0, 0]]), **_syntax([7, 0, 0, 0])), one_word)


def test_focus_padding_gets_no_probability_and_changes_no_score():
    model = FocusCNN(_vectors(), FocusConfig()).eval()
    assert model.syntax is not None  # padding reaches the syntax embeddings too
    sentence = [4, 8, 15, 16, 23]
    alone = model(torch.tensor([sentence]), **_syntax(sentence))
    rows = [sentence + [0] * 20, list(range(2, 27))]
    padded = model(torch.tensor(rows), **_syntax(*rows))
    assert alone.shape == (1, 5) and padded.shape == (2, 25)
    torch.testing.assert_close(padded[0, :5], alone[0])
    probabilities = torch.softmax(padded, dim=1)
    assert torch.all(probabilities[0, 5:] == 0)
    torch.testing.assert_close(probabilities[0, :5].sum(), torch.tensor(1.0))


# ----------------------------------------------------------------- training, prediction, checkpoints

SYNTHETIC = {
    "HUM": ["Who wrote Hamlet ?", "Who invented the telephone ?", "Who is the president of France ?"],
    "LOC": ["Where is the Eiffel Tower ?", "Where was Mozart born ?", "Where is Lake Victoria ?"],
    "NUM": ["How many moons does Mars have ?", "When did World War II end ?", "How tall is Everest ?"],
}


@pytest.fixture(scope="module")
def small_classifier() -> QuestionClassifier:
    questions = [q for texts in SYNTHETIC.values() for q in texts]
    labels = [label for label, texts in SYNTHETIC.items() for _ in texts]
    classifier = QuestionClassifier(FAST_CLASS)
    classifier.fit(questions, labels, questions, labels, seed=3)
    return classifier


@pytest.fixture(scope="module")
def small_tagger() -> FocusTagger:
    questions = load_focus_questions(FIXTURES / "focus.label")
    tokens, focus = [q.tokens for q in questions], [q.focus for q in questions]
    tagger = FocusTagger(FAST_FOCUS)
    tagger.fit(tokens, focus, tokens, focus, seed=3)
    return tagger


def test_classifier_outputs_and_save_load_round_trip(small_classifier: QuestionClassifier, tmp_path: Path):
    texts = ["Who painted the Mona Lisa ?", "Where is Timbuktu ?", "How far is the Moon ?"]
    probabilities = small_classifier.predict_proba(texts)
    assert probabilities.shape == (3, 6)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    path = small_classifier.save(tmp_path / "models" / "class.pt")
    assert [p.name for p in path.parent.iterdir()] == ["class.pt"]  # no temporary file left behind
    restored = QuestionClassifier.load(path)
    assert restored.predict(texts) == small_classifier.predict(texts)
    np.testing.assert_allclose(restored.predict_proba(texts), probabilities, rtol=1e-6)
    assert restored.config == FAST_CLASS


def test_tagger_outputs_and_save_load_round_trip(small_tagger: FocusTagger, tmp_path: Path):
    sentences = [["What", "is", "the", "capital", "of", "Peru", "?"], ["Who", "is", "Tom", "Cruise", "?"]]
    probabilities = small_tagger.predict_proba(sentences)
    assert [len(p) for p in probabilities] == [7, 5]
    np.testing.assert_allclose(probabilities[1], small_tagger.predict_proba(sentences[1:])[0], rtol=1e-5)
    restored = FocusTagger.load(small_tagger.save(tmp_path / "focus.pt"))
    assert restored.predict(sentences) == small_tagger.predict(sentences)
    np.testing.assert_allclose(restored.predict_proba(sentences)[0], probabilities[0], rtol=1e-6)


def test_syntax_ids_tag_the_tokens_as_given():
    labels = syntax_labels()
    ids = syntax_ids([["Who", "is", "the", "author", "?"], ["Where", "?"]])
    assert ids["tag"].shape == ids["dep"].shape == (2, 5)
    tags = [labels["tag"][i - 1] for i in ids["tag"][0].tolist()]
    assert tags == ["WP", "VBZ", "DT", "NN", "."]
    assert labels["dep"][int(ids["dep"][0, 1]) - 1] == "ROOT"
    assert ids["tag"][1, 2:].tolist() == [0, 0, 0] and ids["dep"][1, 2:].tolist() == [0, 0, 0]


def test_a_checkpoint_reads_syntax_by_its_own_label_lists(small_classifier: QuestionClassifier):
    """A pipeline version that orders its labels differently must not shift a saved model's ids:
    the same labels in another order, with the embedding rows moved along, predict the same."""
    texts = ["Who painted the Mona Lisa ?", "How far is the Moon ?"]
    state = small_classifier.state()
    tags = state["syntax_labels"]["tag"]
    assert tags == syntax_labels()["tag"]
    order = list(reversed(range(len(tags))))
    state["syntax_labels"] = {**state["syntax_labels"], "tag": tuple(tags[i] for i in order)}
    table = state["model"]["syntax.tables.tag.weight"]
    state["model"]["syntax.tables.tag.weight"] = torch.cat([table[:1], table[1:][order]])  # row 0: padding
    restored = QuestionClassifier.from_state(state)
    assert restored.model.syntax.labels["tag"][0] == tags[-1]
    np.testing.assert_allclose(restored.predict_proba(texts), small_classifier.predict_proba(texts), rtol=1e-5)


def test_a_words_only_checkpoint_from_before_syntax_inputs_still_loads(small_tagger: FocusTagger, tmp_path: Path):
    words_only = FocusTagger(dataclasses.replace(FAST_FOCUS, syntax_dim=0))
    words_only._init_model([["who", "wrote", "hamlet"]], seed=1)
    state = words_only.state()
    del state["config"]["syntax_dim"]  # as saved before the field existed
    restored = FocusTagger.from_state(state)
    assert restored.config.syntax_dim == 0 and restored.model.syntax is None
    assert restored.predict([["Who", "wrote", "Hamlet", "?"]]) == words_only.predict([["Who", "wrote", "Hamlet", "?"]])


def test_checkpoint_errors_are_input_errors(small_tagger: FocusTagger, tmp_path: Path):
    with pytest.raises(InputError, match="checkpoint not found"):
        QuestionClassifier.load(tmp_path / "missing.pt")
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match="corrupt"):
        QuestionClassifier.load(corrupt)
    with pytest.raises(InputError, match="holds a 'question_focus' model"):
        QuestionClassifier.load(small_tagger.save(tmp_path / "focus.pt"))


def test_bad_input_is_reported_clearly(small_classifier: QuestionClassifier):
    with pytest.raises(NotTrainedError):
        QuestionClassifier().predict(["Who is it ?"])
    with pytest.raises(InputError, match="empty question"):
        small_classifier.predict([""])
    with pytest.raises(InputError, match="unknown question classes"):
        QuestionClassifier(FAST_CLASS).fit(["Why ?"], ["WHY"], ["Why ?"], ["DESC"])
    with pytest.raises(InputError, match="focus index 3 outside its 2 tokens"):
        FocusTagger(FAST_FOCUS).fit([["a", "b"]], [3], [["a", "b"]], [0])


@needs_shared_data
def test_class_cnn_learns_from_a_thousand_questions():
    assert SHARED is not None
    questions = load_question_classes(SHARED / "question_class" / "train_5500.label")
    random.Random(0).shuffle(questions)
    train, dev, held_out = questions[:1000], questions[1000:1200], questions[1200:1700]
    classifier = QuestionClassifier(FAST_CLASS)
    classifier.fit([q.text for q in train], [q.coarse for q in train], [q.text for q in dev], [q.coarse for q in dev])
    predicted = classifier.predict([q.text for q in held_out])
    accuracy = np.mean([p == q.coarse for p, q in zip(predicted, held_out, strict=True)])
    assert accuracy > 0.6  # chance (majority class) is about 0.23


@needs_shared_data
def test_focus_tagger_learns_from_real_questions():
    assert SHARED is not None
    questions = load_focus_questions(SHARED / "question_focus" / "train_1228.label")
    random.Random(0).shuffle(questions)
    train, dev, held_out = questions[:700], questions[700:800], questions[800:1000]
    tagger = FocusTagger(FAST_FOCUS)
    tagger.fit([q.tokens for q in train], [q.focus for q in train], [q.tokens for q in dev], [q.focus for q in dev])
    predicted = tagger.predict([q.tokens for q in held_out])
    accuracy = np.mean([p == q.focus for p, q in zip(predicted, held_out, strict=True)])
    assert accuracy > 0.5  # a uniform guess over about 10 tokens gets 0.1


def test_frozen_tables_are_open_vocabulary(small_tagger: FocusTagger):
    """A word unseen in training keeps its own GloVe vector instead of collapsing into UNK."""
    assert "biochemists" not in small_tagger.vocab
    sentence = ["What", "two", "US", "biochemists", "won", "?"]
    before = small_tagger.predict_proba([sentence])[0]
    assert "biochemists" in small_tagger.vocab  # appended from GloVe, as the rankers do
    as_unknown = small_tagger.predict_proba([["What", "two", "US", "qqxyzzyqq", "won", "?"]])[0]
    assert not np.allclose(before, as_unknown)
    np.testing.assert_allclose(small_tagger.predict_proba([sentence])[0], before, rtol=1e-6)


# ------------------------------------------------------------------------------ question analysis


def test_analysis_falls_back_to_the_wh_word_rules():
    analyzer = QuestionAnalyzer()
    who, why, where = analyzer.analyse_many(["Who wrote the play Hamlet?", "Why is the sky blue?", "Where is the Eiffel Tower?"])
    assert (who.qclass, who.focus, who.focus_span, who.source) == ("HUM", 0, (0, 1), "heuristic")
    assert who.probabilities == {} and who.class_id == COARSE_CLASSES.index("HUM") + 1
    assert (why.qclass, why.focus, why.focus_span) == ("DESC", None, None)
    assert where.qclass == "LOC"
    text = "What is the capital city of France?"
    capital = analyzer.analyse(text)
    assert capital.qclass == "LOC" and parse(text).tokens[capital.focus] == "capital"
    assert capital.focus_span == (2, 5)  # the noun chunk "the capital city" holds the focus
    assert analyzer.analyse("").qclass is None


def test_analysis_uses_the_trained_models(small_classifier: QuestionClassifier, small_tagger: FocusTagger):
    question = parse("Who is the author of the book ?")
    analysis = QuestionAnalyzer(small_classifier, small_tagger).analyse(question)
    assert analysis.source == "classifiers"
    assert set(analysis.probabilities) == set(COARSE_CLASSES)
    assert analysis.qclass == max(analysis.probabilities, key=analysis.probabilities.get)
    assert sum(analysis.probabilities.values()) == pytest.approx(1.0, rel=1e-5)
    words = [token for token in question.tokens if token.strip()]
    assert analysis.focus == small_tagger.predict([words])[0]
    only_class = QuestionAnalyzer(small_classifier).analyse(question)
    assert only_class.source == "class CNN + heuristic focus" and only_class.focus == QuestionAnalyzer().analyse(question).focus


def test_analysis_runs_the_models_once_per_recent_question(small_classifier, small_tagger, monkeypatch):
    """Explaining k candidates analyses one question k times: the models must run once, and the
    remembered analyses must equal fresh ones and stay bounded."""
    from qa_core.classifiers import analysis as analysis_module

    monkeypatch.setattr(analysis_module, "REMEMBERED_QUESTIONS", 2)
    analyzer = QuestionAnalyzer(small_classifier, small_tagger)
    fresh_rome = QuestionAnalyzer(small_classifier, small_tagger).analyse("Where is Rome ?")
    batches: list[int] = []
    predict_proba = small_classifier.predict_proba
    monkeypatch.setattr(small_classifier, "predict_proba", lambda texts: batches.append(len(texts)) or predict_proba(texts))
    question = "Who is the author of the book ?"
    first = analyzer.analyse(question)
    assert analyzer.analyse(parse(question)) is first and batches == [1]  # a parse of the same text is the same question
    mixed = analyzer.analyse_many(["Where is Rome ?", question, "Where is Rome ?"])
    assert batches == [1, 1] and mixed[1] is first and mixed[0] is mixed[2]
    assert mixed[0] == fresh_rome
    analyzer.analyse("What metal conducts electricity best ?")  # a third text pushes out the least recent
    analyzer.analyse(question)
    assert batches == [1, 1, 1, 1], "the book question was the least recently used one"


def _write_label_files(folder: Path) -> None:
    """Hand-written miniature UIUC and focus files (the real ones are not copied into the repository)."""
    folder.mkdir(parents=True, exist_ok=True)
    classes = [f"{label}:x {text}" for label, texts in SYNTHETIC.items() for text in texts]
    classes += ["DESC:def What is an atom ?", "ENTY:animal What animal barks ?", "ABBR:exp What does NASA stand for ?"]
    (folder / "train_5500.label").write_text("\n".join(classes * 2) + "\n", encoding="iso-8859-1")
    (folder / "TREC_10.label").write_text("HUM:ind Who painted the Mona Lisa ?\nLOC:city Where is Rome ?\n")
    focus = ["Who is the #author of the book ?", "What #metal conducts electricity best ?",
             "What is the #name of the director ?", "Who was the first #American in space ?"]
    (folder / "train_1228.label").write_text("".join(f"{i}\t{q}\n" for i, q in enumerate(focus * 3)))


def test_cli_trains_registers_and_the_analysis_finds_them(tmp_path: Path, monkeypatch, capsys):
    from db.store import Store
    from qa_core.cli import main
    from qa_core.services.analysis import question_analyzer

    monkeypatch.setenv("RERANK_LAB_DATA", str(tmp_path / "data"))
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    monkeypatch.setenv("RERANK_LAB_DB", url)
    _write_label_files(tmp_path / "labels")
    assert question_analyzer(Store(url)).source == "heuristic"  # nothing registered yet

    for name in ("question_class", "question_focus"):
        code = main(["train-classifier", name, "--path", str(tmp_path / "labels"), "--seed", "2", "--quiet"])
        out, err = capsys.readouterr()
        assert code == 0, err
        line = json.loads(out.strip().splitlines()[-1])
        assert line["model"] == name and Path(line["checkpoint"]).is_file()
        assert line["version"] == 1  # the version's number, as ``train`` says it (it said the id: 2 for the focus tagger)
        assert 0.0 <= line["dev_accuracy"] <= 1.0

    store = Store(url)
    record = store.models.promoted_model("question_class")
    assert record is not None and record["metrics"]["test_accuracy"] >= 0.0
    assert store.models.promoted_model("question_focus")["training_data"]["seed"] == 2
    assert record["version"] == store.models.promoted_model("question_focus")["version"] == 1
    analyzer = question_analyzer(store)
    store.close()
    assert analyzer.source == "classifiers"
    assert analyzer.analyse("Who wrote Hamlet ?").qclass in COARSE_CLASSES

    assert main(["train-classifier", "question_class", "--path", str(tmp_path / "missing")]) == 2
    assert "train_5500.label not found" in capsys.readouterr().err


def test_tree_kernel_keeps_its_trained_question_analysis_in_the_checkpoint(small_classifier, small_tagger, tmp_path):
    from qa_core.data.demo import load_demo
    from qa_core.rankers import registry
    from qa_core.rankers.tree_kernel import TreeKernelConfig, TreeKernelRanker

    demo = load_demo()
    analyzer = QuestionAnalyzer(small_classifier, small_tagger)
    ranker = TreeKernelRanker(TreeKernelConfig(cs=(1.0,), feature_weights=(1.0,)))
    report = ranker.fit(demo.split("train"), demo.split("dev"), analyzer=analyzer, progress=False)
    assert report["analyzer"] == "classifiers"
    loaded = registry.load(registry.save(ranker, tmp_path / "tk.pt"))
    assert isinstance(loaded.analyzer, QuestionAnalyzer) and loaded.analyzer.source == "classifiers"
    question = demo.split("test")[0]
    np.testing.assert_allclose(loaded.score(question.text, question.candidates),
                               ranker.score(question.text, question.candidates))
    assert loaded.explain(question.text, question.candidates, 0).links == ranker.explain(
        question.text, question.candidates, 0).links
