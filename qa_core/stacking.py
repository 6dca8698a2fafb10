"""Learning-to-rank stacking of rankers: LightGBM's lambdarank over the members' scores plus
lexical features of each (question, candidate) pair.

Why out-of-fold scores: a member scores its own training questions far better than new ones, so a
stacker trained on those scores would learn to trust whichever member memorises best. The stacker
therefore trains on TRAIN questions scored by members that never saw them (``out_of_fold_run``:
k folds over TRAIN's questions, each scored by a member trained on the other folds). DEV's labels
choose the stacker's hyper-parameters (``select_stacker``) and, as for every ranker here, the
members' own epochs; the stacker's fit reads TRAIN labels only, and TEST labels are read nowhere.

Features per candidate, per member: the score standardised within the question's pool (members'
scales differ: logits, BM25 sums, SVM margins) and its rank in the pool as a fraction (0 = top);
then the four word-overlap features (``qa_core.text.features``, IDF over TRAIN's candidates) and
both texts' lengths in words.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from qa_core import ordering
from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.rankers.base import Ranker
from qa_core.rankers.neural import model_words
from qa_core.text.features import FEATURE_NAMES, IdfTable, overlap_features
from qa_core.text.nlp import parse_many
from qa_core.types import InputError, Question

Run = Mapping[str, Mapping[str, float]]
TrainMember = Callable[[Sequence[Question], Sequence[Question], int], Ranker]
"""(train questions, dev questions, seed) -> a fitted ranker."""

LEXICAL_FEATURES = (*FEATURE_NAMES, "question_words", "answer_words")


def question_folds(questions: Sequence[Question], folds: int, seed: int) -> list[list[Question]]:
    """The questions dealt into ``folds`` parts in a seeded random order (each question in one part)."""
    if not 2 <= folds <= len(questions):
        raise InputError(f"{folds} folds need between 2 and {len(questions)} questions")
    order = random.Random(seed).sample(range(len(questions)), len(questions))
    return [[questions[i] for i in order[k::folds]] for k in range(folds)]


def out_of_fold_run(
    train_member: TrainMember, train: Sequence[Question], dev: Sequence[Question], *, folds: int = 5, seed: int = 1
) -> dict[str, dict[str, float]]:
    """Every TRAIN question scored by a member trained on the other folds of TRAIN (``dev`` is only
    handed to the member, for its own model selection)."""
    run: dict[str, dict[str, float]] = {}
    for held_out in question_folds(train, folds, seed):
        held = {q.qid for q in held_out}
        member = train_member([q for q in train if q.qid not in held], dev, seed)
        run.update(run_from_scores(held_out, member.score_pools([(q.text, q.candidates) for q in held_out])))
    return run


@dataclass(frozen=True)
class FeatureTable:
    """One row per candidate, questions in order and each question's rows together."""

    qids: list[str]
    doc_ids: list[str]
    features: np.ndarray
    names: list[str]

    @property
    def group_sizes(self) -> list[int]:
        sizes: dict[str, int] = {}
        for qid in self.qids:
            sizes[qid] = sizes.get(qid, 0) + 1
        return list(sizes.values())


def _pool_features(docs: list[str], scores: np.ndarray) -> np.ndarray:
    """(pool, 2): the scores standardised within the pool (0 for a constant pool) and rank / pool size
    (ties by ``qa_core.ordering``'s rule)."""
    std = scores.std()
    z = (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)
    order = ordering.order(docs, scores)
    rank = np.empty(len(scores))
    rank[order] = np.arange(len(scores)) / max(len(scores), 1)
    return np.stack([z, rank], axis=1)


def feature_table(
    questions: Sequence[Question], runs: Mapping[str, Run], members: Sequence[str], idf: IdfTable
) -> FeatureTable:
    """Member and lexical features of every candidate; every member must score every candidate."""
    texts = list(dict.fromkeys(t for q in questions for t in (q.text, *(c.text for c in q.candidates))))
    parsed = dict(zip(texts, parse_many(texts)))
    rows, qids, doc_ids = [], [], []
    for question in questions:
        docs = [c.doc_id for c in question.candidates]
        if not docs:  # nothing to rank (TrecQA has such questions); they get no row
            continue
        blocks = []
        for member in members:
            scored = runs[member].get(question.qid, {})
            missing = [doc for doc in docs if doc not in scored]
            if missing:
                raise InputError(f"run {member!r} has no score for {len(missing)} candidates of question {question.qid}")
            blocks.append(_pool_features(docs, np.array([scored[doc] for doc in docs], dtype=np.float64)))
        q_parsed = parsed[question.text]
        lexical = [
            [*overlap_features(q_parsed, parsed[c.text], idf), len(model_words(q_parsed)),
             len(model_words(parsed[c.text]))]
            for c in question.candidates
        ]
        rows.append(np.concatenate([*blocks, np.asarray(lexical, dtype=np.float64).reshape(len(docs), -1)], axis=1))
        qids += [question.qid] * len(docs)
        doc_ids += docs
    names = [f"{member}:{kind}" for member in members for kind in ("z", "rank")] + list(LEXICAL_FEATURES)
    width = len(names)
    features = np.concatenate(rows) if rows else np.zeros((0, width))
    return FeatureTable(qids, doc_ids, features, names)


@dataclass(frozen=True)
class StackerParams:
    num_leaves: int = 7
    n_estimators: int = 150
    learning_rate: float = 0.05
    min_child_samples: int = 20


PARAM_GRID = tuple(
    StackerParams(num_leaves=leaves, n_estimators=trees)
    for leaves in (3, 7, 15)
    for trees in (50, 150, 400)
)
"""Chosen among on DEV, simplest first (ties go to the earlier)."""


class Stacker:
    """LightGBM lambdarank over a ``FeatureTable``; fit on TRAIN questions with out-of-fold runs."""

    def __init__(self, members: Sequence[str], params: StackerParams = StackerParams(), seed: int = 1):
        self.members = list(members)
        self.params = params
        self.seed = seed
        self.idf: IdfTable | None = None
        self.feature_names: list[str] = []
        self._model = None

    def fit(self, train: Sequence[Question], train_runs: Mapping[str, Run]) -> Stacker:
        """Learn from TRAIN's labels; ``train_runs`` must be out-of-fold scores of TRAIN."""
        from lightgbm import LGBMRanker

        texts = list(dict.fromkeys(c.text for q in train for c in q.candidates))
        self.idf = IdfTable.fit(model_words(p) for p in parse_many(texts))
        labelled = [q for q in train if any(c.label is not None for c in q.candidates)]
        table = feature_table(labelled, train_runs, self.members, self.idf)
        labels = [max(int(c.label or 0), 0) for q in labelled for c in q.candidates]
        self._model = LGBMRanker(
            objective="lambdarank", random_state=self.seed, deterministic=True, force_row_wise=True, n_jobs=1,
            verbose=-1, **asdict(self.params),
        )  # fmt: skip
        self._model.fit(table.features, labels, group=table.group_sizes)
        self.feature_names = table.names
        return self

    def score(self, questions: Sequence[Question], runs: Mapping[str, Run]) -> dict[str, dict[str, float]]:
        if self._model is None:
            raise InputError("the stacker is not fitted yet")
        table = feature_table(questions, runs, self.members, self.idf)
        scores = self._model.predict(table.features)
        run: dict[str, dict[str, float]] = {}
        for qid, doc, score in zip(table.qids, table.doc_ids, scores):
            run.setdefault(qid, {})[doc] = float(score)
        return run

    @property
    def importances(self) -> dict[str, float]:
        """Total split gain per feature, as a share of all gain."""
        gains = self._model.booster_.feature_importance(importance_type="gain")
        total = gains.sum() or 1.0
        return {name: float(g / total) for name, g in zip(self.feature_names, gains)}


def select_stacker(
    members: Sequence[str],
    train: Sequence[Question],
    train_runs: Mapping[str, Run],
    dev: Sequence[Question],
    dev_runs: Mapping[str, Run],
    *,
    grid: Sequence[StackerParams] = PARAM_GRID,
    seed: int = 1,
) -> tuple[Stacker, float]:
    """The stacker of the grid with the best DEV MAP (fit on TRAIN only), and that MAP."""
    dev_qrels = qrels_from_questions(dev)
    best: tuple[Stacker, float] | None = None
    for params in grid:
        stacker = Stacker(members, params, seed).fit(train, train_runs)
        dev_map = evaluate(stacker.score(dev, dev_runs), dev_qrels).aggregate["map"]
        if best is None or dev_map > best[1]:
            best = (stacker, dev_map)
    if best is None:
        raise InputError("an empty hyper-parameter grid")
    return best
